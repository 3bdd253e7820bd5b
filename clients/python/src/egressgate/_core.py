"""The hand-written half of the client: sending one operation, turning an error body into
`ApiError`, and reading the chat event stream. The generated half (`_operations.py`) names
every operation and calls `_call` or `_events` here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple
from urllib.parse import quote

import httpx2


class _Op(NamedTuple):
    """One operation: its method, path template and what its success answer is."""

    method: str
    path: str
    answer: Literal["json", "text", "none", "events"]


class ApiError(Exception):
    """A non-2xx answer. `code` is the API's stable UPPER_SNAKE code (`UNAUTHORIZED`,
    `TURN_EXPIRED`, ...; the document lists each status's codes in `x-error-codes`); it is
    empty when the body is not the API's error shape (e.g. `/readyz`'s plain text)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @classmethod
    def _from(cls, status: int, text: str) -> ApiError:
        try:
            error = json.loads(text)["error"]
            return cls(status, str(error["code"]), str(error["message"]))
        except (ValueError, KeyError, TypeError):
            return cls(status, "", text.strip())


@dataclass(frozen=True)
class ServerSentEvent:
    """One event of `GET /v1/chats/{chat_id}/events`: its `event` name
    (`refusal.recorded`, `approval.requested`, `approval.resolved`, `approval.revoked`,
    `resync`), its `id` (send it back as `last_event_id` to carry on after a reconnect) and
    its `data`, parsed as JSON when it is JSON."""

    event: str
    id: str | None
    data: Any


def _request(op: _Op, path: Mapping[str, str], query: Mapping[str, Any],
             headers: Mapping[str, Any], body: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments of an httpx2 request for `op`; `None` values are left out."""
    url = op.path
    for name, value in path.items():
        url = url.replace("{" + name + "}", quote(str(value), safe=""))
    out: dict[str, Any] = {
        "params": {k: str(v) for k, v in query.items() if v is not None},
        "headers": {k: str(v) for k, v in headers.items() if v is not None},
    }
    if body is not None:
        out["json"] = {k: v for k, v in body.items() if v is not None}
    return {"method": op.method, "url": url, **out}


def _answer(op: _Op, response: httpx2.Response) -> Any:
    if not response.is_success:
        raise ApiError._from(response.status_code, response.text)
    if op.answer == "json":
        return response.json()
    if op.answer == "text":
        return response.text
    return None


class _EventParser:
    """Server-sent events, line by line (comments and keep-alives skipped)."""

    def __init__(self) -> None:
        self.event, self.id, self.data = "message", None, []

    def feed(self, line: str) -> ServerSentEvent | None:
        if line == "":
            if not self.data:
                self.event = "message"
                return None
            text = "\n".join(self.data)
            try:
                data: Any = json.loads(text)
            except ValueError:
                data = text
            out = ServerSentEvent(self.event, self.id, data)
            self.event, self.data = "message", []
            return out
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self.event = value
        elif field == "data":
            self.data.append(value)
        elif field == "id":
            self.id = value
        return None


def _headers(token: str | None) -> dict[str, str]:
    headers = {"accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


class _Base:
    def __init__(self, base_url: str, token: str | None, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout


class _SyncCore(_Base):
    """Blocking transport."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0,
                 http: httpx2.Client | None = None) -> None:
        super().__init__(base_url, token, timeout)
        self._http = http or httpx2.Client(base_url=self.base_url, headers=_headers(token),
                                           timeout=timeout)

    def _call(self, op: _Op, path: Mapping[str, str], query: Mapping[str, Any],
              headers: Mapping[str, Any], body: Mapping[str, Any] | None) -> Any:
        return _answer(op, self._http.request(**_request(op, path, query, headers, body)))

    def _events(self, op: _Op, path: Mapping[str, str], query: Mapping[str, Any],
                headers: Mapping[str, Any], body: Mapping[str, Any] | None) -> Iterator[ServerSentEvent]:
        with self._http.stream(**_request(op, path, query, headers, body)) as response:
            if not response.is_success:
                response.read()
                raise ApiError._from(response.status_code, response.text)
            parser = _EventParser()
            for line in response.iter_lines():
                event = parser.feed(line)
                if event is not None:
                    yield event

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _AsyncCore(_Base):
    """Awaited transport."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0,
                 http: httpx2.AsyncClient | None = None) -> None:
        super().__init__(base_url, token, timeout)
        self._http = http or httpx2.AsyncClient(base_url=self.base_url,
                                                headers=_headers(token), timeout=timeout)

    async def _call(self, op: _Op, path: Mapping[str, str], query: Mapping[str, Any],
                    headers: Mapping[str, Any], body: Mapping[str, Any] | None) -> Any:
        response = await self._http.request(**_request(op, path, query, headers, body))
        return _answer(op, response)

    async def _events(self, op: _Op, path: Mapping[str, str], query: Mapping[str, Any],
                      headers: Mapping[str, Any], body: Mapping[str, Any] | None) -> AsyncIterator[ServerSentEvent]:
        async with self._http.stream(**_request(op, path, query, headers, body)) as response:
            if not response.is_success:
                await response.aread()
                raise ApiError._from(response.status_code, response.text)
            parser = _EventParser()
            async for line in response.aiter_lines():
                event = parser.feed(line)
                if event is not None:
                    yield event

    async def aclose(self) -> None:
        """Closes the connection pool."""
        await self._http.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
