"""The shipped examples: each spec loads, its reference and tuning space work, its sizes fit the emulator.

CPU only: nothing here compiles for or launches on a GPU. The optional nvcc check at the end runs
only where the CUDA toolkit is installed.
"""

from __future__ import annotations

import ast
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelopt_jupyter.core.compare import is_degenerate
from kernelopt_jupyter.core.expressions import parse_expression
from kernelopt_jupyter.core.inputs import case_variables, generate_case_inputs, parameter_shape
from kernelopt_jupyter.core.launch import resolve_launch
from kernelopt_jupyter.core.loader import load_workload
from kernelopt_jupyter.core.reference import run_numpy_reference
from kernelopt_jupyter.core.tuning_space import enumerate_space
from kernelopt_jupyter.core.workload import Workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = ["saxpy", "sum_reduction", "transpose", "softmax", "sgemm"]
# What the CPU emulator can run "well under a second": elements over all array parameters of a case.
EMULATION_ELEMENTS = 1 << 20
# Static shared memory, threads per block and grid limits every CUDA device shares.
MAX_THREADS, MAX_GRID = 1024, (2**31 - 1, 65535, 65535)


def load(name: str) -> Workload:
    return load_workload(EXAMPLES / name / "workload.yaml")


def elements(workload: Workload, variables: dict) -> int:
    return sum(int(np.prod(parameter_shape(p, variables))) for p in workload.signature if p.is_pointer)


def test_examples_directory_holds_exactly_the_documented_examples():
    found = sorted(path.parent.name for path in EXAMPLES.glob("*/workload.yaml"))
    assert found == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_loads_with_cases_work_model_and_baseline(name):
    workload = load(name)
    assert workload.name == name
    correctness = [c for c in workload.cases if c.kind == "correctness"]
    performance = workload.performance_cases
    assert len(correctness) >= 2, "odd sizes in at least two correctness cases"
    assert performance, "at least one performance case"
    for case in performance:
        assert case.emulation_sizes, f"performance case {case.name} needs emulation_sizes"
    assert workload.work is not None and workload.work.bytes is not None
    assert workload.baseline is not None
    assert workload.tuning is not None and workload.tuning.knobs
    for case in workload.cases:
        variables = case_variables(case)
        moved = parse_expression(workload.work.bytes)(variables)
        assert moved > 0
        if workload.work.flops is not None:
            assert parse_expression(workload.work.flops)(variables) > 0


@pytest.mark.parametrize("name", NAMES)
def test_correctness_sizes_are_not_multiples_of_32(name):
    workload = load(name)
    for case in workload.cases:
        if case.kind == "correctness":
            assert any(value % 32 for value in case.sizes.values()), case.name


@pytest.mark.parametrize("name", NAMES)
def test_reference_gives_finite_non_degenerate_outputs(name):
    workload = load(name)
    for case in [c for c in workload.cases if c.kind == "correctness"]:
        inputs = generate_case_inputs(workload, case, seed=1)
        expected = run_numpy_reference(workload, inputs)
        assert set(expected) == {p.name for p in workload.outputs}
        for output, array in expected.items():
            shape, _dtype = inputs.output_shapes[output]
            assert array.shape == shape, (case.name, output)
            assert array.dtype == np.float64
            assert np.isfinite(array).all(), (case.name, output)
            if array.size == 1:
                # is_degenerate calls any single value "constant"; a scalar result just must not be 0.
                assert abs(float(array[0])) > 1e-30, (case.name, output)
            else:
                assert is_degenerate(array) is None, (case.name, output, is_degenerate(array))


def _transpose_by_loops(src):
    rows, cols = src.shape
    return np.array([[src[r, c] for r in range(rows)] for c in range(cols)])


def _softmax_by_loops(x):
    result = np.empty_like(x)
    for r, row in enumerate(x):
        largest = max(row)
        exponentials = [np.exp(v - largest) for v in row]
        total = sum(exponentials)
        result[r] = [e / total for e in exponentials]
    return result


INDEPENDENT = {
    "saxpy": lambda a, x, y: a * x + y,
    "sum_reduction": lambda x, out: out + sum(float(v) for v in x),
    "transpose": _transpose_by_loops,
    "softmax": _softmax_by_loops,
    "sgemm": lambda A, B: np.einsum("mk,kn->mn", A, B),
}


@pytest.mark.parametrize("name", NAMES)
def test_reference_agrees_with_an_independent_formula(name):
    workload = load(name)
    inputs = generate_case_inputs(workload, workload.cases[0], seed=7)
    got = run_numpy_reference(workload, inputs)
    formula = INDEPENDENT[name]
    arguments = {**inputs.scalars, **{k: v.astype(np.float64) for k, v in inputs.arrays.items()}}
    names = formula.__code__.co_varnames[: formula.__code__.co_argcount]
    want = np.asarray(formula(**{k: arguments[k] for k in names}))
    (output,) = workload.outputs
    np.testing.assert_allclose(got[output.name], want.reshape(got[output.name].shape), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_tuning_space_is_non_empty_and_starts_at_the_kernels_defaults(name):
    workload = load(name)
    assert workload.tuning is not None
    space = list(enumerate_space(workload.tuning))
    assert space, "the restrictions leave no configuration"
    first_values = {knob: values[0] for knob, values in workload.tuning.knobs.items()}
    assert space[0] == first_values, "the first value of each knob must form a valid configuration"
    source = workload.kernel_code()
    defaults = dict(re.findall(r"#ifndef\s+(\w+)\s*\n\s*#define\s+\1\s+(\S+)", source))
    launch_text = " ".join(
        str(item) for item in [*workload.launch.grid, *workload.launch.block, workload.launch.shared_mem]
    )
    for knob, value in first_values.items():
        in_source = re.search(rf"\b{knob}\b", source) is not None
        in_launch = re.search(rf"\b{knob}\b", launch_text) is not None
        assert in_source or in_launch, f"knob {knob} changes nothing"
        if in_source:
            assert defaults.get(knob) == str(value), (
                f"{knob}: kernel default {defaults.get(knob)} != first value {value}"
            )


def test_sgemm_space_has_about_a_hundred_configurations():
    workload = load("sgemm")
    assert workload.tuning is not None
    assert 80 <= len(list(enumerate_space(workload.tuning))) <= 130


@pytest.mark.parametrize("name", NAMES)
def test_every_configuration_launches_within_device_limits_on_every_case(name):
    workload = load(name)
    assert workload.tuning is not None
    for knobs, case, emulated in itertools.product(
        enumerate_space(workload.tuning), workload.cases, (False, True)
    ):
        variables = case_variables(case, knobs, emulated)
        dims = resolve_launch(workload.launch, case.name, variables)
        assert 1 <= dims.threads_per_block <= MAX_THREADS, (knobs, case.name)
        assert all(1 <= g <= limit for g, limit in zip(dims.grid, MAX_GRID, strict=True)), (knobs, case.name)
        assert 0 <= dims.shared_mem <= 48 * 1024
        threads = int(np.prod(dims.grid)) * dims.threads_per_block
        per_thread, needed = _coverage(name, knobs, variables)
        assert threads * per_thread >= needed, f"{knobs} leaves part of case {case.name} uncovered"


def _coverage(name: str, knobs: dict, v: dict) -> tuple[int, int]:
    """(elements each thread handles, elements that need a thread) under each example's mapping."""
    return {
        "saxpy": lambda: (knobs["ITEMS_PER_THREAD"], v["N"]),
        "sum_reduction": lambda: (knobs["ITEMS_PER_THREAD"], v["N"]),
        "transpose": lambda: (knobs["TILE"] // knobs["BLOCK_ROWS"], v["ROWS"] * v["COLS"]),
        "softmax": lambda: (-(-v["COLS"] // knobs["THREADS"]), v["ROWS"] * v["COLS"]),
        "sgemm": lambda: (knobs["TM"] * knobs["TN"], v["M"] * v["N"]),
    }[name]()


@pytest.mark.parametrize("name", NAMES)
def test_cases_fit_the_cpu_emulator(name):
    workload = load(name)
    for case in workload.cases:
        sizes = case.sizes_for(emulated=True)
        assert elements(workload, sizes) <= EMULATION_ELEMENTS, case.name
    for case in workload.performance_cases:
        assert elements(workload, case.sizes) > 4 * EMULATION_ELEMENTS, f"{case.name} is too small for a GPU"


@pytest.mark.parametrize("name", NAMES)
def test_baseline_imports_without_cupy_and_takes_keywords(name):
    workload = load(name)
    assert workload.baseline is not None and isinstance(workload.baseline.python, str)
    file_name, function = workload.baseline.python.split(":")
    tree = ast.parse((EXAMPLES / name / file_name).read_text())
    top_level_imports = [
        alias.name
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ] + [node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module]
    assert not any(module and module.startswith("cupy") for module in top_level_imports), "import cupy inside"
    definition = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    assert definition.args.kwarg is not None, "the baseline must accept and ignore extra parameters (**_)"
    declared = {arg.arg for arg in definition.args.args}
    assert declared <= {p.name for p in workload.signature}


NVCC = shutil.which("nvcc")


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc (the CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", NAMES)
def test_kernel_compiles_at_defaults_and_at_extreme_configurations(name, tmp_path):
    workload = load(name)
    assert workload.tuning is not None
    space = list(enumerate_space(workload.tuning))
    compiled = [knob for knob in workload.tuning.knobs if re.search(rf"\b{knob}\b", workload.kernel_code())]
    variants = [{}, space[-1], space[len(space) // 2]]
    for knobs in variants:
        defines = [f"-D{knob}={knobs[knob]}" for knob in compiled if knob in knobs]
        result = subprocess.run(
            [
                NVCC,
                "-std=c++17",
                "-arch=sm_90",
                "-cubin",
                "-o",
                str(tmp_path / "k.cubin"),
                str(workload.base_dir / str(workload.kernel.source)),
                *defines,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert "warning" not in result.stderr.lower(), result.stderr
