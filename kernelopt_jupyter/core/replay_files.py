"""Per-case replay files for the best candidate: a request JSON and a tiny script that runs it.

A replay re-runs ``best.cu`` on one case's saved inputs, outside any session, and prints its time —
for checking a result later, on another machine, or under a profiler (``ncu python replay/x.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .atomic import write_json, write_text
from .results import CandidateResult

_SCRIPT = '''#!/usr/bin/env python3
"""Re-run best.cu on the saved inputs of case {case!r} and print its time (made by kernelopt-jupyter).

Usage: python {name}.py [--backend auto|cupy|cpu]
"""
import sys
from pathlib import Path

from kernelopt_jupyter.backends.replay import replay

if __name__ == "__main__":
    sys.exit(replay(Path(__file__).with_suffix(".json"), sys.argv[1:]))
'''


def write_replay(run_dir: Path, workload: Any, entry: Any, result: CandidateResult) -> list[Path]:
    manifest_path = run_dir / "input_cases.json"
    if not manifest_path.exists():
        return []
    manifest = json.loads(manifest_path.read_text())
    written = []
    for case in result.cases:
        saved = manifest["cases"].get(case.name)
        if saved is None or not case.grid:
            continue
        parameters = []
        for parameter in workload.signature:
            item: dict[str, Any] = {
                "name": parameter.name,
                "dtype": parameter.param_type.dtype.str,
                "pointer": parameter.is_pointer,
                "role": parameter.role,
            }
            if not parameter.is_pointer:
                item["value"] = saved["scalars"][parameter.name]
            elif parameter.role == "out":
                item["shape"] = saved["output_shapes"][parameter.name]["shape"]
            else:
                item["file"] = f"../{saved['arrays'][parameter.name]}"
            parameters.append(item)
        request = {
            "workload": workload.name,
            "case": case.name,
            "backend": result.backend,
            "kernel": "../best.cu",
            "candidate": entry.id,
            "entry": workload.kernel.entry,
            "options": list(workload.kernel.options),
            "defines": {k: str(v) for k, v in result.knobs.items()},
            "launch": {"grid": case.grid, "block": case.block, "shared_mem": case.shared_mem},
            "parameters": parameters,
            "recorded_median_us": case.median_us,
            "timing": case.timing.model_dump(include={"warmup", "samples", "mode", "cache"})
            if case.timing
            else None,
        }
        written.append(write_json(run_dir / "replay" / f"{case.name}.json", request))
        written.append(
            write_text(run_dir / "replay" / f"{case.name}.py", _SCRIPT.format(case=case.name, name=case.name))
        )
    return written
