"""egressgate's approval loop in Strands Agents (`pip install 'egressgate[strands]'`): the
approval tool that pauses the agent with `tool_context.interrupt`, its resume branch, the
hook that lets it run alone in its batch, and `StrandsApproval`, which registers the card
with the agent's own snapshot and resumes it, exactly once, in any process.

    approval = StrandsApproval(eg)
    agent = Agent(model=..., tools=[approval.tool, run_script], hooks=[approval.batch_rule],
                  state=approval.state_for(turn))
    outcome = approval.ask(agent, "Summarise the data file")  # Paused, or Finished(text)
    # later, in any process, after the person answered:
    outcome = approval.resume(interrupt_id, user, make_agent)  # Finished, Paused, AlreadyDone

On resume Strands runs the tool body again from the top; `tool_context.interrupt` is the
only line that behaves differently. So the tool has a dedicated resume branch: when its own
interrupt was answered it answers from the stored card and decision only and never asks the
server to merge refusals again (after an approval that would find "nothing to ask"; after a
deny it would say the opposite of what the person decided). A second, new approval call in
the resumed run takes the normal path and becomes a chained card.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from strands import Agent, Snapshot, ToolContext, tool
from strands.hooks import BeforeToolCallEvent, BeforeToolsEvent, HookProvider, HookRegistry

from .. import Client
from .claim import (
    APPROVAL_DESCRIPTION,
    APPROVAL_TOOL,
    CANCEL_KEY,
    TURN_KEY,
    AlreadyDone,
    Claim,
    Paused,
    ToolApproval,
    Turn,
    batch_cancellations,
    cancelled,
    first_answer_text,
    first_call,
    register,
    resume_answer,
    with_turn,
)

_RESUME_KEY = "egressgate_resume"


@dataclass(frozen=True)
class Finished:
    """The run ended with the model's final text."""

    text: str


def _result(text: str, ok: bool = True) -> dict[str, Any]:
    return {"status": "success" if ok else "error", "content": [{"text": text}]}


def decide_batch(eg: Client, message: dict[str, Any]) -> dict[str, str]:
    """The batch rule, from the assistant message alone: the first approval call runs, every
    other tool use of the message is cancelled with a text the model can act on. The gate's
    `POST /v1/batches/decide` decides (one rule, one wording, for every runtime); a message
    without an approval call cancels nothing and asks nobody. The same message always gives
    the same answer, so the pass after a resume (the same message, with the finished results
    merged in) agrees with the first."""
    uses = [(c["toolUse"]["toolUseId"], c["toolUse"]["name"]) for c in message.get("content", []) if "toolUse" in c]
    return batch_cancellations(eg, uses)


class BatchRule(HookProvider):
    """Lets the approval tool run alone in its batch. The decision is taken before the batch
    runs from the message alone (`decide_batch`) and applied to each tool call, so the hook
    keeps no state that a resume could contradict."""

    def __init__(self, eg: Client):
        self.eg = eg

    def register_hooks(self, registry: HookRegistry, **_: Any) -> None:
        """Strands' hook registration."""
        registry.add_callback(BeforeToolsEvent, self._decide)
        registry.add_callback(BeforeToolCallEvent, self._cancel)

    def _decide(self, event: BeforeToolsEvent) -> None:
        event.invocation_state[CANCEL_KEY] = decide_batch(self.eg, dict(event.message))

    def _cancel(self, event: BeforeToolCallEvent) -> None:
        text = cancelled(event.invocation_state, event.tool_use["toolUseId"])
        if text:
            event.cancel_tool = text


class StrandsApproval(ToolApproval):
    """The approval tool, the batch rule (Strands hooks) and the pause/resume runner for one
    control API."""

    batch_rule_type = BatchRule

    @staticmethod
    def state_for(turn: Turn) -> dict[str, Any]:
        """The agent's initial `state`: the turn, kept in the snapshot for the resume."""
        return with_turn(turn)

    def _make_tool(self) -> Any:
        eg = self.eg

        @tool(name=APPROVAL_TOOL, description=APPROVAL_DESCRIPTION, context=True)
        def request_egress_approval(
            reason: str, urls: list[str] | None = None, packages: list[str] | None = None,
            tool_context: ToolContext = None,  # type: ignore[assignment]
        ) -> dict[str, Any]:
            """Asks the person to allow what the sandbox was refused.

            Args:
                reason: One sentence: why the task needs it.
                urls: The URLs the script needs.
                packages: The packages the script needs.
            """
            use_id = tool_context.tool_use["toolUseId"]
            resumed = tool_context.invocation_state.get(_RESUME_KEY)
            # RESUME BRANCH: this call's own card was answered. Answer from the stored card
            # and decision only; never ask the server to merge again.
            if resumed and resumed["tool_use_id"] == use_id:
                decision = tool_context.interrupt(APPROVAL_TOOL)
                return _result(resume_answer(resumed["card"], decision))
            # FIRST CALL (or a new question in a resumed run): the server merges and answers.
            turn = Turn.from_dict(tool_context.agent.state.get(TURN_KEY))
            answer = first_call(eg, turn, reason=reason, urls=urls, packages=packages, tool_call_id=use_id)
            if answer["outcome"] != "ask":
                return _result(first_answer_text(answer), ok=False)
            # Raises until answered; the runner registers the card once the agent has stopped.
            tool_context.interrupt(APPROVAL_TOOL, reason={
                "draft_id": answer["draft_id"], "tool_use_id": use_id, "card": answer["card"]})
            raise AssertionError("unreachable: a fresh interrupt always raises")

        return request_egress_approval

    def _settle(self, agent: Agent, result: Any, claim: Claim | None) -> Paused | Finished:
        """After the agent stopped: a card to register (chained when this run holds a claim),
        or the final text."""
        if result.stop_reason != "interrupt":
            return Finished(str(result).strip())
        ours = [i for i in result.interrupts or [] if i.name == APPROVAL_TOOL]
        if len(ours) != 1 or len(result.interrupts) != 1:
            raise RuntimeError(f"expected one approval interrupt, got {result.interrupts!r}")
        snapshot = json.dumps(agent.take_snapshot(preset="session").to_dict()).encode()
        draft = ours[0].reason["draft_id"]
        return claim.chain(draft, snapshot) if claim else register(self.eg, draft, snapshot)

    def ask(self, agent: Agent, prompt: str) -> Paused | Finished:
        """Runs the agent on the user's message until it finishes or pauses on a card. The
        card is registered after the agent stopped, with `take_snapshot()` as its snapshot."""
        return self._settle(agent, agent(prompt), None)

    def resume(
        self, interrupt_id: str, user: str, make_agent: Callable[[dict[str, Any]], Agent],
    ) -> Paused | Finished | AlreadyDone:
        """Takes over the person's click on `interrupt_id` and resumes the agent from the
        card's snapshot: `make_agent(state)` builds the agent (model, tools, hooks) from the
        snapshot's `agent.state`, and the snapshot then restores its messages, state and
        interrupt state. Heartbeats while it runs;
        completes the card with the final text, or chains the next card. A done card is
        `AlreadyDone`; `StillPending` and `ClaimLost` (from `claim`) are raised."""
        claim = Claim.take_over(self.eg, interrupt_id, user)
        if isinstance(claim, AlreadyDone):
            return claim
        snapshot = Snapshot.from_dict(json.loads(claim.snapshot))
        agent = make_agent(dict(snapshot.data.get("state", {})))
        agent.load_snapshot(snapshot)
        pending = _pending_approval(snapshot.data)
        with claim.heartbeating():
            result = agent(
                [{"interruptResponse": {"interruptId": pending["id"], "response": claim.decision or {}}}],
                invocation_state={_RESUME_KEY: {"tool_use_id": pending["reason"]["tool_use_id"], "card": claim.card}},
            )
            outcome = self._settle(agent, result, claim)
            if isinstance(outcome, Finished):
                claim.complete({"final": outcome.text})
        return outcome


def _pending_approval(data: dict[str, Any]) -> dict[str, Any]:
    """The approval interrupt the snapshot paused on (unanswered, named after the tool)."""
    waiting: Sequence[dict[str, Any]] = [
        i for i in data.get("interrupt_state", {}).get("interrupts", {}).values()
        if i["name"] == APPROVAL_TOOL and i.get("response") is None
    ]
    if len(waiting) != 1:
        raise RuntimeError(f"the snapshot holds {len(waiting)} open approval interrupts, not one")
    return dict(waiting[0])
