"""A small, safe evaluator for the arithmetic in workload specs.

Shapes, launch dimensions, work models and tuning restrictions are written as expressions of the
case's size variables and the tuning knobs (``ceil_div(N, BLOCK)``, ``4 * (M*K + K*N)``). Spec files
come from users and from models, so they are never handed to Python's ``eval``: the text is parsed
into a syntax tree, every node is checked against a short whitelist, and the tree is walked here.

Arithmetic expressions allow numbers, names, ``+ - * / // %``, unary minus, parentheses and the
functions ``min``, ``max``, ``ceil_div``. Conditions (tuning restrictions) additionally allow
comparisons and ``and`` / ``or`` / ``not``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from .errors import ExpressionError

Number = int | float
_Evaluator = Callable[[Mapping[str, Number]], Number]


def _ceil_div(a: Number, b: Number) -> Number:
    if b == 0:
        raise ZeroDivisionError("ceil_div by zero")
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return math.ceil(a / b)


_FUNCTIONS: dict[str, tuple[Callable[..., Number], int | None]] = {
    "min": (min, None),
    "max": (max, None),
    "ceil_div": (_ceil_div, 2),
}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


@dataclass(frozen=True)
class Expression:
    """A parsed expression: its text, the names it reads, and a checked evaluator."""

    text: str
    names: frozenset[str]
    _evaluate: _Evaluator

    def __call__(self, variables: Mapping[str, Number]) -> Number:
        missing = self.names.difference(variables)
        if missing:
            known = ", ".join(sorted(variables)) or "none"
            raise ExpressionError(self.text, f"unknown name {sorted(missing)[0]!r} (known: {known})")
        try:
            return self._evaluate(variables)
        except ZeroDivisionError as exc:
            raise ExpressionError(self.text, f"division by zero ({exc})") from None

    def integer(self, variables: Mapping[str, Number], what: str = "value") -> int:
        """Evaluate and insist on a whole number, as shapes and launch dimensions need."""
        value = self(variables)
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):
            if not value.is_integer():
                raise ExpressionError(
                    self.text, f"{what} is {value}, not a whole number (use // or ceil_div)"
                )
            value = int(value)
        return value

    def __str__(self) -> str:
        return self.text


def parse_expression(text: str | int | float) -> Expression:
    """Parse an arithmetic expression (numbers pass through unchanged)."""
    return _parse(str(text).strip(), allow_conditions=False)


def parse_condition(text: str) -> Expression:
    """Parse a condition such as ``BLOCK_M * BLOCK_N <= 1024 and BLOCK_K % 4 == 0``."""
    return _parse(str(text).strip(), allow_conditions=True)


def evaluate(text: str | int | float, variables: Mapping[str, Number]) -> Number:
    return parse_expression(text)(variables)


@lru_cache(maxsize=4096)
def _parse(text: str, allow_conditions: bool) -> Expression:
    if not text:
        raise ExpressionError(text, "empty expression")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(text, f"syntax error at column {exc.offset or 0}") from None
    names: set[str] = set()
    evaluator = _build(tree.body, text, names, allow_conditions)
    return Expression(text, frozenset(names), evaluator)


def _build(node: ast.AST, text: str, names: set[str], conditions: bool) -> _Evaluator:
    """Turn one checked node into a closure; anything not whitelisted is an error."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
        return lambda _v: value
    if isinstance(node, ast.Name):
        name = node.id
        names.add(name)
        return lambda v: v[name]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _build(node.operand, text, names, conditions)
        if isinstance(node.op, ast.USub):
            return lambda v: -inner(v)
        return inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op = _BINARY[type(node.op)]
        left = _build(node.left, text, names, conditions)
        right = _build(node.right, text, names, conditions)
        return lambda v: op(left(v), right(v))
    if isinstance(node, ast.Call):
        return _build_call(node, text, names, conditions)
    if conditions:
        built = _build_condition(node, text, names)
        if built is not None:
            return built
    raise ExpressionError(text, f"{_describe(node)} is not allowed")


def _build_call(node: ast.Call, text: str, names: set[str], conditions: bool) -> _Evaluator:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
        allowed = ", ".join(_FUNCTIONS)
        raise ExpressionError(text, f"only the functions {allowed} may be called")
    function, arity = _FUNCTIONS[node.func.id]
    if (arity is not None and len(node.args) != arity) or not node.args:
        raise ExpressionError(text, f"{node.func.id} takes {arity or 'one or more'} arguments")
    arguments = [_build(arg, text, names, conditions) for arg in node.args]
    return lambda v: function(*(argument(v) for argument in arguments))


def _build_condition(node: ast.AST, text: str, names: set[str]) -> _Evaluator | None:
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        operands = [_build(n, text, names, True) for n in [node.left, *node.comparators]]
        ops = [_COMPARE[type(op)] for op in node.ops]

        def compare(v: Mapping[str, Number]) -> bool:
            values = [operand(v) for operand in operands]
            return all(op(a, b) for op, a, b in zip(ops, values, values[1:], strict=False))

        return compare
    if isinstance(node, ast.BoolOp):
        parts = [_build(n, text, names, True) for n in node.values]
        if isinstance(node.op, ast.And):
            return lambda v: all(part(v) for part in parts)
        return lambda v: any(part(v) for part in parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _build(node.operand, text, names, True)
        return lambda v: not inner(v)
    return None


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"the literal {node.value!r}"
    if isinstance(node, ast.Attribute):
        return "attribute access"
    if isinstance(node, ast.Subscript):
        return "indexing"
    if isinstance(node, ast.Compare | ast.BoolOp) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    ):
        return "a comparison (only tuning restrictions may compare)"
    if isinstance(node, ast.BinOp):
        return f"the operator {type(node.op).__name__}"
    return f"a {type(node).__name__} node"
