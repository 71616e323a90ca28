"""The tuning space: every combination of knob values that satisfies the restrictions.

Knobs become ``-D`` defines and may appear in launch expressions. A knob whose name never appears
in the kernel source only changes the launch, so variants that differ only in such knobs can share
one compiled module (see :func:`compile_key`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from .cuda_source import strip_comments
from .expressions import parse_condition
from .workload import TuningSpace

KnobValues = dict[str, int | float | str]


def enumerate_space(space: TuningSpace) -> Iterator[KnobValues]:
    """All knob combinations in declaration order that pass every restriction."""
    names = list(space.knobs)
    restrictions = [parse_condition(text) for text in space.restrictions]
    for values in itertools.product(*(space.knobs[name] for name in names)):
        combination = dict(zip(names, values, strict=True))
        numeric = {k: v for k, v in combination.items() if isinstance(v, int | float)}
        if all(restriction(numeric) for restriction in restrictions):
            yield combination


def space_size(space: TuningSpace) -> int:
    size = 1
    for values in space.knobs.values():
        size *= len(values)
    return size


def source_knobs(space: TuningSpace | None, source: str) -> list[str]:
    """Knobs the kernel source mentions; only these need to be compiled in as defines."""
    if space is None:
        return []
    code = strip_comments(source)
    return [name for name in space.knobs if re.search(rf"\b{re.escape(name)}\b", code)]


def compile_key(knobs: KnobValues, compiled_knobs: list[str]) -> tuple[tuple[str, str], ...]:
    return tuple((name, str(knobs[name])) for name in compiled_knobs if name in knobs)


def define_options(knobs: KnobValues, compiled_knobs: list[str] | None = None) -> list[str]:
    names = compiled_knobs if compiled_knobs is not None else list(knobs)
    return [f"-D{name}={knobs[name]}" for name in names if name in knobs]
