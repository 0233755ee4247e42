"""The task's client of the overlord: the publish action, over HTTP with the task's token."""

from __future__ import annotations

import logging

import httpx

from tasks.partitions import Offsets, offsets_json
from tasks.protocol import (
    TOKEN_HEADER,
    CheckpointAction,
    PublishAction,
    PublishOutcome,
    PublishResult,
    ReplaceAction,
    SequenceNumbers,
    TaskActionRequest,
)
from tasks.tls import client_context

client_context()  # built at import, not while a successor's group waits for its client
log = logging.getLogger(__name__)


class OverlordClient:
    """Publishes and checkpoint requests go to the overlord that started the task until the
    leader tells where it is (each call a leader makes to the task names it: point_at); a
    follower answers them with a redirect to the leader, which is followed."""

    def __init__(self, url: str, task_id: str, token: str, timeout: float = 60.0) -> None:
        self.task_id = task_id
        self.http = httpx.Client(
            base_url=url.rstrip("/"),
            timeout=timeout,
            headers={TOKEN_HEADER: token},
            verify=client_context(),
            follow_redirects=True,
        )

    def point_at(self, url: str) -> None:
        """The leader moved (a newer epoch called from `url`): publish there from now on."""
        url = url.rstrip("/")
        if url and str(self.http.base_url).rstrip("/") != url:
            log.info("the leading overlord is now at %s", url)
            self.http.base_url = httpx.URL(url)

    def publish(self, action: PublishAction | ReplaceAction) -> PublishResult:
        """A publish, or a compact task's replace: the overlord's word (RETRY when it could
        not be reached)."""
        body = TaskActionRequest(task=self.task_id, action=action).model_dump(mode="json")
        try:
            response = self.http.post("/druid/indexer/v1/action", json=body)
        except httpx.HTTPError as exc:  # unreachable, or redirected in a loop: again later
            return PublishResult(
                PublishOutcome.RETRY, f"overlord unreachable: {type(exc).__name__}"
            )
        if response.status_code >= 500:
            return PublishResult(PublishOutcome.RETRY, f"overlord error {response.status_code}")
        payload = response.json() if response.content else {}
        if response.status_code == 200:
            return PublishResult(_outcome(payload["result"]["outcome"]))
        return PublishResult(_outcome(payload.get("outcome")), str(payload.get("error", "")))

    def request_checkpoint(
        self, supervisor_id: str, group_id: int | None, topic: str, start: Offsets
    ) -> None:
        """Ask the overlord to close the current sequence (it answers at once, then acts)."""
        action = CheckpointAction(
            supervisorId=supervisor_id,
            taskGroupId=group_id,
            checkpointMetadata=SequenceNumbers(
                type="start", stream=topic, partitionSequenceNumberMap=offsets_json(start)
            ),
        )
        body = TaskActionRequest(task=self.task_id, action=action).model_dump(mode="json")
        response = self.http.post("/druid/indexer/v1/action", json=body)
        if response.status_code >= 400:
            raise RuntimeError(
                f"checkpoint request refused: {response.status_code} {response.text}"
            )

    def close(self) -> None:
        self.http.close()


def _outcome(value: object) -> PublishOutcome:
    """The overlord's word for a publish; anything it should not have said is a failure."""
    try:
        return PublishOutcome(str(value))
    except ValueError:
        return PublishOutcome.FAILED
