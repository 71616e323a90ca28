"""The one small interface every backend implements: compile, allocate, launch, synchronize, time.

Backends run only inside the worker process (layer 3), never in the notebook. The worker's runner
is written once against this interface, so validation and timing rules are identical on a GPU and
in CPU emulation; a backend only supplies the mechanics.

Device arrays are whatever the backend's array module ``xp`` makes (CuPy arrays on a GPU, NumPy
arrays in emulation); the runner allocates, copies and compares through ``xp``.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..core.launch import LaunchDims, launch_limit_reason
from ..core.physics import HOST_FLOOR_MARGIN, Peaks
from ..core.results import DeviceInfo, KernelAttributes, Status
from ..core.settings import TimingProtocol


@dataclass(frozen=True)
class CompileRequest:
    """One thing to compile. ``defines`` become ``-D`` options; ``filename`` labels compiler messages."""

    source: str
    entry: str
    options: Sequence[str] = ()
    defines: dict[str, int | float | str] = field(default_factory=dict)
    filename: str = "candidate.cu"


@dataclass
class CompiledKernel:
    """A loaded kernel plus what the compiler said about it; ``handle`` is backend-specific."""

    entry: str
    handle: Any
    attributes: KernelAttributes
    compile_log: str = ""
    compile_time_s: float = 0.0


class CompileFailed(Exception):
    """The source did not compile. ``log`` refers to the candidate's own file name and line numbers."""

    def __init__(self, log: str, compile_time_s: float = 0.0) -> None:
        super().__init__(log)
        self.log = log
        self.compile_time_s = compile_time_s


class LaunchFailed(Exception):
    """A launch went wrong. ``fatal`` means the device state is unusable and the worker must go."""

    def __init__(self, status: Status, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fatal = fatal


@dataclass
class TimingSamples:
    samples_us: list[float]
    warmup: int
    launches_per_sample: int = 1
    mode: str = "per_launch"
    cache: str = "warm"
    clock: str = "cuda_events"
    flags: list[str] = field(default_factory=list)
    host_us_per_launch: float | None = None
    clock_mhz: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    overhead_us: float = 0.0  # per-sample timing overhead, measured and already taken off


class Backend(abc.ABC):
    """Compile and run CUDA C++ kernels on one device (or its emulation)."""

    name: str = "abstract"
    emulated: bool = False
    clock: str = "host"
    xp: Any = np

    @abc.abstractmethod
    def device_info(self) -> DeviceInfo: ...

    @abc.abstractmethod
    def compile(self, request: CompileRequest) -> CompiledKernel:
        """Compile and load; must be safe to call from several threads at once."""

    @abc.abstractmethod
    def launch(self, kernel: CompiledKernel, dims: LaunchDims, args: Sequence[Any]) -> None:
        """Start one launch. Arguments are device arrays and NumPy scalars, in signature order."""

    @abc.abstractmethod
    def synchronize(self, timeout_s: float) -> None:
        """Wait for all launched work; raise :class:`LaunchFailed` (timeout, crash) on failure."""

    def check_launch(self, kernel: CompiledKernel, dims: LaunchDims) -> str | None:
        """Why this launch cannot run here (block too large, too much shared memory...), or None."""
        return launch_limit_reason(self.device_info(), dims, kernel.attributes)

    def time(
        self,
        run: Callable[[], None],
        request: TimingProtocol,
        *,
        prepare: Callable[[], None] | None = None,
        timeout_s: float = 10.0,
    ) -> TimingSamples:
        """Time ``run`` (one launch) with host clocks, one reading pair per launch.

        Backends with device clocks override this. ``prepare`` runs before every launch, outside
        the timed region (e.g. to restore in/out buffers).
        """
        for _ in range(request.warmup):
            if prepare:
                prepare()
            run()
            self.synchronize(timeout_s)
        samples: list[float] = []
        started = time.perf_counter()
        while True:
            if prepare:
                prepare()
            begin = time.perf_counter_ns()
            run()
            self.synchronize(timeout_s)
            samples.append((time.perf_counter_ns() - begin) / 1000.0)
            if enough_samples(samples, request, time.perf_counter() - started):
                break
        return TimingSamples(samples, request.warmup, mode="per_launch", cache=request.cache, clock="host")

    def measure_peaks(self) -> Peaks:
        """Host ceilings: what the CPU emulation can never beat.

        A host has several cache levels and no event timer, and one measurement can land on a busy
        moment, so the cache rate is the best of copies and adds over several cache-resident sizes,
        and host floors get the wider ``HOST_FLOOR_MARGIN``.
        """
        size = 1 << 26
        source, target = np.ones(size, np.float32), np.empty(size, np.float32)
        copy_s = min(_seconds(lambda: np.copyto(target, source)) for _ in range(3))
        cache_gbs = max(_host_cache_rate(source, target, 1 << shift) for shift in (15, 17, 19, 20))
        matrix = np.ones((1024, 1024), np.float32)
        product_s = min(_seconds(lambda: matrix @ matrix) for _ in range(3))
        return Peaks(
            device=self.device_info().name,
            dram_gbs=2 * source.nbytes / copy_s / 1e9,
            l2_gbs=cache_gbs,
            fp32_gflops=2 * 1024**3 / product_s / 1e9,
            method="numpy copy (256 MiB), best cache-resident copy or add (128 KiB to 4 MiB), matmul; host",
            margin=HOST_FLOOR_MARGIN,
        )

    def classify_error(self, error: Exception) -> LaunchFailed | None:
        """Map a backend-specific exception (by its status code, never its text) to a verdict."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release the device; the default has nothing to release."""


def _host_cache_rate(source: np.ndarray, target: np.ndarray, count: int) -> float:
    """GB/s of the faster of a copy and an add over ``count`` floats, repeated to move ~64 MiB."""
    first, second, out = source[:count], source[count : 2 * count], target[:count]
    repeats = max(4, (1 << 24) // count)
    copy_s = min(_seconds(lambda: [np.copyto(out, first) for _ in range(repeats)]) for _ in range(3))
    add_s = min(_seconds(lambda: [np.add(first, second, out=out) for _ in range(repeats)]) for _ in range(3))
    moved = out.nbytes * repeats
    return max(2 * moved / copy_s, 3 * moved / add_s) / 1e9


def _seconds(work: Callable[[], object]) -> float:
    begin = time.perf_counter()
    work()
    return time.perf_counter() - begin


def enough_samples(samples: list[float], request: TimingProtocol, elapsed_s: float) -> bool:
    """Stop rule shared by every backend: the minimum count, then noise or budget, then the cap.

    Below the minimum count, only a run ten times over its budget stops (a very slow kernel).
    """
    count = len(samples)
    if count >= request.max_samples:
        return True
    if count < request.samples:
        return request.budget_s is not None and elapsed_s > 10 * request.budget_s
    if request.target_cv is not None and count >= 3:
        values = np.asarray(samples)
        if values.std() / values.mean() < request.target_cv:
            return True
    return request.budget_s is None or elapsed_s >= request.budget_s


def next_batch_size(
    samples: list[float], request: TimingProtocol, elapsed_s: float, sample_us: float, launches: int = 1
) -> int:
    """How many samples to queue next: what the minimum count still lacks; past it, no more than
    the budget left can pay for (a 10 ms screen of a 1 ms kernel must not queue 25 more samples).

    Each batch also stays well under the driver's launch-queue depth (``launches`` per sample), or
    the host would block behind a held stream.
    """
    cap = max(1, 200 // (launches + 2))
    if len(samples) < request.samples:
        wanted = request.samples - len(samples)
    else:
        wanted = 25
        if request.budget_s is not None:
            left_us = (request.budget_s - elapsed_s) * 1e6
            wanted = min(wanted, int(left_us / max(sample_us, 1e-3)) + 1)
    return max(1, min(wanted, cap, request.max_samples - len(samples)))


GRAPH_MIN_US = 10.0
TimedMode = Literal["per_launch", "back_to_back", "graph"]


def resolve_mode(request: TimingProtocol, warm_us: float | None) -> TimedMode:
    """The timing mode ``auto`` stands for, given the warm-up's device time per launch (µs).

    Measured against Nsight Compute on an H200 (``docs/measurements.md``): a replayed graph matches
    it from 30 µs up (0.0 % at 30 µs, where back-to-back launches read 5.7 % slow: a stream adds
    ~1.5 µs between kernels that a graph does not), but reads a 3 µs kernel 12 % fast (its
    launches overlap), where back-to-back is within 4 %. Cold samples are one launch after a
    flush, which a graph cannot hold, so they are always back to back. ``warm_us`` None: not
    known yet (before the warm-up), which only a cold request can resolve.
    """
    if request.mode != "auto":
        return request.mode
    if request.cache == "cold" or warm_us is None or warm_us < GRAPH_MIN_US:
        return "back_to_back"
    return "graph"
