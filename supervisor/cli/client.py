"""The CLI's HTTP client of the service's own API (Druid's endpoints), its errors and exit
codes. Every failure is one ServiceError with a message a person can act on; the CLI prints
it on one line and exits 1 (refused) or 3 (unreachable)."""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Generator, Mapping
from typing import Any

import httpx

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
DEFAULT_URL = "http://127.0.0.1:8090"
MAX_REDIRECTS = 5


class ServiceError(Exception):
    """The service refused a request (`status_code`), or could not be reached (None)."""

    def __init__(self, message: str, status_code: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


class BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self.header
        yield request


def credentials(user: str | None, environ: Mapping[str, str] | None = None) -> httpx.Auth | None:
    """How the CLI authenticates: SLUICEGATE_TOKEN (an API token), else a user (--user or
    SLUICEGATE_USER) with SLUICEGATE_PASSWORD, asked for on a terminal when unset; None
    with neither (the service may not need it)."""
    environ = os.environ if environ is None else environ
    token = environ.get("SLUICEGATE_TOKEN")
    if token:
        return BearerAuth(token)
    user = user or environ.get("SLUICEGATE_USER")
    if not user:
        return None
    password = environ.get("SLUICEGATE_PASSWORD")
    if password is None:
        if not sys.stdin.isatty():
            raise CliError(
                f"no password for {user}: set SLUICEGATE_PASSWORD (or SLUICEGATE_TOKEN)",
                EXIT_USAGE,
            )
        password = getpass.getpass(f"password for {user}: ")
    return httpx.BasicAuth(user, password)


class ServiceClient:
    """`transport` is httpx's seam: tests pass an httpx.MockTransport or an ASGI app's."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        # a follower overlord redirects writes to the leader (307): followed here, not by
        # httpx, which drops the credentials on the way to another address
        self.http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport, auth=auth)

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        if not response.content:
            return None
        return response.json()

    def exchange(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The whole response (its headers too), once its status is below 400."""
        return self._send(method, path, **kwargs)

    def text(self, path: str) -> str:
        return self._send("GET", path).text

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any = None, **params: Any) -> Any:
        return self.request("POST", path, json=body, params=params or None)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
            for _ in range(MAX_REDIRECTS):
                location = response.headers.get("location")
                if response.status_code not in (307, 308) or not location:
                    break
                target = response.url.join(location)
                if target.scheme not in ("http", "https") or (
                    response.url.scheme == "https" and target.scheme != "https"
                ):
                    break  # credentials go only where they are as safe as here
                response = self.http.request(method, target, **kwargs)
        except httpx.TransportError as exc:
            raise ServiceError(
                f"cannot reach the service at {self.url} ({type(exc).__name__}); "
                "is `sluicegate serve` running?",
                None,
            ) from None
        if response.status_code >= 400:
            raise ServiceError(
                f"{response.status_code}: {_message(response)}", response.status_code
            )
        return response


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text.splitlines()[0] if text else response.reason_phrase
    if isinstance(body, dict) and isinstance(body.get("errorMessage"), str):
        return str(body["errorMessage"])  # Druid's error object (its `error` is only a kind)
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return str(body)


class CliError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def exit_code(error: ServiceError) -> int:
    """A refused request exits 1, an unreachable service 3."""
    return EXIT_UNREACHABLE if error.status_code is None else EXIT_REFUSED
