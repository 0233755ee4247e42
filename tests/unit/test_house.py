"""The size of the rooms: every module of `supervisor/` and `tasks/` at most 400 lines, no
function over 80 (STYLE.md: past ~400 lines a module is split; a long function hides a
second one). What is still over is listed by name and size; the test fails when another
goes over, when a listed one grows, or when one falls within the bound (strike it off), so
the lists only shrink."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE_LINES = 400
FUNCTION_LINES = 80

# issue 42: each to be split
MODULES_OVER: dict[str, int] = {}
FUNCTIONS_OVER: dict[str, int] = {}


def sources() -> Iterator[tuple[str, Path]]:
    for package in ("supervisor", "tasks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path


def module_sizes() -> dict[str, int]:
    return {name: len(path.read_text().splitlines()) for name, path in sources()}


def function_sizes() -> dict[str, int]:
    found: dict[str, int] = {}
    for name, path in sources():
        for node in ast.walk(ast.parse(path.read_text(), name)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                key = f"{name}:{node.name}"
                found[key] = max(found.get(key, 0), node.end_lineno - node.lineno + 1)
    return found


def over(sizes: dict[str, int], bound: int) -> dict[str, int]:
    return {name: size for name, size in sizes.items() if size > bound}


def check(found: dict[str, int], listed: dict[str, int]) -> None:
    assert set(found) - set(listed) == set(), "over the bound: split them"
    assert set(listed) - set(found) == set(), "within the bound now: strike them off"
    grown = {name: size for name, size in found.items() if size > listed[name]}
    assert grown == {}, "grown past their listed size"


def test_modules_stay_within_their_bound() -> None:
    check(over(module_sizes(), MODULE_LINES), MODULES_OVER)


def test_functions_stay_within_their_bound() -> None:
    check(over(function_sizes(), FUNCTION_LINES), FUNCTIONS_OVER)


def test_the_measure_counts_a_long_function(tmp_path: Path) -> None:
    source = "def f():\n" + "    x = 1\n" * 90
    tree = ast.parse(source)
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef) and node.end_lineno == 91
    assert over({"f": node.end_lineno - node.lineno + 1}, FUNCTION_LINES) == {"f": 91}
