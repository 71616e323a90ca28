"""Timing modes on a GPU: launch overhead kept out, cold caches, graphs, clocks (marker gpu)."""

from __future__ import annotations

import pytest

from kernelopt_jupyter import evaluate, load_workload
from kernelopt_jupyter.core.results import Status
from kernelopt_jupyter.core.settings import EvaluationSettings, TimingProtocol

pytestmark = pytest.mark.gpu


def timed(workload, mode: str, cache: str = "warm"):
    protocol = TimingProtocol.fixed(5, 50, mode=mode, cache=cache)
    result = evaluate(
        workload,
        workload.kernel_code(),
        backend="cupy",
        settings=EvaluationSettings(backend="cupy", timing=protocol),
    )
    assert result.status == Status.OK, result.message
    return result.case("big").timing


def test_blocked_modes_exclude_launch_overhead(workload_dir):
    workload = load_workload(workload_dir / "workload.yaml")  # 100k floats: a ~2-3 µs kernel
    per_launch = timed(workload, "per_launch")
    back_to_back = timed(workload, "back_to_back")
    graph = timed(workload, "graph")
    assert back_to_back.mode == "back_to_back" and back_to_back.launches_per_sample > 1
    assert graph.mode == "graph"
    # One event pair per launch from Python measures the host's launch latency (~10 µs on an H100).
    assert back_to_back.median_us < 0.7 * per_launch.median_us, (back_to_back.median_us, per_launch.median_us)
    assert graph.median_us < 0.7 * per_launch.median_us
    assert (
        back_to_back.host_us_per_launch is not None
        and back_to_back.host_us_per_launch > back_to_back.median_us
    )


def test_cold_cache_is_not_faster_than_warm(workload_dir):
    workload = load_workload(workload_dir / "workload.yaml")
    warm = timed(workload, "back_to_back")
    cold = timed(workload, "back_to_back", "cold")
    assert cold.cache == "cold" and cold.launches_per_sample == 1
    assert cold.median_us >= 0.9 * warm.median_us
