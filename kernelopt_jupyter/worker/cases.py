"""Preparing case data on the parent side: inputs, expected outputs, and the files the worker reads.

Inputs are generated and the reference is computed here, in the parent (a NumPy reference) or in a
separate reference worker (a CUDA reference) — never in the candidate's process, so a candidate
cannot find the reference's outputs lying in memory. Each (case, trial) is prepared once per
evaluator and shared by every candidate, so a sweep pays for references once.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.atomic import write_npy
from ..core.compare import is_degenerate
from ..core.expressions import parse_expression
from ..core.inputs import CaseInputs, generate_case_inputs
from ..core.reference import run_numpy_reference
from ..core.settings import EvaluationSettings
from ..core.workload import Case, Workload

# (case, inputs, their .npy files by name, a directory for outputs) -> expected outputs
ReferenceRunner = Callable[[Case, CaseInputs, dict[str, str], Path], dict[str, np.ndarray]]


@dataclass
class PreparedCase:
    case: Case
    trial: int
    inputs: CaseInputs
    directory: Path
    array_files: dict[str, str] = field(default_factory=dict)
    reference_files: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.case.name}@{self.trial}"

    def load_message(self) -> dict[str, object]:
        return {
            "op": "load_case",
            "key": self.key,
            "case": self.case.name,
            "trial": self.trial,
            "arrays": self.array_files,
            "scalars": self.inputs.scalars,
            "output_shapes": {
                name: [list(shape), dtype] for name, (shape, dtype) in self.inputs.output_shapes.items()
            },
            "reference": self.reference_files,
        }


class CasePreparer:
    """Generates and caches every (case, trial) the evaluator needs, as ``.npy`` files."""

    def __init__(
        self,
        workload: Workload,
        settings: EvaluationSettings,
        directory: Path,
        *,
        emulated: bool,
        reference_runner: ReferenceRunner | None = None,
    ) -> None:
        self.workload = workload
        self.settings = settings
        self.directory = directory
        self.emulated = emulated
        self.reference_runner = reference_runner
        self._prepared: dict[tuple[str, int], PreparedCase] = {}

    def seed_for(self, trial: int) -> int:
        """Trial 0 uses the public seed (its inputs are saved for replay); later trials the secret one."""
        return self.settings.seed if trial == 0 else self.settings.secret_seed

    def get(self, case: Case, trial: int) -> PreparedCase:
        key = (case.name, trial)
        if key not in self._prepared:
            self._prepared[key] = self._prepare(case, trial)
        return self._prepared[key]

    def _prepare(self, case: Case, trial: int) -> PreparedCase:
        inputs = generate_case_inputs(
            self.workload, case, self.seed_for(trial), trial, emulated=self.emulated
        )
        directory = self.directory / f"{case.name}@{trial}"
        directory.mkdir(parents=True, exist_ok=True)
        prepared = PreparedCase(case, trial, inputs, directory)
        for name, array in inputs.arrays.items():
            prepared.array_files[name] = str(write_npy(directory / f"in-{name}.npy", array))
        if self.workload.reference.python is not None:
            expected = run_numpy_reference(self.workload, inputs)
        else:
            assert self.reference_runner is not None, "a CUDA reference needs a reference runner"
            expected = self.reference_runner(case, inputs, prepared.array_files, directory)
        for name, array in expected.items():
            prepared.reference_files[name] = str(write_npy(directory / f"ref-{name}.npy", array))
            reason = is_degenerate(array)
            if reason:
                prepared.flags.append(f"degenerate reference for {name}: {reason}")
        return prepared

    def work(self, case: Case) -> tuple[float | None, float | None]:
        """The case's flops and bytes from the work model, at the sizes actually run."""
        model = self.workload.work
        if model is None:
            return None, None
        variables = case.sizes_for(self.emulated)
        flops = float(parse_expression(model.flops)(variables)) if model.flops is not None else None
        moved = float(parse_expression(model.bytes)(variables)) if model.bytes is not None else None
        return flops, moved

    def prepared(self) -> list[PreparedCase]:
        return list(self._prepared.values())

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
