"""Running a CUDA reference kernel in a worker of its own.

A reference is an oracle; if it ran in the candidate's process, a candidate could find the
expected outputs in freed device memory. So a CUDA reference gets a separate worker process and its
outputs come back as files, exactly like the candidate's inputs go out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.inputs import CaseInputs, case_variables
from ..core.launch import resolve_launch
from ..core.results import Status
from ..core.settings import EvaluationSettings
from ..core.workload import Case, Workload, read_source
from .client import WorkerClient, WorkerLost, WorkerReplyError


class ReferenceKernelFailed(RuntimeError):
    """The reference kernel itself failed: every candidate would be judged against garbage."""


class CudaReferenceRunner:
    def __init__(self, workload: Workload, settings: EvaluationSettings, work_dir: Path) -> None:
        assert workload.reference.cuda is not None
        self.workload = workload
        self.settings = settings
        self.reference = workload.reference.cuda
        directory = work_dir / "reference-worker"
        directory.mkdir(parents=True, exist_ok=True)
        self.client = WorkerClient(settings.backend, log_dir=directory)
        self._generation = 0

    def _sync(self) -> None:
        self.client.ensure_started()
        if self.client.generation == self._generation:
            return
        self.client.call(
            {
                "op": "workload",
                "workload": self.workload.portable_dict(),
                "base_dir": str(self.workload.base_dir),
            },
            60,
        )
        self.client.call(
            {
                "op": "compile",
                "key": "reference",
                "source": read_source(self.reference, self.workload.base_dir),
                "entry": self.reference.entry,
                "options": list(self.reference.options),
                "defines": {},
                "wait": True,
            },
            self.settings.compile_timeout_s,
        )
        self._generation = self.client.generation

    def __call__(
        self, case: Case, inputs: CaseInputs, array_files: dict[str, str], directory: Path
    ) -> dict[str, np.ndarray]:
        emulated = bool(self.client.ensure_started().emulated)
        dims = resolve_launch(self.reference.launch, case.name, case_variables(case, None, emulated))
        try:
            self._sync()
            key = f"{case.name}@{inputs.trial}"
            self.client.call(
                {
                    "op": "load_case",
                    "key": key,
                    "case": case.name,
                    "trial": inputs.trial,
                    "arrays": array_files,
                    "scalars": inputs.scalars,
                    "output_shapes": {n: [list(s), d] for n, (s, d) in inputs.output_shapes.items()},
                },
                120,
            )
            reply = self.client.call(
                {
                    "op": "outputs",
                    "kernel": "reference",
                    "case": case.name,
                    "kind": case.kind,
                    "trials": [key],
                    **dims.as_dict(),
                    "directory": str(directory),
                    "launch_timeout_s": self.settings.launch_timeout_s,
                },
                120 + self.settings.launch_timeout_s,
            )
            self.client.call({"op": "forget", "cases": [key]}, 60)
        except (WorkerReplyError, WorkerLost) as exc:
            status = exc.status if exc.status != Status.COMPILE_ERROR else "compile error"
            raise ReferenceKernelFailed(
                f"the CUDA reference kernel failed on case {case.name} ({status}): {exc.message}"
            ) from None
        return {name: np.load(path) for name, path in reply["outputs"].items()}

    def close(self) -> None:
        self.client.close()
