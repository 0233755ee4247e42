"""A small HTTP client of the service for the CLI, turning every failure into one CliError."""

from __future__ import annotations

from typing import Any

import httpx

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
DEFAULT_URL = "http://127.0.0.1:8090"


class CliError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ApiClient:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=timeout)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        if not response.content:
            return None
        return response.json()

    def text(self, path: str) -> str:
        return self._send("GET", path).text

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(
                f"cannot reach the service at {self.url} ({type(exc).__name__}); "
                "is `sluicegate serve` running?",
                EXIT_UNREACHABLE,
            ) from None
        if response.status_code >= 400:
            raise CliError(f"{response.status_code}: {_message(response)}", EXIT_REFUSED)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any = None, **params: Any) -> Any:
        return self.request("POST", path, json=body, params=params or None)


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return (
            response.text.strip().splitlines()[0]
            if response.text.strip()
            else response.reason_phrase
        )
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return str(body)
