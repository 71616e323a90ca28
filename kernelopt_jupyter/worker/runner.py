"""Inside the worker: run one case of one kernel — launch, validate, time — on any backend.

The rules of an honest evaluation are written once, here, against the backend interface:
outputs are fresh allocations poisoned before every launch; inputs are private copies, and the
read-only ones are compared bit for bit afterwards; the reference outputs arrive only after the
candidate finished; performance cases are timed with in/out buffers restored between samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backends.base import Backend, CompiledKernel, enough_samples
from ..core.compare import compare_output
from ..core.launch import LaunchDims
from ..core.results import CaseResult, OutputCheck, Status, TimingStats
from ..core.scoring import summarize
from ..core.settings import TimingProtocol
from ..core.types import poison_value
from ..core.workload import Parameter, Workload


@dataclass
class LoadedCase:
    """One trial of one case, resident in the worker: pristine device inputs and host references."""

    name: str
    trial: int
    arrays: dict[str, Any]
    scalars: dict[str, int | float]
    output_shapes: dict[str, tuple[tuple[int, ...], np.dtype]]
    reference: dict[str, np.ndarray] = field(default_factory=dict)
    _device_reference: dict[str, Any] = field(default_factory=dict)

    def expected(self, name: str, xp: Any) -> Any:
        """The reference output on the device, uploaded the first time a candidate needs it."""
        if name not in self._device_reference:
            self._device_reference[name] = xp.asarray(self.reference[name])
        return self._device_reference[name]


@dataclass
class RunRequest:
    """What the parent asks for one case (see :mod:`kernelopt_jupyter.worker.server`)."""

    case: str
    kind: str
    trials: list[LoadedCase]
    dims: LaunchDims
    launch_timeout_s: float
    timing: TimingProtocol | None = None
    repeat_check: bool = False
    revalidate: LoadedCase | None = None


# A synchronous launch costs the device time plus a launch latency of some microseconds; beyond
# this, the wall clock saw work the events did not.
ESCAPED_WORK_RATIO = 3.0
ESCAPED_WORK_SLACK_US = 100.0


class CaseFailed(Exception):
    def __init__(self, status: Status, message: str, outputs: list[OutputCheck] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.outputs = outputs or []


Invoke = Callable[[dict[str, Any]], None]


class CaseRunner:
    """Runs a kernel (or a baseline callable) through the validation and timing protocol."""

    def __init__(self, backend: Backend, workload: Workload) -> None:
        self.backend = backend
        self.workload = workload
        self.xp = backend.xp

    # --- buffers -------------------------------------------------------------------------------
    def fresh_buffers(self, case: LoadedCase) -> dict[str, Any]:
        """Private copies of the inputs and newly allocated, poisoned outputs."""
        buffers: dict[str, Any] = {}
        for parameter in self.workload.signature:
            if not parameter.is_pointer:
                continue
            if parameter.role in ("in", "inout"):
                buffers[parameter.name] = case.arrays[parameter.name].copy()
            else:
                shape, dtype = case.output_shapes[parameter.name]
                buffers[parameter.name] = self.xp.full(shape, poison_value(dtype), dtype=dtype)
        return buffers

    def timing_buffers(self, case: LoadedCase) -> tuple[dict[str, Any], Callable[[], None] | None]:
        """Fresh buffers for timing, and what restores their in/out parameters before each sample
        (None when there are none), so repeated launches see valid data."""
        buffers = self.fresh_buffers(case)
        restore = [
            (buffers[p.name], case.arrays[p.name])
            for p in self.workload.signature
            if p.is_pointer and p.role == "inout"
        ]
        if not restore:
            return buffers, None

        def prepare() -> None:
            for target, source in restore:
                target[...] = source

        return buffers, prepare

    def kernel_arguments(self, case: LoadedCase, buffers: Mapping[str, Any]) -> list[Any]:
        arguments: list[Any] = []
        for parameter in self.workload.signature:
            if parameter.is_pointer:
                arguments.append(buffers[parameter.name])
            else:
                arguments.append(parameter.param_type.dtype.type(case.scalars[parameter.name]))
        return arguments

    # --- one launch and its checks --------------------------------------------------------------
    def validate(
        self, invoke: Invoke, case: LoadedCase, timeout_s: float
    ) -> tuple[dict[str, Any], list[OutputCheck]]:
        """Launch once on fresh buffers; raise :class:`CaseFailed` unless every check passes."""
        buffers = self.fresh_buffers(case)
        invoke(buffers)
        self.backend.synchronize(timeout_s)
        checks = [
            compare_output(
                output.name,
                buffers[output.name],
                case.expected(output.name, self.xp),
                self.workload.tolerance_for(output),
                self.xp,
            )
            for output in self.workload.outputs
        ]
        failed = [check for check in checks if not check.passed]
        if failed:
            raise CaseFailed(Status.WRONG, "; ".join(check.reason for check in failed), checks)
        mutated = [
            p.name
            for p in self._read_only(case)
            if not self._bitwise_equal(buffers[p.name], case.arrays[p.name])
        ]
        if mutated:
            raise CaseFailed(
                Status.WRONG, f"the kernel wrote to read-only input(s) {', '.join(mutated)}", checks
            )
        return buffers, checks

    def _read_only(self, case: LoadedCase) -> list[Parameter]:
        return [p for p in self.workload.signature if p.is_pointer and p.role == "in"]

    def _bitwise_equal(self, a: Any, b: Any) -> bool:
        return bool(self.xp.array_equal(a.view(self.xp.uint8), b.view(self.xp.uint8)))

    def repeat_agrees(
        self, invoke: Invoke, case: LoadedCase, first: Mapping[str, Any], timeout_s: float
    ) -> None:
        """Run again on identical inputs: a race or an uninitialised read shows up as disagreement."""
        second, checks = self.validate(invoke, case, timeout_s)
        for output in self.workload.outputs:
            a, b = first[output.name], second[output.name]
            if output.order_dependent:
                check = compare_output(output.name, b, a, self.workload.tolerance_for(output), self.xp)
                agrees = check.passed
            else:
                agrees = self._bitwise_equal(a, b)
            if not agrees:
                raise CaseFailed(
                    Status.WRONG,
                    f"{output.name}: two runs on identical inputs disagree (a race or a read of "
                    "uninitialised memory)",
                    checks,
                )

    # --- the whole case ----------------------------------------------------------------------------
    def run(
        self, request: RunRequest, invoke_for: Callable[[LoadedCase, dict[str, Any]], None]
    ) -> CaseResult:
        result = CaseResult(
            name=request.case,
            kind=request.kind,
            status=Status.OK,
            grid=list(request.dims.grid),
            block=list(request.dims.block),
            shared_mem=request.dims.shared_mem,
        )
        started = time.perf_counter()
        try:
            first_buffers: dict[str, Any] = {}
            for index, trial in enumerate(request.trials):
                try:
                    buffers, result.outputs = self.validate(
                        _bind(invoke_for, trial), trial, request.launch_timeout_s
                    )
                except CaseFailed as exc:
                    if index == 0:
                        raise
                    raise CaseFailed(
                        exc.status,
                        f"trial {index + 1} of {len(request.trials)}, on fresh inputs from the run's secret "
                        f"seed (the saved inputs are trial 1's): {exc.message}",
                        exc.outputs,
                    ) from None
                if index == 0:
                    first_buffers = buffers
                result.trials += 1
            if request.repeat_check:
                self.repeat_agrees(
                    _bind(invoke_for, request.trials[0]),
                    request.trials[0],
                    first_buffers,
                    request.launch_timeout_s,
                )
            del first_buffers
            result.seconds["validate"] = time.perf_counter() - started
            if request.timing is not None and request.kind == "performance":
                started = time.perf_counter()
                result.timing, flags, phases = self.time(request, invoke_for)
                result.flags.extend(flags)
                result.seconds["time"] = time.perf_counter() - started
                result.seconds.update({f"time: {k}": v for k, v in phases.items()})
                if request.revalidate is not None:
                    try:
                        self.validate(
                            _bind(invoke_for, request.revalidate),
                            request.revalidate,
                            request.launch_timeout_s,
                        )
                    except CaseFailed as exc:
                        raise CaseFailed(
                            exc.status, f"after timing, on fresh inputs: {exc.message}", exc.outputs
                        ) from None
        except CaseFailed as exc:
            result.status = exc.status
            result.message = exc.message
            result.outputs = exc.outputs or result.outputs
            result.timing = None
        return result

    def time(
        self, request: RunRequest, invoke_for: Callable[[LoadedCase, dict[str, Any]], None]
    ) -> tuple[TimingStats, list[str], dict[str, float]]:
        case = request.trials[0]
        assert request.timing is not None
        buffers, prepare = self.timing_buffers(case)
        samples = self.backend.time(
            lambda: invoke_for(case, buffers),
            request.timing,
            prepare=prepare,
            timeout_s=request.launch_timeout_s,
        )
        stats = summarize(
            samples.samples_us,
            samples.warmup,
            launches_per_sample=samples.launches_per_sample,
            mode=samples.mode,
            cache=samples.cache,
            clock=samples.clock,
            flags=samples.flags,
            sm_clock_mhz=samples.clock_mhz,
            host_us_per_launch=samples.host_us_per_launch,
            overhead_us=samples.overhead_us,
        )
        flags = list(samples.flags)
        host = samples.host_us_per_launch
        if host is not None and host > ESCAPED_WORK_RATIO * stats.median_us + ESCAPED_WORK_SLACK_US:
            flags.append(
                f"host wall time per launch ({host:.1f} µs) is far above the device time "
                f"({stats.median_us:.1f} µs): work may be running outside the timed region"
            )
        stats.flags = flags
        return stats, flags, samples.phases


def interleaved_timings(
    runner: CaseRunner,
    invokers: list[Callable[[LoadedCase, dict[str, Any]], None]],
    case: LoadedCase,
    protocol: TimingProtocol,
    rounds: int,
    timeout_s: float,
) -> list[Any]:
    """Time several kernels in alternation (A/B/A/B...) so drift in clocks or temperature hits all
    of them alike; returns one TimingStats per kernel.

    At least ``rounds`` rounds; after that, rounds go on until every kernel's samples meet the
    protocol's stop rule (noise under target, or its time budget, shared by all the kernels).
    Every kernel is timed in one mode: ``auto`` is settled by the first round, and when it settles
    differently for different kernels (one near the graph threshold, or one that cannot be
    captured), that round is done again back to back.
    """
    per_round = max(10, protocol.samples // rounds)
    first = protocol.model_copy(
        update={
            "samples": per_round,
            "max_samples": per_round,
            "budget_s": None,
            "target_cv": None,
            "host_check": False,
        }
    )
    later = first.model_copy(update={"warmup": 1})
    collected: list[list[float]] = [[] for _ in invokers]
    modes: list[Any] = [None] * len(invokers)
    started = time.perf_counter()
    round_index = 0
    while round_index < rounds or not all(
        enough_samples(values, protocol, time.perf_counter() - started) for values in collected
    ):
        for index, invoke_for in enumerate(invokers):
            buffers, prepare = runner.timing_buffers(case)
            samples = runner.backend.time(
                lambda invoke_for=invoke_for, buffers=buffers: invoke_for(case, buffers),
                first if round_index == 0 else later,
                prepare=prepare,
                timeout_s=timeout_s,
            )
            collected[index].extend(samples.samples_us)
            modes[index] = samples
        if protocol.mode == "auto":
            used = {s.mode for s in modes}
            pinned = next(iter(used)) if len(used) == 1 else "back_to_back"
            protocol, first, later = (p.auto_as(pinned) for p in (protocol, first, later))
            if len(used) > 1:
                collected = [[] for _ in invokers]
                continue
        round_index += 1
    return [
        summarize(
            values,
            protocol.warmup,
            launches_per_sample=s.launches_per_sample,
            mode=f"{s.mode}, interleaved",
            cache=s.cache,
            clock=s.clock,
            flags=s.flags,
            overhead_us=s.overhead_us,
        )
        for values, s in zip(collected, modes, strict=True)
    ]


def _bind(invoke_for: Callable[[LoadedCase, dict[str, Any]], None], case: LoadedCase) -> Invoke:
    return lambda buffers: invoke_for(case, buffers)


def kernel_invoker(
    runner: CaseRunner, kernel: CompiledKernel, dims: LaunchDims
) -> Callable[[LoadedCase, dict[str, Any]], None]:
    def invoke(case: LoadedCase, buffers: dict[str, Any]) -> None:
        runner.backend.launch(kernel, dims, runner.kernel_arguments(case, buffers))

    return invoke
