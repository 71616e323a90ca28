"""The kernelopt command: help everywhere, one clear line and exit code 2 for bad usage or specs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelopt_jupyter.cli.main import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelopt_jupyter.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", [[], ["evaluate"], ["tune"], ["show"]])
def test_help_everywhere(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([*command, "-h"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kernelopt")
    if command == ["tune"]:
        assert "--max-configs" in out and "--json" in out


def test_unknown_command_is_one_line():
    result = run("frobnicate")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_spec_exits_2_with_file_field_and_line(workload_dir, capsys):
    spec = workload_dir / "workload.yaml"
    spec.write_text(spec.read_text().replace("shape: [N]}", "shape: [Q]}", 1))
    code = main(["evaluate", str(workload_dir / "vector_add.cu"), "--workload", str(spec)])
    err = capsys.readouterr().err
    assert code == 2
    assert "workload.yaml:7: signature[0].shape[0]: 'Q'" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_kernel_file(workload_dir, capsys):
    code = main(
        ["evaluate", str(workload_dir / "nope.cu"), "--workload", str(workload_dir / "workload.yaml")]
    )
    assert code == 2 and "kernel file" in capsys.readouterr().err


def test_malformed_knob_and_launch(workload_dir, capsys):
    base = [
        "evaluate",
        str(workload_dir / "vector_add.cu"),
        "--workload",
        str(workload_dir / "workload.yaml"),
    ]
    assert main([*base, "--knob", "BLOCK"]) == 2
    assert "--knob expects NAME=VALUE" in capsys.readouterr().err
    assert main([*base, "--launch", "{nope"]) == 2
    assert "--launch is not valid JSON" in capsys.readouterr().err
    assert main([*base, "--launch", '{"blocks": [1]}']) == 2
    assert "--launch: blocks" in capsys.readouterr().err


def test_tune_needs_a_tuning_space(workload_dir, capsys):
    spec = workload_dir / "workload.yaml"
    text = spec.read_text()
    spec.write_text(text[: text.index("tuning:")].replace("BLOCK", "128"))
    assert main(["tune", "--workload", str(spec)]) == 2
    assert "has no tuning space" in capsys.readouterr().err


def test_show_rejects_non_runs(tmp_path, capsys):
    assert main(["show", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "missing")]) == 2


def test_show_prints_a_run(workload_dir, tmp_path, capsys):
    from test_store import make_store, result

    store = make_store(workload_dir, tmp_path)
    store.add("// a", result({"big": 20.0}), proposer="initial")
    store.add("// b", result({"big": 10.0}), proposer="user")
    assert main(["show", str(store.path)]) == 0
    out = capsys.readouterr().out
    assert "best: candidate #2" in out and "2.00x faster than the initial kernel" in out
    assert "heatmap.png" in out
    assert main(["show", str(store.path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["history"]) == 2 and data["summary"]["best"]["id"] == 2


def test_a_closed_pipe_is_not_an_error(workload_dir, tmp_path):
    from test_store import make_store, result

    store = make_store(workload_dir, tmp_path)
    for median in range(1, 60):
        store.add("// a", result({"big": float(median)}))
    shown = subprocess.run(
        f"{sys.executable} -m kernelopt_jupyter.cli.main show {store.path} --json | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "internal error" not in shown.stderr and "Traceback" not in shown.stderr
