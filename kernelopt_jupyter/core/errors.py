"""Errors raised before anything runs: a bad workload spec or a bad expression.

Each carries enough context (file, field path, line) to point the user at the exact place to fix,
because a spec error is always the user's to fix and a traceback helps nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class KerneloptError(Exception):
    """Base class for every error this package raises on purpose."""


class ExpressionError(KerneloptError, ValueError):
    """A launch, shape or work-model expression that cannot be parsed or evaluated.

    It is a ``ValueError`` too, so that pydantic reports it as a field error of the spec.
    """

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(f"{message} in expression {expression!r}")
        self.expression = expression
        self.reason = message


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec: where it is and what was expected."""

    field: str
    message: str
    line: int | None = None

    def describe(self, path: str) -> str:
        where = f"{path}:{self.line}" if self.line else path
        return f"{where}: {self.field or '(top level)'}: {self.message}"


@dataclass
class SpecError(KerneloptError):
    """A workload spec that was rejected before anything ran."""

    path: str
    problems: list[SpecProblem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(problem.describe(self.path) for problem in self.problems)

    @classmethod
    def single(cls, path: str, field_name: str, message: str, line: int | None = None) -> SpecError:
        return cls(path, [SpecProblem(field_name, message, line)])


class SpecWarning(UserWarning):
    """A spec that loads but invites a false pass (e.g. only power-of-two sizes)."""


class UsageError(KerneloptError):
    """Arguments a command cannot use (a missing kernel file, a malformed ``--knob``)."""
