"""A documented subset of Druid's expression language, compiled to Spark columns.

Literals: numbers, 'strings', null. Identifiers: name or "quoted.name" (input fields, __time).
Operators, loosest first: ||  &&  == != < <= > >=  + -  * / %  ^  and unary - !.
Functions: concat upper lower strlen substring replace trim ltrim rtrim lpad rpad strpos
contains_string regexp_extract regexp_like like if nvl case_searched case_simple isnull notnull
abs ceil floor round sqrt exp log log10 pow div greatest least cast timestamp timestamp_floor
timestamp_format timestamp_extract.

Input fields are strings; in arithmetic they are read as numbers (doubles), as Druid coerces.
Comparisons and logic give booleans, which a transform outputs as 1 or 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasks.rows.expression_parser import ExpressionError, Node, parse
from tasks.spec.periods import parse_period

Resolver = Callable[[str], Any]


def compile_expression(text: str, field: Resolver) -> Any:
    """The Spark column of an expression; `field(name)` gives an input field's column."""
    return _Compiler(field).value(parse(text))


# how many arguments each function of fixed arity takes
ARITY = {
    **dict.fromkeys(("upper", "lower", "strlen", "trim", "ltrim", "rtrim", "isnull", "notnull"), 1),
    **dict.fromkeys(("abs", "ceil", "floor", "sqrt", "exp", "log", "log10"), 1),
    **dict.fromkeys(("nvl", "pow", "div", "contains_string", "like", "regexp_like"), 2),
    **dict.fromkeys(("cast", "timestamp_floor"), 2),
    **dict.fromkeys(("if", "replace", "lpad", "rpad"), 3),
}


class _Compiler:
    def __init__(self, field: Resolver) -> None:
        self.field = field

    def value(self, node: Node) -> Any:
        from pyspark.sql import functions as F

        if node.kind in ("number", "string"):
            return F.lit(node.value)
        if node.kind == "null":
            return F.lit(None)
        if node.kind == "ident":
            return self.field(node.value)
        if node.kind == "unary":
            inner = node.args[0]
            return ~self.boolean(inner) if node.value == "!" else -self.number(inner)
        if node.kind == "binary":
            return self.binary(node)
        return self.call(node.value, node.args)

    def number(self, node: Node) -> Any:
        if node.kind == "number":
            from pyspark.sql import functions as F

            return F.lit(node.value)
        if node.kind in ("ident", "string"):
            return self.value(node).try_cast("double")
        return self.value(node)

    def boolean(self, node: Node) -> Any:
        column = self.value(node)
        if node.kind in ("binary", "unary") and node.value in (
            "==",
            "!=",
            "<",
            "<=",
            ">",
            ">=",
            "&&",
            "||",
            "!",
        ):
            return column
        if node.kind == "call" and node.value in (
            "isnull",
            "notnull",
            "like",
            "regexp_like",
            "contains_string",
        ):
            return column
        return self.number(node) != 0

    def binary(self, node: Node) -> Any:
        from pyspark.sql import functions as F

        op, (left, right) = node.value, node.args
        if op in ("&&", "||"):
            a, b = self.boolean(left), self.boolean(right)
            return (a & b) if op == "&&" else (a | b)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            numeric = any(n.kind == "number" for n in (left, right))
            a = self.number(left) if numeric else self.value(left)
            b = self.number(right) if numeric else self.value(right)
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[
                op
            ]
        a, b = self.number(left), self.number(right)
        if op == "^":
            return F.pow(a, b)
        if op == "%":
            return F.try_mod(a, b) if hasattr(F, "try_mod") else a % b
        if op == "/":
            integral = (
                left.kind == right.kind == "number"
                and isinstance(left.value, int)
                and isinstance(right.value, int)
            )
            return F.floor(a / b).cast("long") if integral else F.try_divide(a, b)
        return {"+": a + b, "-": a - b, "*": a * b}[op]

    def call(self, name: str, args: tuple[Node, ...]) -> Any:
        if name in ARITY and len(args) != ARITY[name]:
            raise ExpressionError(f"{name}() takes {ARITY[name]} arguments, got {len(args)}")
        for family in (self._text_call, self._logic_call, self._number_call):
            found = family(name, args)
            if found is not None:
                return found
        return self._time(name, args)

    def _text(self, node: Node) -> Any:
        return self.value(node).cast("string")

    def _text_call(self, name: str, args: tuple[Node, ...]) -> Any | None:
        """The string functions; None for a name of another family."""
        from pyspark.sql import functions as F

        text = self._text
        if name == "concat":
            return F.concat(*[text(a) for a in args])
        if name in ("upper", "lower", "trim", "ltrim", "rtrim"):
            return getattr(F, name)(text(args[0]))
        if name == "strlen":
            return F.length(text(args[0]))
        if name == "substring":
            start = int(self.literal(args[1])) + 1
            length = int(self.literal(args[2])) if len(args) > 2 else -1
            column = text(args[0])
            return column.substr(start, 2**31 - 1) if length < 0 else column.substr(start, length)
        if name == "replace":
            return F.replace(text(args[0]), text(args[1]), text(args[2]))
        if name in ("lpad", "rpad"):
            return getattr(F, name)(
                text(args[0]), int(self.literal(args[1])), str(self.literal(args[2]))
            )
        if name == "strpos":
            return F.instr(text(args[0]), str(self.literal(args[1]))) - 1
        if name == "contains_string":
            return F.coalesce(text(args[0]).contains(text(args[1])), F.lit(False))
        if name == "regexp_extract":
            index = int(self.literal(args[2])) if len(args) > 2 else 0
            extracted = F.regexp_extract(text(args[0]), str(self.literal(args[1])), index)
            return F.when(extracted != "", extracted)
        if name == "regexp_like":
            return F.coalesce(text(args[0]).rlike(str(self.literal(args[1]))), F.lit(False))
        if name == "like":
            return F.coalesce(text(args[0]).like(str(self.literal(args[1]))), F.lit(False))
        return None

    def _logic_call(self, name: str, args: tuple[Node, ...]) -> Any | None:
        """Conditionals and null tests; None for a name of another family."""
        from pyspark.sql import functions as F

        v, b = self.value, self.boolean
        if name == "if":
            return F.when(b(args[0]), v(args[1])).otherwise(v(args[2]))
        if name == "nvl":
            return F.coalesce(v(args[0]), v(args[1]))
        if name == "case_searched":
            return self._case(
                [(b(c), v(r)) for c, r in zip(args[0::2], args[1::2], strict=False)],
                v(args[-1]) if len(args) % 2 else None,
            )
        if name == "case_simple":
            subject = v(args[0])
            rest = args[1:]
            pairs = [(subject == v(c), v(r)) for c, r in zip(rest[0::2], rest[1::2], strict=False)]
            return self._case(pairs, v(rest[-1]) if len(rest) % 2 else None)
        if name in ("isnull", "notnull"):
            return v(args[0]).isNull() if name == "isnull" else v(args[0]).isNotNull()
        return None

    def _number_call(self, name: str, args: tuple[Node, ...]) -> Any | None:
        """Arithmetic functions and casts; None for a name of another family."""
        from pyspark.sql import functions as F

        n = self.number
        if name in ("abs", "ceil", "floor", "sqrt", "exp", "log10"):
            return getattr(F, name)(n(args[0]))
        if name == "log":
            return F.log(n(args[0]))
        if name == "round":
            scale = int(self.literal(args[1])) if len(args) > 1 else 0
            return F.round(n(args[0]), scale)
        if name == "pow":
            return F.pow(n(args[0]), n(args[1]))
        if name == "div":
            return F.floor(F.try_divide(n(args[0]), n(args[1]))).cast("long")
        if name in ("greatest", "least"):
            return getattr(F, name)(*[n(a) for a in args])
        if name == "cast":
            target = {"LONG": "bigint", "DOUBLE": "double", "FLOAT": "float", "STRING": "string"}
            kind = str(self.literal(args[1])).upper()
            if kind not in target:
                raise ExpressionError(f"cast() to {kind} is not supported")
            source = self.value(args[0])
            if kind == "LONG" and args[0].kind in ("ident", "string"):
                source = source.try_cast("double")
            return source.try_cast(target[kind])
        return None

    @staticmethod
    def literal(node: Node) -> Any:
        """A constant argument (a length, a pattern, a unit)."""
        if node.kind in ("number", "string"):
            return node.value
        if node.kind == "unary" and node.value == "-" and node.args[0].kind == "number":
            return -node.args[0].value
        raise ExpressionError("this argument must be a literal")

    @staticmethod
    def _case(pairs: list[tuple[Any, Any]], otherwise: Any) -> Any:
        from pyspark.sql import functions as F

        column = F.when(*pairs[0])
        for condition, result in pairs[1:]:
            column = column.when(condition, result)
        return column.otherwise(otherwise) if otherwise is not None else column

    def _time(self, name: str, args: tuple[Node, ...]) -> Any:
        from pyspark.sql import functions as F

        from tasks.rows.timestamps import parse as parse_time

        if name == "timestamp":
            fmt = str(self.literal(args[1])) if len(args) > 1 else "iso"
            return parse_time(self.value(args[0]).cast("string"), fmt)
        millis = self.number(args[0]).cast("long")
        if name == "timestamp_floor":
            size = parse_period(str(self.literal(args[1]))).to_millis()
            return F.floor(millis / F.lit(size)).cast("long") * F.lit(size)
        if name == "timestamp_format":
            pattern = (
                str(self.literal(args[1])) if len(args) > 1 else "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
            )
            return F.date_format(F.timestamp_millis(millis), pattern)
        if name == "timestamp_extract":
            unit = str(self.literal(args[1])).upper()
            parts = {
                "SECOND": "second",
                "MINUTE": "minute",
                "HOUR": "hour",
                "DAY": "day",
                "DOW": "dayofweek",
                "DOY": "dayofyear",
                "WEEK": "weekofyear",
                "MONTH": "month",
                "QUARTER": "quarter",
                "YEAR": "year",
            }
            if unit == "EPOCH":
                return F.floor(millis / 1000).cast("long")
            if unit not in parts:
                raise ExpressionError(f"timestamp_extract unit {unit} is not supported")
            extracted = getattr(F, parts[unit])(F.timestamp_millis(millis))
            return ((extracted + 5) % 7 + 1) if unit == "DOW" else extracted
        raise ExpressionError(f"function {name}() is not supported yet")


def render(column: Any, data_type: Any) -> Any:
    """A transform's value as the pipeline's string field: 1/0 for booleans, 5 not 5.0."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, DoubleType, FloatType

    if isinstance(data_type, BooleanType):
        return F.when(column, F.lit("1")).when(~column, F.lit("0"))
    if isinstance(data_type, DoubleType | FloatType):
        integral = (column == F.floor(column)) & (F.abs(column) < F.lit(1e15))
        return F.when(integral, column.cast("long").cast("string")).otherwise(column.cast("string"))
    return column.cast("string")
