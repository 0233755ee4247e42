"""One definition of the task runtimes' arguments (tasks/runtime_args.py): what a runner
writes from its settings (supervisor/runner/spawn.py) is what each runtime reads back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.runner.spawn import runtime_args
from supervisor.settings import Settings
from tasks.runtime import process, shared
from tasks.runtime_args import RuntimeArgs


def test_both_runtimes_read_back_what_a_runner_writes(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    settings = Settings(
        deep_storage=tmp_path / "deep",
        work_dir=tmp_path / "work",
        task_master="spark://10.0.0.1:7077",
        task_cores=3,
        task_executor_memory="2g",
        task_driver_memory="3g",
        task_fixed_heap=True,
        task_malloc_arenas=6,
        tls_cert=cert,
        tls_key=key,
        log_format="json",
        publish_niceness=5,
        orphan_timeout_s=90,
    )
    args = runtime_args(settings, "10.0.0.2", 4100, tmp_path / "token")
    assert args.tls_cert == cert.resolve() and args.cores == 3 and args.host == "10.0.0.2"
    assert args.orphan_timeout_s == 90
    assert args.driver_memory == "3g" and args.fixed_heap  # the shared runtime's heap, fixed
    assert args.malloc_arenas == 6
    extra = ["--payload", "p.json", "--work-dir", "w", "--publish-niceness", "5"]
    read = process.parse_args([*args.argv(), *extra])
    assert RuntimeArgs.of(read) == args and read.publish_niceness == 5
    read = shared.parse_args([*args.argv(), "--tasks-dir", "t"])
    assert RuntimeArgs.of(read) == args and read.tasks_dir == Path("t")


def test_without_tls_no_certificate_is_passed(tmp_path: Path) -> None:
    settings = Settings(deep_storage=tmp_path / "deep", work_dir=tmp_path / "work")
    args = runtime_args(settings, "127.0.0.1", 4100, tmp_path / "token")
    assert "--tls-cert" not in args.argv()
    assert RuntimeArgs.of(shared.parse_args([*args.argv(), "--tasks-dir", "t"])) == args


def test_only_a_shared_application_takes_its_heap_whole(tmp_path: Path) -> None:
    settings = Settings(deep_storage=tmp_path / "deep", work_dir=tmp_path / "work")
    assert runtime_args(settings, "127.0.0.1", 4100, tmp_path / "token").fixed_heap
    settings = Settings(
        deep_storage=tmp_path / "deep", work_dir=tmp_path / "work", task_runtime="process"
    )
    args = runtime_args(settings, "127.0.0.1", 4100, tmp_path / "token")
    assert not args.fixed_heap and "--fixed-heap" not in args.argv()
    assert (
        RuntimeArgs.of(process.parse_args([*args.argv(), "--payload", "p", "--work-dir", "w"]))
        == args
    )


def test_the_arenas_bound_goes_to_the_jvms_environment_unless_the_operator_set_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tasks.spark.session import limit_arenas

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    limit_arenas(0)  # glibc's own
    assert "MALLOC_ARENA_MAX" not in os.environ
    limit_arenas(4)
    assert os.environ["MALLOC_ARENA_MAX"] == "4"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")  # the operator's
    limit_arenas(4)
    assert os.environ["MALLOC_ARENA_MAX"] == "2"
