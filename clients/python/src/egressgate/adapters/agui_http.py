"""An `AguiApproval` agent served over HTTP, as AG-UI clients (`@ag-ui/client`'s `HttpAgent`)
call agents: `POST /` with a `RunAgentInput` as JSON, answered with the run's events as
Server-Sent Events (`ag_ui.encoder.EventEncoder`), written as they happen. The standard
library's threading HTTP server, one thread per run; nothing else to install.

    with serving(approval, port=8000) as url:   # or serve(approval, port=8000).serve_forever()
        ...

It binds loopback unless told otherwise and checks no caller credential itself: put it
behind what authenticates the application's users, and make `user_of` answer from that.
Requests are not logged (a resume entry may carry a card's secret).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError

from .agui import AguiApproval

MAX_BODY = 1 << 20
"""The largest `RunAgentInput` accepted (1 MiB): larger is `413`."""


def _handler(approval: AguiApproval) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._error(413, "TOO_LARGE", f"a run input is at most {MAX_BODY} bytes")
                return
            try:
                run = RunAgentInput.model_validate_json(self.rfile.read(length))
            except ValidationError as e:
                self._error(422, "INVALID_INPUT", f"not an AG-UI RunAgentInput: {e.error_count()} errors")
                return
            encoder = EventEncoder(accept=self.headers.get("Accept"))
            self.send_response(200)
            self.send_header("Content-Type", encoder.get_content_type())
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            events = approval.run(run)
            try:
                for event in events:
                    self.wfile.write(encoder.encode(event).encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client left: the run stops here; a held claim's lease lapses
            finally:
                events.close()

        def _error(self, status: int, code: str, message: str) -> None:
            body = json.dumps({"error": {"code": code, "message": message}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a request line is not worth a secret in a log."""

    return Handler


def serve(approval: AguiApproval, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """The bound server (`port` 0: any free port, see `server_address`); call
    `serve_forever()`."""
    server = ThreadingHTTPServer((host, port), _handler(approval))
    server.daemon_threads = True
    return server


@contextmanager
def serving(approval: AguiApproval, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serves in a background thread while the block runs; yields the endpoint's URL."""
    server = serve(approval, host, port)
    thread = threading.Thread(target=server.serve_forever, name="agui-http", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
