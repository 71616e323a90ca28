"""Timing modes on a GPU: launch overhead kept out, cold caches, graphs, clocks (marker gpu)."""

from __future__ import annotations

import pytest

from kernelopt_jupyter import evaluate, load_workload
from kernelopt_jupyter.core.results import Status
from kernelopt_jupyter.core.settings import EvaluationSettings, TimingProtocol

pytestmark = pytest.mark.gpu


def timed(workload, mode: str, cache: str = "warm"):
    protocol = TimingProtocol.fixed(5, 50, mode=mode, cache=cache)
    result = evaluate(
        workload,
        workload.kernel_code(),
        backend="cupy",
        settings=EvaluationSettings(backend="cupy", timing=protocol),
    )
    assert result.status == Status.OK, result.message
    return result.case("big").timing


def test_blocked_modes_exclude_launch_overhead(workload_dir):
    workload = load_workload(workload_dir / "workload.yaml")  # 100k floats: a ~2-3 µs kernel
    per_launch = timed(workload, "per_launch")
    back_to_back = timed(workload, "back_to_back")
    graph = timed(workload, "graph")
    assert back_to_back.mode == "back_to_back" and back_to_back.launches_per_sample > 1
    assert graph.mode == "graph"
    # One event pair per launch from Python measures the host's launch latency (~10 µs on an H100).
    assert back_to_back.median_us < 0.7 * per_launch.median_us, (back_to_back.median_us, per_launch.median_us)
    assert graph.median_us < 0.7 * per_launch.median_us
    assert (
        back_to_back.host_us_per_launch is not None
        and back_to_back.host_us_per_launch > back_to_back.median_us
    )


def test_cold_cache_is_not_faster_than_warm(workload_dir):
    workload = load_workload(workload_dir / "workload.yaml")
    warm = timed(workload, "back_to_back")
    cold = timed(workload, "back_to_back", "cold")
    assert cold.cache == "cold" and cold.launches_per_sample == 1
    assert cold.median_us >= 0.9 * warm.median_us


def copy_launch(backend, n: int):
    """One launch of a copy of ``n`` floats on the backend's stream, as a callable."""
    import cupy
    import numpy as np

    from kernelopt_jupyter.backends.base import CompileRequest
    from kernelopt_jupyter.core.launch import LaunchDims

    source = r"""extern "C" __global__ void copy(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }"""
    x, y = cupy.ones(n, np.float32), cupy.empty(n, np.float32)
    kernel = backend.compile(CompileRequest(source, "copy"))
    dims = LaunchDims((-(-n // 256), 1, 1), (256, 1, 1), 0)
    arguments = (x, y, np.int32(n))
    return lambda: backend.launch(kernel, dims, arguments)


def test_read_flush_evicts_the_l2_like_the_write_flush():
    """Both ways of evicting the L2 make a small, cache-resident copy slower than warm timing."""
    import cupy
    import numpy as np

    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    n = 1 << 22  # 32 MiB moved: inside the L2 when warm
    medians = {}
    for flush in ("write", "read"):
        backend = CupyBackend(cold_flush=flush)
        launch = copy_launch(backend, n)
        for cache in ("warm", "cold"):
            samples = backend.time(launch, TimingProtocol.fixed(3, 30, cache=cache))
            medians[flush, cache] = float(np.median(samples.samples_us))
        assert cupy.cuda.get_current_stream() == backend.stream, "a cold flush moved later launches"
        backend.close()
    assert medians["write", "cold"] > medians["write", "warm"], medians
    assert medians["read", "cold"] > medians["read", "warm"], medians


def test_the_event_overhead_is_measured_small_and_taken_off_cold_samples_only():
    """An empty kernel still reads a positive time once the ~2 µs per cold sample is taken off, and
    measuring it never leaves the stream held (which would flag the hold's time-out)."""
    import cupy
    import numpy as np

    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    empty = cupy.RawKernel('extern "C" __global__ void nothing() {}', "nothing")

    def launch() -> None:
        empty((1,), (1,), (), stream=backend.stream)

    cold = backend.time(launch, TimingProtocol.fixed(3, 50, cache="cold"))
    warm = backend.time(launch, TimingProtocol.fixed(3, 50))
    per_launch = backend.time(launch, TimingProtocol.fixed(3, 50, mode="per_launch"))
    backend.close()
    assert 0.2 < cold.overhead_us < 10.0, cold.overhead_us
    assert warm.overhead_us == 0.0 and warm.launches_per_sample == 50, "warm samples bury it instead"
    assert per_launch.overhead_us == 0.0
    assert 0.1 < float(np.median(cold.samples_us)) < 10.0, cold.samples_us[:5]
    assert not [flag for flag in cold.flags if "hold" in flag], cold.flags


def test_auto_replays_a_graph_for_long_kernels_and_launches_short_ones_back_to_back():
    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    long = backend.time(copy_launch(backend, 1 << 24), TimingProtocol.fixed(3, 20))  # 128 MiB: ~50 µs
    short = backend.time(copy_launch(backend, 1 << 14), TimingProtocol.fixed(3, 20))
    cold = backend.time(copy_launch(backend, 1 << 24), TimingProtocol.fixed(3, 20, cache="cold"))
    backend.close()
    assert long.mode == "graph" and min(long.samples_us) > 10.0, (long.mode, long.samples_us[:3])
    assert short.mode == "back_to_back" and max(short.samples_us) < 10.0, short.samples_us[:3]
    assert cold.mode == "back_to_back" and cold.launches_per_sample == 1
    assert not long.flags and not short.flags, (long.flags, short.flags)


def test_auto_falls_back_to_back_to_back_when_the_launches_cannot_be_captured():
    """A call that queries its stream works in a plain batch but breaks a capture: ``auto`` times
    it back to back and says so; ``graph`` asked by name keeps the error; the stream is left ready
    for the next capture either way."""
    import cupy

    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    copy = copy_launch(backend, 1 << 24)

    def copy_and_query() -> None:
        copy()
        backend.stream.done  # noqa: B018 - cudaStreamQuery, which no capture may hold

    fallback = backend.time(copy_and_query, TimingProtocol.fixed(3, 20))
    with pytest.raises((cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError)):
        backend.time(copy_and_query, TimingProtocol.fixed(3, 20, mode="graph"))
    assert not backend.stream.is_capturing()
    after = backend.time(copy, TimingProtocol.fixed(3, 20))
    backend.close()
    assert fallback.mode == "back_to_back", fallback.mode
    assert any("could not be captured" in flag for flag in fallback.flags), fallback.flags
    assert min(fallback.samples_us) > 10.0
    assert after.mode == "graph" and not after.flags, (after.mode, after.flags)


def test_modules_loading_on_other_threads_never_stall_a_held_stream():
    """A sweep compiles and loads modules on worker threads while the timing thread holds its
    stream. A load may wait for the device to go quiet, which a held stream never does until the
    hold gives up (5 s): a load and a hold must never overlap."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from kernelopt_jupyter.backends.base import CompileRequest
    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    copy = copy_launch(backend, 1 << 20)
    source = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += VALUE; }'

    def compile_all() -> None:  # four at a time, so the compile process pool starts too
        with ThreadPoolExecutor(4) as pool:
            requests = [CompileRequest(source, "k", defines={"VALUE": f"{v}.5f"}) for v in range(32)]
            list(pool.map(backend.compile, requests))

    compiling = threading.Thread(target=compile_all)
    compiling.start()
    slowest, flags = 0.0, []
    while compiling.is_alive():
        started = time.perf_counter()
        timing = backend.time(copy, TimingProtocol.fixed(3, 20, host_check=False))
        slowest = max(slowest, time.perf_counter() - started)
        flags += timing.flags
    compiling.join()
    backend.close()
    assert slowest < 2.0, f"one timing took {slowest:.1f} s: a hold waited for a module load"
    assert not flags, flags


def test_the_measured_l2_ceiling_is_above_the_memory_ceiling():
    """The physics floor trusts these: an L2 figure under DRAM's (as many short copies timed from
    Python gave) made an honest ``cupy.sum`` of an L2-sized array 'faster than the hardware'."""
    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    peaks = backend.measure_peaks()
    backend.close()
    assert peaks.l2_gbs is not None and peaks.l2_gbs > 1.2 * peaks.dram_gbs, peaks
