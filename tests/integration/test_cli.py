"""The `sluicegate` CLI against a running service: outputs and exit codes, errors included."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from supervisor.cli import main
from supervisor.net import free_port, wait_for_port
from supervisor.testkit.service import RunningService
from supervisor.testkit.waits import wait_for
from tests.specs import spec


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "wiki.json"
    path.write_text(json.dumps(spec("wiki")))
    return path


@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_supervisor_commands(service: RunningService, spec_file: Path, capsys) -> None:
    url = ["supervisor", "--url", service.url]
    assert run(capsys, *url, "submit", str(spec_file)) == (0, "supervisor wiki submitted\n", "")
    code, out, _ = run(capsys, *url, "-o", "json", "submit", str(spec_file), "--skip-if-unmodified")
    assert (code, json.loads(out)) == (0, {"id": "wiki"})

    code, out, _ = run(capsys, *url, "list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["ID", "DATASOURCE", "STATE"]
    assert row.split()[:3] == ["wiki", "wiki", "PENDING"]
    code, out, _ = run(capsys, *url, "-o", "json", "list")
    assert json.loads(out)[0]["id"] == "wiki"

    code, out, _ = run(capsys, *url, "get", "wiki")
    assert code == 0
    assert ["topic", "wiki-edits"] in [line.split() for line in out.splitlines()]
    code, out, _ = run(capsys, *url, "-o", "json", "get", "wiki")
    assert json.loads(out)["spec"]["ioConfig"]["topic"] == "wiki-edits"

    assert run(capsys, *url, "suspend", "wiki") == (0, "supervisor wiki suspended\n", "")
    code, _, err = run(capsys, *url, "suspend", "wiki")
    assert (code, err) == (1, "error: 400: [wiki] is already suspended\n")
    assert run(capsys, *url, "resume", "wiki") == (0, "supervisor wiki resumed\n", "")

    code, out, _ = run(capsys, *url, "history", "wiki")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["VERSION", "STATE"]
    assert [line.split()[1] for line in lines[1:]] == ["running", "suspended", "running"]
    code, out, _ = run(capsys, *url, "-o", "json", "history", "wiki", "--count", "1")
    assert len(json.loads(out)) == 1

    code, _, err = run(capsys, *url, "terminate", "wiki")  # no terminal to say yes: aborted
    assert (code, err.splitlines()[-1]) == (130, "error: aborted")
    assert err.startswith("Terminate supervisor wiki? Its tasks publish and stop. [y/N]")
    assert run(capsys, *url, "terminate", "wiki", "--yes") == (
        0,
        "supervisor wiki terminated\n",
        "",
    )
    assert run(capsys, *url, "list") == (0, "no supervisors\n", "")
    code, out, _ = run(capsys, *url, "history", "wiki")
    assert out.splitlines()[1].split()[1] == "terminated"


@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_cli_errors_are_one_line_with_exit_codes(
    service: RunningService, spec_file: Path, tmp_path: Path, capsys
) -> None:
    url = ["supervisor", "--url", service.url]
    code, out, err = run(capsys, *url, "get", "nope")
    assert (code, out, err) == (1, "", "error: 404: [nope] does not exist\n")

    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    code, _, err = run(capsys, *url, "submit", str(bad))
    assert code == 2 and err.startswith(f"error: {bad} is not valid JSON") and err.count("\n") == 1

    code, _, err = run(capsys, *url, "submit", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read" in err and err.count("\n") == 1

    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps(spec("wiki", taskCount=0)))
    code, _, err = run(capsys, *url, "submit", str(invalid))
    assert code == 1 and "spec.ioConfig.taskCount" in err and err.count("\n") == 1

    down = f"http://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, "supervisor", "--url", down, "list")
    assert code == 3 and err.startswith(f"error: cannot reach the service at {down}")

    code, _, err = run(capsys, *url, "frobnicate")
    assert code == 2 and err.startswith("error: No such command") and err.count("\n") == 1
    code, _, err = run(capsys, *url, "-o", "yaml", "list")
    assert code == 2 and err.count("\n") == 1


# Every command of every group talking to the service, with its arguments, and what puts the
# state back after it (so that the second form of it meets the state the first met)
EVERY_COMMAND: list[tuple[str, list[str], list[list[str]]]] = [
    ("supervisor", ["submit", "{spec}"], [["suspend", "wiki"]]),
    ("supervisor", ["list"], []),
    ("supervisor", ["get", "wiki"], []),
    ("supervisor", ["history", "wiki", "--count", "2"], []),
    ("supervisor", ["status", "wiki"], []),
    ("supervisor", ["health", "wiki"], []),
    ("supervisor", ["stats", "wiki"], []),
    ("supervisor", ["handoff", "wiki", "0"], []),
    ("supervisor", ["reset", "wiki", "--yes"], []),
    ("supervisor", ["reset-offsets", "wiki", "-p", "0=5", "--yes"], []),
    ("supervisor", ["resume", "wiki"], [["suspend", "wiki"]]),
    ("supervisor", ["suspend", "wiki"], []),
    ("supervisor", ["resume-all", "--yes"], [["suspend-all", "--yes"]]),
    ("supervisor", ["suspend-all", "--yes"], []),
    ("supervisor", ["terminate", "wiki", "--yes"], [["submit", "{spec}"], ["suspend", "wiki"]]),
    ("supervisor", ["terminate-all", "--yes"], [["submit", "{spec}"], ["suspend", "wiki"]]),
    ("task", ["list"], []),
    ("task", ["status", "index_kafka_nope"], []),
    ("task", ["reports", "index_kafka_nope"], []),
    ("task", ["log", "index_kafka_nope"], []),
    ("task", ["shutdown", "index_kafka_nope", "--yes"], []),
    ("task", ["shutdown-all", "wiki", "--yes"], []),
    ("segments", ["list", "wiki"], []),
    ("segments", ["mark-unused", "wiki", "--interval", "2026-01-01/2026-01-02"], []),
    ("segments", ["mark-used", "wiki", "--interval", "2026-01-01/2026-01-02"], []),
    ("segments", ["drop", "wiki", "--yes"], []),
    ("segments", ["kill", "wiki", "2026-01-01/2026-01-02", "--yes"], []),
    ("rules", ["show", "wiki"], []),
    ("rules", ["set", "wiki", "{spec}"], []),  # not a list of rules: the same 400 both ways
    ("compaction", ["status"], []),
    ("compaction", ["show", "wiki"], []),
    ("compaction", ["set", "{spec}"], []),
    ("compaction", ["delete", "wiki"], []),
    ("compaction", ["cluster"], []),
    ("workers", ["list"], []),
    ("workers", ["disable", "127.0.0.1:1"], []),
    ("workers", ["enable", "127.0.0.1:1"], []),
]


def test_a_command_with_its_own_api_flag_is_refused_when_added() -> None:
    import click

    from supervisor.cli.common import api_group

    group = api_group("example", "An example.")

    @click.command("mine")
    @click.option("-o", "offset")
    def mine(offset: str) -> None: ...

    with pytest.raises(TypeError, match="command mine has its own -o"):
        group.add_command(mine)


def _stable(result: tuple[int, str, str]) -> tuple[int, str, str]:
    """A command's result without the time its status was made (each pass makes it anew) and
    a kill task's id (each kill is a task of its own)."""
    code, out, err = result
    out = re.sub(r'"generationTime": "[^"]*"', "", out)
    return code, re.sub(r'"task": "api-issued_kill_[^"]*"', "", out), err


def test_every_api_command_is_listed_for_the_flags_test() -> None:
    from supervisor.cli import cli
    from supervisor.cli.common import ApiGroup

    commands = {
        (name, command)
        for name, group in cli.commands.items()
        if isinstance(group, ApiGroup)
        for command in group.commands  # type: ignore[attr-defined]
    }
    assert commands == {(group, args[0]) for group, args, _ in EVERY_COMMAND}


@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_flags_before_and_after_the_command_give_the_same_result(
    settings, spec_file: Path, capsys, monkeypatch
) -> None:
    """--url, -o/--output and -u/--user are taken before the command (`supervisor -o json
    list`) and after it (`supervisor list -o json`), with the same result for every command
    of every group; given on both sides, the one after wins. The environment's URL leads
    nowhere and the service needs a login, so an option not taken would show."""
    from pydantic import SecretStr

    settings.auth = "basic"
    settings.admin_password = SecretStr("admin-pass-1")
    monkeypatch.delenv("SLUICEGATE_TOKEN", raising=False)
    monkeypatch.delenv("SLUICEGATE_USER", raising=False)
    monkeypatch.setenv("SLUICEGATE_PASSWORD", "admin-pass-1")
    monkeypatch.setenv("SLUICEGATE_URL", f"http://127.0.0.1:{free_port()}")
    with RunningService(settings) as service:
        flags = ["--url", service.url, "-o", "json", "--user", "admin"]

        def before(group: str, args: list[str]) -> tuple[int, str, str]:
            return run(capsys, group, *flags, *(a.format(spec=spec_file) for a in args))

        def after(group: str, args: list[str]) -> tuple[int, str, str]:
            return run(capsys, group, *(a.format(spec=spec_file) for a in args), *flags)

        assert before("supervisor", ["submit", "{spec}"])[0] == 0
        assert after("supervisor", ["suspend", "wiki"])[0] == 0  # no pass changes its state

        def suspended() -> bool:
            answer = before("supervisor", ["status", "wiki"])
            return json.loads(answer[1])["payload"]["state"] == "SUSPENDED"

        wait_for(suspended, 30, "the supervisor suspended")
        succeeded = set()
        for group, args, undo in EVERY_COMMAND:
            first = before(group, args)
            for step in undo:
                assert before(group, step)[0] == 0, step
            second = after(group, args)
            for step in undo:
                assert after(group, step)[0] == 0, step
            assert _stable(first) == _stable(second), (group, args)
            if first[0] == 0:
                succeeded.add((group, args[0]))
                json.loads(first[1])  # -o json taken: the answer is JSON
        # most succeed outright; the rest answer the service's own refusal, the same both ways
        assert {("supervisor", "list"), ("supervisor", "terminate"), ("task", "list")} <= succeeded
        assert len(succeeded) >= 18, succeeded
        # on both sides: the one after the command wins
        code, out, _ = run(capsys, "supervisor", *flags, "list", "-o", "table")
        assert code == 0 and out.split()[:3] == ["ID", "DATASOURCE", "STATE"]
        code, out, _ = run(capsys, "supervisor", "-o", "table", "list", *flags)
        assert code == 0 and json.loads(out)[0]["id"] == "wiki"


def test_url_from_environment(monkeypatch, capsys) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("SLUICEGATE_URL", down)
    code, _, err = run(capsys, "supervisor", "list")
    assert code == 3 and down in err


def _sluicegate() -> str:
    return str(Path(sys.executable).parent / "sluicegate")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serve_runs_migrations_and_stops_on_sigterm(tmp_path: Path, log_format: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SLUICEGATE_METADATA_URL": f"sqlite:///{tmp_path / 'env.db'}",
        "SLUICEGATE_LOG_FORMAT": log_format,
    }
    process = subprocess.Popen(
        [
            _sluicegate(),
            "serve",
            "--port",
            str(port),
            "--deep-storage",
            str(tmp_path / "seg"),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert wait_for_port("127.0.0.1", port, 60), "serve did not listen"
        assert httpx.get(f"http://127.0.0.1:{port}/status/health").json() is True
        response = httpx.post(f"http://127.0.0.1:{port}/druid/indexer/v1/supervisor", json=spec())
        assert response.json() == {"id": "wiki"}
        # started again in place on glibc's malloc (SLUICEGATE_PYTHON_ALLOCATOR's default)
        started_with = Path(f"/proc/{process.pid}/environ").read_bytes().split(b"\0")
        assert b"PYTHONMALLOC=malloc" in started_with
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    # uvicorn re-raises the signal once it has shut down cleanly
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
    if log_format == "json":  # one object a line, the request among them
        entries = [json.loads(line) for line in output.splitlines() if line.strip()]
        assert {"time", "level", "logger", "message"} <= set(entries[0])
        assert any("POST /druid/indexer/v1/supervisor" in e["message"] for e in entries)
    assert (tmp_path / "env.db").exists()
    assert (tmp_path / "seg").is_dir() and (tmp_path / "work").is_dir()


@pytest.mark.kafka
def test_kafka_local_runs_a_broker_until_sigint(tmp_path: Path, jar_cache: Path) -> None:
    from supervisor.devstack.topics import create_topic, produce

    port = free_port()
    process = subprocess.Popen(
        [_sluicegate(), "kafka-local", "--port", str(port), "--data-dir", str(tmp_path / "k")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert f"ready at 127.0.0.1:{port}" in ready, ready
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "cli-topic", 1)
        assert produce(bootstrap, "cli-topic", [(None, b"hello")]) == 1
    finally:
        process.send_signal(signal.SIGINT)
        rest = process.communicate(timeout=60)[0]
    assert process.returncode == 0, rest
    assert "Kafka stopped" in rest
    assert (tmp_path / "k" / "logs" / "meta.properties").exists()


@pytest.mark.kafka
def test_quickstart_once(tmp_path: Path, jar_cache: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            _sluicegate(),
            "quickstart",
            "--once",
            "--kafka-port",
            str(free_port()),
            "--port",
            str(free_port()),
            "--var",
            str(tmp_path / "qs"),
            "--spec",
            str(root / "examples/wikipedia-supervisor.json"),
            "--data",
            str(root / "examples/wikipedia-sample.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "created topic wikipedia (3 partitions) with 200 records" in result.stdout
    assert "submitted supervisor wikipedia" in result.stdout
    assert "stopped." in result.stdout


@pytest.mark.kafka
def test_quickstart_streams_publishes_and_answers_sql(tmp_path: Path, jar_cache: Path) -> None:
    """The quickstart as a person runs it: live progress, a published segment, SQL over the
    sample edits (their aggregates computed here from the file), and a clean Ctrl-C. The
    example spec's taskDuration (a minute) is shortened to 15 s, for the first publish sooner;
    test_quickstart_once takes the example spec as it is."""
    root = Path(__file__).resolve().parents[2]
    spec = json.loads((root / "examples/wikipedia-supervisor.json").read_text())
    spec["spec"]["ioConfig"]["taskDuration"] = "PT15S"
    spec_path = tmp_path / "wikipedia-supervisor.json"
    spec_path.write_text(json.dumps(spec))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sample = root / "examples/wikipedia-sample.jsonl"
    process = subprocess.Popen(
        [
            _sluicegate(),
            "quickstart",
            "--kafka-port",
            str(free_port()),
            "--port",
            str(port),
            "--var",
            str(tmp_path / "qs"),
            "--rate",
            "20",
            "--spec",
            str(spec_path),
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        segments = f"{url}/druid/coordinator/v1/metadata/datasources/wikipedia/segments"

        def published() -> bool:
            try:
                return httpx.get(segments, timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(published, 420, "the quickstart's first published segment", every=2)
        query = (
            'SELECT channel, SUM(added) AS added, SUM("count") AS edits FROM wikipedia '
            "WHERE __time < TIMESTAMP '2026-11-22 10:00:00' GROUP BY 1 ORDER BY 1"
        )
        result = subprocess.run(
            [_sluicegate(), "sql", "--url", url, "-o", "json", query],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        expected: dict[str, list[int]] = {}
        for line in sample.read_text().splitlines():
            edit = json.loads(line)
            totals = expected.setdefault(edit["channel"], [0, 0])
            totals[0] += edit["added"]
            totals[1] += 1
        rows = json.loads(result.stdout)
        assert {r["channel"]: [r["added"], r["edits"]] for r in rows} == expected
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=120)[0]
    assert process.returncode == 0, output
    assert "created topic wikipedia (3 partitions) with 200 records" in output
    assert "20 wiki edits/s" in output
    progress = [line for line in output.splitlines() if " streamed " in line]
    assert progress and "published" in progress[-1] and "lag" in progress[-1]
    assert output.rstrip().endswith("`make quickstart` resumes.")


@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_the_cli_logs_in(settings, spec_file: Path, capsys, monkeypatch) -> None:
    from pydantic import SecretStr

    settings.auth = "basic"
    settings.admin_password = SecretStr("admin-pass-1")
    for name in ("SLUICEGATE_USER", "SLUICEGATE_PASSWORD", "SLUICEGATE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with RunningService(settings) as service:
        url = ["supervisor", "--url", service.url]
        code, _, err = run(capsys, *url, "list")
        assert code == 1 and err.startswith("error: 401: Authorization") and err.count("\n") == 1
        # --user with no password and no terminal: one line, a usage error
        code, _, err = run(capsys, *url, "--user", "admin", "list")
        assert (code, err) == (
            2,
            "error: no password for admin: set SLUICEGATE_PASSWORD (or SLUICEGATE_TOKEN)\n",
        )
        monkeypatch.setenv("SLUICEGATE_PASSWORD", "admin-pass-1")
        assert run(capsys, *url, "--user", "admin", "submit", str(spec_file))[0] == 0
        monkeypatch.setenv("SLUICEGATE_USER", "admin")
        code, out, _ = run(capsys, *url, "-o", "json", "list")
        assert (code, json.loads(out)[0]["id"]) == (0, "wiki")
        token = httpx.post(
            f"{service.url}/druid-ext/basic-security/authentication/db/basic/users/admin/tokens/cli",
            auth=("admin", "admin-pass-1"),
        ).json()["token"]
        monkeypatch.delenv("SLUICEGATE_USER")
        monkeypatch.delenv("SLUICEGATE_PASSWORD")
        monkeypatch.setenv("SLUICEGATE_TOKEN", token)
        assert run(capsys, *url, "suspend", "wiki") == (0, "supervisor wiki suspended\n", "")


def test_serve_refuses_a_public_address_without_authentication(tmp_path: Path) -> None:
    env = {**os.environ, "SLUICEGATE_METADATA_URL": f"sqlite:///{tmp_path / 'env.db'}"}
    env.pop("SLUICEGATE_AUTH", None)
    done = subprocess.run(
        [_sluicegate(), "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: refusing to serve 0.0.0.0 with authentication off")
    assert done.stderr.count("\n") == 1
