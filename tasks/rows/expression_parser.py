"""Druid's expression language, the documented subset Sluicegate runs (tasks/rows/expressions.py
compiles it to Spark columns): tokens, a precedence-climbing parser and the syntax tree."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<string>'(?:[^'\\]|\\.)*')|(?P<quoted>\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>\|\||&&|==|!=|<=|>=|[-+*/%^<>!(),]))"
)
_BINARY = [("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%")]
FUNCTIONS = {
    "concat",
    "upper",
    "lower",
    "strlen",
    "substring",
    "replace",
    "trim",
    "ltrim",
    "rtrim",
    "lpad",
    "rpad",
    "strpos",
    "contains_string",
    "regexp_extract",
    "regexp_like",
    "like",
    "if",
    "nvl",
    "case_searched",
    "case_simple",
    "isnull",
    "notnull",
    "abs",
    "ceil",
    "floor",
    "round",
    "sqrt",
    "exp",
    "log",
    "log10",
    "pow",
    "div",
    "greatest",
    "least",
    "cast",
    "timestamp",
    "timestamp_floor",
    "timestamp_format",
    "timestamp_extract",
}


class ExpressionError(ValueError):
    """The expression cannot be parsed, or uses what the subset does not have."""


@dataclass(frozen=True)
class Node:
    kind: str  # number, string, null, ident, unary, binary, call
    value: Any = None
    args: tuple[Node, ...] = ()


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ExpressionError(
                f"unexpected character at {position}: {text[position : position + 10]!r}"
            )
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.index = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise ExpressionError(
                f"expected {value or 'more'} but found {token[1] if token else 'the end'}"
            )
        self.index += 1
        return token

    def parse(self) -> Node:
        node = self.binary(0)
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def binary(self, level: int) -> Node:
        if level == len(_BINARY):
            return self.power()
        node = self.binary(level + 1)
        while (
            (token := self.peek()) is not None and token[0] == "op" and token[1] in _BINARY[level]
        ):
            self.take()
            node = Node("binary", token[1], (node, self.binary(level + 1)))
        return node

    def power(self) -> Node:
        node = self.unary()
        token = self.peek()
        if token is not None and token[1] == "^":
            self.take()
            return Node("binary", "^", (node, self.power()))
        return node

    def unary(self) -> Node:
        token = self.peek()
        if token is not None and token[0] == "op" and token[1] in ("-", "!"):
            self.take()
            return Node("unary", token[1], (self.unary(),))
        return self.atom()

    def atom(self) -> Node:
        kind, text = self.take()
        if kind == "number":
            return Node("number", float(text) if any(c in text for c in ".eE") else int(text))
        if kind == "string":
            return Node("string", bytes(text[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "quoted":
            return Node("ident", text[1:-1].replace('\\"', '"'))
        if kind == "name":
            token = self.peek()
            if token is not None and token[1] == "(":
                return self.call(text)
            return Node("null") if text == "null" else Node("ident", text)
        if text == "(":
            node = self.binary(0)
            self.take(")")
            return node
        raise ExpressionError(f"unexpected {text!r}")

    def call(self, name: str) -> Node:
        if name not in FUNCTIONS:
            raise ExpressionError(f"function {name}() is not supported yet")
        self.take("(")
        args: list[Node] = []
        if self.peek() is not None and self.peek()[1] != ")":  # type: ignore[index]
            args.append(self.binary(0))
            while self.peek() is not None and self.peek()[1] == ",":  # type: ignore[index]
                self.take(",")
                args.append(self.binary(0))
        self.take(")")
        return Node("call", name, tuple(args))


def parse(text: str) -> Node:
    return _Parser(text).parse()


def identifiers(node: Node) -> set[str]:
    found = {node.value} if node.kind == "ident" else set()
    for arg in node.args:
        found |= identifiers(arg)
    return found
