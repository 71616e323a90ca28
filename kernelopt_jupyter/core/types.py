"""Kernel parameter types: the spellings a spec may use and the NumPy dtype behind each.

A spec may name element types the NumPy way (``float32``) or the C way (``float``, ``unsigned int``,
``const float*``), because users copy signatures straight out of their ``.cu`` files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_NUMPY_NAMES = {
    "bool": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}
_C_NAMES = {
    "char": np.int8,
    "signed char": np.int8,
    "unsigned char": np.uint8,
    "short": np.int16,
    "unsigned short": np.uint16,
    "int": np.int32,
    "signed": np.int32,
    "signed int": np.int32,
    "unsigned": np.uint32,
    "unsigned int": np.uint32,
    "long": np.int64,
    "long long": np.int64,
    "unsigned long": np.uint64,
    "unsigned long long": np.uint64,
    "size_t": np.uint64,
    "float": np.float32,
    "double": np.float64,
    "int8_t": np.int8,
    "int16_t": np.int16,
    "int32_t": np.int32,
    "int64_t": np.int64,
    "uint8_t": np.uint8,
    "uint16_t": np.uint16,
    "uint32_t": np.uint32,
    "uint64_t": np.uint64,
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")

SUPPORTED_TYPE_NAMES = sorted({*_NUMPY_NAMES, *_C_NAMES})


@dataclass(frozen=True)
class ParamType:
    """An element type, and whether the parameter is a pointer to it."""

    dtype: np.dtype
    pointer: bool
    const: bool = False

    @property
    def is_float(self) -> bool:
        return self.dtype.kind == "f"

    def describe(self) -> str:
        text = str(self.dtype)
        if self.pointer:
            text = ("const " if self.const else "") + text + "*"
        return text


def parse_type(spelling: str) -> ParamType:
    """Parse ``float32``, ``const float*``, ``unsigned int`` ...; raise ``ValueError`` if unknown."""
    text = spelling.strip()
    pointer_depth = text.count("*")
    if pointer_depth > 1:
        raise ValueError(f"{spelling!r}: pointers to pointers are not supported")
    const = bool(re.search(r"\bconst\b", text.split("*")[0]))
    base = _QUALIFIERS.sub(" ", text.replace("*", " "))
    base = " ".join(base.split())
    dtype = _NUMPY_NAMES.get(base) or _C_NAMES.get(base)
    if dtype is None:
        raise ValueError(
            f"unknown element type {base!r} (expected one of: {', '.join(SUPPORTED_TYPE_NAMES)})"
        )
    return ParamType(np.dtype(dtype), pointer=pointer_depth == 1, const=const)


def poison_value(dtype: np.dtype) -> float | int:
    """What an output is filled with before a launch, so unwritten elements cannot pass.

    Floats get NaN (never equal to anything); integers get a large, unusual sentinel.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return float("nan")
    if dtype.kind == "b":
        return 1
    info = np.iinfo(dtype)
    return int(info.max - 0x2A) if dtype.kind == "u" else int(info.min + 0x2A)
