"""The task's client of the overlord: the publish action, over HTTP with the task's token."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from tasks.partitions import Offsets, offsets_json
from tasks.protocol import (
    TOKEN_HEADER,
    CheckpointAction,
    PublishAction,
    SequenceNumbers,
    TaskActionRequest,
)


@dataclass(frozen=True)
class ActionResult:
    outcome: str
    reason: str = ""


# httpx's default TLS context, built once: each client builds its own otherwise (~20 ms of
# loading CA certificates), and a standby builds its task's client while the group waits.
TLS = httpx.create_ssl_context()


class OverlordClient:
    def __init__(self, url: str, task_id: str, token: str, timeout: float = 60.0) -> None:
        self.task_id = task_id
        self.http = httpx.Client(
            base_url=url.rstrip("/"), timeout=timeout, headers={TOKEN_HEADER: token}, verify=TLS
        )

    def publish(self, action: PublishAction) -> ActionResult:
        body = TaskActionRequest(task=self.task_id, action=action).model_dump(mode="json")
        try:
            response = self.http.post("/druid/indexer/v1/action", json=body)
        except httpx.TransportError as exc:
            return ActionResult("retry", f"overlord unreachable: {type(exc).__name__}")
        payload = response.json() if response.content else {}
        if response.status_code == 200:
            return ActionResult(str(payload["result"]["outcome"]))
        if response.status_code >= 500:
            return ActionResult("retry", f"overlord error {response.status_code}")
        return ActionResult(str(payload.get("outcome", "failed")), str(payload.get("error", "")))

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
