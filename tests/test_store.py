"""The run store: numbering, files after every candidate, atomic writes that survive a kill."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from kernelopt_jupyter.core.atomic import write_json
from kernelopt_jupyter.core.inputs import generate_case_inputs
from kernelopt_jupyter.core.loader import load_workload
from kernelopt_jupyter.core.results import CandidateResult, CaseResult, DeviceInfo, Status
from kernelopt_jupyter.core.scoring import summarize
from kernelopt_jupyter.core.store import RunStore, claim_run_directory, read_run

DEVICE = DeviceInfo(backend="cpu", name="test device", emulated=True)


def result(medians: dict[str, float] | None, status: Status = Status.OK, knobs=None) -> CandidateResult:
    cases = [CaseResult(name="small", kind="correctness", status=status, grid=[8], block=[128])]
    for name, median in (medians or {}).items():
        cases.append(
            CaseResult(
                name=name,
                kind="performance",
                status=status,
                grid=[8],
                block=[128],
                timing=summarize([median] * 5, 2),
            )
        )
    from kernelopt_jupyter.core.scoring import score

    return CandidateResult(
        status=status,
        cases=cases,
        score_us=score(cases) if status == Status.OK else None,
        knobs=knobs or {},
        message="" if status == Status.OK else "case small: wrong",
    )


def make_store(workload_dir: Path, tmp_path: Path) -> RunStore:
    workload = load_workload(workload_dir / "workload.yaml")
    store = RunStore.create(tmp_path / "results", workload, device=DEVICE, settings={"seed": 0})
    store.save_inputs([generate_case_inputs(workload, case, 0) for case in workload.cases])
    return store


def test_run_numbers_never_overwrite(tmp_path):
    first = claim_run_directory(tmp_path)
    second = claim_run_directory(tmp_path)
    (tmp_path / "run-007").mkdir()
    third = claim_run_directory(tmp_path)
    assert [first.name, second.name, third.name] == ["run-001", "run-002", "run-008"]


def test_files_after_each_candidate(workload_dir, tmp_path):
    store = make_store(workload_dir, tmp_path)
    run = store.path
    for name in [
        "workload.json",
        "summary.json",
        "history.json",
        "input_cases.json",
        "supplied-reference.py",
    ]:
        assert (run / name).is_file(), name
    manifest = json.loads((run / "input_cases.json").read_text())
    saved = np.load(run / manifest["cases"]["small"]["arrays"]["a"])
    assert saved.shape == (1000,) and saved.dtype == np.float32

    store.add("// slow", result({"big": 20.0}), proposer="initial")
    store.add("// broken", result({"big": 1.0}, Status.WRONG), proposer="user", parent_id=1)
    store.add("// fast", result({"big": 10.0}), proposer="user", parent_id=1, rationale="faster")
    store.add("// screened", result({"big": 5.0}), proposer="tune", screening=True)

    summary, history = read_run(run)
    assert [e.id for e in history] == [1, 2, 3, 4]
    assert history[2].parent_id == 1 and history[2].rationale == "faster"
    assert (run / "candidates/0002.cu").read_text() == "// broken"
    assert (run / "best.cu").read_text() == "// fast", "a wrong or screened candidate never becomes best"
    assert summary["best"]["id"] == 3
    assert summary["speedup"]["vs_initial"] == pytest.approx(2.0)
    assert summary["statuses"] == {"ok": 3, "wrong": 1}
    request = json.loads((run / "replay/big.json").read_text())
    assert request["kernel"] == "../best.cu" and request["launch"]["block"] == [128]
    assert (run / "replay/big.py").read_text().startswith("#!/usr/bin/env python3")
    store.finish(reveal={"secret_seed": 42})
    summary, _ = read_run(run)
    assert summary["status"] == "finished" and summary["settings"]["secret_seed"] == 42
    assert (run / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (run / "heatmap.svg").read_bytes()[:2000]


def test_heatmap_marks_failures_and_emulation(workload_dir, tmp_path):
    store = make_store(workload_dir, tmp_path)
    store.add("// a", result({"big": 20.0}))
    store.add("// b", result(None, Status.COMPILE_ERROR))
    store.render_heatmap()
    svg = (store.path / "heatmap.svg").read_text()
    assert "compile_error" in svg and "emulated, not GPU timings" in svg and "20.0" in svg


def test_atomic_write_leaves_old_or_new(tmp_path):
    path = tmp_path / "data.json"
    write_json(path, {"version": 1})
    write_json(path, {"version": 2, "payload": list(range(1000))})
    assert json.loads(path.read_text())["version"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


KILLER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_store import make_store, result
    store = make_store(Path({workload!r}), Path({tmp!r}))
    print(store.path, flush=True)
    i = 0
    while True:
        i += 1
        store.add("// candidate %d\\n" % i + "x" * 200000, result({{"big": float(1 + i % 7)}}))
""")


def test_kill_in_the_middle_leaves_a_readable_run(workload_dir, tmp_path):
    for attempt, delay in enumerate([0.8, 1.3, 2.1]):
        base = tmp_path / f"attempt{attempt}"
        script = KILLER.format(tests=str(Path(__file__).parent), workload=str(workload_dir), tmp=str(base))
        process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        run = Path(process.stdout.readline().strip())
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        summary, history = read_run(run)
        assert history, "some candidates finished before the kill"
        assert summary["candidates"] in (len(history), len(history) - 1)
        for entry in history:
            assert (run / entry.source_file).read_text().startswith(f"// candidate {entry.id}\n")
        if (run / "best.cu").exists():
            assert (run / "best.cu").read_text().startswith("// candidate")
