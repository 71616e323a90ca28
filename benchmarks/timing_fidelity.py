"""Timing fidelity: kernelopt's medians against Nsight Compute's kernel durations, on one GPU.

    python benchmarks/timing_fidelity.py [--repeats 5] [--only fidelity_3us,fidelity_30us]

Copy kernels of about 3 µs, 30 µs, 300 µs and 3 ms (plus a no-op, and three between 7 and 20 µs
around where ``auto`` switches mode) are timed through the CUDA backend in each mode — auto (the
default; the row names the mode it chose), back_to_back, graph, per_launch (one event pair per
launch, the seed-compatible mode) — warm and cold, and under ``ncu --clock-control none --metrics
gpu__time_duration.sum`` with ``--cache-control none`` (warm) and ``all`` (cold). Prints, per
kernel, each median, its difference from ncu, and the spread of the median over the repeats.
Two further rows per kernel: cold mode with the L2 evicted by *writing* (dirty lines the kernel
must write back) instead of reading (clean lines, like ncu's flush-and-invalidate), and a
diagnostic of launches each timed alone after the GPU idled (what ncu sees), to tell launch
overhead from the pause ncu leaves between kernels.
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SOURCE = r"""
#define COPY(NAME) \
    extern "C" __global__ void NAME(const float* __restrict__ x, float* __restrict__ y, long long n) { \
        long long stride = (long long)gridDim.x * blockDim.x; \
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) \
            y[i] = x[i] * 1.0001f; \
    }
COPY(fidelity_3us)
COPY(fidelity_10us)
COPY(fidelity_15us)
COPY(fidelity_20us)
COPY(fidelity_30us)
COPY(fidelity_300us)
COPY(fidelity_3ms)
extern "C" __global__ void fidelity_noop(const float* x, float* y, long long n) {}
"""
# Elements per array: the copy moves 8 bytes per element at roughly 3 TB/s.
KERNELS = {
    "fidelity_noop": 1,
    "fidelity_3us": 1 << 20,
    "fidelity_10us": 4 << 20,
    "fidelity_15us": 6 << 20,
    "fidelity_20us": 8 << 20,
    "fidelity_30us": 11 << 20,
    "fidelity_300us": 112 << 20,
    "fidelity_3ms": 1120 << 20,
}
NCU_LAUNCHES = 15


def launch_dims(n: int) -> tuple[int, int, int]:
    return (min(132 * 32, max(1, -(-n // 256))), 1, 1)


def ncu_child() -> None:
    """Run under ncu: each kernel a few times, nothing else."""
    import cupy

    module = cupy.RawModule(code=SOURCE, options=("-std=c++17",))
    largest = max(KERNELS.values())
    x = cupy.ones(largest, np.float32)
    y = cupy.empty_like(x)
    for name, n in KERNELS.items():
        kernel = module.get_function(name)
        for _ in range(NCU_LAUNCHES):
            kernel(launch_dims(n), (256,), (x, y, np.int64(n)))
    cupy.cuda.runtime.deviceSynchronize()


def find_ncu() -> str | None:
    candidates = [
        shutil.which("ncu"),
        *sorted(glob.glob("/usr/local/cuda*/bin/ncu")),
        *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")),
    ]
    return next((c for c in candidates if c), None)


def ncu_durations(cache: str) -> dict[str, float]:
    """Median gpu__time_duration.sum (µs) per kernel, with ncu's cache control ('none' or 'all')."""
    ncu = find_ncu()
    if ncu is None:
        return {}
    command = [
        ncu,
        "--clock-control",
        "none",
        "--cache-control",
        cache,
        "--metrics",
        "gpu__time_duration.sum",
        "--csv",
        "--print-units",
        "base",
        "-k",
        "regex:fidelity_",
        sys.executable,
        __file__,
        "--ncu-child",
        "--only",
        ",".join(KERNELS),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=400)
    rows = [line for line in completed.stdout.splitlines() if line.startswith('"')]
    values: dict[str, list[float]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"].split("(")[0].strip()
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3}.get(
            row["Metric Unit"], 1e-3
        )
        values.setdefault(name, []).append(float(row["Metric Value"].replace(",", "")) * scale)
    if not values:
        print(
            f"ncu ({cache}) gave no rows; its output ended with:\n"
            f"{completed.stdout[-600:]}{completed.stderr[-600:]}"
        )
    return {name: statistics.median(v) for name, v in values.items()}


def ours(repeats: int, cold_flush: str = "read") -> dict[tuple[str, str], list[float]]:
    """Medians (µs) per (kernel, mode) from the CUDA backend, `repeats` independent measurements each.

    With ``cold_flush="write"`` only the cold mode is measured, with the L2 evicted by writing.
    Prints the per-sample overhead the backend measured and took off, per mode.
    """
    import cupy

    from kernelopt_jupyter.backends.base import CompileRequest
    from kernelopt_jupyter.backends.cupy_backend import CupyBackend
    from kernelopt_jupyter.core.launch import LaunchDims
    from kernelopt_jupyter.core.settings import TimingProtocol

    backend = CupyBackend(cold_flush=cold_flush)  # type: ignore[arg-type]
    largest = max(KERNELS.values())
    x = cupy.ones(largest, np.float32)
    y = cupy.empty_like(x)
    modes = {
        "auto warm": (TimingProtocol(), repeats),
        "auto cold": (TimingProtocol(cache="cold"), repeats),
        "back_to_back warm": (TimingProtocol(mode="back_to_back"), 1),
        "graph warm": (TimingProtocol(mode="graph"), 1),
        "per_launch warm": (TimingProtocol(mode="per_launch"), 1),
        "back_to_back warm, 20 µs samples": (TimingProtocol(mode="back_to_back", sample_us=20.0), 1),
    }
    if cold_flush == "write":
        modes = {"auto cold, write flush": (TimingProtocol(cache="cold"), repeats)}
    results: dict[tuple[str, str], list[float]] = {}
    overheads: dict[str, float] = {}
    for name, n in KERNELS.items():
        kernel = backend.compile(CompileRequest(SOURCE, name))
        dims = LaunchDims(launch_dims(n), (256, 1, 1), 0)
        arguments = [x, y, np.int64(n)]
        for mode, (protocol, count) in modes.items():
            for _ in range(count):
                samples = backend.time(
                    lambda k=kernel, d=dims, a=arguments: backend.launch(k, d, a), protocol
                )
                shown = f"{mode} = {samples.mode}" if mode.startswith("auto") else mode
                results.setdefault((name, shown), []).append(float(np.median(samples.samples_us)))
                overheads[shown] = samples.overhead_us
    print(
        f"per-sample overhead taken off ({cold_flush} flush): "
        + ", ".join(f"{mode} {us:.2f} µs" for mode, us in overheads.items() if us)
    )
    backend.close()
    return results


def isolated(samples: int = 50, idle_s: float = 200e-6) -> dict[tuple[str, str], list[float]]:
    """Diagnostic: each launch alone, after the GPU idled, behind a stream hold — what ncu sees.

    Back-to-back launches give the memory system no pause between kernels; ncu serializes them
    with long gaps. If this row agrees with ncu where back_to_back does not, the difference is the
    pause (write-backs finishing between kernels), not launch overhead.
    """
    import cupy

    from kernelopt_jupyter.backends.base import CompileRequest
    from kernelopt_jupyter.backends.cupy_backend import CupyBackend
    from kernelopt_jupyter.backends.stream_hold import StreamHold
    from kernelopt_jupyter.core.launch import LaunchDims

    backend = CupyBackend()
    hold = StreamHold(backend.device_info().sm_clock_mhz)
    x = cupy.ones(max(KERNELS.values()), np.float32)
    y = cupy.empty_like(x)
    results: dict[tuple[str, str], list[float]] = {}
    for name, n in KERNELS.items():
        kernel = backend.compile(CompileRequest(SOURCE, name))
        dims = LaunchDims(launch_dims(n), (256, 1, 1), 0)
        arguments = [x, y, np.int64(n)]
        for _ in range(5):
            backend.launch(kernel, dims, arguments)
        values = []
        for _ in range(samples):
            cupy.cuda.runtime.deviceSynchronize()
            time.sleep(idle_s)
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            hold.hold(backend.stream)
            start.record(backend.stream)
            backend.launch(kernel, dims, arguments)
            end.record(backend.stream)
            hold.release()
            end.synchronize()
            values.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0)
        results[(name, "isolated warm (diag)")] = [statistics.median(values)]
    hold.close()
    backend.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", help="comma-separated kernel names (default: all)")
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        chosen = args.only.split(",")
        for name in [name for name in KERNELS if name not in chosen]:
            del KERNELS[name]
    if args.ncu_child:
        ncu_child()
        return
    measured = ours(args.repeats)
    measured.update(ours(args.repeats, cold_flush="write"))
    measured.update(isolated())
    truth = {"warm": ncu_durations("none"), "cold": ncu_durations("all")}
    print(f"{'kernel':<16}{'mode':<40}{'ours µs':>10}{'ncu µs':>10}{'diff %':>8}{'spread %':>10}")
    kernel_order = list(KERNELS)
    for (name, mode), medians in sorted(measured.items(), key=lambda item: kernel_order.index(item[0][0])):
        cache = "cold" if "cold" in mode else "warm"
        reference = truth[cache].get(name)
        median = statistics.median(medians)
        diff = f"{100 * (median / reference - 1):+8.1f}" if reference else f"{'-':>8}"
        spread = f"{100 * (max(medians) - min(medians)) / median:10.2f}" if len(medians) > 1 else f"{'-':>10}"
        shown = f"{reference:10.2f}" if reference else f"{'-':>10}"
        print(f"{name:<16}{mode:<40}{median:>10.2f}{shown}{diff}{spread}")
    print(f"spread: (max - min) of {args.repeats} medians over their median")
    print(f"ncu: median of {NCU_LAUNCHES} launches, clock control none; warm/cold = cache control none/all")


if __name__ == "__main__":
    main()
