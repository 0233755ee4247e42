"""The rows running tasks hold and have not published, for the SQL API, as Druid's Broker
merges its realtime tasks' rows with the published segments: exactly once across a handoff.

The table's current metadata file and every supervisor's committed offsets are read in one
statement, so they agree: a publish commits its segments and its offsets together. Each task
group (a supervisor's group of one generation: the same start offsets) is asked once, its
replicas in the order of their ids (the same one every time, so that a query never sees fewer
of a group's rows than the one before it), for the files of the rows it holds past the
committed offsets (tasks/runtime/held.py). What they cover is checked against the committed
offsets: on each partition the first held row is the first one not committed, and no two
groups hold the same offsets (a later generation may start past where an earlier one has read
to: those offsets are read by nobody yet). A publish since the offsets were read (a task's
409, a range that starts past them, a file gone) is a 503 the query tries once more, on a
fresh read; a group that does not answer, or whose files this overlord cannot reach (a remote
task host's work directory), is named in the answer's response context, not a failure."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import and_, select, union_all
from sqlalchemy.orm import Session

from supervisor.clients.held import HeldRows
from supervisor.clients.task_api import TaskApiClient, TaskApiError, reachable
from supervisor.db.models import CommittedOffsetsRow, IcebergTableRow, TaskRow
from supervisor.db.tasks import TaskRepository, start_of
from supervisor.lake.catalog import NAMESPACE
from supervisor.lake.tables import CATALOG
from supervisor.sql.errors import SqlError
from tasks.protocol import TaskStatusCode
from tasks.storage import Storage

KAFKA_TASK = "index_kafka"
MAX_GROUPS_AT_ONCE = 8


class Stale(SqlError):
    """What was read is older than a publish: read again."""

    def __init__(self, message: str) -> None:
        super().__init__(503, "unavailable", "RUNTIME_FAILURE", f"a task published: {message}")


@dataclass
class Snapshot:
    location: str | None  # the table's metadata file (None: no table)
    committed: dict[str, dict[str, int]]  # each supervisor's committed offsets


@dataclass
class Live:
    """What a datasource's tasks hold: the files to read with the table, and the groups whose
    rows are not among them (each {supervisor, groupId, reason})."""

    files: list[str] = field(default_factory=list)  # read with deep storage's file system
    # those on a task host's disk this overlord does not read (or, over_chat, any host's):
    # each task's, fetched from it
    remote: list[tuple[TaskRow, list[str]]] = field(default_factory=list)
    lacking: list[dict[str, Any]] = field(default_factory=list)


def snapshot(session: Session, datasource: str) -> Snapshot:
    """The datasource's table and its supervisors' committed offsets, in one statement (on a
    database that gives each statement its own snapshot, two could straddle a publish): the
    table with its offsets, and the offsets with their table, for a datasource that has only
    one of them (a table adopted with none, offsets before the first publish's table)."""
    columns = (
        IcebergTableRow.metadata_location,
        CommittedOffsetsRow.supervisor_id,
        CommittedOffsetsRow.offsets,
    )
    its_table = and_(
        IcebergTableRow.catalog_name == CATALOG,
        IcebergTableRow.table_namespace == NAMESPACE,
        IcebergTableRow.table_name == datasource,
    )
    query = union_all(
        select(*columns)
        .select_from(IcebergTableRow)
        .outerjoin(CommittedOffsetsRow, CommittedOffsetsRow.datasource == datasource)
        .where(its_table),
        select(*columns)
        .select_from(CommittedOffsetsRow)
        .outerjoin(IcebergTableRow, its_table)
        .where(CommittedOffsetsRow.datasource == datasource),
    )
    location: str | None = None
    committed: dict[str, dict[str, int]] = {}
    for found_location, supervisor, offsets in session.execute(query):
        location = location or found_location
        if supervisor is not None:
            committed[supervisor] = {str(p): int(o) for p, o in (offsets or {}).items()}
    return Snapshot(location, committed)


Asker = Callable[[TaskRow, dict[str, int]], HeldRows]
Fetcher = Callable[[TaskRow, str], bytes]  # a held file, from its task, as an Arrow stream


def ask(timeout_s: float) -> Asker:
    def held(task: TaskRow, since: dict[str, int]) -> HeldRows:
        return TaskApiClient.for_task(task, timeout=timeout_s).held_rows(since)

    return held


def fetch(timeout_s: float) -> Fetcher:
    def held_file(task: TaskRow, path: str) -> bytes:
        return TaskApiClient.for_task(task, timeout=timeout_s).held_file(path)

    return held_file


def held_rows(
    session: Session,
    datasource: str,
    committed: dict[str, dict[str, int]],
    storage: Storage,
    asker: Asker,
    tolerant: bool,
    over_chat: bool = False,
) -> Live:
    """The rows the datasource's running tasks hold past `committed`. A publish under the
    read is `Stale`, unless `tolerant` (the query's last try): then the groups it touched are
    named lacking. Files in a task's work directory are read here when this machine has
    them, else (or always, `over_chat`) fetched from the task."""
    tasks = TaskRepository(session).find(
        (TaskStatusCode.RUNNING,), datasource, None, task_type=KAFKA_TASK
    )
    groups: dict[tuple[str, int | None, tuple[tuple[str, int], ...]], list[TaskRow]] = {}
    for task in sorted(tasks, key=lambda row: row.id):
        if task.supervisor_id is None or not reachable(task):
            continue
        key = (task.supervisor_id, task.group_id, tuple(sorted(start_of(task).items())))
        groups.setdefault(key, []).append(task)
    live = Live()
    if not groups:
        return live
    with ThreadPoolExecutor(min(MAX_GROUPS_AT_ONCE, len(groups))) as pool:
        answers = list(
            pool.map(
                lambda replicas: _first_answer(replicas, committed, asker),
                groups.values(),
            )
        )
    by_supervisor: dict[str, list[tuple[TaskRow, HeldRows]]] = {}
    for replicas, (answer, reason, stale) in zip(groups.values(), answers, strict=True):
        task = replicas[0]
        if answer is None:
            if stale and not tolerant:
                raise Stale(reason)
            live.lacking.append(lacks(task, reason))
            continue
        by_supervisor.setdefault(str(task.supervisor_id), []).append((task, answer))
    for supervisor, held in by_supervisor.items():
        covering, bad = _covering(held, committed.get(supervisor, {}), tolerant)
        live.lacking += [lacks(task, "its offsets do not follow the committed") for task in bad]
        for task, answer in covering:
            if _reachable(answer, storage, over_chat):
                live.files.extend(answer.files)
            else:
                live.remote.append((task, list(answer.files)))
    return live


def _first_answer(
    replicas: list[TaskRow], committed: dict[str, dict[str, int]], asker: Asker
) -> tuple[HeldRows | None, str, bool]:
    """The first replica's answer that comes; else why none came, and whether a replica's 409
    said a publish moved past the committed offsets (stale)."""
    reason = "no replica answered"
    for task in replicas:
        try:
            return asker(task, committed.get(str(task.supervisor_id), {})), "", False
        except TaskApiError as exc:
            if exc.status_code == 409:
                return None, f"stale: {exc}", True
            reason = f"{task.id} did not answer: {exc}"
    return None, reason, False


def _covering(
    held: list[tuple[TaskRow, HeldRows]], committed: dict[str, int], tolerant: bool
) -> tuple[list[tuple[TaskRow, HeldRows]], list[TaskRow]]:
    """The answers of one supervisor's groups, checked to cover each partition's offsets once
    from the committed ones on (gaps between generations aside: nobody read them yet)."""
    ranges: dict[str, list[tuple[int, int, str]]] = {}
    for task, answer in held:
        for partition, start in answer.start.items():
            end = answer.end.get(partition, start)
            if end > start:
                ranges.setdefault(partition, []).append((start, end, task.id))
    bad: set[str] = set()
    for partition, spans in ranges.items():
        spans.sort()
        expected = committed.get(partition, spans[0][0])
        if spans[0][0] != expected:  # rows between the committed offsets and the first held
            bad.add(spans[0][2])
        for (_, end, _), (start, _, task_id) in itertools.pairwise(spans):
            if start < end:  # two groups holding the same offsets: a generation's overlap
                bad.add(task_id)
    if bad and not tolerant:
        raise Stale(f"the held offsets of {', '.join(sorted(bad))} do not follow the committed")
    return (
        [(task, answer) for task, answer in held if task.id not in bad],
        [task for task, _ in held if task.id in bad],
    )


def _reachable(answer: HeldRows, storage: Storage, over_chat: bool) -> bool:
    """Whether this overlord reads the files with deep storage's file system: in deep storage,
    or in a work directory on this machine (deep storage is local then: a task's persists go to
    deep storage when it is S3), unless told to fetch those from their tasks (`over_chat`)."""
    if answer.where == "deep" or not answer.files:
        return True
    return not (over_chat or storage.is_s3 or not Path(answer.files[0]).is_file())


def lacks(task: TaskRow, reason: str) -> dict[str, Any]:
    return {"supervisor": task.supervisor_id, "groupId": task.group_id, "reason": reason}
