import pytest

from tasks.rows.expression_parser import ExpressionError, Node, identifiers, parse


def test_precedence_and_associativity() -> None:
    tree = parse("a + b * 2 ^ 3 ^ 2 > 10 && !c || d == 'x'")
    assert tree.kind == "binary" and tree.value == "||"
    left = tree.args[0]
    assert left.value == "&&"
    comparison = left.args[0]
    assert comparison.value == ">"
    sum_ = comparison.args[0]
    assert sum_.value == "+" and sum_.args[1].value == "*"
    power = sum_.args[1].args[1]
    assert power.value == "^" and power.args[1].value == "^"  # right-associative


def test_literals_identifiers_and_calls() -> None:
    tree = parse("concat(\"kafka.key\", '-', upper(page), 1.5, 2, null)")
    assert tree == Node(
        "call",
        "concat",
        (
            Node("ident", "kafka.key"),
            Node("string", "-"),
            Node("call", "upper", (Node("ident", "page"),)),
            Node("number", 1.5),
            Node("number", 2),
            Node("null"),
        ),
    )
    assert identifiers(parse("if(x > 1, y, z + __time)")) == {"x", "y", "z", "__time"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a +", "expected more"),
        ("(a + b", "expected )"),
        ("a b", "unexpected 'b'"),
        ("frobnicate(a)", "function frobnicate() is not supported yet"),
        ("a $ b", "unexpected character"),
        ("", "expected more"),
    ],
)
def test_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)
