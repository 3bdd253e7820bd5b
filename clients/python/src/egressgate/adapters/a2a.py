"""egressgate's approval loop in an A2A agent (`pip install 'egressgate[a2a]'`): an
`AgentExecutor` for the A2A SDK whose task enters `input-required` carrying the card when the
agent asks for what the sandbox was refused, and continues, exactly once, when the client
answers in the same task after the person decided on the card.

    approval = A2AApproval(eg, agent, turn_for=lambda ctx: open_turn(eg, user_of(ctx), ctx.context_id))
    app = build_app(approval, agent_card(url, "Data agent", "Downloads and summarises data"))
    uvicorn.run(app, host="127.0.0.1", port=8000)       # or `async with serving(...)`
    # a client's task pauses in input-required with the card; after the person answered, the
    # client's next message in that task ("approve" or "deny") continues it. In a new process:
    task = await approval.restore(interrupt_id, user)   # the paused task, from the card's snapshot

The agent is any object with `begin(text) -> state` and `step(state, turn, answer) ->
ApprovalCall | str` (see `Agent`): its state is plain JSON, kept with the A2A `Task` as the
card's snapshot, so a different process can continue the task after the first one died.

What the client's answer means: the person's decision is egressgate's stored decision and
nothing else. `approve` says "the person answered the card, continue": the run continues
with the stored decision (approved, or the decline when the person declined). `deny` (or
`reject`, `decline`) continues it declined whatever the person decided: a client may withhold
an approval, never grant one. Any other text, or an answer before the person decided, leaves
the task in `input-required` and says why, without touching the card.

The resume branch: the continued run never asks the gate to merge refusals again (after an
approval that would find "nothing to ask"; after a deny it would say the opposite of what the
person decided). The approval call's answer is built from the claimed card and the stored
decision only; a new approval call in the continued run is a fresh question, and its card is
chained onto the claimed one. A2A runs one approval call at a time: there is no batch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import uuid4

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

from .. import Client
from .claim import AlreadyDone, Claim, ClaimLost, Paused, StillPending, Turn, register
from .claim import first_answer_text, first_call, resume_answer

INTERRUPT_KEY = "egressgate_interrupt_id"
"""The task's metadata key for the card it waits on (or last waited on)."""

CARD_KEY = "egressgate_card"
"""The key of the card in the `input-required` message's data part."""

APPROVE = frozenset({"approve", "approved"})
"""Client answers meaning "the person answered the card: continue with the stored decision"."""

DENY = frozenset({"deny", "denied", "reject", "rejected", "decline", "declined"})
"""Client answers meaning "continue declined", whatever the person decided."""


@dataclass(frozen=True)
class ApprovalCall:
    """The agent's approval tool call: what it asks the person for, and why."""

    call_id: str
    reason: str
    urls: list[str] | None = None
    packages: list[str] | None = None


class Agent(Protocol):
    """What the executor runs. Its state is plain JSON: it goes into the card's snapshot."""

    def begin(self, text: str) -> dict[str, Any]:
        """A new task's state, from the user's message."""

    def step(self, state: dict[str, Any], turn: Turn, answer: str | None) -> ApprovalCall | str:
        """Runs until the agent calls the approval tool (`ApprovalCall`) or ends (its final
        text), updating `state` in place; `answer` is the approval tool's result for the last
        `ApprovalCall` (None on the first step). Runs in a worker thread: it may block."""


def client_answer(text: str) -> str | None:
    """What the client's message in a paused task says: `"approve"`, `"deny"`, or None."""
    word = text.strip().strip(".!").lower()
    return "approve" if word in APPROVE else "deny" if word in DENY else None


def card_message(task: Task, interrupt_id: str, card: dict[str, Any], card_url: str | None,
                 note: str | None = None) -> Message:
    """The `input-required` status message: the question as text (with `note` first), and the
    card as data (`interrupt_id`, `question`, `reason`, `sites`, `packages`, `card_url` when
    the gate has a public URL). Never the resume secret on its own."""
    asked = list(card.get("sites", [])) + list(card.get("packages", []))
    question = f"Allow {', '.join(asked)}? {card.get('reason', '')}".strip()
    data: dict[str, Any] = {"interrupt_id": interrupt_id, "question": question, "reason": card.get("reason", ""),
                            "sites": list(card.get("sites", [])), "packages": list(card.get("packages", []))}
    if card_url:
        data["card_url"] = card_url
    text = question + " Once the person decided on the card, answer `approve` (or `deny`) in this task."
    return Message(role=Role.ROLE_AGENT, task_id=task.id, context_id=task.context_id, message_id=uuid4().hex,
                   parts=[new_text_part(f"{note} {text}" if note else text), new_data_part({CARD_KEY: data})])


def _still_waiting(task: Task, note: str) -> Message:
    """The paused task's card again, after an answer that does not continue it."""
    parts = [new_text_part(note)] + [Part(data=p.data) for p in task.status.message.parts if p.HasField("data")]
    return Message(role=Role.ROLE_AGENT, task_id=task.id, context_id=task.context_id, message_id=uuid4().hex,
                   parts=parts)


class A2AApproval(AgentExecutor):
    """The A2A SDK's `AgentExecutor` running `agent` with egressgate's approval loop, and the
    task store it keeps its tasks in. `turn_for(context)` opens (or finds) the turn of a new
    task; it runs in a worker thread."""

    def __init__(self, eg: Client, agent: Agent, turn_for: Callable[[RequestContext], Turn],
                 store: TaskStore | None = None):
        self.eg = eg
        self.agent = agent
        self.turn_for = turn_for
        self.store = store or InMemoryTaskStore()
        self.paused: dict[str, Paused] = {}
        """The card each paused task waits on, by task id, with its secret: for the runtime that
        shows the card itself (no `--control-public-url`). The task carries no secret."""
        self._held: dict[str, Claim] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """A new task runs until the agent ends or pauses on a card; a message in a paused task
        is the client's answer (see the module's doc)."""
        task = context.current_task
        if task is None:
            if context.message is None:
                raise InvalidParamsError(message="a new task needs the user's message")
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            turn = await asyncio.to_thread(self.turn_for, context)
            state = self.agent.begin(context.get_user_input())
            out = await asyncio.to_thread(self._drive, task, turn, state, None, None)
        elif task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            answered = await self._answered(context, task, updater)
            if answered is None:
                return
            out = answered
        else:
            raise UnsupportedOperationError(message=f"task {task.id} is {TaskState.Name(task.status.state)}")
        await self._settle(updater, task, out)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancels the task; a card it waits on stays for the person (it simply expires)."""
        if not (context.task_id and context.context_id):
            raise InvalidParamsError(message="cancel names no task")
        self._held.pop(context.task_id, None)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    async def restore(self, interrupt_id: str, user: str,
                      call_context: ServerCallContext | None = None) -> Task | AlreadyDone:
        """A new process's way back to a paused task: takes over the person's click on
        `interrupt_id` (exactly one process wins), puts the task from the card's snapshot back
        into the store in `input-required`, and holds the claim for the client's answer. A done
        card is `AlreadyDone`; `StillPending` and `ClaimLost` are raised. `call_context` is whom
        the store files the task under (the client that will answer)."""
        claim = await asyncio.to_thread(Claim.take_over, self.eg, interrupt_id, user)
        if isinstance(claim, AlreadyDone):
            return claim
        saved = json.loads(claim.snapshot)
        task = ParseDict(saved["task"], Task())
        task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED,
                                        message=card_message(task, interrupt_id, claim.card, None)))
        task.metadata.update({INTERRUPT_KEY: interrupt_id})
        await self.store.save(task, call_context or ServerCallContext())
        self._held[task.id] = claim
        return task

    async def finished(self, task_id: str, context: ServerCallContext, error: UnsupportedOperationError) -> Exception:
        """The SDK's refusal of a message in a finished task, with egressgate's word when the
        task's card is done: the same error type and code, and `data.egressgate`."""
        task = await self.store.get(task_id, context) if task_id else None
        if task is None or INTERRUPT_KEY not in task.metadata:
            return error
        interrupt_id = str(task.metadata[INTERRUPT_KEY])
        outcome = await asyncio.to_thread(self.eg.get_interrupt_outcome, interrupt_id)
        if outcome["state"] != "done":
            return error
        return UnsupportedOperationError(
            message=f"{error.message}; egressgate: the card {interrupt_id} is already done, nothing runs again",
            data={"egressgate": {"interrupt_id": interrupt_id, "state": "done"}})

    async def _answered(self, context: RequestContext, task: Task,
                        updater: TaskUpdater) -> Paused | str | None:
        """The client's answer in a paused task: the run's outcome, or None when the task
        stays paused (or ended because another process finished the card)."""
        interrupt_id = str(task.metadata[INTERRUPT_KEY])
        said = client_answer(context.get_user_input())
        if said is None:
            await updater.requires_input(_still_waiting(
                task, "Answer `approve` or `deny` once the person decided on the card."))
            return None
        claim = self._held.pop(task.id, None)
        if claim is None:
            try:
                user = (await asyncio.to_thread(self.eg.get_interrupt_outcome, interrupt_id))["user_id"]
                taken = await asyncio.to_thread(Claim.take_over, self.eg, interrupt_id, user)
            except StillPending:
                await updater.requires_input(_still_waiting(task, "The person has not answered the card yet."))
                return None
            except ClaimLost:
                await updater.requires_input(_still_waiting(task, "Another process is continuing this card."))
                return None
            if isinstance(taken, AlreadyDone):
                await updater.reject(updater.new_agent_message([new_text_part(
                    f"egressgate: the card {interrupt_id} is already done (another process finished it); "
                    "nothing ran again")]))
                return None
            claim = taken
        saved = json.loads(claim.snapshot)["agent"]
        # RESUME BRANCH: the approval call's answer comes from the claimed card and the stored
        # decision only; a client's "deny" may withhold the approval, never grant one.
        answer = resume_answer(claim.card, claim.decision if said == "approve" else None)
        self.paused.pop(task.id, None)
        return await asyncio.to_thread(self._resume, claim, task, saved, answer)

    def _resume(self, claim: Claim, task: Task, saved: dict[str, Any], answer: str) -> Paused | str:
        with claim.heartbeating():
            return self._drive(task, Turn.from_dict(saved["turn"]), saved["state"], answer, claim)

    def _drive(self, task: Task, turn: Turn, state: dict[str, Any], answer: str | None,
               claim: Claim | None) -> Paused | str:
        """Runs the agent until it ends (the card, when claimed, is completed with the final
        text) or pauses on a card, registered with the task and the agent's state as its
        snapshot (chained onto the claimed card when there is one)."""
        while True:
            out = self.agent.step(state, turn, answer)
            if isinstance(out, str):
                if claim:
                    claim.complete({"final": out})
                return out
            first = first_call(self.eg, turn, reason=out.reason, urls=out.urls, packages=out.packages,
                               tool_call_id=out.call_id)
            if first["outcome"] != "ask":
                answer = first_answer_text(first)
                continue
            snapshot = json.dumps({"task": MessageToDict(task),
                                   "agent": {"turn": turn.to_dict(), "state": state}}).encode()
            if claim:
                return claim.chain(first["draft_id"], snapshot)
            return register(self.eg, first["draft_id"], snapshot)

    async def _settle(self, updater: TaskUpdater, task: Task, out: Paused | str) -> None:
        """The run's end as A2A events: the final text as the task's artifact and `completed`,
        or `input-required` carrying the card."""
        if isinstance(out, str):
            await updater.add_artifact([new_text_part(out)], name="answer")
            await updater.complete()
            return
        self.paused[task.id] = out
        await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED,
                                    message=card_message(task, out.interrupt_id, out.card, out.card_url),
                                    metadata={INTERRUPT_KEY: out.interrupt_id})
