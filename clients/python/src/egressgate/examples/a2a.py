"""`python -m egressgate.examples.a2a ask --user U --chat C --url URL [--unattended]` and
`... resume --interrupt-id ID`: an A2A agent (the SDK's executor, request handler and HTTP
app, served on loopback) with a scripted agent (no network model) whose sandbox downloads
through the turn's proxy, is refused, asks, and pauses its task in `input-required` with the
card; the SDK's client is the caller. `resume`, in a new process after the person answered,
restores the task from the card's snapshot, and the client answers in that task as the person
decided on egressgate: the task completes with the downloaded text.

`... serve [--host H] [--port P]` serves the same agent until killed, printing
`{"url": ...}` first: a task's chat is its A2A `contextId`, its user the request metadata's
`user`. Reads EGRESSGATE_CONTROL and EGRESSGATE_RUNTIME_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import Client as A2AClient
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, new_text_part
from a2a.server.agent_execution import RequestContext
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, Task, TaskState

from .. import Client
from ..adapters.a2a import A2AApproval, ApprovalCall
from ..adapters.a2a_server import agent_card, build_app, serving
from ..adapters.claim import APPROVAL_TOOL, AlreadyDone, Paused, Turn, open_turn
from ._script import DOWNLOAD_TOOL, REASON, Example, Step, download, main, next_move

PROMPT = "Download these and show them to me:"


class ScriptedAgent:
    """The scripted model behind the A2A agent: `next_move` over the tool results in its
    state, so a continued task picks up where the paused one stopped."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        """The approval tool's answers this process saw (the deny, unattended)."""

    def begin(self, text: str) -> dict[str, Any]:
        """The URLs are the message's words that look like URLs."""
        return {"urls": [w for w in text.split() if w.startswith(("http://", "https://"))],
                "history": [], "asked": None}

    def step(self, state: dict[str, Any], turn: Turn, answer: str | None) -> ApprovalCall | str:
        """Downloads until one is refused (an approval call) or all worked (the bodies)."""
        history = state["history"]
        if answer is not None:
            self.answers.append(answer)
            history.append({"tool": APPROVAL_TOOL, "url": state["asked"], "text": answer})
        while True:
            move, arg = next_move(state["urls"], [Step(s["tool"], s["url"], s["text"]) for s in history])
            if move == "download":
                history.append({"tool": DOWNLOAD_TOOL, "url": arg, "text": download(turn, arg)})
            elif move == "ask":
                state["asked"] = arg
                return ApprovalCall(f"call_{len(history)}", REASON, urls=[arg])
            else:
                return arg


def _card(url: str) -> Any:
    return agent_card(url, "egressgate example agent", "Downloads the URLs in the message through the sandbox's proxy",
                      streaming=False)


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[A2AClient]:
    """The SDK's client for the agent at `url` (no proxy settings of the environment)."""
    async with httpx.AsyncClient(trust_env=False, timeout=60) as http:
        client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


async def _send(client: A2AClient, text: str, *, context_id: str = "", task_id: str = "") -> Task:
    """One message (in a task, when `task_id`); the task as it stands when the agent stopped."""
    message = Message(role=Role.ROLE_USER, message_id=os.urandom(8).hex(), context_id=context_id,
                      task_id=task_id, parts=[new_text_part(text)])
    async for response in client.send_message(SendMessageRequest(message=message)):
        if response.HasField("task"):
            return response.task
    raise RuntimeError("the agent answered without a task")


def _outcome(approval: A2AApproval, task: Task) -> Paused | str:
    """A paused task's card, or a completed task's text."""
    if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and task.id in approval.paused:
        return approval.paused[task.id]
    if task.status.state == TaskState.TASK_STATE_COMPLETED:
        return "\n".join(get_artifact_text(a) for a in task.artifacts)
    raise RuntimeError(f"the task ended {TaskState.Name(task.status.state)}: {task.status.message}")


def ask(eg: Client, turn: Turn, urls: list[str]) -> Any:
    """The first run: the client's task, until the card or the final text."""
    agent = ScriptedAgent()
    approval = A2AApproval(eg, agent, turn_for=lambda _: turn)

    async def run() -> Any:
        async with serving(lambda url: build_app(approval, _card(url))) as url, _client(url) as client:
            out = _outcome(approval, await _send(client, " ".join([PROMPT, *urls]), context_id=turn.chat))
        if isinstance(out, Paused):
            return out
        return out, agent.answers[-1] if agent.answers else None

    return asyncio.run(run())


def _no_new_tasks(_: RequestContext) -> Turn:
    raise RuntimeError("this process only continues a restored task")


def resume(eg: Client, interrupt_id: str, user: str) -> Any:
    """The continued run, in a new process: the task comes back from the card's snapshot, and
    the client answers in it as the person decided on egressgate."""
    approval = A2AApproval(eg, ScriptedAgent(), turn_for=_no_new_tasks)

    async def run() -> Any:
        async with serving(lambda url: build_app(approval, _card(url))) as url, _client(url) as client:
            task = await approval.restore(interrupt_id, user)
            if isinstance(task, AlreadyDone):
                return task
            decision = eg.get_interrupt_outcome(interrupt_id)["decision"] or {}
            said = "approve" if decision.get("outcome") == "approved" else "deny"
            return _outcome(approval, await _send(client, said, context_id=task.context_id, task_id=task.id))

    return asyncio.run(run())


def serve(eg: Client, host: str, port: int) -> None:
    """Serves the agent until killed; each task opens its own turn."""

    def turn_for(context: RequestContext) -> Turn:
        return open_turn(eg, str(context.metadata.get("user", "")), str(context.context_id))

    approval = A2AApproval(eg, ScriptedAgent(), turn_for=turn_for)

    async def run() -> None:
        async with serving(lambda url: build_app(approval, _card(url)), host, port) as url:
            print(json.dumps({"url": url}), flush=True)
            await asyncio.Event().wait()

    asyncio.run(run())


def _main(argv: list[str]) -> int:
    if argv[:1] != ["serve"]:
        return main(Example(ask=ask, resume=resume), argv)
    parser = argparse.ArgumentParser(prog="egressgate.examples.a2a serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv[1:])
    control = os.environ.get("EGRESSGATE_CONTROL", "http://127.0.0.1:8080")
    with Client(control, token=os.environ.get("EGRESSGATE_RUNTIME_TOKEN")) as eg:
        serve(eg, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
