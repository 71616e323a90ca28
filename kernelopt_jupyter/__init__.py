"""kernelopt-jupyter: make a CUDA kernel faster, one validated candidate at a time.

The Python API in brief::

    from kernelopt_jupyter import load_workload, evaluate
    workload = load_workload("examples/saxpy/workload.yaml")
    result = evaluate(workload, workload.kernel_code())      # CandidateResult
"""

from __future__ import annotations

from typing import Any

from .core.loader import load_workload
from .core.results import CandidateResult, Status
from .core.workload import Workload

__version__ = "0.1.0"
__all__ = ["CandidateResult", "Status", "Workload", "__version__", "evaluate", "load_workload"]


def evaluate(
    workload: Workload, source: str, launch: Any = None, backend: str = "auto", **options: Any
) -> CandidateResult:
    """Evaluate one kernel on every case (compile, validate, time) in a fresh worker process."""
    from .worker.evaluator import evaluate as _evaluate

    return _evaluate(workload, source, launch, backend, **options)
