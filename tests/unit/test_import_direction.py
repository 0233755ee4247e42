"""The direction of imports: `supervisor/` may import `tasks/`, never the reverse; dev-only code
(`supervisor/devstack`) is reached from the CLI and the testkit alone, the testkit from tests
and benchmarks alone; the overlord's packages form no cycle; the routes, the clients and the
models do not reach the metadata DB's tables; the overlord imports only the public contract of
`tasks/`; `bench/` never imports `tests/`. Every import counts, those inside functions too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules(package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def imports(path: Path) -> set[str]:
    """Every module an import statement in the file names (absolute imports; `from a import
    b` names both a and a.b, since b may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def unit(module: str) -> str | None:
    """The part of the overlord a module belongs to: `supervisor.controller` for
    supervisor.controller.plan, `supervisor.settings` for supervisor.settings; `tasks` for
    anything under tasks/; None outside the project."""
    parts = module.split(".")
    if parts[0] == "tasks":
        return "tasks"
    if parts[0] != "supervisor":
        return None
    return ".".join(parts[:2])


def graph() -> dict[str, dict[str, set[str]]]:
    """unit -> unit it imports -> the importing modules (for the failure message)."""
    edges: dict[str, dict[str, set[str]]] = {}
    for package in ("supervisor", "tasks"):
        for module, path in modules(package):
            source = unit(module)
            assert source is not None
            for name in imports(path):
                target = unit(name)
                if target is not None and target != source and _exists(name):
                    edges.setdefault(source, {}).setdefault(target, set()).add(module)
    return edges


def _exists(name: str) -> bool:
    base = ROOT / name.replace(".", "/")
    return base.with_suffix(".py").exists() or base.is_dir()


def importing(packages: tuple[str, ...], prefix: str) -> dict[str, list[str]]:
    """The modules of `packages` that import names starting with `prefix`, and those names."""
    found = {
        module: sorted(n for n in imports(path) if n == prefix or n.startswith(prefix + "."))
        for package in packages
        for module, path in modules(package)
    }
    return {module: names for module, names in found.items() if names}


def test_tasks_never_import_the_overlord() -> None:
    assert importing(("tasks",), "supervisor") == {}


def test_dev_only_code_is_reached_from_the_cli_alone() -> None:
    allowed = ("supervisor.cli", "supervisor.devstack", "supervisor.testkit")
    offenders = {
        module
        for module, path in modules("supervisor")
        if not module.startswith(allowed)
        and any(n.startswith("supervisor.devstack") for n in imports(path))
    }
    assert offenders == set()
    into_cli = {
        module
        for module, path in modules("supervisor")
        if module.startswith("supervisor.devstack")
        and any(n.startswith("supervisor.cli") for n in imports(path))
    }
    assert into_cli == set()


# The public contract of tasks/ that the overlord may import: its top-level modules (the task
# protocol, partitions and offsets, deep storage, Kafka properties and offsets, logs, what the
# pipeline supports and the checks of binary formats, granularities, jars) and the spec
# models. What runs in a task lives in its subpackages (runtime, reading, rows, output, spark).
# One exception: the CLI builds Spark sessions (`sluicegate sql`) and the driver's class
# archive (`make setup`).
SUBPACKAGES = ("runtime", "reading", "rows", "output", "spark")
CLI_MAY_USE = ("tasks.spark",)


def contract(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "tasks" and (len(parts) < 2 or parts[1] not in SUBPACKAGES)


def test_the_overlord_imports_only_the_tasks_contract() -> None:
    offenders = {
        module: sorted(
            n
            for n in imports(path)
            if n.split(".")[0] == "tasks"
            and _exists(n)
            and not contract(n)
            and not (module.startswith("supervisor.cli") and n.startswith(CLI_MAY_USE))
        )
        for module, path in modules("supervisor")
    }
    assert {m: names for m, names in offenders.items() if names} == {}


def test_the_contract_check_tells_the_contract_from_the_rest() -> None:
    assert contract("tasks.protocol") and contract("tasks.spec.errors") and contract("tasks")
    assert not contract("tasks.runtime.indexer") and not contract("tasks.rows")


def test_the_testkit_is_reached_from_tests_and_benchmarks_alone() -> None:
    reaching = importing(("supervisor", "tasks"), "supervisor.testkit")
    assert [m for m in reaching if not m.startswith("supervisor.testkit")] == []


def test_benchmarks_never_import_the_tests() -> None:
    assert importing(("bench",), "tests") == {}


def test_routes_clients_and_models_do_not_import_the_db() -> None:
    layers = ("supervisor/api", "supervisor/clients", "supervisor/model")
    assert importing(layers, "supervisor.db") == {}, "they reach the DB through services"


def test_the_overlord_packages_form_no_cycle() -> None:
    edges = graph()

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            for target in edges.get(node, {}):
                if target == goal:
                    return True
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return False

    cycles = sorted(
        f"{source} -> {target} (in {sorted(importers)})"
        for source, targets in edges.items()
        for target, importers in targets.items()
        if reaches(target, source)
    )
    assert cycles == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "late.py"
    module.write_text("def f():\n    from supervisor.devstack.kafka import LocalKafka\n")
    assert "supervisor.devstack.kafka" in imports(module)
    assert unit("supervisor.devstack.kafka") == "supervisor.devstack"
    assert unit("supervisor.settings") == "supervisor.settings"
