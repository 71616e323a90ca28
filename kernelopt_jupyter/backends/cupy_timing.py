"""Timing on a CUDA device without the usual lies.

* One CUDA event pair per launch, recorded from Python, measures the host's launch latency when the
  kernel is short (a no-op reads ~11 µs on an H100). So every mode except ``per_launch`` first
  queues a *blocking kernel* that spins on a host-mapped flag, enqueues a whole batch of samples
  behind it, then releases the flag: the GPU runs the batch back to back and the events bracket
  device work only (nvbench's method).
* ``per_launch``: one event pair around each launch, in-out buffers restored and (cold mode) a
  buffer twice the L2's size read (or written) between samples, outside the pair.
* ``back_to_back``: one event pair around ``launches_per_sample`` launches; time per launch is the
  mean. ``graph``: the same launches captured once as a CUDA graph and replayed. ``auto`` (the
  default) is graph for kernels of 10 µs and more, back-to-back below and for cold samples
  (:func:`.base.resolve_mode` says why); the timing records the mode used.
* Warm samples last ``sample_us`` (500 µs; at most 50 launches), so the ~2 µs an event pair adds
  is buried. A cold sample is one launch after a flush: there that cost is measured with an empty
  kernel (:meth:`Timer.sample_overhead_us`) and taken off; without that, a cold 30 µs copy read
  9 % slow against Nsight Compute.
* Before timing, persisting-L2 lines are reset and the persisting limit set to 0, so a candidate
  cannot pin its data in L2. The SM clock is read around the measurement (NVML) and samples taken
  under 75 % of the maximum are flagged. A few synchronous launches compare host wall time with the
  event time: a large gap means work escaped the timed region (e.g. onto another stream).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Literal

import cupy
import numpy as np

from ..core.settings import TimingProtocol
from .base import TimingSamples, enough_samples, next_batch_size, resolve_mode
from .stream_hold import StreamHold

_PERSISTING_L2_LIMIT = 0x06  # cudaLimitPersistingL2CacheSize
THROTTLE_FRACTION = 0.75
ColdFlush = Literal["write", "read"]
MIN_SAMPLE_US = 0.01  # a sample never reads zero or less after the overhead is taken off
_EMPTY_SOURCE = 'extern "C" __global__ void kernelopt_empty() {}'


class Clocks:
    """SM clock readings through NVML, when nvidia-ml-py is installed."""

    def __init__(self, device_id: int) -> None:
        self.handle: Any = None
        self.max_mhz: float | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            bus_id = cupy.cuda.runtime.deviceGetPCIBusId(device_id)
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            self.max_mhz = float(pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM))
            self._pynvml = pynvml
        except Exception:  # no NVML: clocks simply are not recorded
            self.handle = None

    def sm_mhz(self) -> float | None:
        if self.handle is None:
            return None
        try:
            return float(self._pynvml.nvmlDeviceGetClockInfo(self.handle, self._pynvml.NVML_CLOCK_SM))
        except Exception:
            return None


def set_persisting_limit_zero() -> bool:
    """No L2 set-aside for persisting accesses (False if the device has no such limit)."""
    try:
        cupy.cuda.runtime.deviceSetLimit(_PERSISTING_L2_LIMIT, 0)
    except cupy.cuda.runtime.CUDARuntimeError:
        return False
    return True


def reset_persisting_lines() -> bool:
    """Demote every persisting L2 line to normal (cudaCtxResetPersistingL2Cache)."""
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:  # cuda-bindings absent: with the limit at 0 no new line can persist
        return True
    (error,) = cudart.cudaCtxResetPersistingL2Cache()
    return int(error) == 0


class Timer:
    """Runs the sampling loop for one kernel (or callable) on one stream."""

    def __init__(
        self, stream: Any, hold: StreamHold, clocks: Clocks, l2_bytes: int, cold_flush: ColdFlush = "read"
    ) -> None:
        self.stream = stream
        self.hold = hold
        self.clocks = clocks
        self.cold_flush = cold_flush
        self.flush_buffer = cupy.full(max(2 * l2_bytes, 64 << 20), 0xA5, dtype=np.uint8)
        self._flush_sink = cupy.zeros((), dtype=np.uint64)
        self._flush_loaded = False
        self._l2_limit_set: bool | None = None
        self._overheads: dict[str, float] = {}
        self._empty: Callable[[], None] | None = None

    def reset_l2(self) -> bool:
        if self._l2_limit_set is None:
            self._l2_limit_set = set_persisting_limit_zero()
        return self._l2_limit_set and reset_persisting_lines()

    def flush(self) -> None:
        """Evict the L2 before a cold sample, on the timing stream.

        ``write`` overwrites a buffer twice the L2's size, which leaves the L2 full of dirty lines
        the next kernel must write back; ``read`` sums it instead, leaving clean lines, as
        ``ncu --cache-control all`` does (flush and invalidate). Both run on the current stream,
        which the backend made the timing stream: a ``with stream:`` block here would, on exit, hand
        the thread's later launches to another stream, outside the event pairs.
        """
        if self.cold_flush == "read":
            self.flush_buffer.sum(out=self._flush_sink)
        else:
            self.flush_buffer.fill(np.uint8(0xA5))

    def _load_flush(self) -> None:
        """Flush once, outside any hold: its first call compiles and loads CuPy's reduction kernel,
        a load that would stall behind a held stream. Only cold timing needs it; warm-only runs
        never pay for the compile."""
        if not self._flush_loaded:
            self.flush()
            self.stream.synchronize()
            self._flush_loaded = True

    def measure(
        self,
        run: Callable[[], None],
        request: TimingProtocol,
        prepare: Callable[[], None] | None,
        wait: Callable[[Any, float], None],
        timeout_s: float,
    ) -> TimingSamples:
        flags: list[str] = []
        phases: dict[str, float] = {}
        mark = time.perf_counter()
        if not self.reset_l2():
            flags.append("persisting L2 could not be reset")
        phases["l2 reset"] = time.perf_counter() - mark
        asked = request.mode
        if request.cache == "cold":
            request = request.model_copy(update={"mode": resolve_mode(request, None)})
            self._load_flush()
        overhead_us = self.sample_overhead_us(request, wait, timeout_s)
        mark = time.perf_counter()
        warm_us = self._warm_up(run, request, prepare, wait, timeout_s)
        phases["warm-up"] = time.perf_counter() - mark
        request = request.model_copy(update={"mode": resolve_mode(request, warm_us)})
        per_sample = self._launches_per_sample(request, warm_us)
        graph = None
        if request.mode == "graph":
            mark = time.perf_counter()
            graph, request = self._graph_or_fallback(run, per_sample, request, asked, flags)
            phases["graph capture"] = time.perf_counter() - mark
        mark = time.perf_counter()
        clock_start = self.clocks.sm_mhz()
        phases["clock readings"] = time.perf_counter() - mark
        started = time.perf_counter()
        samples = self._sample(run, request, prepare, wait, timeout_s, per_sample, overhead_us, flags, graph)
        phases["sampling"] = time.perf_counter() - started
        clock_end = self.clocks.sm_mhz()
        flags.extend(self._clock_flags(clock_start, clock_end))
        return TimingSamples(
            samples,
            request.warmup,
            launches_per_sample=per_sample,
            mode=request.mode,
            cache=request.cache,
            clock="cuda_events",
            flags=sorted(set(flags)),
            clock_mhz=[c for c in (clock_start, clock_end) if c is not None],
            phases=phases,
            overhead_us=overhead_us,
        )

    def sample_overhead_us(
        self, request: TimingProtocol, wait: Callable[[Any, float], None], timeout_s: float
    ) -> float:
        """What one cold sample adds beyond its launch (µs), measured once per mode.

        After the flush, an event pair with one launch between costs about 2 µs more than that
        launch does amid others: 7 % of a 30 µs kernel, and every cold sample is one launch. So an
        empty kernel is timed alone after a flush, then 50 to a sample; the difference is taken
        off every cold sample. Warm samples need no correction: they hold enough launches
        (``sample_us``) to bury it, and there the cost hides behind the previous kernel anyway
        (subtracting an empty kernel's figure made a 30 µs copy read 10 % fast). ``per_launch``
        keeps its overhead: it is there to show it.
        """
        if request.mode == "per_launch" or request.cache != "cold":
            return 0.0
        if request.mode not in self._overheads:
            run = self._empty_launch()
            single = TimingProtocol.fixed(5, 100, mode=request.mode, cache="cold", host_check=False)
            many = TimingProtocol.fixed(5, 20, mode=request.mode, host_check=False)
            alone = self._sample(run, single, None, wait, timeout_s, 1, 0.0, [])
            amid = self._sample(run, many, None, wait, timeout_s, 50, 0.0, [])
            self._overheads[request.mode] = max(0.0, float(np.median(alone)) - float(np.median(amid)))
        return self._overheads[request.mode]

    def _empty_launch(self) -> Callable[[], None]:
        """One launch of an empty kernel on the timing stream; compiled and loaded (by a first
        launch) before any stream hold: loading a module waits for the device, and the held stream
        would keep it waiting until the hold gave up (5 s)."""
        if self._empty is None:
            kernel = cupy.RawKernel(_EMPTY_SOURCE, "kernelopt_empty")

            def launch() -> None:
                kernel((1,), (1,), (), stream=self.stream)

            launch()
            self.stream.synchronize()
            self._empty = launch
        return self._empty

    def _sample(
        self,
        run: Callable[[], None],
        request: TimingProtocol,
        prepare: Callable[[], None] | None,
        wait: Callable[[Any, float], None],
        timeout_s: float,
        per_sample: int,
        overhead_us: float,
        flags: list[str],
        graph: Any = None,
    ) -> list[float]:
        """The sampling loop: batches of event pairs queued behind the stream hold. In graph mode
        each sample replays ``graph`` (captured here when not given)."""
        if graph is None and request.mode == "graph":
            graph = self._capture(run, per_sample)
        blocked = request.mode != "per_launch"
        samples: list[float] = []
        started = time.perf_counter()
        while not samples or not enough_samples(samples, request, time.perf_counter() - started):
            sample_us = float(np.mean(samples)) * per_sample if samples else 0.0
            batch = next_batch_size(samples, request, time.perf_counter() - started, sample_us, per_sample)
            pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(batch)]
            with self.hold.held(self.stream) if blocked else contextlib.nullcontext():
                for start, end in pairs:
                    if prepare:
                        prepare()
                    if request.cache == "cold":
                        self.flush()
                    start.record(self.stream)
                    if graph is not None:
                        graph.launch(self.stream)
                    else:
                        for _ in range(per_sample):
                            run()
                    end.record(self.stream)
            wait(pairs[-1][1], timeout_s * batch * per_sample + 5.0)
            if blocked and self.hold.timed_out():
                flags.append("the stream hold timed out; a batch ran while still being queued")
            for start, end in pairs:
                elapsed_us = cupy.cuda.get_elapsed_time(start, end) * 1000.0
                samples.append(max(elapsed_us - overhead_us, MIN_SAMPLE_US * per_sample) / per_sample)
        return samples

    def _warm_up(
        self,
        run: Callable[[], None],
        request: TimingProtocol,
        prepare: Callable[[], None] | None,
        wait: Callable[[Any, float], None],
        timeout_s: float,
    ) -> float:
        """Run the warm-up launches; return their mean device time per launch (µs)."""
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        count = max(1, request.warmup)
        held = request.mode != "per_launch" and count <= 100
        with self.hold.held(self.stream) if held else contextlib.nullcontext():
            start.record(self.stream)
            for _ in range(count):
                if prepare:
                    prepare()
                run()
            end.record(self.stream)
        wait(end, timeout_s * count)
        return cupy.cuda.get_elapsed_time(start, end) * 1000.0 / count

    @staticmethod
    def _launches_per_sample(request: TimingProtocol, warm_us: float) -> int:
        """Enough launches per event pair to make a sample ``sample_us`` long; one when each sample
        must be cold."""
        if request.mode == "per_launch" or request.cache == "cold":
            return 1
        if request.launches_per_sample:
            return request.launches_per_sample
        return int(min(50, max(1, round(request.sample_us / max(warm_us, 0.1)))))

    def host_time_per_launch(
        self, run: Callable[[], None], prepare: Callable[[], None] | None, count: int = 5
    ) -> float:
        """Wall time per launch with a device-wide synchronize after each: catches escaped work."""
        total = 0.0
        for _ in range(count):
            if prepare:
                prepare()
                cupy.cuda.runtime.deviceSynchronize()
            begin = time.perf_counter()
            run()
            cupy.cuda.runtime.deviceSynchronize()
            total += time.perf_counter() - begin
        return total / count * 1e6

    def _capture(self, run: Callable[[], None], launches: int) -> Any:
        """``launches`` calls of ``run`` captured as one CUDA graph, uploaded to the device. If a
        call fails, the capture is ended (its error set aside) before the call's error goes up,
        so the stream is never left capturing."""
        self.stream.begin_capture()
        try:
            for _ in range(launches):
                run()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stream.end_capture()
            raise
        graph = self.stream.end_capture()
        graph.upload(self.stream)
        return graph

    def _graph_or_fallback(
        self, run: Callable[[], None], launches: int, request: TimingProtocol, asked: str, flags: list[str]
    ) -> tuple[Any, TimingProtocol]:
        """The graph to replay, or, when ``auto`` chose graph and the launches cannot be captured
        (a call that synchronizes, or one the driver will not record), none and the request
        switched to back-to-back, with a flag that says so. Any failure counts: whatever it is,
        the launches run fine outside a capture (the warm-up just ran them). Asked for by name,
        graph mode keeps the error."""
        try:
            return self._capture(run, launches), request
        except Exception as exc:
            if asked == "graph":
                raise
            flags.append(
                f"the launches could not be captured as a CUDA graph ({type(exc).__name__}); "
                "timed back to back"
            )
            return None, request.model_copy(update={"mode": "back_to_back"})

    def _clock_flags(self, start: float | None, end: float | None) -> list[str]:
        maximum = self.clocks.max_mhz
        readings = [c for c in (start, end) if c is not None]
        if not maximum or not readings:
            return []
        low = min(readings)
        if low < THROTTLE_FRACTION * maximum:
            return [f"SM clock {low:.0f} MHz < 75% of its {maximum:.0f} MHz maximum (throttled?)"]
        return []
