"""Planted cheats: one bad kernel, baseline or spec per validation defence, each proven to be caught.

Model-written kernels are known to "win" by fooling the evaluator (see ``docs/validation.md``). Every
defence the evaluator has gets a planted offender here, from ``tests/fixtures/cheats/``, and each
test checks two things: the verdict (``wrong``, ``invalid``, a flag) and that the message says why in
words a user understands. Where a setting switches a defence off, the same offender is also shown
to slip through without it, so the test proves the defence - not some other check - caught it.

Everything that does not need a GPU runs on the CPU emulation (CI). Tests marked ``gpu`` need CuPy
and a CUDA device and skip otherwise. Settings are always passed explicitly: the package defaults may
change, and these tests are about the defences, not the defaults.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kernelopt_jupyter import evaluate, load_workload
from kernelopt_jupyter.backends.cpu.backend import CpuBackend
from kernelopt_jupyter.core.errors import SpecWarning
from kernelopt_jupyter.core.inputs import generate_case_inputs
from kernelopt_jupyter.core.physics import FLOOR_MARGIN, HOST_FLOOR_MARGIN, Peaks, floor_us, impossible
from kernelopt_jupyter.core.results import CandidateResult, CaseResult, OutputCheck, Status, TimingStats
from kernelopt_jupyter.core.settings import EvaluationSettings, TimingProtocol
from kernelopt_jupyter.core.store import read_run
from kernelopt_jupyter.core.workload import Workload
from kernelopt_jupyter.session import Session, SweepSettings
from kernelopt_jupyter.worker.evaluator import Evaluator

CHEATS = Path(__file__).parent / "fixtures" / "cheats"
QUICK = TimingProtocol(warmup=2, samples=10, max_samples=10, mode="back_to_back")
# The public seed (trial 0) and a fixed "secret" one, so a failure can be reproduced.
PUBLIC_SEED = 0
SECRET_SEED = 7_318_905_264_117_553

backends = pytest.mark.parametrize("backend", ["cpu", pytest.param("cupy", marks=pytest.mark.gpu)])

SpecEdit = Callable[[dict[str, Any]], None]


# --- helpers -------------------------------------------------------------------------------------------
def settings(backend: str, **changes: Any) -> EvaluationSettings:
    """Every defence on, quick timing; ``changes`` switch one thing for a test."""
    values: dict[str, Any] = {
        "backend": backend,
        "seed": PUBLIC_SEED,
        "secret_seed": SECRET_SEED,
        "trials": 2,
        "repeat_check": True,
        "revalidate_after_timing": True,
        "physics_floor": True,
        "timing": QUICK,
        "launch_timeout_s": 5.0,
    }
    values.update(changes)
    return EvaluationSettings(**values)


def planted(name: str) -> str:
    """The source of a planted kernel from the fixtures."""
    return (CHEATS / f"{name}.cu").read_text()


def spec(directory: Path, edit: SpecEdit | None = None, name: str = "workload.yaml") -> Workload:
    """Load the cheats spec from a private copy, after ``edit`` changed its data."""
    path = directory / name
    data = yaml.safe_load(path.read_text())
    if edit is not None:
        edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_workload(path)


def parameter(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in data["signature"] if item["name"] == name)


def with_baseline(name: str) -> SpecEdit:
    """A spec edit that makes ``baselines.py:<name>`` the workload's baseline."""

    def edit(data: dict[str, Any]) -> None:
        data["baseline"] = {"python": f"baselines.py:{name}", "name": name}

    return edit


def output_check(result: CandidateResult, case: str) -> OutputCheck:
    found = result.case(case)
    assert found is not None and found.outputs, f"case {case} has no output checks: {result.message}"
    return found.outputs[0]


@pytest.fixture
def cheats_dir(tmp_path: Path) -> Path:
    """A private copy of the cheats fixtures that a test may edit."""
    target = tmp_path / "cheats"
    shutil.copytree(CHEATS, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def workload(cheats_dir: Path) -> Workload:
    """The cheats spec as it is: c = a + b, a correctness and a performance case."""
    return spec(cheats_dir)


# --- the control ------------------------------------------------------------------------------------------
@backends
def test_honest_kernel_passes_every_defence(workload: Workload, backend: str) -> None:
    """The honest kernel passes with every defence on: the defences below reject cheats, not kernels."""
    result = evaluate(workload, planted("vector_add"), backend=backend, settings=settings(backend))
    assert result.status == Status.OK, result.message
    assert result.ranks
    big = result.case("big")
    assert big is not None and big.trials == 2 and big.timing is not None
    assert not any("degenerate" in flag or "outside the timed region" in flag for flag in big.flags)


# --- 1. unwritten outputs ---------------------------------------------------------------------------------
@backends
def test_unwritten_outputs_are_poisoned_and_fail(workload: Workload, backend: str) -> None:
    """Outputs are fresh buffers full of NaN: the half the kernel never wrote shows up as NaN."""
    result = evaluate(workload, planted("partial_write"), backend=backend, settings=settings(backend))
    assert result.status == Status.WRONG and not result.ranks
    check = output_check(result, "small")
    unwritten = 1000 - 1000 // 2
    assert check.nonfinite == unwritten and check.mismatches == unwritten
    assert check.first_mismatch is not None
    assert check.first_mismatch.index == [500] and check.first_mismatch.got == "nan"
    assert f"{unwritten} NaN/Inf where the reference is finite" in result.message


# --- 2. input mutation --------------------------------------------------------------------------------------
@backends
@pytest.mark.parametrize(
    ("kernel", "mutated"),
    [("zeroes_input", "a"), ("nudges_input", "b")],
    ids=["zeroes-a", "flips-one-bit-of-b"],
)
def test_writing_a_read_only_input_fails(workload: Workload, backend: str, kernel: str, mutated: str) -> None:
    """The outputs are right, but a read-only input changed (even by one bit): wrong, and named."""
    result = evaluate(workload, planted(kernel), backend=backend, settings=settings(backend))
    assert result.status == Status.WRONG
    assert output_check(result, "small").passed, "the outputs themselves are correct"
    assert f"the kernel wrote to read-only input(s) {mutated}" in result.message


@backends
def test_zeroing_inputs_cannot_make_the_reference_agree(workload: Workload, backend: str) -> None:
    """Zero the inputs, write zeros: the reference was computed beforehand, from pristine copies."""
    result = evaluate(workload, planted("zeroes_everything"), backend=backend, settings=settings(backend))
    assert result.status == Status.WRONG
    assert "outside tolerance" in result.message
    assert output_check(result, "small").mismatches == 1000


# --- 3. aliasing and stale outputs (Python baselines) -------------------------------------------------------
@backends
@pytest.mark.parametrize(
    ("baseline", "reason"),
    [
        ("returns_input", "returned output 'c' aliases parameter 'a'"),
        ("returns_cached", "returned output 'c' is the array returned by an earlier call"),
        ("returns_cached_view", "returned output 'c' is the array returned by an earlier call"),
        ("honest", None),
        ("in_place", None),
    ],
)
def test_baseline_returning_an_input_or_a_stale_array_fails(
    cheats_dir: Path, backend: str, baseline: str, reason: str | None
) -> None:
    """A returned output must be a new array: not an input, not (a view of) one returned before."""

    with Evaluator(spec(cheats_dir, with_baseline(baseline)), settings(backend)) as evaluator:
        result = evaluator.evaluate_baseline()
    assert result is not None
    if reason is None:
        assert result.status == Status.OK, result.message
    else:
        assert result.status == Status.WRONG
        assert result.message.startswith("case small: ") and result.message.endswith(reason)


def test_baseline_returning_the_wrong_shape_is_wrong_not_a_crash(cheats_dir: Path) -> None:
    """A returned output of the wrong shape is the baseline's mistake, not a crash of the worker."""
    with Evaluator(spec(cheats_dir, with_baseline("wrong_shape")), settings("cpu")) as evaluator:
        result = evaluator.evaluate_baseline()
    assert result is not None
    assert result.status == Status.WRONG, result.message
    assert "shape" in result.message


# --- 4. fixed-input specialisation --------------------------------------------------------------------------
def _public_case(data: dict[str, Any]) -> None:
    data["cases"] = [{"name": "public", "kind": "correctness", "sizes": {"N": 250}}]


def _specialised_source(workload: Workload) -> str:
    """The planted kernel with the public trial's first input and its outputs baked in."""
    inputs = generate_case_inputs(workload, workload.cases[0], PUBLIC_SEED, 0)
    a, b = inputs.arrays["a"], inputs.arrays["b"]
    known = (a.astype(np.float64) + b.astype(np.float64)).astype(np.float32)
    values = ", ".join(f"{value:.9e}f" for value in known.tolist())
    return f"#define KNOWN_A0 {float(a[0]):.9e}f\n#define KNOWN_C {values}\n" + planted("seed_specialised")


@backends
def test_kernel_specialised_to_the_public_inputs_fails_the_secret_trial(
    cheats_dir: Path, backend: str
) -> None:
    """It replays memorised outputs for the public (trial 0) inputs: one trial passes it, two do not."""
    workload = spec(cheats_dir, _public_case)
    source = _specialised_source(workload)

    fooled = evaluate(workload, source, backend=backend, settings=settings(backend, trials=1))
    assert fooled.status == Status.OK, "with one trial the memorised outputs look right"

    result = evaluate(workload, source, backend=backend, settings=settings(backend, trials=2))
    assert result.status == Status.WRONG
    case = result.case("public")
    assert case is not None and case.trials == 1, "trial 0 (public seed) passed, trial 1 (secret seed) failed"
    assert "250 of 250 elements are outside tolerance" in result.message


def test_secret_trial_failure_says_it_was_on_fresh_inputs(cheats_dir: Path) -> None:
    """The saved inputs pass on replay, so the message must say the failure came from fresh inputs."""
    workload = spec(cheats_dir, _public_case)
    result = evaluate(workload, _specialised_source(workload), backend="cpu", settings=settings("cpu"))
    assert result.status == Status.WRONG
    assert re.search(r"trial|fresh inputs|secret seed", result.message), result.message


def test_secret_seed_is_hidden_until_the_run_ends(workload: Workload, tmp_path: Path) -> None:
    """While a session runs, no file of the run holds the secret seed; ``summary.json`` gets it at the end."""
    needle = str(SECRET_SEED).encode()
    with Session(workload, settings=settings("cpu"), results_dir=tmp_path / "results") as session:
        entry = session.evaluate(planted("vector_add"))
        assert entry.result.status == Status.OK, entry.result.message
        assert session.store is not None
        run = session.store.path
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "running"
        assert "secret_seed" not in summary["settings"]
        assert summary["settings"]["trials"] == 2
        leaks = [path.name for path in run.rglob("*") if path.is_file() and needle in path.read_bytes()]
        assert not leaks, f"the secret seed is readable during the run in {leaks}"
    summary, _history = read_run(run)
    assert summary["status"] == "finished"
    assert summary["settings"]["secret_seed"] == SECRET_SEED


def test_loader_warns_when_every_size_is_a_power_of_two_or_a_multiple_of_32(cheats_dir: Path) -> None:
    """Only "round" sizes cannot catch a kernel that skips its bounds checks: the spec gets a warning."""

    def round_sizes(data: dict[str, Any]) -> None:
        data["cases"] = [
            {"name": "small", "kind": "correctness", "sizes": {"N": 1024}},
            {"name": "big", "kind": "performance", "sizes": {"N": 65536}, "emulation_sizes": {"N": 8192}},
        ]

    with pytest.warns(SpecWarning, match="every case size is a power of two or a multiple of 32"):
        workload = spec(cheats_dir, round_sizes)
    assert len(workload.warnings) == 1 and "add a case with odd sizes" in workload.warnings[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fixture's own sizes (1000, 100000) raise no warning
        assert load_workload(CHEATS / "workload.yaml").warnings == []


# --- 5. races and uninitialised reads -----------------------------------------------------------------------
@backends
def test_runs_that_disagree_bit_for_bit_fail_the_repeat_check(cheats_dir: Path, backend: str) -> None:
    """Each run is within tolerance, but two runs on identical inputs differ: wrong, and why."""
    workload = spec(cheats_dir)
    result = evaluate(workload, planted("differs_per_call"), backend=backend, settings=settings(backend))
    assert result.status == Status.WRONG
    assert output_check(result, "small").passed, "each run on its own is within tolerance"
    assert "c: two runs on identical inputs disagree (a race or a read of uninitialised memory)" in (
        result.message
    )

    unchecked = evaluate(
        workload, planted("differs_per_call"), backend=backend, settings=settings(backend, repeat_check=False)
    )
    assert unchecked.status == Status.OK, "without the repeat run nothing notices"


@backends
def test_order_dependent_output_may_differ_within_tolerance(cheats_dir: Path, backend: str) -> None:
    """Declared ``order_dependent`` (float atomics), the two runs need only agree within tolerance."""

    def order_dependent(data: dict[str, Any]) -> None:
        parameter(data, "c")["order_dependent"] = True

    workload = spec(cheats_dir, order_dependent)
    result = evaluate(workload, planted("differs_per_call"), backend=backend, settings=settings(backend))
    assert result.status == Status.OK, result.message


def _row_sums(order_dependent: bool) -> SpecEdit:
    def edit(data: dict[str, Any]) -> None:
        parameter(data, "s")["order_dependent"] = order_dependent

    return edit


@pytest.mark.gpu
def test_float_atomics_race_fails_the_repeat_check_on_gpu(cheats_dir: Path) -> None:
    """Real float atomics: 65000 additions per address land in a different order on every run."""
    workload = spec(cheats_dir, _row_sums(False), name="row_sums.yaml")
    result = evaluate(workload, planted("row_sums_atomic"), backend="cupy", settings=settings("cupy"))
    assert result.status == Status.WRONG
    assert output_check(result, "rows").passed, "each run is within tolerance of the reference"
    assert "s: two runs on identical inputs disagree" in result.message


@pytest.mark.gpu
def test_float_atomics_pass_when_declared_order_dependent_on_gpu(cheats_dir: Path) -> None:
    workload = spec(cheats_dir, _row_sums(True), name="row_sums.yaml")
    result = evaluate(workload, planted("row_sums_atomic"), backend="cupy", settings=settings("cupy"))
    assert result.status == Status.OK, result.message


# --- 6. caching / drift -------------------------------------------------------------------------------------
@backends
def test_kernel_that_replays_cached_results_fails_after_timing(workload: Workload, backend: str) -> None:
    """Honest for its first launches, then replays remembered outputs: caught on fresh inputs after timing."""
    result = evaluate(workload, planted("replays_cache"), backend=backend, settings=settings(backend))
    assert result.status == Status.WRONG
    small, big = result.case("small"), result.case("big")
    assert small is not None and small.status == Status.OK, "correctness cases are not timed"
    assert big is not None and big.status == Status.WRONG and big.trials == 2
    assert big.timing is None, "a case that fails after timing shows no time"
    assert result.message.startswith("case big: after timing, on fresh inputs: c: ")

    unchecked = evaluate(
        workload,
        planted("replays_cache"),
        backend=backend,
        settings=settings(backend, revalidate_after_timing=False),
    )
    assert unchecked.status == Status.OK, "without re-validation the replayed outputs are never checked"


@backends
def test_sweep_finalist_that_replays_cached_results_never_becomes_best(
    cheats_dir: Path, backend: str, tmp_path: Path
) -> None:
    """A sweep's quick screen runs one trial and no re-validation; its finalists get them all."""

    def launch_knob(data: dict[str, Any]) -> None:
        data["kernel"]["source"] = "replays_cache.cu"
        data["tuning"] = {"knobs": {"BLOCK": [256]}}  # one config: later ones would replay earlier memos
        data["launch"] = {"grid": ["ceil_div(N, BLOCK)"], "block": ["BLOCK"]}

    workload = spec(cheats_dir, launch_knob)
    with Session(workload, settings=settings(backend), results_dir=tmp_path / "results") as session:
        report = session.tune(SweepSettings(finalist_window=float("inf")))
        best = session.best
    screened = [o for o in report.outcomes if not o.final]
    finals = [o for o in report.outcomes if o.final]
    assert screened and all(o.result.status == Status.OK for o in screened), "the screen cannot see it"
    assert finals and all(o.result.status == Status.WRONG for o in finals), [o.result.message for o in finals]
    assert all(case.timing is None for o in finals for case in o.result.cases), "failed: no time shown"
    assert report.best is None and best is None, "a screened entry never becomes the best"


def test_kernel_that_idles_after_its_evaluation_cannot_win_the_ab_retiming(
    workload: Workload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel honest for as long as its own evaluation lasts, then idle, must not become the best.

    Defence 6 re-validates after timing, but the A/B/A/B re-timing against the best comes later and
    decides on its own which is faster.
    """
    # Re-time side by side whatever the first timings say, so the test does not depend on noise.
    monkeypatch.setattr("kernelopt_jupyter.session.session.AB_WINDOW", 100.0)
    with Session(workload, settings=settings("cpu"), results_dir=tmp_path / "results") as session:
        honest = session.evaluate(planted("slow_add"), proposer="honest")
        assert honest.result.status == Status.OK, honest.result.message
        cheat = session.evaluate(planted("idles_after_validation"), proposer="cheat")
        assert cheat.result.status == Status.OK, "its own evaluation saw an honest kernel"
        assert cheat.ab is not None, "the cheat was re-timed side by side with the best"
        assert session.best is not None
        assert session.best.id == honest.id, f"a kernel that stopped working became the best: {cheat.ab}"


# --- 7. faster than physics ---------------------------------------------------------------------------------
PEAKS = Peaks(device="hand-made", dram_gbs=1000.0, l2_gbs=4000.0, fp32_gflops=50_000.0)
L2_BYTES = 50_000_000


def _timed(
    median_us: float, *, moved: float | None = None, flops: float | None = None, cache: str = "warm"
) -> CaseResult:
    """A hand-made timed case: the floor rules can be checked without any device."""
    timing = TimingStats(
        median_us=median_us,
        min_us=median_us,
        max_us=median_us,
        mean_us=median_us,
        p10_us=median_us,
        p90_us=median_us,
        cv=0.0,
        samples=100,
        warmup=10,
        cache=cache,
    )
    return CaseResult(
        name="case", kind="performance", status=Status.OK, timing=timing, bytes=moved, flops=flops
    )


@pytest.mark.parametrize(
    ("moved", "cache", "l2_bytes", "expected_us", "where"),
    [
        (2 * L2_BYTES, "warm", L2_BYTES, 2 * L2_BYTES / 4000e3, "(L2)"),  # up to 2x L2: L2 bandwidth
        (2 * L2_BYTES + 1, "warm", L2_BYTES, (2 * L2_BYTES + 1) / 1000e3, "(memory)"),
        (1_000_000, "cold", L2_BYTES, 1_000_000 / 1000e3, "(memory)"),  # cold samples: memory bandwidth
        (1_000_000, "warm", None, 1_000_000 / 4000e3, "(L2)"),  # cache size unknown: it may all be cached
    ],
    ids=["warm-fits-2xL2", "warm-over-2xL2", "cold", "no-l2-size"],
)
def test_floor_from_bytes_uses_l2_bandwidth_only_when_warm_data_fits(
    moved: float, cache: str, l2_bytes: int | None, expected_us: float, where: str
) -> None:
    floor = floor_us(_timed(1.0, moved=moved, cache=cache), PEAKS, l2_bytes)
    assert floor is not None
    value, how = floor
    assert value == pytest.approx(expected_us)
    assert how.endswith(where)


def test_floor_is_the_larger_of_bytes_and_flops() -> None:
    case = _timed(1.0, moved=1_000_000, flops=5e9)  # 0.25 µs of L2 traffic, 100 µs of arithmetic
    floor = floor_us(case, PEAKS, L2_BYTES)
    assert floor is not None
    assert floor[0] == pytest.approx(100.0) and "GFLOP" in floor[1]
    assert floor_us(_timed(1.0), PEAKS, L2_BYTES) is None, "no work model, no floor"


def test_impossible_only_below_the_floor_margin() -> None:
    floor = 2 * L2_BYTES / 4000e3  # 25 µs
    below = _timed(floor * FLOOR_MARGIN * 0.99, moved=2 * L2_BYTES)
    reason = impossible(below, PEAKS, L2_BYTES)
    assert reason is not None and reason.startswith("faster than the hardware allows")
    assert "the kernel cannot have done the case's work" in reason
    assert impossible(_timed(floor * FLOOR_MARGIN * 1.01, moved=2 * L2_BYTES), PEAKS, L2_BYTES) is None
    untimed = _timed(1.0, moved=2 * L2_BYTES)
    untimed.timing = None
    assert impossible(untimed, PEAKS, L2_BYTES) is None


def test_host_peaks_use_their_own_wider_margin() -> None:
    """Host wall-clock floors are looser: a time the GPU margin calls impossible passes on the host."""
    floor = 2 * L2_BYTES / 4000e3
    host = PEAKS.model_copy(update={"margin": HOST_FLOOR_MARGIN})
    between = _timed(floor * (HOST_FLOOR_MARGIN + FLOOR_MARGIN) / 2, moved=2 * L2_BYTES)
    assert impossible(between, PEAKS, L2_BYTES) is not None
    assert impossible(between, host, L2_BYTES) is None
    assert impossible(_timed(floor * HOST_FLOOR_MARGIN * 0.99, moved=2 * L2_BYTES), host, L2_BYTES)
    measured = CpuBackend().measure_peaks()
    assert measured.margin == HOST_FLOOR_MARGIN and measured.l2_gbs and measured.l2_gbs > 0


@backends
def test_work_model_claiming_more_than_the_hardware_can_move_is_invalid(
    cheats_dir: Path, backend: str
) -> None:
    """A time under the floor of the (inflated) work model: invalid, never ranks; honest model: ok."""

    def inflated(data: dict[str, Any]) -> None:
        data["work"]["bytes"] = "1000000*N"

    workload = spec(cheats_dir, inflated)
    result = evaluate(workload, planted("vector_add"), backend=backend, settings=settings(backend))
    assert result.status == Status.INVALID and not result.ranks and result.score_us is None
    big = result.case("big")
    assert big is not None and big.status == Status.INVALID
    assert big.message.startswith("faster than the hardware allows: median ")
    assert result.message.startswith("case big: faster than the hardware allows")

    off = evaluate(
        workload, planted("vector_add"), backend=backend, settings=settings(backend, physics_floor=False)
    )
    assert off.status == Status.OK, "with the floor switched off the same timing ranks"


def test_honest_numpy_baseline_on_cache_resident_data_is_not_impossible(cheats_dir: Path) -> None:
    def cache_sized(data: dict[str, Any]) -> None:
        data["cases"][1]["emulation_sizes"] = {"N": 1 << 20}  # 12 MB moved: within a server's L3
        with_baseline("numpy_add_out")(data)

    with Evaluator(spec(cheats_dir, cache_sized), settings("cpu")) as evaluator:
        result = evaluator.evaluate_baseline()
    assert result is not None
    assert result.status == Status.OK, result.message


# --- 8. degenerate references -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("distribution", "reason"),
    [
        ("zeros", "the reference output is all zeros: a kernel writing zeros would pass"),
        ("ones", "the reference output is constant: a kernel writing that constant would pass"),
    ],
)
def test_degenerate_reference_is_flagged(cheats_dir: Path, distribution: str, reason: str) -> None:
    """All-zero inputs make an all-zero reference: a kernel that does nothing passes, and it is flagged."""

    def degenerate(data: dict[str, Any]) -> None:
        for name in ("a", "b"):
            parameter(data, name)["input"] = {"distribution": distribution}

    workload = spec(cheats_dir, degenerate)
    kernel = "writes_zeros" if distribution == "zeros" else "vector_add"
    result = evaluate(workload, planted(kernel), backend="cpu", settings=settings("cpu"))
    assert result.status == Status.OK, result.message
    for case in result.cases:
        assert f"degenerate reference for c: {reason}" in case.flags, case.flags


# --- 9. NaN / Inf and magnitude-aware tolerance -------------------------------------------------------------
@backends
@pytest.mark.parametrize(("kernel", "written"), [("nan_element", "nan"), ("inf_element", "inf")])
def test_nan_or_inf_where_the_reference_is_finite_fails(
    workload: Workload, backend: str, kernel: str, written: str
) -> None:
    result = evaluate(workload, planted(kernel), backend=backend, settings=settings(backend))
    assert result.status == Status.WRONG
    check = output_check(result, "small")
    assert check.nonfinite == 1 and check.mismatches == 1
    assert check.first_mismatch is not None
    assert check.first_mismatch.index == [7] and check.first_mismatch.got == written
    assert "1 NaN/Inf where the reference is finite" in result.message


@backends
def test_error_small_in_absolute_terms_but_large_relative_to_small_outputs_fails(
    cheats_dir: Path, backend: str
) -> None:
    """+5e-7 everywhere is under ``atol``: harmless on outputs near 1, a 0.05% error on outputs near 1e-3."""
    honest_scale = evaluate(
        spec(cheats_dir), planted("small_offset"), backend=backend, settings=settings(backend)
    )
    assert honest_scale.status == Status.OK, honest_scale.message

    def small_values(data: dict[str, Any]) -> None:
        for name in ("a", "b"):
            parameter(data, name)["input"] = {"distribution": "uniform", "low": 1.0e-4, "high": 1.0e-3}

    result = evaluate(
        spec(cheats_dir, small_values), planted("small_offset"), backend=backend, settings=settings(backend)
    )
    assert result.status == Status.WRONG
    check = output_check(result, "small")
    assert check.mismatches == 0, "every element is within the elementwise tolerance"
    assert check.rel_norm_error > 1e-4
    assert re.search(r"c: relative norm error \S+ exceeds 1e-05", result.message), result.message


# --- 10. persisting L2 --------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_persisting_l2_limit_is_zero_while_timing(
    cheats_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline sets a persisting-L2 set-aside in its first call; every call during timing sees 0."""
    log = tmp_path / "l2.log"
    monkeypatch.setenv("KERNELOPT_TEST_L2_LOG", str(log))

    with Evaluator(spec(cheats_dir, with_baseline("persisting_l2_probe")), settings("cupy")) as evaluator:
        result = evaluator.evaluate_baseline()
    assert result is not None and result.status == Status.OK, result and result.message
    big = result.case("big")
    assert big is not None and big.timing is not None
    assert not any("persisting L2 could not be reset" in flag for flag in big.flags), big.flags
    lines = log.read_text().split()
    set_to = int(lines[lines.index("set") + 1])
    readings = [int(line) for line in lines if line.isdigit()]
    readings.remove(set_to)  # the read-back right after setting it
    assert set_to > 0, "the probe could not set a set-aside: the test proves nothing on this device"
    assert set_to in readings, "the set-aside was still in place when the big case started"
    assert readings[-1] == 0, f"after timing the persisting-L2 limit reads {readings[-1]}, not 0"


# --- 11. the reference is never in the candidate's process --------------------------------------------------
def test_numpy_reference_runs_outside_the_candidate_worker(
    cheats_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "reference-pids.txt"
    monkeypatch.setenv("KERNELOPT_TEST_REFERENCE_PID_FILE", str(pid_file))

    def recording(data: dict[str, Any]) -> None:
        data["reference"] = {"python": "reference.py:vector_add_recording_pid"}

    with Evaluator(spec(cheats_dir, recording), settings("cpu")) as evaluator:
        result = evaluator.evaluate(planted("vector_add"))
        worker_pid = evaluator.client.call({"op": "hello"}, 30)["pid"]
    assert result.status == Status.OK, result.message
    pids = {int(line) for line in pid_file.read_text().split()}
    assert pids, "the reference never ran"
    assert worker_pid not in pids, "the reference ran in the candidate's worker process"


def test_cuda_reference_runs_in_a_worker_of_its_own(cheats_dir: Path) -> None:
    def cuda_reference(data: dict[str, Any]) -> None:
        data["reference"] = {
            "cuda": {
                "source": "vector_add.cu",
                "entry": "vector_add",
                "launch": {"grid": ["ceil_div(N, 256)"], "block": [256]},
            }
        }

    with Evaluator(spec(cheats_dir, cuda_reference), settings("cpu")) as evaluator:
        result = evaluator.evaluate(planted("vector_add"))
        worker_pid = evaluator.client.call({"op": "hello"}, 30)["pid"]
        reference = evaluator._reference  # private: the only handle on the reference worker
        assert reference is not None
        reference_pid = reference.client.call({"op": "hello"}, 30)["pid"]
    assert result.status == Status.OK, result.message
    assert reference_pid != worker_pid and reference_pid != os.getpid()


# --- 12. work outside the timed region ----------------------------------------------------------------------
@pytest.mark.gpu
def test_work_on_a_side_stream_is_flagged(cheats_dir: Path) -> None:
    """The baseline's slow part runs on its own stream: the events see nothing, the host clock does."""

    with Evaluator(spec(cheats_dir, with_baseline("side_stream")), settings("cupy")) as evaluator:
        result = evaluator.evaluate_baseline()
    assert result is not None
    big = result.case("big")
    assert big is not None and big.timing is not None, big and big.message
    flagged = [flag for flag in big.flags if "outside the timed region" in flag]
    assert flagged, big.flags
    assert flagged[0].startswith("host wall time per launch")
