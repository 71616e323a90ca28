"""Input generation: every case's arrays and scalars, drawn from a seeded generator.

Each (seed, trial, case, parameter) gets its own independent stream, so adding a parameter or a
case never changes the values another one receives, and a later trial draws entirely fresh data.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .callables import resolve_callable
from .expressions import Number, parse_expression
from .workload import Case, InputSpec, Parameter, Workload, scalar_value


@dataclass
class CaseInputs:
    """The concrete data for one trial of one case.

    ``arrays`` holds the in/inout pointer inputs, ``scalars`` the scalar parameters, and
    ``output_shapes`` the shape and dtype of every out/inout parameter.
    """

    case: str
    trial: int
    variables: dict[str, Number]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    scalars: dict[str, Number] = field(default_factory=dict)
    output_shapes: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)


def _stream(seed: int, trial: int, case: str, parameter: str) -> np.random.Generator:
    words = [
        seed & 0xFFFFFFFF,
        seed >> 32 & 0xFFFFFFFF,
        trial,
        zlib.crc32(case.encode()),
        zlib.crc32(parameter.encode()),
    ]
    return np.random.default_rng(np.random.SeedSequence(words))


def case_variables(
    case: Case, knobs: Mapping[str, Number] | None = None, emulated: bool = False
) -> dict[str, Number]:
    return {**(knobs or {}), **case.sizes_for(emulated)}


def parameter_shape(parameter: Parameter, variables: Mapping[str, Number]) -> tuple[int, ...]:
    return tuple(
        parse_expression(item).integer(variables, f"shape of {parameter.name}")
        for item in parameter.shape or []
    )


def generate_case_inputs(
    workload: Workload,
    case: Case,
    seed: int,
    trial: int = 0,
    *,
    knobs: Mapping[str, Number] | None = None,
    emulated: bool = False,
) -> CaseInputs:
    variables = case_variables(case, knobs, emulated)
    inputs = CaseInputs(case=case.name, trial=trial, variables=variables)
    for parameter in workload.signature:
        rng = _stream(seed, trial, case.name, parameter.name)
        dtype = parameter.param_type.dtype
        if parameter.is_pointer:
            shape = parameter_shape(parameter, variables)
            if parameter.is_output:
                inputs.output_shapes[parameter.name] = (shape, dtype.str)
            if parameter.role in ("in", "inout"):
                spec = parameter.input or default_input(dtype)
                inputs.arrays[parameter.name] = draw(spec, rng, shape, dtype, variables, workload)
        elif parameter.input is not None:
            value = draw(parameter.input, rng, (), dtype, variables, workload)
            inputs.scalars[parameter.name] = value.item()
        else:
            inputs.scalars[parameter.name] = (
                np.asarray(scalar_value(parameter, variables)).astype(dtype).item()
            )
    return inputs


def default_input(dtype: np.dtype) -> InputSpec:
    if dtype.kind == "f":
        return InputSpec(distribution="uniform", low=-1.0, high=1.0)
    if dtype.kind == "b":
        return InputSpec(distribution="integers", low=0, high=2)
    return InputSpec(distribution="integers", low=0, high=100)


def draw(
    spec: InputSpec,
    rng: np.random.Generator,
    shape: tuple[int, ...],
    dtype: np.dtype,
    variables: Mapping[str, Number],
    workload: Workload,
) -> np.ndarray:
    dtype = np.dtype(dtype)
    if spec.generator is not None:
        function = resolve_callable(spec.generator, workload.base_dir)
        array = np.asarray(function(rng, shape, dtype, dict(variables)))
        if array.shape != shape:
            raise ValueError(
                f"input generator {spec.generator!r} returned shape {array.shape}, expected {shape}"
            )
        return np.ascontiguousarray(array, dtype=dtype)
    kind = spec.distribution
    if kind == "uniform":
        low = -1.0 if spec.low is None else spec.low
        high = 1.0 if spec.high is None else spec.high
        if dtype.kind == "f":
            sample_dtype = dtype if dtype in (np.float32, np.float64) else np.float64
            values = rng.random(shape, dtype=sample_dtype)
            values *= high - low
            values += low
            return values.astype(dtype, copy=False)
        return rng.integers(int(low), int(high), shape, dtype=dtype, endpoint=False)
    if kind == "normal":
        sample_dtype = dtype if dtype in (np.float32, np.float64) else np.float64
        values = rng.standard_normal(shape, dtype=sample_dtype)
        values *= spec.std
        values += spec.mean
        return values.astype(dtype, copy=False)
    if kind == "integers":
        low = 0 if spec.low is None else int(spec.low)
        high = 100 if spec.high is None else int(spec.high)
        return rng.integers(low, high, shape, endpoint=False).astype(dtype)
    if kind == "ones":
        return np.ones(shape, dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype)
    assert kind == "constant" and spec.value is not None
    return np.full(shape, spec.value, dtype)
