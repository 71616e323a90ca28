"""What can be learned about the entry kernel from its source alone, for ``KernelAttributes``.

The CUDA backend gets static shared memory and the thread limit from the driver; here we estimate
them from the text so that ``check_launch`` refuses the same launches: the entry kernel's
``__launch_bounds__`` and the sum of its static ``__shared__`` arrays, evaluated with the
candidate's defines, simple ``#define`` / ``constexpr`` constants and the entry's template
arguments. When any part cannot be evaluated the answer is None (unknown), never a guess; the
runtime still enforces CUDA's limits when the kernel runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ...core.cuda_source import entry_base_name, split_top_level
from .translate import SharedDeclaration

_VECTOR_SIZES = {
    "char": 1,
    "uchar": 1,
    "short": 2,
    "ushort": 2,
    "int": 4,
    "uint": 4,
    "float": 4,
    "long": 8,
    "ulong": 8,
    "longlong": 8,
    "ulonglong": 8,
    "double": 8,
}
_SCALAR_SIZES = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "uchar": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "ushort": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "signed int": 4,
    "uint": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "long": 8,
    "unsigned long": 8,
    "long long": 8,
    "unsigned long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "double": 8,
}
_INT_TYPES = r"(?:unsigned\s+|signed\s+)?(?:int|long\s+long|long|short|char|size_t|u?int\d+_t|unsigned)"


@dataclass(frozen=True)
class KernelSpan:
    """Where the entry kernel's body is, its template parameter names and its launch bounds text."""

    body_start: int
    body_end: int
    template_params: list[str]
    launch_bounds: str | None


def _matching(text: str, open_index: int, open_char: str, close_char: str) -> int:
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] == open_char:
            depth += 1
        elif text[index] == close_char:
            depth -= 1
            if depth == 0:
                return index
    return -1


def split_arguments(text: str) -> list[str]:
    """Split ``64, 8, Foo<1, 2>`` at top-level commas."""
    return [part.strip() for _, part in split_top_level(text) if part.strip()]


def global_kernels(stripped: str) -> dict[str, KernelSpan]:
    """Every ``__global__`` function with a body, by name."""
    spans: dict[str, KernelSpan] = {}
    for match in re.finditer(r"\b__global__\b", stripped):
        position, bounds = match.end(), None
        while True:
            paren = stripped.find("(", position)
            if paren < 0:
                break
            head = stripped[position:paren]
            if re.search(r"__launch_bounds__\s*$", head):
                close = _matching(stripped, paren, "(", ")")
                bounds = stripped[paren + 1 : close]
                position = close + 1
                continue
            name = re.search(r"(\w+)\s*$", head)
            close = _matching(stripped, paren, "(", ")")
            brace = stripped.find("{", close)
            semicolon = stripped.find(";", close)
            if name is None or close < 0 or brace < 0 or (0 <= semicolon < brace):
                break
            before = stripped[max(0, match.start() - 400) : match.start()]
            template = re.search(r"template\s*<([^{};]*)>\s*(?:extern\s+\"\s*\"\s*)?(?:static\s+)?$", before)
            params = [_template_param_name(p) for p in split_arguments(template.group(1))] if template else []
            spans[name.group(1)] = KernelSpan(brace, _matching(stripped, brace, "{", "}"), params, bounds)
            break
    return spans


def _template_param_name(declaration: str) -> str:
    name = re.search(r"(\w+)\s*(?:=.*)?$", declaration.strip(), re.S)
    return name.group(1) if name else ""


def constants(stripped: str, defines: Mapping[str, int | float | str]) -> dict[str, str]:
    """Names with a constant value: request defines, ``#define N 64`` and ``constexpr int N = 64;``."""
    values: dict[str, str] = {}
    for match in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]+)$", stripped, re.M):
        values[match.group(1)] = match.group(2).strip()
    pattern = rf"\b(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?{_INT_TYPES}\s+(\w+)\s*=\s*([^;]+);"
    for match in re.finditer(pattern, stripped):
        values.setdefault(match.group(1), match.group(2).strip())
    for name, value in defines.items():
        values[name] = str(value)
    return values


_ALLOWED_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: int(a / b),
    ast.Div: lambda a, b: int(a / b),
    ast.Mod: lambda a, b: a - b * int(a / b),
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
}


def evaluate(expression: str, names: Mapping[str, str], depth: int = 0) -> int | None:
    """An integer constant expression of C literals, + - * / % << >> and known names, or None."""
    text = re.sub(
        r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", lambda m: str(int(m.group(1), 0)), expression.strip()
    )
    if depth > 8 or not text or re.search(r"[^\w\s+\-*/%()<>]", text):
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return evaluate(names[node.id], names, depth + 1) if node.id in names else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        if isinstance(node, ast.BinOp) and type(node.op) in _ALLOWED_BINARY:
            left, right = value(node.left), value(node.right)
            if (
                left is None
                or right is None
                or (isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0)
            ):
                return None
            return _ALLOWED_BINARY[type(node.op)](left, right)
        return None

    return value(tree)


def _type_size(type_text: str, names: Mapping[str, str]) -> int | None:
    words = re.sub(r"\b(?:volatile|const|struct|__restrict__)\b", " ", type_text)
    words = " ".join(words.split())
    for _ in range(4):  # template type parameters resolve to the instance's type text
        if words in names and names[words] != words:
            words = " ".join(names[words].split())
    vector = re.fullmatch(r"([a-z]+)([1-4])", words)
    if vector and vector.group(1) in _VECTOR_SIZES:
        element, count = _VECTOR_SIZES[vector.group(1)], int(vector.group(2))
        alignment = {1: element, 2: 2 * element, 3: element, 4: min(4 * element, 16)}[count]
        return -(-element * count // alignment) * alignment
    return _SCALAR_SIZES.get(words)


def estimate(
    stripped: str,
    entry: str,
    shared: list[SharedDeclaration],
    defines: Mapping[str, int | float | str],
) -> tuple[int | None, int | None]:
    """(static shared bytes, launch-bounds thread limit) of the entry kernel; None where unknown."""
    kernels = global_kernels(stripped)
    span = kernels.get(entry_base_name(entry))
    if span is None:
        return None, None
    names = constants(stripped, defines)
    arguments = split_arguments(entry[entry.index("<") + 1 : entry.rindex(">")]) if "<" in entry else []
    for param, argument in zip(span.template_params, arguments, strict=False):
        if param:
            names[param] = argument
    limit = None
    if span.launch_bounds:
        first = split_arguments(span.launch_bounds)
        limit = evaluate(first[0], names) if first else None
    total: int | None = 0
    for decl in shared:
        if decl.extern:
            continue
        inside = span.body_start < decl.start < span.body_end
        other_kernel = any(s.body_start < decl.start < s.body_end for s in kernels.values() if s is not span)
        if other_kernel:
            continue
        if not inside or total is None:
            total = None
            continue
        size = 8 if decl.pointer else _type_size(decl.type_text, names)
        for dim in decl.dims:
            count = evaluate(dim, names)
            size = None if size is None or count is None else size * count
        total = None if size is None else total + size
    return total, limit
