"""The task's client of the overlord: the publish action, over HTTP with the task's token."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from tasks.protocol import TOKEN_HEADER, PublishAction, TaskActionRequest


@dataclass(frozen=True)
class ActionResult:
    outcome: str
    reason: str = ""


class OverlordClient:
    def __init__(self, url: str, task_id: str, token: str, timeout: float = 60.0) -> None:
        self.task_id = task_id
        self.http = httpx.Client(
            base_url=url.rstrip("/"), timeout=timeout, headers={TOKEN_HEADER: token}
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

    def close(self) -> None:
        self.http.close()
