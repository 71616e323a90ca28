"""Tables every front end shows: one candidate's cases, and a run's candidates.

Built as pandas DataFrames so the CLI prints them as text and the notebook renders them as HTML
from the same columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..core.results import CandidateResult, CaseResult
from ..core.store import HistoryEntry


def _sizes(case: CaseResult) -> str:
    return " ".join(f"{k}={v}" for k, v in case.sizes.items())


def _error(case: CaseResult) -> str:
    if not case.outputs:
        return ""
    worst = max(case.outputs, key=lambda o: o.rel_norm_error)
    return f"{worst.rel_norm_error:.1e}"


def case_table(result: CandidateResult) -> pd.DataFrame:
    rows = []
    for case in result.cases:
        timing = case.timing
        throughput = case.throughput()
        rows.append(
            {
                "case": case.name,
                "kind": "perf" if case.kind == "performance" else "check",
                "status": case.status.value,
                "sizes": _sizes(case),
                "grid": "x".join(map(str, case.grid)) if case.grid else "",
                "block": "x".join(map(str, case.block)) if case.block else "",
                "median_us": round(timing.median_us, 3) if timing else None,
                "p10_us": round(timing.p10_us, 3) if timing else None,
                "p90_us": round(timing.p90_us, 3) if timing else None,
                "cv_%": round(100 * timing.cv, 2) if timing else None,
                "samples": timing.samples if timing else None,
                "GB/s": round(throughput["gbs"], 1) if "gbs" in throughput else None,
                "GFLOP/s": round(throughput["gflops"], 1) if "gflops" in throughput else None,
                "rel_err": _error(case),
            }
        )
    return pd.DataFrame(rows).dropna(axis=1, how="all")


def history_table(entries: Sequence[HistoryEntry], performance_cases: Sequence[str] = ()) -> pd.DataFrame:
    rows = []
    for entry in entries:
        row: dict[str, object] = {
            "id": entry.id,
            "proposer": entry.proposer + (" (screen)" if entry.screening else ""),
            "status": entry.result.status.value,
            "score_us": round(entry.result.score_us, 3) if entry.result.score_us else None,
            "knobs": " ".join(f"{k}={v}" for k, v in entry.knobs.items()),
        }
        for name in performance_cases:
            case = entry.result.case(name)
            row[name] = round(case.median_us, 3) if case is not None and case.median_us else None
        rows.append(row)
    return pd.DataFrame(rows)


def failure_lines(result: CandidateResult) -> list[str]:
    lines = []
    if result.message:
        lines.append(result.message)
    for case in result.cases:
        lines.extend(f"case {case.name}: {flag}" for flag in case.flags)
    return lines
