"""Serving an `A2AApproval` over HTTP with the A2A SDK: the agent card, the JSON-RPC endpoint
behind the SDK's request handler (whose refusal of a message in a finished task gets
egressgate's word that the card is done), and uvicorn on a loopback socket.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import uvicorn
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, SendMessageRequest
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from a2a.utils.errors import UnsupportedOperationError
from starlette.applications import Starlette

if TYPE_CHECKING:
    from .a2a import A2AApproval


def agent_card(url: str, name: str, description: str, *, streaming: bool = True) -> AgentCard:
    """A spec-complete agent card for one JSON-RPC endpoint at `url`, with one skill."""
    return AgentCard(
        name=name, description=description, version="1",
        supported_interfaces=[AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC.value,
                                             protocol_version=PROTOCOL_VERSION_CURRENT)],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"], default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="task", name=name, description=description, tags=["egressgate"])])


class _Handler(DefaultRequestHandler):
    """The SDK's request handler; a message in a finished task is still refused with the SDK's
    terminal-state error, which now also says (from egressgate) that the card is done."""

    def __init__(self, approval: A2AApproval, card: AgentCard):
        super().__init__(agent_executor=approval, task_store=approval.store, agent_card=card)
        self._approval = approval

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        """The SDK's `SendMessage`."""
        try:
            return await super().on_message_send(params, context)
        except UnsupportedOperationError as e:
            raise await self._approval.finished(params.message.task_id, context, e) from e

    async def on_message_send_stream(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        """The SDK's `SendStreamingMessage`."""
        try:
            async for event in super().on_message_send_stream(params, context):
                yield event
        except UnsupportedOperationError as e:
            raise await self._approval.finished(params.message.task_id, context, e) from e


def build_app(approval: A2AApproval, card: AgentCard) -> Starlette:
    """The agent card at the SDK's well-known path and JSON-RPC at the card's URL path."""
    path = "/" + card.supported_interfaces[0].url.split("://", 1)[-1].partition("/")[2]
    handler = _Handler(approval, card)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()  # ends the tasks the handler still holds (paused ones too)

    return Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, path), lifespan=lifespan)


@asynccontextmanager
async def serving(make_app: Callable[[str], Starlette], host: str = "127.0.0.1",
                  port: int = 0) -> AsyncIterator[str]:
    """Serves `make_app(url)` with uvicorn on `host:port` (0: any free port) while the block
    runs; yields the base URL (`http://host:port/`)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound}/"
    server = uvicorn.Server(uvicorn.Config(make_app(url), log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield url
    finally:
        server.should_exit = True
        await task
        sock.close()
