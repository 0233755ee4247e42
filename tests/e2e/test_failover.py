"""Two overlords, one leader, on a real broker, Spark and PostgreSQL, as processes of their own.

A producer writes numbered records to a 2-partition topic without pause; one supervisor reads
it (taskCount 1, replicas 1, rollovers by handoff). The leader is made to die at each step
where dying hurts most, one after another, the other overlord taking over each time and the
dead one coming back as a follower:

1. SIGKILL while its task reads;
2. at a rollover, after every replica was paused (no end offsets yet);
3. at a rollover, after the end offsets were set on the tasks, before it wrote them down;
4. at a rollover, after it recorded the successor task, before it started it;
5. after a publish committed, before the task had its answer;
6. SIGSTOP past its lease, then SIGCONT: its lease is gone, it must follow.

Each time the follower must lead within the lease plus a pass, adopt the running task (none is
killed) and finish what was half done; at the end every record is published exactly once.
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.devstack.topics import create_topic
from supervisor.testkit import faults
from supervisor.testkit.numbers import Numbers
from supervisor.testkit.overlord import Overlord
from supervisor.testkit.waits import wait_for
from tests.e2e.harness import BASE, LONG, VERIFY, Run
from tests.e2e.test_supervisor import SID
from tests.e2e.test_supervisor import spec as numbers_spec

LEASE_S = 3.0  # the harness's SLUICEGATE_LEASE_S
PERIOD_S = 1.0


def spec(topic: str, bootstrap: str) -> dict[str, Any]:
    """test_supervisor's, with one replica of one group, rolled over only when handed off."""
    return numbers_spec(
        topic, bootstrap, period="PT1S", taskCount=1, replicas=1, taskDuration="PT1H"
    )


def take_over(leader: Overlord, follower: Overlord) -> float:
    """Seconds from the leader's death (it has just been killed, or killed itself) until the
    follower says it leads."""
    began = time.monotonic()
    wait_for(follower.leads, 30, f"{follower.log.stem} to lead", every=0.1)
    return time.monotonic() - began


def published(run: Run, before: int) -> bool:
    """Whether a publish committed since `before` publishes (a generation handed off before
    it read a record publishes too, and moves no offset: a loaded machine does that). A failed
    task fails the test at once, with its reason: no handoff follows here, so its successor
    would never publish and the wait would end only at its bound."""
    failed = [(t.id, t.error) for t in run.tasks() if t.status == "FAILED"]
    assert failed == [], f"a task failed: {failed}"
    return run.publishes() > before


def test_the_leader_dies_at_every_step_and_nothing_is_lost_or_repeated(
    kafka: LocalKafka, postgres: LocalPostgres, jar_cache: Path, tmp_path: Path
) -> None:
    db = postgres.create_database(f"fo{uuid.uuid4().hex[:8]}")
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    a, b = Overlord(tmp_path, jar_cache, db, "a"), Overlord(tmp_path, jar_cache, db, "b")
    a.start()
    wait_for(a.leads, 30, "a to lead")
    b.start()
    ledger = Numbers(kafka.bootstrap_servers, [topic], rate=40).start()
    leader, follower = a, b
    try:
        with httpx.Client(
            timeout=30, follow_redirects=True, auth=Overlord.auth, verify=VERIFY
        ) as api:
            # writes go to the follower: it redirects them to the leader
            submitted = api.post(f"{follower.url}{BASE}", json=spec(topic, kafka.bootstrap_servers))
            assert submitted.json() == {"id": SID}
            run = Run(a, ledger, api, topic)
            (task,) = run.reading_now(0, 1)
            took: dict[str, float] = {}

            # 1. SIGKILL mid-read: the follower leads and adopts the task, which reads on
            leader.kill9()
            took["mid-read"] = take_over(leader, follower)
            leader.start()
            leader, follower = follower, leader
            (adopted,) = run.reading_now(0, 1)
            assert adopted.id == task.id

            # 2-4. the leader dies at a step of a rollover (a handoff asked of the follower)
            for point in (faults.ROLLOVER_PAUSED, faults.ROLLOVER_ENDS_SET, faults.TASK_RECORDED):
                committed = run.publishes()
                leader.arm(point)
                handoff = {"taskGroupIds": [0]}
                asked = api.post(f"{follower.url}{BASE}/{SID}/taskGroups/handoff", json=handoff)
                assert asked.is_success
                wait_for(leader.exited, LONG, f"{leader.log.stem} to die at {point}")
                took[point] = take_over(leader, follower)
                leader.arm("")
                leader.start()
                leader, follower = follower, leader
                # the new leader finishes the rollover: the generation publishes, a successor reads
                wait_for(lambda c=committed: published(run, c), LONG, f"a publish after {point}")
                run.reading_now(0, 1)
                if point == faults.TASK_RECORDED:  # the successor it recorded, started, not failed
                    assert "its launch never happened" in leader.log.read_text()

            # 5. the leader dies once a publish committed, before the task has its answer
            committed = run.publishes()
            leader.arm(faults.PUBLISH_COMMITTED)
            assert api.post(
                f"{follower.url}{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}
            ).is_success
            wait_for(leader.exited, LONG, "the leader to die once a publish committed")
            took[faults.PUBLISH_COMMITTED] = take_over(leader, follower)
            assert run.publishes() > committed  # it did commit
            leader.arm("")
            leader.start()
            leader, follower = follower, leader
            # the task's answer was lost with the overlord: it asks the new leader again, which
            # says it is published (not twice), and the task succeeds
            publishing = [t for t in run.tasks() if t.end and t.status == "RUNNING"]
            for t in publishing:
                wait_for(
                    lambda t=t: next(x for x in run.tasks() if x.id == t.id).status == "SUCCESS",
                    LONG,
                    f"{t.id} to succeed through the new leader",
                )
            run.reading_now(0, 1)

            # 6. SIGSTOP past the lease: the follower takes over; on SIGCONT the old one follows
            leader.signal(signal.SIGSTOP)
            try:
                took["SIGSTOP"] = take_over(leader, follower)
            finally:
                leader.signal(signal.SIGCONT)
            wait_for(lambda: not leader.leads(), 30, "the woken overlord to follow")
            assert "lost the leader lease" in leader.log.read_text()
            leader, follower = follower, leader
            run.reading_now(0, 1)

            # the end: everything produced is published once, and no task was killed
            ledger.stop()
            target = {str(p): ledger.next_offset(str(p)) for p in range(2)}
            asked = [0.0]

            def published_all() -> bool:
                """Hand off until a generation ends at the last record (a handoff asked before
                the task read it all ends short, and its successor would read on)."""
                if run.committed() == target:
                    return True
                if time.monotonic() >= asked[0] + 10:
                    asked[0] = time.monotonic()
                    url = f"{follower.url}{BASE}/{SID}/taskGroups/handoff"
                    assert api.post(url, json={"taskGroupIds": [0]}).is_success
                return False

            wait_for(published_all, LONG, "everything to be published")
            run.check()
            failed = [(t.id, t.error) for t in run.tasks() if t.status == "FAILED"]
            assert failed == []
            bound = LEASE_S + PERIOD_S + 4.0  # the lease, a campaign tick, a loaded machine
            print(f"takeover seconds: {took}")
            assert all(seconds <= bound for seconds in took.values()), took
    finally:
        ledger.stopping.set()
        for overlord in (a, b):
            overlord.stop()
