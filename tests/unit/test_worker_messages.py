"""The task host's messages (supervisor/schemas/worker.py) as the leader's runner reads them:
an exit entry that does not read as one, or a report that does not, costs that entry's report
or the entry alone, never the host's whole sync."""

from __future__ import annotations

from supervisor.schemas.worker import WorkerState


def test_a_sync_answer_reads_what_it_can() -> None:
    state = WorkerState.model_validate(
        {
            "host": "h:1",
            "running": ["t1"],
            "exited": [
                {"task": "t2", "exitCode": 0, "report": {"not": "a report"}},
                {"exitCode": 1},  # no task: passed over
                "junk",
                {"task": "t3", "exitCode": None, "report": None},
            ],
        }
    )
    assert state.running == ["t1"]
    assert [(e.task, e.exitCode, e.report) for e in state.exited] == [
        ("t2", 0, None),
        ("t3", None, None),
    ]
    assert WorkerState.model_validate({}).running == []
