"""Just enough reading of CUDA source to check a spec against its kernel before anything compiles.

We do not parse C++. We find the ``__global__`` function named by the entry point and split its
parameter list at top-level commas, so that a spec whose signature has the wrong number of
parameters, or a pointer where the kernel takes a scalar, is rejected with the kernel's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(")
_GLOBAL = re.compile(r"\b__global__\b")


@dataclass(frozen=True)
class KernelParameter:
    text: str
    is_pointer: bool


@dataclass(frozen=True)
class KernelDeclaration:
    name: str
    line: int
    parameters: list[KernelParameter]


def strip_comments(source: str) -> str:
    """Blank out comments and string/char literals, keeping every newline (so lines still match)."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        two = source[i : i + 2]
        if two == "//":
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif two == "/*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(c if c == "\n" else " " for c in source[i:j]))
            i = j
        elif source[i] in "\"'":
            quote, j = source[i], i + 1
            while j < n and source[j] != quote and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(quote + " " * max(0, j - i - 2) + (quote if j - i >= 2 else ""))
            i = j
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def entry_base_name(entry: str) -> str:
    """``sgemm<64, 8>`` → ``sgemm``; ``ns::kernel`` → ``kernel``."""
    return entry.split("<", 1)[0].strip().split("::")[-1]


def find_kernels(source: str) -> list[KernelDeclaration]:
    """Every ``__global__`` function in the source, with its parameters."""
    text = strip_comments(source)
    kernels: list[KernelDeclaration] = []
    for match in _GLOBAL.finditer(text):
        position = match.end()
        while True:
            paren = text.find("(", position)
            if paren < 0:
                break
            bounds = _LAUNCH_BOUNDS.search(text, position, paren + 1)
            if bounds is not None and bounds.end() - 1 == paren:
                position = _matching_paren(text, paren) + 1
                continue
            name_match = re.search(r"(\w+)\s*$", text[position:paren])
            if name_match is None:
                break
            close = _matching_paren(text, paren)
            parameters = _split_parameters(text[paren + 1 : close])
            line = text.count("\n", 0, position + name_match.start()) + 1
            kernels.append(KernelDeclaration(name_match.group(1), line, parameters))
            break
    return kernels


def find_kernel(source: str, entry: str) -> KernelDeclaration | None:
    name = entry_base_name(entry)
    for kernel in find_kernels(source):
        if kernel.name == name:
            return kernel
    return None


def _matching_paren(text: str, open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def split_top_level(text: str) -> list[tuple[int, str]]:
    """Split at commas outside any brackets: ``a, f(b, c), T<1, 2>`` → three parts, with offsets."""
    parts: list[tuple[int, str]] = []
    depth, begin = 0, 0
    for index, char in enumerate(text):
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append((begin, text[begin:index]))
            begin = index + 1
    parts.append((begin, text[begin:]))
    return parts


def _split_parameters(text: str) -> list[KernelParameter]:
    if not text.strip() or text.strip() == "void":
        return []
    result = []
    for _, part in split_top_level(text):
        declaration = part.split("=", 1)[0]
        result.append(KernelParameter(" ".join(part.split()), "*" in declaration or "[" in declaration))
    return result
