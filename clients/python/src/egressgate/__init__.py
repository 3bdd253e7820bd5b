"""egressgate's control API from Python: `Client` (blocking) and `AsyncClient`, one method per
operation of the OpenAPI document, named after its operationId in snake_case
(`open_turn`, `request_approval`, `resume_interrupt`, ...), typed with the document's
schemas; `ApiError` (`status`, `code`, `message`) for every non-2xx answer; the chat event
stream as an iterator of `ServerSentEvent`.

    from egressgate import Client
    with Client("http://127.0.0.1:8080", token=RUNTIME_TOKEN) as eg:
        turn = eg.open_turn(user_id="alice", chat_id="c1", can_ask_human=True)
"""

from ._core import ApiError, ServerSentEvent, _AsyncCore, _SyncCore
from ._operations import OPERATIONS, _AsyncOperations, _SyncOperations
from ._schemas import *  # noqa: F403 - every schema of the document, by its name
from ._schemas import __dict__ as _schema_names

__all__ = ["ApiError", "AsyncClient", "Client", "OPERATIONS", "ServerSentEvent"] + [
    n for n in _schema_names if n[:1].isupper()
]


class Client(_SyncOperations, _SyncCore):
    """The control API, blocking: `Client(base_url, token=None, *, timeout=30.0, http=None)`.
    `token` is sent as `Authorization: Bearer` (the runtime or admin token, or a named one);
    `http` is an `httpx2.Client` of your own (its base URL and headers are then yours)."""


class AsyncClient(_AsyncOperations, _AsyncCore):
    """The control API, awaited: as `Client`, with `httpx2.AsyncClient`; the event stream is
    an async iterator."""
