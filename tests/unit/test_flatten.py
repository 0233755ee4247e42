"""flattenSpec paths: what is read (as Spark's JSONPath) and what is refused, naming the field."""

from __future__ import annotations

import pytest

from tasks.rows.flatten import WILDCARD, Field, jq_steps, json_path_steps, parse


@pytest.mark.parametrize(
    ("expr", "steps"),
    [
        ("$", ()),
        ("$.a", ("a",)),
        ("$.a.b_c.d1", ("a", "b_c", "d1")),
        ("$['a b']['c']", ("a b", "c")),
        ('$["quoted"]', ("quoted",)),
        ("$.list[0]", ("list", 0)),
        ("$.list[*].x", ("list", WILDCARD, "x")),
        ("$.map.*", ("map", WILDCARD)),
        ("$.a-b", ("a-b",)),
    ],
)
def test_json_paths_read(expr: str, steps: tuple) -> None:
    assert json_path_steps(expr) == steps


@pytest.mark.parametrize(
    ("expr", "steps"),
    [
        (".", ()),
        (".a", ("a",)),
        (".a.b", ("a", "b")),
        ('."a b"', ("a b",)),
        ('.["a b"].c', ("a b", "c")),
        (".thing.food[1]", ("thing", "food", 1)),
        (".list[]", ("list", WILDCARD)),
    ],
)
def test_jq_paths_read(expr: str, steps: tuple) -> None:
    assert jq_steps(expr) == steps


@pytest.mark.parametrize(
    "expr", ["a.b", "$..a", "$.a[?(@.b > 1)]", "$.a.length()", "$.a[", "$.a[-1]", "$[1:2]"]
)
def test_json_paths_refused(expr: str) -> None:
    with pytest.raises(ValueError):
        json_path_steps(expr)


@pytest.mark.parametrize("expr", ["a", ".a | length", ".a[1:2]", "map(.x)", ".a.b?"])
def test_jq_paths_refused(expr: str) -> None:
    with pytest.raises(ValueError):
        jq_steps(expr)


def test_a_field_renders_as_spark_json_path() -> None:
    assert Field("x", ("a", 0, WILDCARD, "b c")).json_path == "$.a[0][*]['b c']"
    assert Field("x", ()).json_path == "$"


def test_a_flatten_spec_with_every_field_type() -> None:
    spec, problems = parse(
        {
            "useFieldDiscovery": False,
            "fields": [
                {"type": "root", "name": "page"},
                {"type": "root", "name": "renamed", "expr": "user"},
                {"type": "path", "name": "city", "expr": "$.geo.city"},
                {"type": "jq", "name": "first", "expr": ".tags[0]"},
                {"type": "tree", "name": "deep", "nodes": ["a", "b"]},
            ],
        },
        "flattenSpec",
    )
    assert problems == [] and spec is not None and not spec.discover
    assert [(f.name, f.json_path) for f in spec.fields] == [
        ("page", "$.page"),
        ("renamed", "$.user"),
        ("city", "$.geo.city"),
        ("first", "$.tags[0]"),
        ("deep", "$.a.b"),
    ]
    assert parse({}, "f")[0] == parse({"fields": []}, "f")[0]
    assert parse(None, "f") == (None, [])


def test_flatten_spec_problems_name_their_field() -> None:
    _, problems = parse(
        {
            "useFieldDiscovery": "yes",
            "fields": [
                {"type": "path", "name": "a", "expr": "$..x"},
                {"type": "jq", "name": "b"},
                {"type": "tree", "name": "c", "nodes": []},
                {"type": "xpath", "name": "d", "expr": "/x"},
                {"type": "root"},
                {"type": "root", "name": "e"},
                {"type": "root", "name": "e"},
                "f",
            ],
        },
        "spec.ioConfig.inputFormat.flattenSpec",
    )
    fields = [field.removeprefix("spec.ioConfig.inputFormat.flattenSpec.") for field, _ in problems]
    assert fields == [
        "useFieldDiscovery",
        "fields[0].expr",
        "fields[1].expr",
        "fields[2].nodes",
        "fields[3].type",
        "fields[4].name",
        "fields[6].name",
        "fields[7]",
    ]
    assert parse({"fields": {}}, "f")[1] == [("f.fields", "must be a list")]
    assert parse([], "f")[1] == [("f", "must be an object")]
