"""egressgate's approval loop as an AG-UI agent (`pip install 'egressgate[agui]'`): a run that
is refused and asks ends with `RUN_FINISHED` carrying AG-UI's interrupt outcome (the gate's
card, as the AG-UI `Interrupt` the gate issues), and the next run's `resume` entry becomes the
gate's exactly-once claim. `egressgate.adapters.agui_http` serves it over HTTP (SSE).

    approval = AguiApproval(eg, model, {"run_script": run_script},
                            turn_for=lambda run: open_turn(eg, user, run.thread_id),
                            user_of=lambda run: user)
    for event in approval.run(run_agent_input):   # RUN_STARTED … RUN_FINISHED / RUN_ERROR
        send(event)

The agent is a loop over AG-UI messages: `model(messages)` answers with an `AssistantMessage`
(text, or tool calls); the tools run; the approval tool (`request_egress_approval`) makes the
gate's first call. When the gate answers `ask`, the run stops: the agent's own state (the
turn, the AG-UI messages, the approval call it paused on) is serialised, registered as the
card's snapshot, and the run ends with the interrupt outcome. The interrupt's
`metadata.egressgate` carries what the frontend shows the person: the card, its link when the
gate has a public URL, and the resume secret.

A run with `resume` (exactly one entry, for the card) continues from the snapshot in any
process. With the secret in the entry's `metadata.egressgate.secret` (the person answered in
the chat), the entry goes to the gate's resume endpoint as is, which decides: only `resolved`
with `payload.approved: true` approves, a `cancelled` entry declines. Without it, the person
answered on the card page and the run takes that claim over; a cancelled entry for a card
nobody answered withdraws the request without running anything (the next turn expires the
card). The gate checks the card is the caller's (`user_of`) before anything is claimed.

The resume branch: the approval call the run paused on gets its result from the stored card
and the stored decision only (`resume_answer`); the first call is never made again for it.
The batch rule: when an assistant message holds an approval call, the gate's
`POST /v1/batches/decide` names the other calls to cancel, and they get its text as their
result before the approval call runs, from the message alone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Interrupt,
    Message,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from pydantic import TypeAdapter

from .. import ApiError, Client
from .claim import (
    APPROVAL_TOOL,
    AlreadyDone,
    Claim,
    ClaimLost,
    Paused,
    StillPending,
    Turn,
    first_answer_text,
    first_call,
    register,
    resume_answer,
)

METADATA_KEY = "egressgate"
"""The key of egressgate's entry in an interrupt's and a resume entry's `metadata`."""

Model = Callable[[list[Message]], AssistantMessage]
"""The agent's model: the conversation so far in, the next assistant message out."""

Tool = Callable[[Turn, dict[str, Any]], str]
"""A sandbox tool: the turn (its proxy) and the call's arguments in, the result text out."""

MAX_STEPS = 50
"""Model calls one run may make: past it the run fails (`TOO_MANY_STEPS`) instead of looping."""

class RunFailed(Exception):
    """The run cannot go on for a reason of its own (not the gate's): ends it with `RUN_ERROR`
    carrying `code`."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


@dataclass
class AgentState:
    """The agent's own state, serialised as the card's snapshot: what a run in another
    process needs to continue (the turn for its proxy, the AG-UI messages, the approval call
    it paused on)."""

    turn: Turn
    messages: list[Message]
    paused_call: str | None = None

    def to_json(self) -> bytes:
        """The snapshot's bytes."""
        return json.dumps({
            "turn": self.turn.to_dict(), "paused_call": self.paused_call,
            "messages": _MESSAGES.dump_python(self.messages, mode="json", by_alias=True),
        }).encode()

    @classmethod
    def from_json(cls, data: bytes) -> AgentState:
        """Back from `to_json`."""
        saved = json.loads(data)
        return cls(Turn.from_dict(saved["turn"]), _MESSAGES.validate_python(saved["messages"]),
                   saved.get("paused_call"))


def _id() -> str:
    return uuid.uuid4().hex


class AguiApproval:
    """An AG-UI agent with egressgate's approval loop: `run` turns one `RunAgentInput` into
    its events. `turn_for(run)` opens the turn of a new user message (the application knows
    the user, the chat and whether a person can answer); `user_of(run)` names the caller, whose
    card alone a resume may claim."""

    def __init__(self, eg: Client, model: Model, tools: dict[str, Tool], *,
                 turn_for: Callable[[RunAgentInput], Turn], user_of: Callable[[RunAgentInput], str]):
        self.eg = eg
        self.model = model
        self.tools = tools
        self.turn_for = turn_for
        self.user_of = user_of

    def run(self, run: RunAgentInput) -> Iterator[BaseEvent]:
        """The run's events, as they happen. Fails closed: any error ends the run with
        `RUN_ERROR` (`code` the gate's code, or `STILL_PENDING`, `CLAIM_LOST`,
        `INCOMPLETE_RESUME`, `TOO_MANY_STEPS`, `AGENT_ERROR`)."""
        yield RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id)
        try:
            if run.resume:
                yield from self._resume(run)
            else:
                state = AgentState(self.turn_for(run), list(run.messages))
                yield from self._loop(run, state, None)
        except ApiError as e:
            yield RunErrorEvent(code=e.code or "API_ERROR", message=e.message)
        except RunFailed as e:
            yield RunErrorEvent(code=e.code, message=str(e))
        except StillPending as e:
            yield RunErrorEvent(code="STILL_PENDING", message=str(e))
        except ClaimLost as e:
            yield RunErrorEvent(code="CLAIM_LOST", message=str(e))
        except Exception as e:  # noqa: BLE001 - the stream must end with a terminal event
            yield RunErrorEvent(code="AGENT_ERROR", message=f"{type(e).__name__}: {e}")

    def _loop(self, run: RunAgentInput, state: AgentState, claim: Claim | None) -> Iterator[BaseEvent]:
        """Model, tools, model … until a final text (the run succeeds; a held claim completes
        the card) or a card (the run pauses; a held claim chains it)."""
        for _ in range(MAX_STEPS):
            reply = self.model(state.messages)
            state.messages.append(reply)
            yield from _announce(reply)
            calls = reply.tool_calls or []
            if not calls:
                text = str(reply.content or "")
                if claim:
                    claim.complete({"final": text})
                yield RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id, result={"final": text})
                return
            cancel = self._batch(calls)
            approval = None
            for call in calls:
                if call.id in cancel:
                    yield _answer(state, call.id, cancel[call.id])
                elif call.function.name == APPROVAL_TOOL:
                    approval = call
                elif call.function.name in self.tools:
                    args = json.loads(call.function.arguments or "{}")
                    yield _answer(state, call.id, self.tools[call.function.name](state.turn, args))
                else:
                    yield _answer(state, call.id, f"there is no tool named {call.function.name!r}")
            if approval is None:
                continue
            args = json.loads(approval.function.arguments or "{}")
            first = first_call(self.eg, state.turn, reason=str(args.get("reason", "")), urls=args.get("urls"),
                               packages=args.get("packages"), tool_call_id=approval.id)
            if first["outcome"] != "ask":
                yield _answer(state, approval.id, first_answer_text(first))
                continue
            # The pause: serialise first, then register the card (chained under a held claim).
            state.paused_call = approval.id
            snapshot = state.to_json()
            paused = claim.chain(first["draft_id"], snapshot) if claim else register(self.eg, first["draft_id"], snapshot)
            yield RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id,
                                   outcome=RunFinishedInterruptOutcome(interrupts=[_interrupt(paused)]))
            return
        raise RunFailed("TOO_MANY_STEPS", f"the model made {MAX_STEPS} calls without finishing")

    def _batch(self, calls: list[ToolCall]) -> dict[str, str]:
        """The batch rule: with an approval call among `calls`, the others to cancel and their
        text, as the gate decides from the message alone."""
        if not any(c.function.name == APPROVAL_TOOL for c in calls):
            return {}
        uses = [{"toolUseId": c.id, "name": c.function.name} for c in calls]
        return dict(self.eg.decide_batch(approval_tool=APPROVAL_TOOL, tool_uses=uses)["cancel"])  # type: ignore[arg-type]

    def _resume(self, run: RunAgentInput) -> Iterator[BaseEvent]:
        """The next run's `resume`: the claim, the snapshot, the resume branch, the loop."""
        entries = run.resume or []
        if len(entries) != 1:
            raise RunFailed("INCOMPLETE_RESUME", "send exactly one resume entry: the card's")
        entry = entries[0]
        claim = self._claim(entry, self.user_of(run))
        if isinstance(claim, AlreadyDone):
            text = "That request was answered and finished before; nothing ran again."
            yield from _say(text)
            yield RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id,
                                   result={"already_done": True, "interrupt_id": claim.interrupt_id})
            return
        if claim is None:
            yield from _say("The approval request was withdrawn; nothing was approved.")
            yield RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id, result={"withdrawn": True})
            return
        state = AgentState.from_json(claim.snapshot)
        if not state.paused_call:
            raise RuntimeError("the card's snapshot holds no paused approval call")
        with claim.heartbeating():
            # RESUME BRANCH: the paused call's result from the stored card and decision only.
            call, state.paused_call = state.paused_call, None
            yield _answer(state, call, resume_answer(claim.card, claim.decision))
            yield from self._loop(run, state, claim)

    def _claim(self, entry: ResumeEntry, user: str) -> Claim | AlreadyDone | None:
        """This process's claim for the entry: the person's answer given in the chat forwarded
        with its secret (a claim of the runtime's own), else the card page's click taken over.
        `None`: a cancelled entry for a card nobody answered (nothing is claimed)."""
        secret = ((entry.metadata or {}).get(METADATA_KEY) or {}).get("secret")
        if secret:
            try:
                answer = dict(self.eg.resume_interrupt(
                    entry.interrupt_id, secret=str(secret), user=user,
                    resume=[entry.model_dump(mode="json", by_alias=True, exclude_none=True)]))  # type: ignore[list-item]
            except ApiError as e:
                if e.status != 409:
                    raise
                # The card page claimed first: its click is taken over below.
            else:
                if answer.get("replayed"):
                    return AlreadyDone(entry.interrupt_id, answer.get("decision"))
                card = dict(self.eg.get_interrupt_outcome(entry.interrupt_id, user=user)["card"])
                return Claim(self.eg, entry.interrupt_id, user, answer, card)
        try:
            return Claim.take_over(self.eg, entry.interrupt_id, user)
        except StillPending:
            if entry.status == "cancelled":
                return None
            raise


def _interrupt(paused: Paused) -> Interrupt:
    """The gate's AG-UI interrupt, with what the frontend shows the person in its metadata."""
    shown: dict[str, Any] = {"card": paused.card, "secret": paused.secret}
    if paused.card_url:
        shown["card_url"] = paused.card_url
    interrupt = Interrupt.model_validate(paused.interrupt)
    interrupt.metadata = {**(interrupt.metadata or {}), METADATA_KEY: shown}
    return interrupt


def _say(text: str, message_id: str | None = None) -> Iterator[BaseEvent]:
    """A text message of the assistant as AG-UI events."""
    message_id = message_id or _id()
    yield TextMessageStartEvent(message_id=message_id, role="assistant")
    yield TextMessageContentEvent(message_id=message_id, delta=text)
    yield TextMessageEndEvent(message_id=message_id)


def _announce(reply: AssistantMessage) -> Iterator[BaseEvent]:
    """An assistant message as AG-UI events: its text, then each tool call."""
    if reply.content:
        yield from _say(str(reply.content), reply.id)
    for call in reply.tool_calls or []:
        yield ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.function.name, parent_message_id=reply.id)
        yield ToolCallArgsEvent(tool_call_id=call.id, delta=call.function.arguments)
        yield ToolCallEndEvent(tool_call_id=call.id)


def _answer(state: AgentState, call_id: str, text: str) -> ToolCallResultEvent:
    """A tool call's result: kept in the agent's messages and sent as `TOOL_CALL_RESULT`."""
    message = ToolMessage(id=_id(), tool_call_id=call_id, content=text)
    state.messages.append(message)
    return ToolCallResultEvent(message_id=message.id, tool_call_id=call_id, content=text, role="tool")
