"""Every `sluicegate` command against a service running a real supervisor (Kafka, Spark tasks,
SQLite): outputs, exit codes and confirmations, and the errors (unknown ids, bad arguments,
the service down)."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from supervisor.cli import main
from supervisor.cli import supervisor_status as status_module
from supervisor.db.models import SegmentRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.net import free_port
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tasks.storage import load_spec_uri

BASE = "/druid/indexer/v1/supervisor"


@pytest.fixture
def engine(tmp_path: Path, jar_cache: Path) -> Iterator[tuple[RunningService, httpx.Client]]:
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]") as running:
        yield running


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, *args)
    assert (code, err) == (0, ""), (args, err)
    return out


def lines_with(text: str, needle: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if needle in line]


def test_every_command_against_a_running_supervisor(
    kafka: LocalKafka, engine: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    service, api = engine
    sup, task, seg = (
        ["supervisor", "--url", service.url],
        ["task", "--url", service.url],
        ["segments", "--url", service.url],
    )
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    records = [
        (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{i}"}).encode())
        for i in range(30)
    ]
    produce(kafka.bootstrap_servers, topic, records[:20], partition=0)
    produce(kafka.bootstrap_servers, topic, records[20:], partition=1)
    spec = supervisor_spec(
        "words", topic, kafka.bootstrap_servers, ["word"], period="PT1S", taskDuration="PT10M"
    )
    spec_file = tmp_path / "words.json"
    spec_file.write_text(json.dumps(spec))
    # a second supervisor whose broker is gone: it turns unhealthy
    dead = supervisor_spec("dead", topic, f"127.0.0.1:{free_port()}", ["word"], period="PT1S")
    dead_file = tmp_path / "dead.json"
    dead_file.write_text(json.dumps(dead))

    assert ok(capsys, *sup, "submit", str(spec_file)) == "supervisor words submitted\n"
    assert ok(capsys, *sup, "submit", str(dead_file)) == "supervisor dead submitted\n"

    # status: the running task, its offsets and lag, per partition
    def caught_up() -> dict[str, Any] | None:
        code, out, _ = run(capsys, *sup, "-o", "json", "status", "words")
        payload = json.loads(out)["payload"] if code == 0 else {}
        active = payload.get("activeTasks") or []
        return payload if active and active[0]["currentOffsets"] == {"0": 20, "1": 10} else None

    payload = wait_for(caught_up, 300, "the task to read everything")
    task_id = payload["activeTasks"][0]["id"]
    out = ok(capsys, *sup, "status", "words")
    assert out.splitlines()[0].split() == ["supervisor", "words", "RUNNING", "healthy"]
    assert lines_with(out, task_id)[0][:3] == ["0", task_id, "ACTIVE"]
    assert lines_with(out, task_id)[0][-2:] == ["1=10", "0"]  # current offsets, then lag
    assert ["0", "20", "-", "0"] in [line.split() for line in out.splitlines()]

    # --watch redraws until Ctrl-C (here: the second wait is interrupted); the screen-clearing
    # codes are left out when the output is not a terminal
    waits: list[float] = []

    def interrupt_second(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(status_module, "pause", interrupt_second)
    out = ok(capsys, *sup, "status", "words", "--watch", "--interval", "0.5")
    assert out.count("supervisor words  RUNNING  healthy") == 2 and waits == [0.5, 0.5]

    assert ok(capsys, *sup, "health", "words") == "supervisor words is healthy\n"
    out = ok(capsys, *sup, "stats", "words")
    [row] = lines_with(out, task_id)
    assert row[:6] == ["0", task_id, "30", "0", "0", "0"] and 0 <= float(row[6]) <= 30 / 5
    assert json.loads(ok(capsys, *sup, "-o", "json", "stats", "words"))["0"][task_id]

    # tasks
    out = ok(capsys, *task, "list", "--state", "running")
    assert lines_with(out, task_id)[0][:3] == [task_id, "words", "RUNNING"]
    listed = json.loads(ok(capsys, *task, "-o", "json", "list", "--datasource", "words"))
    assert [t["id"] for t in listed] == [task_id]
    out = ok(capsys, *task, "status", task_id)
    assert ["status", "RUNNING"] in [line.split() for line in out.splitlines()]
    out = ok(capsys, *task, "reports", task_id)
    assert ["processed", "30"] in [line.split() for line in out.splitlines()]
    assert f"task {task_id}: {topic} from " in ok(capsys, *task, "log", task_id)

    # handoff publishes; the segments are listed
    assert ok(capsys, *sup, "handoff", "words", "0") == (
        "supervisor words: handoff of task group(s) 0 requested\n"
    )
    wait_for(
        lambda: (
            api.get(f"{BASE}/words/status").json()["payload"]["committedOffsets"]
            == {"0": 20, "1": 10}
        ),
        300,
        "the handoff to publish",
    )
    out = ok(capsys, *seg, "list", "words")
    assert out.splitlines()[0].split()[:4] == ["SEGMENT", "INTERVAL", "ROWS", "BYTES"]
    segments = json.loads(ok(capsys, *seg, "-o", "json", "list", "words"))
    assert sum(s["numRows"] for s in segments) == 30
    assert all(lines_with(out, s["identifier"]) for s in segments)

    # Druid SQL through the service's API, over the published rows
    query = 'SELECT COUNT(*) AS n, MIN(__time) AS "first", MAX(word) AS "last" FROM words'
    out = ok(capsys, "sql", "--url", service.url, query)
    assert [line.split() for line in out.splitlines()] == [
        ["n", "first", "last"],
        ["30", "2026-11-22T10:00:00.000Z", "w9"],
        ["(1", "row)"],
    ]
    out = ok(capsys, "sql", "--url", service.url, "-o", "json", query)
    assert json.loads(out) == [{"n": 30, "first": "2026-11-22T10:00:00.000Z", "last": "w9"}]
    out = ok(capsys, "sql", "--url", service.url, "--max-rows", "2", "SELECT word FROM words")
    assert out.splitlines()[0] == "word" and len(out.splitlines()) == 4
    assert out.splitlines()[-1] == "(2 rows (more not shown; --max-rows))"
    code, _, err = run(capsys, "sql", "--url", service.url, "SELECT * FROM nope")
    assert code == 1 and err.startswith("error: query failed: 400: ") and "nope" in err
    assert err.count("\n") == 1
    code, _, err = run(capsys, "sql", "--url", service.url, "SELECT TIME_FLIP(1) FROM words")
    assert code == 1 and "TIME_FLIP" in err and err.count("\n") == 1

    # Spark SQL over the published segments (--master), __time a timestamp
    spark = ("sql", "--url", service.url, "--master", "local[1]")
    query = "SELECT COUNT(*) AS n, MIN(__time) AS first, MAX(word) AS last FROM words"
    out = ok(capsys, *spark, "-o", "json", query)
    assert json.loads(out) == [{"n": 30, "first": "2026-11-22 10:00:00", "last": "w9"}]
    code, _, err = run(capsys, *spark, "SELECT * FROM nope")
    assert code == 1 and err.startswith("error: query failed: [TABLE_OR_VIEW_NOT_FOUND]")
    assert err.count("\n") == 1

    # retention rules, compaction configs and marking, over the coordinator's API
    rul, com = ["rules", "--url", service.url], ["compaction", "--url", service.url]
    rules = [
        {"type": "loadByInterval", "interval": "2026-01-01/2027-01-01"},
        {"type": "dropForever"},
    ]
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    out = ok(capsys, *rul, "set", "words", str(tmp_path / "rules.json"))
    assert out == "datasource words: 2 rule(s) set\n"
    assert [line.split() for line in ok(capsys, *rul, "show", "words", "--full").splitlines()] == [
        ["#", "RULE", "APPLIES", "TO"],
        ["1", "loadByInterval", "2026-01-01/2027-01-01"],
        ["2", "dropForever", "forever"],
        ["3", "loadForever", "forever"],  # the default rule
    ]
    assert json.loads(ok(capsys, *rul, "-o", "json", "show", "words")) == rules
    assert ok(capsys, *rul, "show", "other") == (
        "no rules of its own for other: the default rules apply\n"
    )
    config = {"dataSource": "words", "skipOffsetFromLatest": "P1D"}  # the one day is skipped
    (tmp_path / "compaction.json").write_text(json.dumps(config))
    out = ok(capsys, *com, "set", str(tmp_path / "compaction.json"))
    assert out == "datasource words: compaction config set\n"
    assert ["skipOffsetFromLatest", "P1D"] in lines_with(ok(capsys, *com, "show", "words"), "P1D")
    [row] = lines_with(ok(capsys, *com, "status"), "words")
    assert row[:2] == ["words", "RUNNING"]
    assert ok(capsys, *com, "cluster", "--ratio", "0.5", "--max", "3") == (
        "cluster compaction config set\n"
    )
    shown = json.loads(ok(capsys, *com, "-o", "json", "cluster"))
    assert (shown["compactionTaskSlotRatio"], shown["maxCompactionTaskSlots"]) == (0.5, 3)
    assert ok(capsys, *com, "delete", "words") == "datasource words: compaction config deleted\n"
    assert ok(capsys, *com, "status") == "no datasource has a compaction config\n"
    day = "2026-11-22T00:00:00Z/2026-11-23T00:00:00Z"
    out = ok(capsys, *seg, "mark-unused", "words", "--interval", day)
    assert out == f"{len(segments)} segment(s) of words marked unused\n"
    code, _, err = run(capsys, *seg, "list", "words")  # no reader sees them
    assert code == 1 and "has no published segments" in err
    out = ok(capsys, *seg, "mark-used", "words", segments[0]["identifier"])
    assert out == "1 segment(s) of words marked used\n"
    out = ok(capsys, *seg, "mark-used", "words", "--interval", day)
    assert out == f"{len(segments) - 1} segment(s) of words marked used\n"
    back = json.loads(ok(capsys, *seg, "-o", "json", "list", "words"))
    assert sorted(s["identifier"] for s in back) == sorted(s["identifier"] for s in segments)

    # reset-offsets and reset ask first; "no" changes nothing
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run(capsys, *sup, "reset-offsets", "words", "-p", "1=5")
    assert code == 130 and err.endswith("error: aborted\n")
    assert api.get(f"{BASE}/words/status").json()["payload"]["committedOffsets"]["1"] == 10
    out = ok(capsys, *sup, "reset-offsets", "words", "--partition", "1=5", "--yes")
    assert out == "supervisor words: partition 1 to 5\n"
    assert api.get(f"{BASE}/words/status").json()["payload"]["committedOffsets"] == {
        "0": 20,
        "1": 5,
    }
    before = {t["id"] for t in api.get("/druid/indexer/v1/tasks").json()}
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = run(capsys, *sup, "reset", "words")
    assert (code, out) == (0, "supervisor words reset\n")
    assert err.startswith("Reset supervisor words? Its committed offsets are forgotten")
    assert api.get(f"{BASE}/words/status").json()["payload"]["committedOffsets"] == {}

    # the unhealthy supervisor: health exits 1 and says why
    def unhealthy() -> tuple[int, str, str] | None:
        result = run(capsys, *sup, "health", "dead")
        return result if result[0] == 1 else None

    code, out, err = wait_for(unhealthy, 300, "the dead supervisor to turn unhealthy")
    assert err == "error: supervisor dead is unhealthy: UNABLE_TO_CONNECT_TO_STREAM\n"
    out = ok(capsys, *sup, "status", "dead")
    assert "UNHEALTHY" in out.splitlines()[0] and "recent errors:" in out

    # a task shut down by hand
    running = wait_for(
        lambda: [
            t["id"]
            for t in api.get("/druid/indexer/v1/tasks", params={"state": "running"}).json()
            if t["id"] not in before
        ],
        300,
        "a task after the reset",
    )
    victim = running[0]
    assert ok(capsys, *task, "shutdown", victim, "--yes") == f"task {victim} shut down\n"
    assert api.get(f"/druid/indexer/v1/task/{victim}/status").json()["status"]["status"] == (
        "FAILED"
    )
    out = ok(capsys, *task, "list", "--type", "index_kafka", "--created", "2020-01-01_2020-01-02")
    assert out == "no tasks\n"
    code, _, err = run(capsys, *task, "list", "--created", "yesterday")
    assert code == 1 and err.startswith("error: 400: createdTimeInterval: ")
    # every running task of the datasource (the supervisor then starts new ones)
    running = wait_for(
        lambda: [
            t["id"]
            for t in api.get("/druid/indexer/v1/runningTasks").json()
            if t["dataSource"] == "words"
        ],
        300,
        "a task replacing the one shut down",
    )
    out = ok(capsys, *task, "shutdown-all", "words", "--yes")
    assert out == f"{len(running)} running task(s) of datasource words shut down\n"
    for gone in running:
        status = api.get(f"/druid/indexer/v1/task/{gone}/status").json()["status"]
        assert (status["status"], status["errorMsg"]) == ("FAILED", "Shutdown request from user")

    # every supervisor at once
    assert ok(capsys, *sup, "suspend-all", "--yes") == "every supervisor suspended\n"
    out = ok(capsys, *sup, "-o", "json", "list")
    assert {s["id"]: s["suspended"] for s in json.loads(out)} == {"words": True, "dead": True}
    assert ok(capsys, *sup, "resume-all", "--yes") == "every supervisor resumed\n"
    assert ok(capsys, *sup, "terminate-all", "--yes") == "every supervisor terminated\n"
    assert ok(capsys, *sup, "list") == "no supervisors\n"

    # a datasource dropped, then killed: its rows and files go for good
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run(capsys, *seg, "drop", "words")
    assert code == 130 and err.startswith("Mark every segment of words unused?")
    dropped = json.loads(ok(capsys, *seg, "-o", "json", "list", "words"))
    out = ok(capsys, *seg, "drop", "words", "--yes")  # (a stopping task may publish meanwhile)
    assert out.endswith(" segment(s) of words marked unused\n")
    assert int(out.split()[0]) >= len(dropped)
    out = ok(capsys, *seg, "kill", "words", day, "--yes")
    assert out.startswith("kill task ") and out.endswith(" started\n")
    kill_task = out.split()[2]
    wait_for(
        lambda: "SUCCESS" in ok(capsys, *task, "status", kill_task), 120, "the kill task to end"
    )
    ids = [s["identifier"] for s in dropped]
    assert not db_rows(service, select(SegmentRow).where(SegmentRow.id.in_(ids)))
    assert not [s for s in dropped if Path(load_spec_uri(s["loadSpec"])).exists()]

    # errors: one line, non-zero exit
    for args, code, start in [
        ([*sup, "status", "nope"], 1, "error: 404: [nope] does not exist"),
        ([*sup, "health", "nope"], 1, "error: 404: [nope] does not exist"),
        ([*sup, "stats", "nope"], 1, "error: 404: [nope] does not exist"),
        ([*sup, "reset", "nope", "--yes"], 1, "error: 404"),
        ([*sup, "handoff", "nope", "0"], 1, "error: 404"),
        ([*sup, "handoff", "words"], 2, "error: Missing argument"),
        ([*sup, "reset-offsets", "words", "-p", "1:5", "--yes"], 2, "error: --partition 1:5"),
        ([*task, "status", "nope"], 1, "error: 404"),
        ([*task, "log", "nope"], 1, "error: 404"),
        ([*task, "shutdown", "nope", "--yes"], 1, "error: 404"),
        ([*seg, "list", "nope"], 1, "error: 404: datasource [nope] has no published segments"),
        ([*seg, "mark-unused", "words"], 2, "error: give --interval or segment ids"),
        ([*seg, "kill", "words", "yesterday", "--yes"], 1, "error: 400"),
        ([*com, "show", "nope"], 1, "error: 404"),
        ([*com, "cluster", "--ratio", "2"], 2, "error: Invalid value for '--ratio'"),
        ([*rul, "set", "words", str(spec_file)], 1, "error: 400"),
        (["task", "--url", f"http://127.0.0.1:{free_port()}", "list"], 3, "error: cannot reach"),
        (["sql", "--url", f"http://127.0.0.1:{free_port()}", "SELECT 1"], 3, "error: cannot reach"),
    ]:
        result, out, err = run(capsys, *args)
        assert (result, out) == (code, ""), (args, err)
        assert err.startswith(start) and err.count("\n") == 1, (args, err)


def test_completion_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    for shell, marker in (("bash", "complete -o"), ("zsh", "#compdef sluicegate"), ("fish", "")):
        out = ok(capsys, "completion", shell)
        assert "_SLUICEGATE_COMPLETE" in out and marker in out
    code, _, err = run(capsys, "completion", "tcsh")
    assert code == 2 and err.count("\n") == 1
