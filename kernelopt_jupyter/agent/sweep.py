"""The tuning sweep: the offline way to improve a kernel, and later the agent's ``tune`` proposer.

Every configuration of the spec's tuning space is validated on every case. To be fast without
being sloppy:

* variants that differ only in launch-only knobs share one compiled module;
* distinct ``-D`` variants compile in parallel in the worker's NVRTC thread pool, ahead of the
  device, so compiling overlaps running;
* configurations over the device's limits are skipped, with the reason, before compiling;
* every configuration is validated on one trial of every case and screened with a short timing;
* the best few (within ``finalist_window`` of the best screen) are then re-timed *together*,
  round-robin, under the full protocol's sample count, noise target and budget (one budget per
  case shared by all finalists, so drift hits them alike), and validated again with every
  defence; only these full numbers decide the winner.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.inputs import case_variables
from ..core.launch import launch_limit_reason, resolve_launch
from ..core.results import CandidateResult, Status
from ..core.settings import TimingProtocol
from ..core.tuning_space import KnobValues, enumerate_space
from ..worker.client import WorkerLost, WorkerReplyError
from ..worker.evaluator import Evaluator
from ..worker.handles import KernelHandle
from ..worker.retiming import interleave, with_timings


def screen_protocol(full: TimingProtocol) -> TimingProtocol:
    """A short version of the full protocol (same cache): enough to rank, not to report. ``auto``
    becomes back-to-back so that every configuration is ranked in one mode, whatever its length,
    and none pays for a graph capture; the finalists are timed in the full protocol's mode."""
    return full.auto_as("back_to_back").model_copy(
        update={
            "warmup": 1,
            "samples": 3,
            "max_samples": 20,
            "budget_s": 0.01,
            "target_cv": None,
            "host_check": False,
            "sample_us": 20.0,  # short samples; an event pair's ~2 µs is well inside the finalist window
        }
    )


@dataclass
class SweepSettings:
    max_configs: int | None = None
    screen: TimingProtocol | None = None  # None: derived from the evaluator's protocol
    finalists: int = 5
    finalist_window: float = 0.15  # screens more than 15 % slower than the best cannot win
    compile_ahead: int = 64
    sample_seed: int = 0


@dataclass
class SweepOutcome:
    """One configuration's fate; ``final`` marks full-protocol re-timings of the finalists."""

    knobs: KnobValues
    result: CandidateResult
    final: bool = False


@dataclass
class SweepReport:
    space_size: int
    configs: int
    outcomes: list[SweepOutcome] = field(default_factory=list)
    skipped: list[tuple[KnobValues, str]] = field(default_factory=list)
    wall_s: float = 0.0
    compile_groups: int = 0
    best: SweepOutcome | None = None
    phases_s: dict[str, float] = field(default_factory=dict)

    def add_time(self, phase: str, seconds: float) -> None:
        self.phases_s[phase] = self.phases_s.get(phase, 0.0) + seconds

    @property
    def configs_per_s(self) -> float:
        return self.configs / self.wall_s if self.wall_s > 0 else 0.0

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if not o.final and o.result.status == status)


Record = Callable[[SweepOutcome], None]


def choose_configs(evaluator: Evaluator, settings: SweepSettings) -> tuple[int, list[KnobValues]]:
    space = evaluator.workload.tuning
    if space is None or not space.knobs:
        return 1, [dict(evaluator.default_knobs)]
    configs = list(enumerate_space(space))
    total = len(configs)
    if settings.max_configs is not None and settings.max_configs < total:
        default = evaluator.default_knobs
        rest = [c for c in configs if c != default]
        picked = random.Random(settings.sample_seed).sample(rest, max(0, settings.max_configs - 1))
        configs = ([default] if default in configs else []) + picked
        configs = configs[: settings.max_configs]
    return total, configs


def over_limits(evaluator: Evaluator, knobs: KnobValues) -> str | None:
    """Why this configuration cannot launch on the device at some case, before compiling it."""
    workload, device = evaluator.workload, evaluator.device
    for case in workload.cases:
        try:
            dims = resolve_launch(workload.launch, case.name, case_variables(case, knobs, device.emulated))
        except ValueError as exc:
            return f"case {case.name}: {exc}"
        reason = launch_limit_reason(device, dims)
        if reason is not None:
            return f"case {case.name}: {reason}"
    return None


def run_sweep(
    evaluator: Evaluator, settings: SweepSettings | None = None, record: Record | None = None
) -> SweepReport:
    settings = settings or SweepSettings()
    started = time.perf_counter()
    source = evaluator.workload.kernel_code()
    total, configs = choose_configs(evaluator, settings)
    report = SweepReport(space_size=total, configs=len(configs))
    screen = settings.screen or screen_protocol(evaluator.settings.timing)
    runnable: list[KnobValues] = []
    for knobs in configs:
        reason = over_limits(evaluator, knobs)
        if reason is None:
            runnable.append(knobs)
        else:
            report.skipped.append((knobs, reason))
    handles = [
        evaluator.submit(source, knobs) if i < settings.compile_ahead else None
        for i, knobs in enumerate(runnable)
    ]
    remaining_uses: dict[str, int] = {}
    report.compile_groups = len({evaluator.handle_for(source, knobs).key for knobs in runnable})
    for knobs in runnable:
        key = evaluator.handle_for(source, knobs).key
        remaining_uses[key] = remaining_uses.get(key, 0) + 1
    for index, knobs in enumerate(runnable):
        ahead = index + settings.compile_ahead
        if ahead < len(runnable) and handles[ahead] is None:
            handles[ahead] = evaluator.submit(source, runnable[ahead])
        handle = handles[index]
        assert handle is not None
        mark = time.perf_counter()
        compiled = evaluator.wait_compiled(handle)
        report.add_time("compile wait", time.perf_counter() - mark)
        mark = time.perf_counter()
        with evaluator.screening():
            result = evaluator.run(handle, compiled, None, knobs, timing=screen)
        report.add_time("validate + screen", time.perf_counter() - mark)
        for case in result.cases:
            for phase, seconds in case.seconds.items():
                report.add_time(f"  of which worker {phase}", seconds)
        _release(evaluator, handle, remaining_uses)
        outcome = SweepOutcome(knobs, result)
        report.outcomes.append(outcome)
        mark = time.perf_counter()
        if record is not None:
            record(outcome)
        report.add_time("record", time.perf_counter() - mark)
    mark = time.perf_counter()
    _retime_finalists(evaluator, source, settings, report, record)
    report.add_time("finalists (full protocol)", time.perf_counter() - mark)
    report.wall_s = time.perf_counter() - started
    return report


def _release(evaluator: Evaluator, handle: KernelHandle, remaining_uses: dict[str, int]) -> None:
    remaining_uses[handle.key] -= 1
    if remaining_uses[handle.key] == 0:
        evaluator.forget(handle)


def pick_finalists(outcomes: list[SweepOutcome], settings: SweepSettings) -> list[SweepOutcome]:
    """The fastest screened configurations, at most ``finalists``, within the window of the best."""
    ranked = sorted(
        (o for o in outcomes if not o.final and o.result.ranks), key=lambda o: o.result.score_us or 0.0
    )
    if not ranked:
        return []
    limit = (ranked[0].result.score_us or 0.0) * (1.0 + settings.finalist_window)
    return [o for o in ranked[: settings.finalists] if (o.result.score_us or 0.0) <= limit]


def _retime_finalists(
    evaluator: Evaluator, source: str, settings: SweepSettings, report: SweepReport, record: Record | None
) -> None:
    finalists = pick_finalists(report.outcomes, settings)
    if not finalists:
        return
    mark = time.perf_counter()
    try:
        timings = interleave(evaluator, [(source, None, o.knobs) for o in finalists])
    except (RuntimeError, WorkerLost, WorkerReplyError):
        timings = None  # one of them failed under the long timing: time each alone to find which
    report.add_time("  of which finalists: interleaved timing", time.perf_counter() - mark)
    for index, outcome in enumerate(finalists):
        mark = time.perf_counter()
        if timings is None:
            result = evaluator.evaluate(source, None, outcome.knobs)
        else:
            # Validation after the timing, with every defence the screen left out.
            checked = evaluator.validate(source, None, outcome.knobs)
            checked.compile_time_s, checked.compile_log = (
                outcome.result.compile_time_s,
                outcome.result.compile_log,
            )
            result = with_timings(evaluator, checked, {name: t[index] for name, t in timings.items()})
        report.add_time("  of which finalists: validation", time.perf_counter() - mark)
        final = SweepOutcome(outcome.knobs, result, final=True)
        report.outcomes.append(final)
        if record is not None:
            record(final)
        if result.ranks and (report.best is None or result.score_us < report.best.result.score_us):  # type: ignore[operator]
            report.best = final
    # The finalists' modules were compiled again for the re-timing; free them as the screen does.
    handles = {h.key: h for h in (evaluator.handle_for(source, o.knobs) for o in finalists)}
    for handle in handles.values():
        evaluator.forget(handle)
