"""Names for compiled kernels on the parent side: what was asked to compile, and what came of it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..core.results import KernelAttributes, Status


@dataclass(frozen=True)
class KernelHandle:
    """A kernel submitted for compilation; ``key`` names it in the worker."""

    key: str
    source: str
    entry: str
    options: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def message(self, wait: bool) -> dict[str, Any]:
        return {
            "op": "compile",
            "key": self.key,
            "source": self.source,
            "entry": self.entry,
            "options": list(self.options),
            "defines": dict(self.defines),
            "wait": wait,
        }


@dataclass
class CompileOutcome:
    ok: bool
    log: str
    time_s: float | None
    attributes: KernelAttributes | None = None
    status: Status = Status.OK
