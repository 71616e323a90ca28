"""Running a NumPy reference, in float64, to get the expected outputs of a case.

The reference receives every parameter by name: float arrays upcast to float64 copies (so it can
neither see nor alter the candidate's data and rounds as little as possible), integer arrays as
copies, scalars as Python numbers, and each ``out`` parameter as a zeroed float64 array. It may
return the outputs (one array, a tuple in signature order, or a dict by name) or fill them in place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from .callables import resolve_callable
from .errors import KerneloptError
from .inputs import CaseInputs
from .workload import Workload


class ReferenceFailed(KerneloptError):
    """The reference raised or returned something that does not match the outputs."""


def reference_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if np.dtype(dtype).kind == "f" else np.dtype(dtype)


def run_numpy_reference(workload: Workload, inputs: CaseInputs) -> dict[str, np.ndarray]:
    assert workload.reference.python is not None
    function = resolve_callable(workload.reference.python, workload.base_dir)
    name = getattr(function, "__name__", repr(function))
    arguments: dict[str, Any] = dict(inputs.scalars)
    for array_name, array in inputs.arrays.items():
        arguments[array_name] = array.astype(reference_dtype(array.dtype), copy=True)
    for output in workload.outputs:
        if output.role == "out":
            shape, dtype = inputs.output_shapes[output.name]
            arguments[output.name] = np.zeros(shape, reference_dtype(np.dtype(dtype)))
    arguments = _accepted(function, arguments)
    try:
        returned = function(**arguments)
    except Exception as exc:
        raise ReferenceFailed(
            f"reference {name} raised {type(exc).__name__}: {exc} (case {inputs.case})"
        ) from exc
    return _collect_outputs(workload, inputs, returned, arguments, name)


def _accepted(function: Callable[..., Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Pass only the parameters the function declares, unless it takes ``**kwargs``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return arguments
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return arguments
    names = {p.name for p in parameters}
    return {key: value for key, value in arguments.items() if key in names}


def outputs_by_name(returned: Any, names: list[str]) -> dict[str, Any]:
    """What a reference or baseline returned, by output name: a dict as is, a tuple or list in
    signature order, a single value for a single output. ``ValueError`` says what did not fit."""
    if isinstance(returned, dict):
        return returned
    if isinstance(returned, tuple | list):
        if len(returned) != len(names):
            raise ValueError(
                f"returned {len(returned)} values but there are {len(names)} outputs ({', '.join(names)})"
            )
        return dict(zip(names, returned, strict=True))
    if len(names) != 1:
        raise ValueError(f"returned one value but there are {len(names)} outputs")
    return {names[0]: returned}


def _collect_outputs(
    workload: Workload, inputs: CaseInputs, returned: Any, arguments: dict[str, Any], name: str
) -> dict[str, np.ndarray]:
    outputs = workload.outputs
    if returned is None:
        missing = [o.name for o in outputs if o.name not in arguments]
        if missing:
            raise ReferenceFailed(f"reference {name} returned nothing and does not take {missing} to fill in")
        values = {o.name: arguments[o.name] for o in outputs}
    else:
        try:
            values = outputs_by_name(returned, [o.name for o in outputs])
        except ValueError as exc:
            raise ReferenceFailed(f"reference {name} {exc}") from None
    result: dict[str, np.ndarray] = {}
    for output in outputs:
        if output.name not in values:
            raise ReferenceFailed(f"reference {name} did not return output {output.name!r}")
        shape, dtype = inputs.output_shapes[output.name]
        array = np.asarray(values[output.name])
        if array.size == int(np.prod(shape)) and array.shape != shape:
            array = array.reshape(shape)
        if array.shape != shape:
            raise ReferenceFailed(
                f"reference {name} returned shape {array.shape} for {output.name!r}, expected {shape} "
                f"(case {inputs.case})"
            )
        result[output.name] = np.ascontiguousarray(array, dtype=reference_dtype(np.dtype(dtype)))
    return result
