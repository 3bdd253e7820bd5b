"""`python -m egressgate.examples.agui ask --user U --chat C --url URL [--unattended]` and
`... resume --interrupt-id ID`: an AG-UI agent served over HTTP (SSE) with a scripted model
(no network model) whose sandbox tool downloads through the turn's proxy, is refused, asks,
and ends the run with the interrupt outcome; the next run's `resume`, in a new process after
the person answered, finishes with the downloaded text. Each command starts the endpoint on
loopback and is its own AG-UI client (a `RunAgentInput` POSTed, the events read back).

`... serve --user U [--port P]` only serves (one line `{"url": …}`, then until killed), for
another AG-UI client such as `@ag-ui/client`'s `HttpAgent`: each new user message opens a turn
of user U in the chat named by the thread id, and the scripted model downloads the URLs on the
lines of the first user message. Reads EGRESSGATE_CONTROL and EGRESSGATE_RUNTIME_TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
import uuid
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Event,
    FunctionCall,
    Message,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    ToolCall,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from pydantic import TypeAdapter

from .. import ApiError, Client
from ..adapters.agui import METADATA_KEY, AguiApproval
from ..adapters.agui_http import serve, serving
from ..adapters.claim import APPROVAL_TOOL, AlreadyDone, ClaimLost, Paused, StillPending, Turn, open_turn
from ._script import DOWNLOAD_TOOL, REASON, Example, Step, download, main, next_move

PROMPT = "Download these files and show them to me:"

_EVENT: TypeAdapter[BaseEvent] = TypeAdapter(Event)


def _urls(messages: list[Message]) -> list[str]:
    """The URLs on the lines of the first user message."""
    first = next((m for m in messages if isinstance(m, UserMessage)), None)
    text = first.content if first and isinstance(first.content, str) else ""
    return [line.strip() for line in text.splitlines() if "://" in line]


def _history(messages: list[Message]) -> list[Step]:
    """The tool results the model has seen, in order, with the URL each was about."""
    calls = {c.id: c.function for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
    steps = []
    for m in messages:
        if isinstance(m, ToolMessage):
            call = calls[m.tool_call_id]
            args = json.loads(call.arguments or "{}")
            steps.append(Step(call.name, args.get("url") or (args.get("urls") or [None])[0], str(m.content)))
    return steps


def scripted_model(messages: list[Message]) -> AssistantMessage:
    """The scripted model over AG-UI messages: `next_move`, as an assistant message. Asking
    comes with a retry of the download beside it, which the batch rule cancels."""
    move, arg = next_move(_urls(messages), _history(messages))
    n = len(messages)
    if move == "final":
        return AssistantMessage(id=f"msg_{n}", content=arg)
    calls = [(DOWNLOAD_TOOL, {"url": arg})]
    if move == "ask":
        calls = [(APPROVAL_TOOL, {"reason": REASON, "urls": [arg]}), (DOWNLOAD_TOOL, {"url": arg})]
    return AssistantMessage(id=f"msg_{n}", tool_calls=[
        ToolCall(id=f"call_{n}_{i}", function=FunctionCall(name=name, arguments=json.dumps(args)))
        for i, (name, args) in enumerate(calls)])


def agent(eg: Client, user: str, turn: Turn | None = None) -> AguiApproval:
    """The example's agent for `user`: each new user message opens a turn in the thread's chat
    (or uses `turn`, the one the command line opened)."""
    def turn_for(run: RunAgentInput) -> Turn:
        return turn or open_turn(eg, user, run.thread_id)

    return AguiApproval(eg, scripted_model, {DOWNLOAD_TOOL: lambda t, args: download(t, str(args["url"]))},
                        turn_for=turn_for, user_of=lambda run: user)


def post_run(url: str, run: RunAgentInput) -> list[BaseEvent]:
    """An AG-UI client's run: the input POSTed, the SSE stream read back as events."""
    body = run.model_dump_json(by_alias=True, exclude_none=True).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "text/event-stream"})
    # Straight to the endpoint: never through a proxy of the environment.
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=120) as r:
        stream = r.read().decode()
    return [_EVENT.validate_json(line[len("data: "):]) for line in stream.splitlines() if line.startswith("data: ")]


def _settle(events: list[BaseEvent]) -> Paused | AlreadyDone | RunFinishedEvent:
    """How the run ended: a card (from the interrupt outcome), a done card, or the finish.
    `RUN_ERROR` is raised as what the adapter met."""
    end = events[-1]
    if isinstance(end, RunErrorEvent):
        if end.code == "STILL_PENDING":
            raise StillPending(end.message)
        if end.code == "CLAIM_LOST":
            raise ClaimLost(end.message)
        raise ApiError(0, end.code or "", end.message)
    assert isinstance(end, RunFinishedEvent), end
    if end.outcome is not None and end.outcome.type == "interrupt":
        interrupt = end.outcome.interrupts[0]
        shown = (interrupt.metadata or {})[METADATA_KEY]
        return Paused(interrupt.id, shown["secret"], shown.get("card_url"), shown["card"],
                      interrupt.model_dump(mode="json", by_alias=True, exclude_none=True))
    result = end.result or {}
    if result.get("already_done"):
        return AlreadyDone(result["interrupt_id"], None)
    return end


def ask(eg: Client, turn: Turn, urls: list[str]) -> Any:
    """The first run, over HTTP: until the card, or the final text (with the deny the
    approval tool answered, when unattended)."""
    with serving(agent(eg, turn.user, turn)) as url:
        events = post_run(url, RunAgentInput(thread_id=turn.chat, run_id=uuid.uuid4().hex, messages=[
            UserMessage(id="user_1", content="\n".join([PROMPT, *urls]))]))
    out = _settle(events)
    if not isinstance(out, RunFinishedEvent):
        return out
    approvals = {e.tool_call_id for e in events if isinstance(e, ToolCallStartEvent) and e.tool_call_name == APPROVAL_TOOL}
    denied = [str(e.content) for e in events if isinstance(e, ToolCallResultEvent) and e.tool_call_id in approvals]
    return out.result["final"], denied[-1] if denied else None


def resume(eg: Client, interrupt_id: str, user: str) -> Any:
    """The next run, in any process: its `resume` entry answers the card, which the person
    answered on the card page (the adapter takes that claim over)."""
    with serving(agent(eg, user)) as url:
        events = post_run(url, RunAgentInput(
            thread_id=f"resume-{interrupt_id}", run_id=uuid.uuid4().hex, messages=[],
            resume=[ResumeEntry(interrupt_id=interrupt_id, status="resolved")]))
    out = _settle(events)
    return out.result["final"] if isinstance(out, RunFinishedEvent) else out


def serve_main(argv: list[str]) -> int:
    """`serve --user U [--port P]`: the endpoint alone, until killed."""
    parser = argparse.ArgumentParser(prog="egressgate.examples.agui serve")
    parser.add_argument("--user", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    eg = Client(os.environ.get("EGRESSGATE_CONTROL", "http://127.0.0.1:8080"),
                token=os.environ.get("EGRESSGATE_RUNTIME_TOKEN"))
    server = serve(agent(eg, args.user), port=args.port)
    print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}/"}), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    sys.exit(serve_main(argv[1:]) if argv[:1] == ["serve"] else main(Example(ask=ask, resume=resume), argv))
