"""A session: one workload, one evaluator (worker), one run directory. Every front end uses this.

The session is the only door from the notebook and the CLI into evaluation: it starts the worker,
writes the run store after every candidate, and times the baseline once, so front ends only decide
*what* to evaluate and how to show it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..agent.sweep import SweepOutcome, SweepReport, SweepSettings, run_sweep
from ..core.launch import CandidateLaunch
from ..core.loader import load_workload
from ..core.results import CandidateResult, DeviceInfo, Status
from ..core.scoring import geometric_mean
from ..core.settings import EvaluationSettings
from ..core.store import HistoryEntry, RunStore, now
from ..core.tuning_space import KnobValues
from ..core.workload import Workload
from ..worker.evaluator import Evaluator
from ..worker.retiming import below_floor, interleave

# Candidates this close to the best are re-timed side by side before they may replace it.
AB_WINDOW = 0.03


class Session:
    def __init__(
        self,
        workload: Workload | str | Path,
        *,
        settings: EvaluationSettings | None = None,
        results_dir: str | Path = "results",
        time_baseline: bool = True,
    ) -> None:
        self.workload = workload if isinstance(workload, Workload) else load_workload(workload)
        self.settings = settings or EvaluationSettings()
        self.results_dir = Path(results_dir)
        self.time_baseline = time_baseline
        self.evaluator = Evaluator(self.workload, self.settings)
        self.store: RunStore | None = None
        self.baseline: CandidateResult | None = None
        self.baseline_note = ""

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> RunStore:
        """Start the worker, claim ``results/run-NNN``, save the inputs, time the baseline."""
        if self.store is not None:
            return self.store
        device = self.evaluator.device
        self.store = RunStore.create(
            self.results_dir, self.workload, device=device, settings=self.settings.public_dump()
        )
        self.store.save_inputs([self.evaluator.cases.get(case, 0).inputs for case in self.workload.cases])
        self.evaluator.preload()
        if self.time_baseline and self.workload.baseline is not None:
            if device.emulated:
                self.baseline_note = "baseline not timed: it needs a GPU (this run uses CPU emulation)"
            else:
                self.baseline = self.evaluator.evaluate_baseline()
                self.store.set_baseline(self.baseline)
        return self.store

    @property
    def device(self) -> DeviceInfo:
        return self.evaluator.device

    def finish(self) -> None:
        if self.store is not None:
            self.store.finish(reveal={"secret_seed": self.settings.secret_seed})

    def close(self) -> None:
        try:
            self.finish()
        finally:
            self.evaluator.close()

    def __enter__(self) -> Session:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- candidates -----------------------------------------------------------------------------------------
    def evaluate(
        self,
        source: str,
        *,
        launch: CandidateLaunch | Mapping[str, Any] | None = None,
        knobs: KnobValues | None = None,
        proposer: str = "user",
        rationale: str = "",
        parent_id: int | None = None,
    ) -> HistoryEntry:
        store = self.start()
        started = now()
        if launch is not None and not isinstance(launch, CandidateLaunch):
            launch = CandidateLaunch.model_validate(launch)
        result = self.evaluator.evaluate(source, launch, knobs)
        return store.add(
            source,
            result,
            proposer=proposer,
            rationale=rationale,
            parent_id=parent_id,
            launch=launch.model_dump(mode="json") if launch else None,
            started_at=started,
            ab=self._against_best(result, source, launch, knobs),
        )

    def evaluate_initial(self) -> HistoryEntry:
        return self.evaluate(
            self.workload.kernel_code(), proposer="initial", rationale="the workload's initial kernel"
        )

    def tune(
        self,
        settings: SweepSettings | None = None,
        on_outcome: Callable[[SweepOutcome, HistoryEntry], None] | None = None,
    ) -> SweepReport:
        store = self.start()
        source = self.workload.kernel_code()
        parent = store.history[0].id if store.history else None
        finalist_ids: set[int] = set()

        def record(outcome: SweepOutcome) -> None:
            label = "full timing of a finalist" if outcome.final else "sweep screen (quick timing)"
            best = store.best
            # Finalists were timed side by side already; only a best from outside the sweep needs A/B.
            ab = (
                self._against_best(outcome.result, source, None, outcome.knobs)
                if outcome.final and (best is None or best.id not in finalist_ids)
                else None
            )
            entry = store.add(
                source,
                outcome.result,
                proposer="tune",
                parent_id=parent,
                screening=not outcome.final,
                rationale=f"{label}: " + ", ".join(f"{k}={v}" for k, v in outcome.knobs.items()),
                ab=ab,
            )
            if outcome.final:
                finalist_ids.add(entry.id)
            if on_outcome is not None:
                on_outcome(outcome, entry)

        return run_sweep(self.evaluator, settings, record)

    def _against_best(
        self, result: CandidateResult, source: str, launch: CandidateLaunch | None, knobs: KnobValues | None
    ) -> dict[str, Any] | None:
        """Within 3 % of the best, timings from separate moments can differ by drift alone: re-time
        both A/B/A/B and let that side-by-side measurement decide who is faster."""
        best = self.store.best if self.store else None
        if best is None or not result.ranks or best.result.score_us is None or result.score_us is None:
            return None
        if abs(result.score_us / best.result.score_us - 1.0) > AB_WINDOW:
            return None
        assert self.store is not None
        best_source = (self.store.path / best.source_file).read_text()
        best_launch = CandidateLaunch.model_validate(best.launch) if best.launch else None
        timings = interleave(
            self.evaluator, [(source, launch, knobs), (best_source, best_launch, best.knobs)]
        )
        mine = geometric_mean([pair[0].median_us for pair in timings.values()])
        theirs = geometric_mean([pair[1].median_us for pair in timings.values()])
        verdict: dict[str, Any] = {
            "against": best.id,
            "ratio": mine / theirs,
            "candidate_us": mine,
            "best_us": theirs,
            "cases": {name: [pair[0].median_us, pair[1].median_us] for name, pair in timings.items()},
        }
        # The re-timing decides, so it gets the same scrutiny as the first timing: the floor, and
        # validation again afterwards (a kernel that goes stale after many launches loses here).
        problem = below_floor(self.evaluator, result, {name: pair[0] for name, pair in timings.items()})
        if problem is None:
            again = self.evaluator.validate(source, launch, knobs)
            if again.status != Status.OK:
                problem = f"validation after the interleaved re-timing failed: {again.message}"
        if problem is not None:
            verdict.update(ratio=None, rejected=problem)
        return verdict

    @property
    def best(self) -> HistoryEntry | None:
        return self.store.best if self.store else None


def evaluate_once(
    workload: Workload,
    source: str,
    *,
    launch: CandidateLaunch | Mapping[str, Any] | None = None,
    knobs: KnobValues | None = None,
    settings: EvaluationSettings | None = None,
) -> tuple[CandidateResult, DeviceInfo]:
    """Evaluate one kernel in a fresh worker without recording a run (``kernelopt evaluate``)."""
    if launch is not None and not isinstance(launch, CandidateLaunch):
        launch = CandidateLaunch.model_validate(launch)
    with Evaluator(workload, settings) as evaluator:
        return evaluator.evaluate(source, launch, knobs), evaluator.device
