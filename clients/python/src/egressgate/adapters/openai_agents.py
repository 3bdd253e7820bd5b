"""egressgate's approval loop in the OpenAI Agents SDK (`pip install 'egressgate[openai-agents]'`):
the approval tool as a function tool with `needs_approval`, so the run stops with
`result.interruptions` (the SDK's human-in-the-loop); the card registered with the run's
serialised `RunState` as its snapshot; the resume, in any process, that takes the person's
click over, restores the `RunState`, applies `state.approve(item)` or `state.reject(item)` from
the stored decision and runs again; and the batch rule as a guardrail on the other tools.

    approval = OpenAIAgentsApproval(eg)
    agent = Agent(name="analyst", model=..., tools=approval.tools(run_script),
                  model_settings=ModelSettings(parallel_tool_calls=False))
    outcome = await approval.ask(agent, "Summarise the data file", approval.context_for(turn))
    # later, in any process, after the person answered:
    outcome = await approval.resume(interrupt_id, user, make_agent)  # Finished, Paused, AlreadyDone

`needs_approval` is where the server is asked: it makes the first call (the server merges what
the proxy refused this turn) and keeps the answer in the run's context, keyed by the call id,
so it travels inside the `RunState`; only an `ask` pauses the run. On resume the SDK does not
evaluate `needs_approval` again for the call it paused on: it runs the tool body when the call
was approved and hands the model the rejection message when it was rejected. Both answers are
built from the stored card and the stored decision only (the resume branch): the body never
asks the server again (after an approval the merge would find "nothing to ask"), and a call
the SDK approved without a stored approval from the gate answers as declined (fail closed).
A new approval call in the resumed run is a fresh question and becomes a chained card.

The batch rule: after each model response a run hook asks the gate which of its tool calls to
cancel (every call beside the first approval call), and a tool input guardrail on the other
tools answers those calls with that text instead of running them, so a download beside the
approval call never reaches the proxy. The decision is kept in the run's context, so the
resumed run, which does not call the model for the paused step again, applies the same one.
`ModelSettings(parallel_tool_calls=False)` asks the model for one call per step in the first
place; the guardrail holds for models that ignore it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, RunHooks, Runner, function_tool
from agents.items import ModelResponse, ToolApprovalItem
from agents.run_state import RunState
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolGuardrailFunctionOutput, ToolInputGuardrailData, tool_input_guardrail

from .. import Client
from .claim import APPROVAL_DESCRIPTION, APPROVAL_TOOL, CANCEL_KEY, TURN_KEY, AlreadyDone, Claim, Paused
from .claim import ToolApproval, Turn, batch_cancellations, cancelled, first_answer_text, first_call, register
from .claim import resume_answer, with_turn

UNREADABLE_CALL = "the approval call's arguments are not a JSON object; call the tool again with valid arguments"
"""What the model reads when its approval call could not be read (nothing was asked)."""

_ASKED_KEY = "egressgate_asked"
_RESUME_KEY = "egressgate_resume"


@dataclass(frozen=True)
class Finished:
    """The run ended with the agent's final output; `items` is the whole conversation
    (`result.to_input_list()`), for a caller that wants to read what the tools answered."""

    text: str
    items: list[Any]


class BatchRule(RunHooks[Any]):
    """Lets the approval tool run alone in its step: decides after each model response, from
    that response alone, which calls to cancel, and keeps the decision in the run's context
    where `guard` reads it. The same response always gives the same decision."""

    def __init__(self, eg: Client):
        self.eg = eg

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        """Before any tool of this response runs."""
        uses = [(item.call_id, item.name) for item in response.output if getattr(item, "type", None) == "function_call"]
        context.context[CANCEL_KEY] = await asyncio.to_thread(batch_cancellations, self.eg, uses)


@tool_input_guardrail(name="egressgate_batch_rule")
def guard(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    """The batch rule at the tool: a call cancelled beside an approval call answers with the
    gate's text and does not run."""
    text = cancelled(data.context.context, data.context.tool_call_id)
    return ToolGuardrailFunctionOutput.reject_content(text) if text else ToolGuardrailFunctionOutput.allow()


class OpenAIAgentsApproval(ToolApproval):
    """The approval tool, the batch rule (run hooks and a tool guardrail) and the pause/resume
    runner for one control API."""

    batch_rule_type = BatchRule

    @staticmethod
    def context_for(turn: Turn, **extra: Any) -> dict[str, Any]:
        """The run's context: the turn (kept in the `RunState` for the resume) and `extra`."""
        return with_turn(turn, **extra)

    def tools(self, *others: FunctionTool) -> list[FunctionTool]:
        """The agent's tools: the approval tool, and `others` each with the batch rule's
        guardrail added (copies; the originals are unchanged)."""
        guarded = [dataclasses.replace(t, tool_input_guardrails=[*(t.tool_input_guardrails or []), guard])
                   for t in others]
        return [self.tool, *guarded]

    def _make_tool(self) -> FunctionTool:
        eg = self.eg

        async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            """FIRST CALL: the server merges and answers, once per call id; only `ask` pauses."""
            context = ctx.context
            if cancelled(context, call_id):
                return False
            asked = context.setdefault(_ASKED_KEY, {})
            if call_id not in asked:
                turn = Turn.from_dict(context[TURN_KEY])
                asked[call_id] = await asyncio.to_thread(
                    first_call, eg, turn, reason=params.get("reason", ""), urls=params.get("urls"),
                    packages=params.get("packages"), tool_call_id=call_id)
            return bool(asked[call_id]["outcome"] == "ask")

        @function_tool(name_override=APPROVAL_TOOL, description_override=APPROVAL_DESCRIPTION,
                       needs_approval=needs_approval)
        def request_egress_approval(
            ctx: ToolContext[Any], reason: str, urls: list[str] | None = None, packages: list[str] | None = None,
        ) -> str:
            """Asks the person to allow what the sandbox was refused.

            Args:
                reason: One sentence: why the task needs it.
                urls: The URLs the script needs.
                packages: The packages the script needs.
            """
            context, call_id = ctx.context, ctx.tool_call_id
            text = cancelled(context, call_id)
            if text:
                return text
            # RESUME BRANCH: the SDK runs this body only after the call was approved. Answer
            # from the stored card and decision; never ask the server again.
            resumed = context.get(_RESUME_KEY, {}).get(call_id)
            if resumed:
                return resume_answer(resumed["card"], resumed["decision"])
            answer = context.get(_ASKED_KEY, {}).get(call_id)
            if answer is None or answer["outcome"] == "ask":
                # Approved inside the SDK without the person's stored approval: fail closed.
                return resume_answer((answer or {}).get("card", {}), None)
            return first_answer_text(answer)

        return request_egress_approval

    async def _run(self, agent: Agent[Any], start: str | RunState[Any, Any], context: dict[str, Any] | None,
                   run_config: RunConfig | None) -> Any:
        """Runs until the end or a pause on an approval call the gate answered `ask`. The SDK
        pauses without asking `needs_approval` when a call's arguments are not a JSON object;
        such a call is rejected with a text the model can act on, and the run goes on."""
        result = await Runner.run(agent, start, context=context, hooks=self.batch_rule, run_config=run_config)
        while True:
            asked = result.context_wrapper.context.get(_ASKED_KEY, {})
            unasked = [i for i in _approval_items(result.interruptions) if i.call_id not in asked]
            if not unasked:
                return result
            state = result.to_state()
            for item in unasked:
                state.reject(item, rejection_message=UNREADABLE_CALL)
            result = await Runner.run(agent, state, hooks=self.batch_rule, run_config=run_config)

    async def _settle(self, result: Any, claim: Claim | None) -> Paused | Finished:
        """After the run stopped: a card to register (chained when this run holds a claim),
        with the run's `RunState` as its snapshot, or the final output."""
        if not result.interruptions:
            return Finished(str(result.final_output), result.to_input_list())
        ours = _approval_items(result.interruptions)
        if len(ours) != len(result.interruptions):
            raise RuntimeError(f"expected one approval interruption, got {result.interruptions!r}")
        draft = result.context_wrapper.context[_ASKED_KEY][ours[0].call_id]["draft_id"]
        snapshot = result.to_state().to_string().encode()
        if claim:
            return await asyncio.to_thread(claim.chain, draft, snapshot)
        return await asyncio.to_thread(register, self.eg, draft, snapshot)

    async def ask(self, agent: Agent[Any], prompt: str, context: dict[str, Any],
                  run_config: RunConfig | None = None) -> Paused | Finished:
        """Runs the agent on the user's message (`context` from `context_for`) until it
        finishes or stops on the approval call; the card is registered after the run stopped,
        with `result.to_state()` as its snapshot."""
        return await self._settle(await self._run(agent, prompt, context, run_config), None)

    async def resume(
        self, interrupt_id: str, user: str, make_agent: Callable[[dict[str, Any]], Agent[Any]],
        run_config: RunConfig | None = None,
    ) -> Paused | Finished | AlreadyDone:
        """Takes over the person's click on `interrupt_id`, restores the `RunState` from the
        card's snapshot (`make_agent(context)` builds the same agent from the run's context),
        approves or rejects the paused call from the stored decision and runs again while
        heartbeating; completes the card with the final output, or chains the next card. A
        done card is `AlreadyDone`; `StillPending` and `ClaimLost` (from `claim`) are raised."""
        claim = await asyncio.to_thread(Claim.take_over, self.eg, interrupt_id, user)
        if isinstance(claim, AlreadyDone):
            return claim
        snapshot = claim.snapshot.decode()
        context = dict(json.loads(snapshot)["context"]["context"])
        agent = make_agent(context)
        state = await RunState.from_string(agent, snapshot, context_override=context)
        ours = _approval_items(state.get_interruptions())
        if len(ours) != 1:
            raise RuntimeError(f"the snapshot holds {len(ours)} approval interruptions, not one")
        item = ours[0]
        context.setdefault(_RESUME_KEY, {})[item.call_id] = {"card": claim.card, "decision": claim.decision}
        if (claim.decision or {}).get("outcome") == "approved":
            state.approve(item)
        else:
            state.reject(item, rejection_message=resume_answer(claim.card, claim.decision))
        with claim.heartbeating():
            outcome = await self._settle(await self._run(agent, state, None, run_config), claim)
            if isinstance(outcome, Finished):
                await asyncio.to_thread(claim.complete, {"final": outcome.text})
        return outcome


def _approval_items(items: list[ToolApprovalItem]) -> list[ToolApprovalItem]:
    """The interruptions that are the approval tool's calls."""
    return [i for i in items if i.tool_name == APPROVAL_TOOL]
