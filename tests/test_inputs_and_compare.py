"""Input generation, NumPy reference conventions, and the comparison rules."""

import numpy as np
import pytest

from kernelopt_jupyter.core.compare import compare_output, is_degenerate
from kernelopt_jupyter.core.inputs import generate_case_inputs
from kernelopt_jupyter.core.loader import load_workload
from kernelopt_jupyter.core.reference import ReferenceFailed, run_numpy_reference
from kernelopt_jupyter.core.workload import Tolerance


@pytest.fixture
def workload(workload_dir):
    return load_workload(workload_dir / "workload.yaml")


def test_inputs_are_seeded_and_independent(workload):
    case = workload.case("small")
    first = generate_case_inputs(workload, case, seed=7)
    again = generate_case_inputs(workload, case, seed=7)
    other_seed = generate_case_inputs(workload, case, seed=8)
    other_trial = generate_case_inputs(workload, case, seed=7, trial=1)
    assert np.array_equal(first.arrays["a"], again.arrays["a"])
    assert not np.array_equal(first.arrays["a"], other_seed.arrays["a"])
    assert not np.array_equal(first.arrays["a"], other_trial.arrays["a"])
    assert not np.array_equal(first.arrays["a"], first.arrays["b"])
    assert first.arrays["a"].dtype == np.float32 and first.arrays["a"].shape == (1000,)
    assert first.scalars == {"N": 1000}
    assert first.output_shapes == {"c": ((1000,), "<f4")}
    assert first.arrays["a"].min() >= -1 and first.arrays["a"].max() <= 1


def test_emulation_sizes(workload):
    case = workload.case("big")
    assert generate_case_inputs(workload, case, seed=0).scalars["N"] == 100000
    assert generate_case_inputs(workload, case, seed=0, emulated=True).scalars["N"] == 20000


def test_reference_runs_in_float64(workload):
    inputs = generate_case_inputs(workload, workload.case("small"), seed=1)
    expected = run_numpy_reference(workload, inputs)["c"]
    assert expected.dtype == np.float64
    np.testing.assert_allclose(expected, inputs.arrays["a"].astype(np.float64) + inputs.arrays["b"])


def _reference(workload_dir, body):
    (workload_dir / "reference.py").write_text(body)
    import sys

    for name in [n for n in sys.modules if n.startswith("kernelopt_user_reference")]:
        del sys.modules[name]
    return load_workload(workload_dir / "workload.yaml")


@pytest.mark.parametrize(
    "body",
    [
        "def vector_add(a, b, c, N):\n    c[:] = a + b\n",
        "def vector_add(a, b, **kw):\n    return {'c': a + b}\n",
        "def vector_add(a, b):\n    return (a + b,)\n",
    ],
)
def test_reference_conventions(workload_dir, body):
    workload = _reference(workload_dir, body)
    inputs = generate_case_inputs(workload, workload.case("small"), seed=1)
    expected = run_numpy_reference(workload, inputs)["c"]
    np.testing.assert_allclose(expected, inputs.arrays["a"].astype(np.float64) + inputs.arrays["b"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("def vector_add(a, b):\n    return a[:10]\n", "returned shape (10,) for 'c', expected (1000,)"),
        ("def vector_add(a, b):\n    raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
        ("def vector_add(a, b):\n    return (a, b)\n", "returned 2 values but there are 1 outputs"),
        ("def vector_add(a, b):\n    return None\n", "returned nothing"),
    ],
)
def test_reference_failures_are_clear(workload_dir, body, message):
    workload = _reference(workload_dir, body)
    inputs = generate_case_inputs(workload, workload.case("small"), seed=1)
    with pytest.raises(ReferenceFailed, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_numpy_reference(workload, inputs)


TOL = Tolerance(rtol=1e-5, atol=1e-6, max_rel_norm=1e-5)


def test_exact_match_passes():
    want = np.linspace(-1, 1, 100)
    check = compare_output("y", want.astype(np.float32), want, TOL)
    assert check.passed and check.mismatches == 0


def test_nan_never_passes_and_first_mismatch_is_reported():
    want = np.ones((4, 5))
    got = want.astype(np.float32)
    got[2, 3] = np.nan
    check = compare_output("y", got, want, TOL)
    assert not check.passed
    assert check.nonfinite == 1
    assert check.first_mismatch.index == [2, 3] and check.first_mismatch.got == "nan"
    assert "NaN/Inf where the reference is finite" in check.reason


def test_nan_in_reference_matches_nan():
    want = np.array([1.0, np.nan, np.inf])
    assert compare_output("y", want.copy(), want, TOL).passed
    got = want.copy()
    got[2] = -np.inf
    assert not compare_output("y", got, want, TOL).passed


def test_elementwise_and_norm_bounds():
    want = np.full(1000, 100.0)
    got = want.copy()
    got[10] += 0.01  # 1e-4 relative: outside rtol 1e-5
    check = compare_output("y", got, want, TOL)
    assert not check.passed and check.mismatches == 1 and check.first_mismatch.index == [10]
    loose = Tolerance(rtol=1e-3, atol=0, max_rel_norm=1e-7)
    check = compare_output("y", got, want, loose)
    assert not check.passed and "relative norm error" in check.reason
    assert compare_output("y", got, want, Tolerance(rtol=1e-3, atol=0, max_rel_norm=None)).passed


def test_integers_must_match_exactly():
    want = np.arange(10, dtype=np.int32)
    got = want.copy()
    got[3] += 1
    check = compare_output("h", got, want, Tolerance(rtol=1, atol=1))
    assert not check.passed and check.first_mismatch.index == [3]


def test_shape_mismatch():
    assert not compare_output("y", np.zeros(3), np.zeros(4), TOL).passed


def test_degenerate_references():
    assert "all zeros" in is_degenerate(np.zeros(10))
    assert "constant" in is_degenerate(np.full(10, 3.5))
    assert is_degenerate(np.arange(10.0)) is None


def test_single_value_outputs_are_not_constant():
    assert is_degenerate(np.array([5.0])) is None
    assert "all zeros" in is_degenerate(np.array([0.0]))


def _general_path(monkeypatch, *args):
    import kernelopt_jupyter.core.compare as compare

    with monkeypatch.context() as patched:
        patched.setattr(compare, "_passing_check", lambda *_: None)
        return compare.compare_output(*args)


@pytest.mark.parametrize(
    "case",
    [
        "passes",
        "zeros_in_reference",
        "one_nan",
        "one_inf",
        "one_outside",
        "norm_only",
        "inf_in_both",
        "ints_equal",
        "ints_differ",
    ],
)
def test_quick_passing_path_agrees_with_the_general_one(case, monkeypatch):
    """The fast path for passing outputs must give exactly the general path's verdict and figures."""
    rng = np.random.default_rng(7)
    want = rng.standard_normal(5000)
    got = (want * (1 + 1e-7)).astype(np.float32)
    tolerance = Tolerance(rtol=1e-5, atol=1e-6, max_rel_norm=1e-5)
    if case == "zeros_in_reference":
        want[::7] = 0.0
        got = (want * (1 + 1e-7)).astype(np.float32)
    elif case == "one_nan":
        got[123] = np.nan
    elif case == "one_inf":
        got[77] = np.inf
    elif case == "one_outside":
        got[4000] += 1.0
    elif case == "norm_only":
        got = (want * (1 + 5e-6)).astype(np.float32)  # each element within 1e-5, the norm is not
        tolerance = Tolerance(rtol=1e-5, atol=1e-6, max_rel_norm=1e-6)
    elif case == "inf_in_both":
        want[5], got[5] = np.inf, np.inf
    elif case in ("ints_equal", "ints_differ"):
        want = rng.integers(-50, 50, 5000)
        got = want.astype(np.int32)
        if case == "ints_differ":
            got[9] += 1
    quick = compare_output("out", got, want, tolerance)
    general = _general_path(monkeypatch, "out", got, want, tolerance)
    mine, theirs = quick.model_dump(), general.model_dump()
    for figure in ("max_abs_error", "max_rel_error", "rel_norm_error"):  # sums in another order
        assert mine.pop(figure) == pytest.approx(theirs.pop(figure), rel=1e-9), figure
    assert mine == theirs
    expected_pass = case in ("passes", "zeros_in_reference", "inf_in_both", "ints_equal")
    assert quick.passed is expected_pass, quick.reason
