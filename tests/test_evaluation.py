"""End-to-end evaluation through the worker, on the CPU emulation (CI) and on a GPU (marker gpu)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelopt_jupyter import evaluate, load_workload
from kernelopt_jupyter.core.results import Status
from kernelopt_jupyter.core.settings import EvaluationSettings, TimingProtocol
from kernelopt_jupyter.core.store import read_run
from kernelopt_jupyter.session import Session, SweepSettings

FAULTS = Path(__file__).parent / "fixtures" / "faults"
QUICK = TimingProtocol.fixed(2, 10, mode="back_to_back")

backends = pytest.mark.parametrize("backend", ["cpu", pytest.param("cupy", marks=pytest.mark.gpu)])


def settings(backend: str, **extra) -> EvaluationSettings:
    return EvaluationSettings(backend=backend, timing=QUICK, launch_timeout_s=3.0, **extra)


@backends
def test_initial_kernel_passes_and_ranks(workload_dir, backend):
    workload = load_workload(workload_dir / "workload.yaml")
    result = evaluate(workload, workload.kernel_code(), backend=backend, settings=settings(backend))
    assert result.status == Status.OK, result.message
    assert result.ranks and result.score_us > 0
    big = result.case("big")
    assert big.timing is not None and big.timing.samples == 10
    assert result.case("small").timing is None, "correctness cases are not timed"
    assert big.flops and big.bytes and big.throughput()["gbs"] > 0


@backends
def test_wrong_kernel_is_reported_with_first_mismatch(workload_dir, backend):
    workload = load_workload(workload_dir / "workload.yaml")
    result = evaluate(
        workload, (FAULTS / "wrong.cu").read_text(), backend=backend, settings=settings(backend)
    )
    assert result.status == Status.WRONG and not result.ranks
    check = result.case("small").outputs[0]
    assert check.first_mismatch is not None and check.mismatches > 0
    assert "outside tolerance" in result.message


@backends
def test_faults_get_their_status_and_the_run_goes_on(workload_dir, backend, tmp_path):
    workload = load_workload(workload_dir / "workload.yaml")
    good = workload.kernel_code()
    plan = [
        ("illegal_address", Status.CRASHED),
        ("good", Status.OK),
        ("infinite_loop", Status.TIMEOUT),
        ("good", Status.OK),
        ("compile_error", Status.COMPILE_ERROR),
        ("good", Status.OK),
    ]
    with Session(workload, settings=settings(backend), results_dir=tmp_path) as session:
        for name, expected in plan:
            source = good if name == "good" else (FAULTS / f"{name}.cu").read_text()
            entry = session.evaluate(source, proposer=name)
            assert entry.result.status == expected, f"{name}: {entry.result.message}"
        run = session.store.path
    summary, history = read_run(run)
    assert [e.result.status for e in history] == [expected for _, expected in plan]
    compile_error = history[4].result
    assert "candidate.cu(3)" in compile_error.compile_log or "candidate.cu:3" in compile_error.compile_log
    assert "undefined_name" in compile_error.compile_log
    assert summary["best"]["id"] in (2, 4, 6)


@backends
def test_launch_over_device_limits_is_invalid(workload_dir, backend):
    workload = load_workload(workload_dir / "workload.yaml")
    result = evaluate(
        workload, workload.kernel_code(), backend=backend, settings=settings(backend), knobs={"BLOCK": 2048}
    )
    assert result.status == Status.INVALID
    assert "2048 threads; the limit is 1024" in result.message


def _delay_workload(workload_dir: Path):
    path = workload_dir / "workload.yaml"
    data = yaml.safe_load(path.read_text())
    (workload_dir / "delay.cu").write_text((FAULTS / "delay.cu").read_text())
    data["kernel"]["source"] = "delay.cu"
    data["tuning"] = {"knobs": {"DELAY": [2, 1, 0, 3], "BLOCK": [128, 256, 2048]}}
    data["cases"][1]["emulation_sizes"] = {"N": 4000}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_workload(path)


@backends
def test_sweep_finds_the_known_fastest_config(workload_dir, backend, tmp_path):
    workload = _delay_workload(workload_dir)
    with Session(workload, settings=settings(backend), results_dir=tmp_path) as session:
        report = session.tune(SweepSettings(finalists=3))
        run = session.store.path
    assert report.configs == 12
    assert len(report.skipped) == 4 and all("2048 threads" in reason for _, reason in report.skipped)
    assert report.count(Status.COMPILE_ERROR) == 2, "DELAY=3 does not compile"
    assert report.compile_groups == 4, "BLOCK is launch-only: one module per DELAY value"
    assert report.best is not None and report.best.knobs["DELAY"] == 0
    summary, history = read_run(run)
    assert summary["best"]["knobs"]["DELAY"] == 0
    assert not history[summary["best"]["id"] - 1].screening


@backends
def test_close_candidates_are_retimed_interleaved(workload_dir, backend, tmp_path, monkeypatch):
    import kernelopt_jupyter.session.session as session_module

    monkeypatch.setattr(session_module, "AB_WINDOW", float("inf"))  # treat every pair as "close"
    workload = load_workload(workload_dir / "workload.yaml")
    slower = (FAULTS / "delay.cu").read_text().replace("#define DELAY 0", "#define DELAY 1")
    slower = slower.replace("DELAY * 3000", "DELAY * 300")
    with Session(workload, settings=settings(backend), results_dir=tmp_path) as session:
        first = session.evaluate(workload.kernel_code(), proposer="initial")
        assert first.ab is None, "nothing to compare the first candidate with"
        second = session.evaluate(slower, proposer="user")
        assert second.ab is not None and second.ab["against"] == first.id
        assert set(second.ab["cases"]) == {"big"}
        assert second.ab["ratio"] > 1.0, "the delayed kernel is slower side by side"
        assert session.best.id == first.id, "the side-by-side measurement decides, and it lost"


@backends
def test_sweep_finalists_are_timed_together_and_fully_validated(workload_dir, backend, tmp_path):
    workload = _delay_workload(workload_dir)
    with Session(workload, settings=settings(backend), results_dir=tmp_path) as session:
        report = session.tune(SweepSettings(finalists=3, finalist_window=float("inf")))
    finals = [o for o in report.outcomes if o.final]
    assert len(finals) == 3, [(o.knobs, o.result.message) for o in report.outcomes]
    for outcome in finals:
        big = outcome.result.case("big")
        assert big is not None and big.timing is not None
        assert big.timing.mode.endswith("interleaved"), "finalists are timed round-robin, side by side"
        assert big.trials == 2, "a finalist passes every defence the screen left out"
    screened = [o for o in report.outcomes if not o.final and o.result.ranks]
    assert all(o.result.case("big").trials == 1 for o in screened), "the screen runs one trial"


def test_finalists_are_the_fastest_screens_within_the_window() -> None:
    from kernelopt_jupyter.agent.sweep import SweepOutcome, pick_finalists
    from kernelopt_jupyter.core.results import CandidateResult

    def screened(score: float | None, status: Status = Status.OK) -> SweepOutcome:
        return SweepOutcome({"X": score or 0}, CandidateResult(status=status, score_us=score))

    outcomes = [screened(s) for s in (12.0, 10.0, 11.4, 11.6, 30.0, 10.5)]
    outcomes.append(screened(None, Status.WRONG))
    picked = pick_finalists(outcomes, SweepSettings(finalists=3, finalist_window=0.15))
    assert [o.result.score_us for o in picked] == [10.0, 10.5, 11.4], "the three fastest"
    picked = pick_finalists(outcomes, SweepSettings(finalists=10, finalist_window=0.15))
    assert [o.result.score_us for o in picked] == [10.0, 10.5, 11.4], "11.6 is over 15 % slower"
    assert pick_finalists([screened(None, Status.WRONG)], SweepSettings()) == []


def test_interleaved_timing_keeps_sampling_until_its_budget_when_noise_stays_high(workload_dir):
    from kernelopt_jupyter.worker.evaluator import Evaluator
    from kernelopt_jupyter.worker.retiming import interleave

    workload = load_workload(workload_dir / "workload.yaml")
    source = workload.kernel_code()
    fixed = settings("cpu")
    with Evaluator(workload, fixed) as evaluator:
        counts = [t.samples for t in interleave(evaluator, [(source, None, None)] * 2)["big"]]
    assert counts == [40, 40], "a fixed protocol: 4 rounds of 10 samples each"
    adaptive = TimingProtocol(warmup=1, samples=10, budget_s=0.3, target_cv=1e-12)
    with Evaluator(workload, settings("cpu").model_copy(update={"timing": adaptive})) as evaluator:
        counts = [t.samples for t in interleave(evaluator, [(source, None, None)] * 2)["big"]]
    assert min(counts) > 40, "an unreachable noise target: rounds go on until the budget is spent"


def test_preload_sends_every_trial_the_settings_call_for(workload_dir):
    """Secret-seed trials and re-validation inputs are set-up work, not the first full evaluation's."""
    from kernelopt_jupyter.worker.evaluator import Evaluator

    workload = load_workload(workload_dir / "workload.yaml")
    with Evaluator(workload, settings("cpu", trials=2)) as evaluator:
        evaluator.preload()
        loaded = set(evaluator._loaded)
        expected = {evaluator.cases.get(case, t).key for case in workload.cases for t in range(3)}
        assert loaded == expected
        evaluator.evaluate(workload.kernel_code())
        assert evaluator._loaded == loaded, "a full evaluation needs nothing more"


def test_a_profiled_worker_writes_its_profile_before_the_client_lets_it_go(
    workload_dir, tmp_path, monkeypatch
):
    """KERNELOPT_WORKER_PROFILE (the benchmarks' aid): the profile is written before the shutdown
    reply, since the client may kill the worker as soon as it has that reply."""
    import pstats

    monkeypatch.setenv("KERNELOPT_WORKER_PROFILE", str(tmp_path / "prof"))
    workload = load_workload(workload_dir / "workload.yaml")
    result = evaluate(workload, workload.kernel_code(), backend="cpu", settings=settings("cpu"))
    assert result.status == Status.OK, result.message
    (profile,) = (tmp_path / "prof").glob("worker-*.prof")
    functions = {name for _file, _line, name in pstats.Stats(str(profile)).stats}  # type: ignore[attr-defined]
    assert "op_run" in functions
