"""Re-timing close candidates side by side (A/B/A/B), and holding that timing to the same floor.

A difference of a few percent between timings taken minutes apart can be clock or thermal drift.
So the session re-times a close candidate interleaved with the best, and lets that measurement
decide; since it decides, its medians must clear the physics floor too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.inputs import case_variables
from ..core.launch import CandidateLaunch, resolve_launch
from ..core.physics import impossible
from ..core.results import CandidateResult, Status, TimingStats
from ..core.scoring import score
from ..core.tuning_space import KnobValues
from .evaluator import Evaluator


def below_floor(
    evaluator: Evaluator, result: CandidateResult, timings: Mapping[str, TimingStats]
) -> str | None:
    """Why re-timed medians of a result's cases are faster than the hardware allows, or None
    (always None with the floor switched off in the settings)."""
    if not evaluator.settings.physics_floor:
        return None
    for name, stats in timings.items():
        case = result.case(name)
        if case is None:
            continue
        reason = impossible(
            case.model_copy(update={"timing": stats}), evaluator.peaks, evaluator.device.l2_cache_bytes
        )
        if reason is not None:
            return f"case {name}: {reason}"
    return None


def with_timings(
    evaluator: Evaluator, result: CandidateResult, timings: Mapping[str, TimingStats]
) -> CandidateResult:
    """A copy of ``result`` whose performance cases carry a decisive re-timing, scored again and
    held to the physics floor (an impossible re-timing makes the copy ``invalid``)."""
    updated = result.model_copy(deep=True)
    for case in updated.cases:
        stats = timings.get(case.name)
        if stats is not None and case.status == Status.OK:  # a case that failed shows no time
            case.timing = stats
            case.flags.extend(flag for flag in stats.flags if flag not in case.flags)
    updated.score_us = score(updated.cases) if updated.status == Status.OK else None
    problem = below_floor(evaluator, updated, timings)
    if problem is not None:
        updated.status, updated.message, updated.score_us = Status.INVALID, problem, None
    return updated


def interleave(
    evaluator: Evaluator,
    candidates: Sequence[tuple[str, CandidateLaunch | None, KnobValues | None]],
    rounds: int = 4,
) -> dict[str, list[TimingStats]]:
    """Re-time candidates alternately (A/B/A/B) on every performance case, under identical
    conditions, so a difference of a few percent is not clock or thermal drift."""
    handles = [evaluator.submit(source, knobs) for source, _, knobs in candidates]
    for handle in handles:
        outcome = evaluator.wait_compiled(handle)
        if not outcome.ok:
            raise RuntimeError(f"interleaved re-timing could not compile a candidate: {outcome.log}")
    timings: dict[str, list[TimingStats]] = {}
    for case in evaluator.workload.performance_cases:
        launches = []
        for _, launch, knobs in candidates:
            variables = case_variables(case, evaluator.knobs_with_defaults(knobs), evaluator.device.emulated)
            launches.append(resolve_launch(evaluator.workload.launch, case.name, variables, launch).as_dict())
        trial = evaluator.ensure_loaded(case, 0)
        reply = evaluator.client.call(
            {
                "op": "interleave",
                "kernels": [h.key for h in handles],
                "launches": launches,
                "case": case.name,
                "kind": case.kind,
                "trials": [trial],
                "grid": [1],
                "block": [1],
                "shared_mem": 0,
                "launch_timeout_s": evaluator.settings.launch_timeout_s,
                "timing": evaluator.settings.timing.model_dump(),
                "rounds": rounds,
            },
            evaluator.backstop_s(evaluator.settings.timing) * len(candidates),
        )
        timings[case.name] = [TimingStats.model_validate(t) for t in reply["timings"]]
    return timings
