"""Every example runs end to end: on the CPU emulation in CI (through the CLI), on a GPU under `gpu`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelopt_jupyter import load_workload
from kernelopt_jupyter.cli.main import main
from kernelopt_jupyter.core.results import Status
from kernelopt_jupyter.core.settings import EvaluationSettings, TimingProtocol
from kernelopt_jupyter.session import Session

EXAMPLES = sorted(
    p.parent for p in (Path(__file__).resolve().parents[1] / "examples").glob("*/workload.yaml")
)
NAMES = [p.name for p in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=NAMES)
def test_example_evaluates_on_cpu_through_the_cli(example, capsys):
    workload = load_workload(example / "workload.yaml")
    kernel = example / workload.kernel.source
    code = main(
        [
            "evaluate",
            str(kernel),
            "--workload",
            str(example / "workload.yaml"),
            "--backend",
            "cpu",
            "--warmup",
            "1",
            "--samples",
            "3",
            "--budget",
            "0",
            "--json",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert code == 0, result["message"]
    assert result["status"] == "ok" and result["score_us"] > 0
    assert {c["name"] for c in result["cases"]} == {c.name for c in workload.cases}


@pytest.mark.parametrize("example", EXAMPLES, ids=NAMES)
def test_example_tunes_on_cpu_through_the_cli(example, tmp_path, capsys):
    code = main(
        [
            "tune",
            "--workload",
            str(example / "workload.yaml"),
            "--backend",
            "cpu",
            "--max-configs",
            "3",
            "--warmup",
            "1",
            "--samples",
            "3",
            "--budget",
            "0",
            "--results",
            str(tmp_path),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    summary = out["summary"]
    assert summary["status"] == "finished" and summary["emulated"] is True
    assert summary["best"] is not None, "at least the initial kernel validates"
    run = Path(out["run"])
    assert (run / "best.cu").is_file() and (run / "heatmap.png").is_file()


@pytest.mark.gpu
@pytest.mark.parametrize("example", EXAMPLES, ids=NAMES)
def test_example_evaluates_and_ranks_on_gpu(example, tmp_path):
    workload = load_workload(example / "workload.yaml")
    settings = EvaluationSettings(backend="cupy", timing=TimingProtocol.fixed(3, 20))
    with Session(workload, settings=settings, results_dir=tmp_path) as session:
        entry = session.evaluate_initial()
        assert entry.result.status == Status.OK, entry.result.message
        assert entry.result.ranks
        if workload.baseline is not None:
            assert session.baseline is not None and session.baseline.status == Status.OK, (
                session.baseline.message
            )
        assert not session.device.emulated
