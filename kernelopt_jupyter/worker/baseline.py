"""Running a Python baseline (e.g. one calling ``cupy.matmul``) under the candidates' protocol.

A baseline is trusted library code, but it is held to the same rules as a kernel so that its
numbers are comparable and its outputs honest: it gets private input copies and poisoned outputs,
and a returned array must be a new array — not an input, and not one it returned before. It is
never timed as a replayed CUDA graph unless asked by name (:func:`baseline_protocol`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.reference import outputs_by_name
from ..core.results import Status
from ..core.settings import TimingProtocol
from .runner import CaseFailed, CaseRunner, LoadedCase


def baseline_protocol(timing: TimingProtocol | None) -> TimingProtocol | None:
    """``auto`` timing means back-to-back for a baseline: Python code allocates its results from a
    memory pool, and a graph captured around it would keep writing, at every replay, into blocks
    the pool has handed out again since."""
    return timing.auto_as("back_to_back") if timing is not None else None


def baseline_invoker(
    runner: CaseRunner, function: Callable[..., Any]
) -> Callable[[LoadedCase, dict[str, Any]], None]:
    outputs = runner.workload.outputs
    previous: dict[str, Any] = {}  # strong references: a pooled allocator cannot hand them out again

    def invoke(case: LoadedCase, buffers: dict[str, Any]) -> None:
        arguments = {**case.scalars, **buffers}
        returned = function(**arguments)
        if returned is None:
            return
        try:
            values = outputs_by_name(returned, [o.name for o in outputs])
        except ValueError as exc:
            raise CaseFailed(Status.WRONG, f"the baseline {exc}") from None
        for name, value in values.items():
            if name not in buffers:
                continue
            _reject_aliasing(runner, name, value, buffers, previous)
            shape = tuple(getattr(value, "shape", ()))
            if shape != tuple(buffers[name].shape):
                raise CaseFailed(
                    Status.WRONG,
                    f"returned output {name!r} has shape {shape}, expected {tuple(buffers[name].shape)}",
                )
            buffers[name][...] = value

    return invoke


def _reject_aliasing(
    runner: CaseRunner, name: str, value: Any, buffers: dict[str, Any], previous: dict[str, Any]
) -> None:
    if not hasattr(value, "shape") or value is buffers[name]:
        return
    for other_name, other in buffers.items():
        if other_name != name and runner.xp.shares_memory(value, other):
            raise CaseFailed(Status.WRONG, f"returned output {name!r} aliases parameter {other_name!r}")
    earlier = previous.get(name)
    if earlier is not None and (earlier is value or runner.xp.shares_memory(earlier, value)):
        raise CaseFailed(Status.WRONG, f"returned output {name!r} is the array returned by an earlier call")
    previous[name] = value
