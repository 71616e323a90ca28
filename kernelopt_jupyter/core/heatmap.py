"""The latency heatmap: rows are candidates, columns performance cases, colour is relative latency.

Colour is each cell's median divided by the best median in that column (1.0 = fastest for that
case), on a log scale, so a candidate that wins one case and loses another shows it at a glance.
Cells carry the latency in µs; failed candidates are a grey row naming their status.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from .atomic import write_bytes
from .results import CandidateResult, Status


def heatmap_matrix(rows: Sequence[tuple[str, CandidateResult]]) -> tuple[list[str], np.ndarray]:
    """Case names and a (rows × cases) array of medians in µs (NaN where there is none)."""
    cases: list[str] = []
    for _, result in rows:
        for case in result.cases:
            if case.kind == "performance" and case.name not in cases:
                cases.append(case.name)
    values = np.full((len(rows), len(cases)), np.nan)
    for r, (_, result) in enumerate(rows):
        if result.status != Status.OK:
            continue
        for case in result.cases:
            if case.name in cases and case.timing is not None:
                values[r, cases.index(case.name)] = case.timing.median_us
    return cases, values


def render_heatmap(
    history: Sequence[Any],
    png: Path,
    svg: Path,
    *,
    title: str,
    emulated: bool,
    baseline: CandidateResult | None = None,
) -> None:
    rows = [(entry.label + (" (screen)" if entry.screening else ""), entry.result) for entry in history]
    if baseline is not None and baseline.status == Status.OK:
        rows.append(("baseline", baseline))
    cases, values = heatmap_matrix(rows)
    figure = _draw(rows, cases, values, title + (" — emulated, not GPU timings" if emulated else ""))
    for path, fmt in ((png, "png"), (svg, "svg")):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, dpi=110, bbox_inches="tight")
        write_bytes(path, buffer.getvalue())


def _draw(rows: list[tuple[str, CandidateResult]], cases: list[str], values: np.ndarray, title: str) -> Any:
    height = 1.6 + 0.32 * max(1, len(rows))
    width = 3.2 + 1.3 * max(1, len(cases))
    # A bare Figure (no pyplot) can be drawn on a background thread without touching global state.
    figure = Figure(figsize=(width, height))
    axes = figure.subplots()
    best = np.nanmin(values, axis=0) if values.size and not np.all(np.isnan(values)) else np.ones(len(cases))
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = values / best
    finite = relative[np.isfinite(relative)]
    top = max(2.0, float(finite.max())) if finite.size else 2.0
    masked = np.ma.masked_invalid(relative)
    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(bad="#d9d9d9")
    image = axes.imshow(
        masked if masked.size else np.zeros((1, 1)),
        cmap=cmap,
        norm=LogNorm(vmin=1.0, vmax=top),
        aspect="auto",
    )
    font = 8 if len(rows) <= 40 else 6
    for r, (_, result) in enumerate(rows):
        for c in range(len(cases)):
            if np.isfinite(values[r, c]):
                axes.text(c, r, _format_us(values[r, c]), ha="center", va="center", fontsize=font)
            elif result.status != Status.OK:
                axes.text(c, r, result.status.value, ha="center", va="center", fontsize=font, color="#555555")
    axes.set_xticks(range(len(cases)), cases, rotation=30, ha="right")
    axes.set_yticks(range(len(rows)), [label[:48] for label, _ in rows], fontsize=font)
    axes.set_title(title, fontsize=10)
    colorbar = figure.colorbar(image, ax=axes, fraction=0.04, pad=0.02)
    colorbar.set_label("latency / best for the case (log)")
    return figure


def _format_us(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} ms"
    if value >= 100:
        return f"{value:.0f} µs"
    return f"{value:.2f} µs" if value < 10 else f"{value:.1f} µs"
