"""The run store: ``results/run-NNN/``, written after every candidate so a kill loses nothing.

Layout (see ``docs/run-format.md``): ``workload.json``, ``input_cases.json`` + ``inputs/``,
``supplied-reference.*``, ``candidates/NNNN.cu`` + ``NNNN.json``, ``history.json``,
``summary.json``, ``best.cu``, ``replay/<case>.json|.py``, ``heatmap.png|.svg``. Every file goes
through :mod:`kernelopt_jupyter.core.atomic`, and ``history.json`` is rewritten whole after each
candidate, so at any moment the directory is a readable run holding every finished candidate.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .atomic import write_json, write_npy, write_text
from .callables import resolve_callable, split_reference
from .heatmap import render_heatmap
from .inputs import CaseInputs
from .replay_files import write_replay
from .results import CandidateResult, DeviceInfo
from .scoring import speedup
from .workload import Workload, read_source


class HistoryEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="strings")

    id: int
    parent_id: int | None = None
    proposer: str = "user"
    rationale: str = ""
    source_file: str
    source_hash: str
    launch: dict[str, Any] | None = None
    knobs: dict[str, int | float | str] = Field(default_factory=dict)
    result: CandidateResult
    screening: bool = Field(False, description="timed by a sweep's quick screen; never the best")
    ab: dict[str, Any] | None = Field(None, description="interleaved re-timing against the best of the time")
    started_at: str
    finished_at: str

    @property
    def label(self) -> str:
        knobs = ",".join(f"{k}={v}" for k, v in self.knobs.items())
        return f"#{self.id} {self.proposer}" + (f" {knobs}" if knobs else "")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def claim_run_directory(results_dir: str | Path) -> Path:
    """Create the next free ``run-NNN`` (``mkdir`` is atomic, so two sessions never share one)."""
    root = Path(results_dir)
    root.mkdir(parents=True, exist_ok=True)
    numbers = [int(p.name[4:]) for p in root.glob("run-*") if p.name[4:].isdigit()]
    number = max(numbers, default=0) + 1
    while True:
        path = root / f"run-{number:03d}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            number += 1


class RunStore:
    def __init__(self, path: Path, workload: Workload, *, heatmap_interval_s: float = 5.0) -> None:
        self.path = path
        self.workload = workload
        self.history: list[HistoryEntry] = []
        self.summary: dict[str, Any] = {}
        self.baseline: CandidateResult | None = None
        self.reference: CandidateResult | None = None
        self.heatmap_interval_s = heatmap_interval_s
        self._last_heatmap = 0.0
        self._painter = BackgroundPainter(self.render_heatmap)
        self._best_id: int | None = None
        self._history_json: list[str] = []

    # --- creating ----------------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        results_dir: str | Path,
        workload: Workload,
        *,
        device: DeviceInfo,
        settings: dict[str, Any],
        heatmap_interval_s: float = 5.0,
    ) -> RunStore:
        store = cls(claim_run_directory(results_dir), workload, heatmap_interval_s=heatmap_interval_s)
        write_json(store.path / "workload.json", workload.portable_dict())
        store._save_reference()
        store.summary = {
            "run": store.path.name,
            "workload": workload.name,
            "status": "running",
            "started_at": now(),
            "device": device.model_dump(mode="json"),
            "emulated": device.emulated,
            "settings": settings,
            "candidates": 0,
        }
        store._write_summary()
        write_json(store.path / "history.json", [])
        return store

    def _save_reference(self) -> None:
        reference = self.workload.reference
        if reference.cuda is not None:
            write_text(
                self.path / "supplied-reference.cu", read_source(reference.cuda, self.workload.base_dir)
            )
            return
        assert reference.python is not None
        if isinstance(reference.python, str):
            location, _ = split_reference(reference.python)
            path = self.workload.base_dir / location
            if path.is_file():
                write_text(self.path / "supplied-reference.py", path.read_text())
                return
        function = resolve_callable(reference.python, self.workload.base_dir)
        try:
            write_text(self.path / "supplied-reference.py", inspect.getsource(function))
        except (OSError, TypeError):
            write_text(
                self.path / "supplied-reference.py",
                f"# reference: {reference.python!r} (source unavailable)\n",
            )

    def save_inputs(self, cases: Sequence[CaseInputs]) -> None:
        """Write the first trial's inputs and the manifest that points at them (for replay)."""
        manifest: dict[str, Any] = {"workload": self.workload.name, "cases": {}}
        for inputs in cases:
            files = {}
            for name, array in inputs.arrays.items():
                relative = f"inputs/{inputs.case}/{name}.npy"
                write_npy(self.path / relative, array)
                files[name] = relative
            manifest["cases"][inputs.case] = {
                "variables": inputs.variables,
                "arrays": files,
                "scalars": inputs.scalars,
                "output_shapes": {
                    n: {"shape": list(s), "dtype": d} for n, (s, d) in inputs.output_shapes.items()
                },
            }
        write_json(self.path / "input_cases.json", manifest)

    # --- recording -----------------------------------------------------------------------------------------
    def add(
        self,
        source: str,
        result: CandidateResult,
        *,
        proposer: str = "user",
        rationale: str = "",
        parent_id: int | None = None,
        launch: dict[str, Any] | None = None,
        started_at: str | None = None,
        screening: bool = False,
        ab: dict[str, Any] | None = None,
    ) -> HistoryEntry:
        entry_id = len(self.history) + 1
        source_file = f"candidates/{entry_id:04d}.cu"
        write_text(self.path / source_file, source)
        entry = HistoryEntry(
            id=entry_id,
            parent_id=parent_id,
            proposer=proposer,
            rationale=rationale,
            source_file=source_file,
            source_hash=hashlib.sha256(source.encode()).hexdigest()[:16],
            launch=launch,
            knobs=result.knobs,
            result=result,
            screening=screening,
            ab=ab,
            started_at=started_at or now(),
            finished_at=now(),
        )
        write_json(
            self.path / f"candidates/{entry_id:04d}.json",
            {"launch": launch, "knobs": result.knobs, "status": result.status.value},
        )
        self.history.append(entry)
        # Each entry is serialised once; the file is still rewritten whole (atomically) every time.
        self._history_json.append(entry.model_dump_json(indent=2))
        write_text(self.path / "history.json", "[\n" + ",\n".join(self._history_json) + "\n]\n")
        if self._improves(entry):
            self._best_id = entry.id
            write_text(self.path / "best.cu", source)
            write_replay(self.path, self.workload, entry, result)
        self._write_summary()
        if time.monotonic() - self._last_heatmap >= self.heatmap_interval_s:
            self._last_heatmap = time.monotonic()
            self._painter.request()
        return entry

    def _improves(self, entry: HistoryEntry) -> bool:
        if not entry.result.ranks or entry.screening:
            return False
        best = self.best
        if best is None:
            return True
        if entry.ab is not None and entry.ab.get("against") == best.id:
            ratio = entry.ab.get("ratio")  # measured side by side: that decides (None: rejected)
            return ratio is not None and ratio < 1.0
        return entry.result.score_us < best.result.score_us  # type: ignore[operator]

    @property
    def best(self) -> HistoryEntry | None:
        return None if self._best_id is None else self.history[self._best_id - 1]

    def set_baseline(self, result: CandidateResult | None) -> None:
        self.baseline = result
        if result is not None:
            write_json(self.path / "baseline.json", result.model_dump(mode="json"))
        self._write_summary()

    def finish(self, *, reveal: dict[str, Any] | None = None) -> None:
        """Mark the run complete; ``reveal`` adds what could not be written earlier (the secret seed)."""
        self.summary["status"] = "finished"
        self.summary["finished_at"] = now()
        if reveal:
            self.summary["settings"] = {**self.summary.get("settings", {}), **reveal}
        self._write_summary()
        self._painter.wait()
        self.render_heatmap()

    # --- derived files --------------------------------------------------------------------------------------
    def render_heatmap(self) -> None:
        if not self.history:
            return
        render_heatmap(
            list(self.history),
            self.path / "heatmap.png",
            self.path / "heatmap.svg",
            title=f"{self.workload.name} — {self.summary['device']['name']}",
            emulated=bool(self.summary.get("emulated")),
            baseline=self.baseline,
        )
        self._last_heatmap = time.monotonic()

    def _write_summary(self) -> None:
        best = self.best
        initial = self.history[0] if self.history else None
        statuses: dict[str, int] = {}
        for entry in self.history:
            statuses[entry.result.status.value] = statuses.get(entry.result.status.value, 0) + 1
        self.summary.update(
            {
                "candidates": len(self.history),
                "statuses": statuses,
                "best": None
                if best is None
                else {
                    "id": best.id,
                    "proposer": best.proposer,
                    "score_us": best.result.score_us,
                    "knobs": best.knobs,
                    "file": "best.cu",
                    "cases": {c.name: c.median_us for c in best.result.cases if c.kind == "performance"},
                },
                "speedup": {
                    "vs_initial": speedup(
                        initial.result.score_us if initial else None, best.result.score_us if best else None
                    ),
                    "vs_reference": speedup(
                        self.reference.score_us if self.reference else None,
                        best.result.score_us if best else None,
                    ),
                    "vs_baseline": speedup(
                        self.baseline.score_us if self.baseline else None,
                        best.result.score_us if best else None,
                    ),
                },
                "baseline": None
                if self.baseline is None
                else {
                    "name": self.workload.baseline.name if self.workload.baseline else "baseline",
                    "status": self.baseline.status.value,
                    "score_us": self.baseline.score_us,
                },
                "updated_at": now(),
                "pid": os.getpid(),
            }
        )
        write_json(self.path / "summary.json", self.summary)


class BackgroundPainter:
    """Redraws a derived file on one background thread, coalescing requests, so a sweep never waits
    for matplotlib; ``wait`` lets the final drawing happen after the last background one."""

    def __init__(self, draw: Callable[[], None]) -> None:
        self._draw = draw
        self._lock = threading.Lock()
        self._pending = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        with self._lock:
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="kernelopt-heatmap", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return
                self._pending = False
            with contextlib.suppress(Exception):  # a failed redraw must not take the run down
                self._draw()

    def wait(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.join()


def read_run(path: str | Path) -> tuple[dict[str, Any], list[HistoryEntry]]:
    """Read a run directory (finished, running, or killed mid-way) back into objects."""
    import json

    path = Path(path)
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{path} is not a run directory (no summary.json)")
    summary = json.loads(summary_path.read_text())
    history_path = path / "history.json"
    entries = json.loads(history_path.read_text()) if history_path.is_file() else []
    return summary, [HistoryEntry.model_validate(entry) for entry in entries]
