import math

import pytest

from kernelopt_jupyter.core.results import CaseResult, Status
from kernelopt_jupyter.core.scoring import geometric_mean, score, summarize
from kernelopt_jupyter.core.tuning_space import compile_key, define_options, enumerate_space, source_knobs
from kernelopt_jupyter.core.workload import TuningSpace


def case(name, kind, median, status=Status.OK):
    timing = summarize([median, median, median], 1) if median else None
    return CaseResult(name=name, kind=kind, status=status, timing=timing)


def test_summary_statistics():
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0], warmup=10)
    assert stats.median_us == 3.0 and stats.min_us == 1.0 and stats.max_us == 100.0
    assert stats.samples == 5 and stats.warmup == 10
    assert stats.p10_us == pytest.approx(1.4)
    assert stats.cv > 1.0


def test_score_is_geometric_mean_of_performance_medians_only():
    cases = [
        case("check", "correctness", 1000.0),
        case("a", "performance", 2.0),
        case("b", "performance", 8.0),
    ]
    assert score(cases) == pytest.approx(4.0)


def test_score_needs_every_case_ok():
    cases = [case("check", "correctness", None, Status.WRONG), case("a", "performance", 2.0)]
    assert score(cases) is None
    assert score([case("check", "correctness", 1.0)]) is None  # nothing timed


def test_geometric_mean_rejects_non_positive():
    assert geometric_mean([1, 100]) == pytest.approx(10)
    with pytest.raises(ValueError):
        geometric_mean([1, 0])
    assert math.isclose(geometric_mean([3.0]), 3.0)


def test_space_enumeration_with_restrictions():
    space = TuningSpace(
        knobs={"BM": [32, 64, 128], "TM": [4, 8]}, restrictions=["BM // TM <= 16", "BM % TM == 0"]
    )
    configs = list(enumerate_space(space))
    assert {"BM": 128, "TM": 4} not in configs
    assert {"BM": 32, "TM": 4} in configs and len(configs) == 5


def test_source_knobs_and_compile_key():
    space = TuningSpace(knobs={"BLOCK": [64, 128], "ITEMS": [1, 2]})
    source = "#ifndef ITEMS\n#define ITEMS 1\n#endif\n__global__ void k() {}"
    assert source_knobs(space, source) == ["ITEMS"]
    assert compile_key({"BLOCK": 64, "ITEMS": 2}, ["ITEMS"]) == compile_key(
        {"BLOCK": 128, "ITEMS": 2}, ["ITEMS"]
    )
    assert define_options({"ITEMS": 2, "BLOCK": 64}, ["ITEMS"]) == ["-DITEMS=2"]


def test_knobs_named_only_in_comments_are_launch_only():
    space = TuningSpace(knobs={"BLOCK": [64, 128]})
    assert source_knobs(space, "// BLOCK threads per block\n/* BLOCK */ __global__ void k() {}") == []
