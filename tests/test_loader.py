"""Every way a spec can be wrong is rejected before anything runs, naming file, field and line."""

import warnings
from pathlib import Path

import pytest
import yaml

from kernelopt_jupyter.core.errors import SpecError, SpecWarning
from kernelopt_jupyter.core.loader import load_workload


def edit(directory: Path, change) -> Path:
    path = directory / "workload.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def problems(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_workload(path)
    text = str(info.value)
    assert str(path) in text, "every problem names the file"
    return text


def test_fixture_loads(workload_dir):
    workload = load_workload(workload_dir / "workload.yaml")
    assert workload.name == "vector_add"
    assert [p.name for p in workload.outputs] == ["c"]
    assert workload.parameter("a").role == "in"  # const pointer defaults to an input
    assert workload.base_dir == workload_dir.resolve()


def test_unknown_field_names_field_line_and_expected(workload_dir):
    path = workload_dir / "workload.yaml"
    path.write_text(path.read_text().replace("tolerance: {", "tolerence: {"))
    text = problems(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("tolerence"))
    assert f"workload.yaml:{line}: tolerence: unknown field 'tolerence'" in text
    assert "expected one of:" in text and "tolerance" in text


def test_unknown_nested_field(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"][0].update(shap=["N"]))
    assert "signature[0].shap: unknown field 'shap'" in problems(path)


def test_missing_reference(workload_dir):
    path = edit(workload_dir, lambda d: d.pop("reference"))
    assert "reference: missing required field" in problems(path)


def test_reference_function_missing(workload_dir):
    path = edit(workload_dir, lambda d: d["reference"].update(python="reference.py:nope"))
    assert "reference.python:" in problems(path)
    assert "has no function 'nope'" in problems(path)


def test_reference_file_missing(workload_dir):
    path = edit(workload_dir, lambda d: d["reference"].update(python="missing.py:f"))
    assert "does not exist" in problems(path)


def test_shape_with_unknown_variable(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"][1].update(shape=["M"]))
    text = problems(path)
    assert "signature[1].shape[0]: 'M' in 'M' is not a size variable (known: N)" in text


def test_parameter_count_mismatch_names_kernel_line(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"].pop(1))
    text = problems(path)
    assert "vector_add.cu:2: kernel 'vector_add' takes 4 parameters but the signature lists 3" in text


def test_pointer_where_kernel_takes_scalar(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"][3].update(type="int32*", role="in", shape=["N"]))
    assert "parameter 4 of 'vector_add' is a scalar" in problems(path)


def test_missing_kernel_file(workload_dir):
    path = edit(workload_dir, lambda d: d["kernel"].update(source="nowhere.cu"))
    assert "kernel.source: kernel file" in problems(path)


def test_entry_not_in_source(workload_dir):
    path = edit(workload_dir, lambda d: d["kernel"].update(entry="vec_add"))
    assert "no __global__ function named 'vec_add'" in problems(path)


def test_bad_expression_in_launch(workload_dir):
    path = edit(workload_dir, lambda d: d["launch"].update(grid=["N ** 2"]))
    assert "launch.grid[0]: the operator Pow is not allowed" in problems(path)


def test_launch_names_unknown_knob(workload_dir):
    path = edit(workload_dir, lambda d: d["launch"].update(block=["THREADS"]))
    assert "launch.block[0]: 'THREADS'" in problems(path)


def test_restriction_names_unknown_knob(workload_dir):
    path = edit(workload_dir, lambda d: d["tuning"].update(restrictions=["BLOK <= 1024"]))
    assert "tuning.restrictions[0]: 'BLOK' in 'BLOK <= 1024' is not a numeric knob" in problems(path)


def test_unknown_type(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"][0].update(type="float16*"))
    assert "unknown element type 'float16'" in problems(path)


def test_non_const_pointer_needs_role(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"][2].pop("role"))
    assert "needs a 'role'" in problems(path)


def test_case_sizes_must_agree(workload_dir):
    path = edit(workload_dir, lambda d: d["cases"][1].update(sizes={"M": 4}))
    text = problems(path)
    assert "cases[1].sizes: size variables ['M'] differ" in text


def test_duplicate_case_names(workload_dir):
    path = edit(workload_dir, lambda d: d["cases"][1].update(name="small"))
    assert "case name 'small' is used twice" in problems(path)


def test_scalar_without_value(workload_dir):
    def change(d):
        d["signature"][3]["name"] = "n"

    assert "scalar 'n' needs 'value' or 'input'" in problems(edit(workload_dir, change))


def test_no_outputs(workload_dir):
    path = edit(workload_dir, lambda d: d["signature"][2].update(role="in"))
    assert "nothing to check" in problems(path)


def test_yaml_syntax_error_has_line(workload_dir):
    path = workload_dir / "workload.yaml"
    path.write_text(path.read_text() + "cases: [\n")
    assert "invalid YAML" in problems(path)


def test_several_problems_are_all_reported(workload_dir):
    def change(d):
        d["signature"][1]["shape"] = ["M"]
        d["launch"]["block"] = ["THREADS"]

    text = problems(edit(workload_dir, change))
    assert len(text.splitlines()) == 2


def test_json_spec_is_accepted(workload_dir):
    import json

    data = yaml.safe_load((workload_dir / "workload.yaml").read_text())
    data["bogus"] = 1
    path = workload_dir / "workload.json"
    path.write_text(json.dumps(data, indent=2))
    text = problems(path)
    assert "workload.json:" in text and "unknown field 'bogus'" in text


def test_missing_file():
    with pytest.raises(SpecError, match="file not found"):
        load_workload("/nonexistent/workload.yaml")


def test_python_keyword_parameter_name(workload_dir):
    def change(d):
        d["signature"][0]["name"] = "in"

    assert "'in' is not usable as a Python argument name" in problems(edit(workload_dir, change))


def test_knob_named_like_a_size_variable(workload_dir):
    path = edit(workload_dir, lambda d: d["tuning"]["knobs"].update(N=[1, 2]))
    assert "knob 'N' has the name of a size variable" in problems(path)


def test_restriction_on_a_text_knob(workload_dir):
    def change(d):
        d["tuning"]["knobs"]["MODE"] = ["fast", "slow"]
        d["tuning"]["restrictions"] = ["MODE == 1"]

    assert "is not a numeric knob" in problems(edit(workload_dir, change))


def test_numeric_looking_knob_values_are_numbers(workload_dir):
    path = edit(workload_dir, lambda d: d["tuning"]["knobs"].update(EPS=["1e-5", "2"]))
    assert load_workload(path).tuning.knobs["EPS"] == [1e-5, 2]


def test_power_of_two_sizes_warn(workload_dir):
    def change(d):
        d["cases"][0]["sizes"] = {"N": 1024}
        d["cases"][1]["sizes"] = {"N": 65536}

    path = edit(workload_dir, change)
    with pytest.warns(SpecWarning, match="every case size is a power of two or a multiple of 32"):
        workload = load_workload(path)
    assert len(workload.warnings) == 1
    edit(workload_dir, lambda d: d["cases"][0].update(sizes={"N": 1000}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_workload(path).warnings == []
