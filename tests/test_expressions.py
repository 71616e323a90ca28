import pytest

from kernelopt_jupyter.core.errors import ExpressionError
from kernelopt_jupyter.core.expressions import evaluate, parse_condition, parse_expression


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ceil_div(N, 256)", 4),
        ("ceil_div(1024, 256)", 4),
        ("min(N, 512) + max(2, 3)", 515),
        ("N // 3 * 2", 666),
        ("N % 7", 1000 % 7),
        ("-N + 2 * (N - 1)", 998),
        ("4 * (N + 1) / 2", 2002.0),
        (12, 12),
        ("1.5e3", 1500.0),
    ],
)
def test_arithmetic(text, expected):
    assert evaluate(text, {"N": 1000}) == expected


def test_names_are_collected():
    assert parse_expression("ceil_div(M, BM) * max(N, K)").names == {"M", "BM", "N", "K"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("__import__('os')", "only the functions"),
        ("N.bit_length()", "only the functions"),
        ("x[0]", "indexing"),
        ("N ** 2", "Pow"),
        ("lambda: 1", "Lambda"),
        ("N < 3", "only tuning restrictions"),
        ("'text'", "literal"),
        ("min()", "arguments"),
        ("ceil_div(1)", "takes 2"),
        ("N +", "syntax error"),
        ("", "empty"),
    ],
)
def test_rejected(text, fragment):
    with pytest.raises(ExpressionError) as info:
        parse_expression(text)({"N": 4, "x": 1})
    assert fragment in str(info.value)


def test_unknown_name_lists_known():
    with pytest.raises(ExpressionError, match=r"unknown name 'Q'.*known: N"):
        evaluate("Q + 1", {"N": 1})


def test_division_by_zero_is_an_expression_error():
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate("N // (N - N)", {"N": 3})
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate("ceil_div(N, 0)", {"N": 3})


def test_integer_insists_on_whole_numbers():
    assert parse_expression("N / 2").integer({"N": 8}) == 4
    with pytest.raises(ExpressionError, match="not a whole number"):
        parse_expression("N / 3").integer({"N": 8}, "grid")


def test_conditions():
    condition = parse_condition("BM * BN <= 4096 and BM % TM == 0 and not (BM == 8 or BN > 128)")
    assert condition({"BM": 64, "BN": 64, "TM": 8})
    assert not condition({"BM": 64, "BN": 256, "TM": 8})
    assert not condition({"BM": 8, "BN": 64, "TM": 8})
    assert parse_condition("1 < BM < 100")({"BM": 50})
    assert not parse_condition("1 < BM < 100")({"BM": 100})
