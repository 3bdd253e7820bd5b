"""`python -m egressgate.examples.strands ask --user U --chat C --url URL [--unattended]` and
`... resume --interrupt-id ID`: a Strands Agents agent with a scripted model (no network
model) whose sandbox tool downloads through the turn's proxy, is refused, asks with the
approval tool, pauses, and, resumed in a new process after the person answered, finishes
with the downloaded text. Reads EGRESSGATE_CONTROL and EGRESSGATE_RUNTIME_TOKEN.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from strands import Agent, ToolContext, tool
from strands.models import Model

from .. import Client
from ..adapters.claim import APPROVAL_TOOL, Turn
from ..adapters.strands import TURN_KEY, Finished, StrandsApproval
from ._script import DOWNLOAD_TOOL, REASON, Example, Step, download, finished, next_move, run

URLS_KEY = "example_urls"


def _history(messages: list[dict[str, Any]]) -> list[Step]:
    """The tool results the model has seen, in order, with the URL each was about."""
    uses: dict[str, dict[str, Any]] = {}
    steps: list[Step] = []
    for m in messages:
        for c in m["content"]:
            if "toolUse" in c:
                uses[c["toolUse"]["toolUseId"]] = c["toolUse"]
            if "toolResult" in c:
                r = c["toolResult"]
                use = uses[r["toolUseId"]]
                url = use["input"].get("url") or (use["input"].get("urls") or [None])[0]
                steps.append(Step(use["name"], url, "".join(b.get("text", "") for b in r["content"])))
    return steps


class ScriptedModel(Model):
    """A Strands model that plays `next_move` over the conversation: no network, the same
    moves for the same messages, so a resumed run continues where the first one paused."""

    def __init__(self, urls: list[str]):
        self.urls = urls

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> Any:
        """Nothing configured."""
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        """Not used by the example."""
        raise NotImplementedError

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        """One assistant message, as Strands' stream events."""
        move, arg = next_move(self.urls, _history(messages))
        n = len(messages)
        yield {"messageStart": {"role": "assistant"}}
        if move == "final":
            yield {"contentBlockDelta": {"delta": {"text": arg}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        calls = [(DOWNLOAD_TOOL, {"url": arg})]
        if move == "ask":
            # The approval call, and beside it a retry the batch rule cancels.
            calls = [(APPROVAL_TOOL, {"reason": REASON, "urls": [arg]}), (DOWNLOAD_TOOL, {"url": arg})]
        for i, (name, args_) in enumerate(calls):
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": f"tooluse_{n}_{i}", "name": name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args_)}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


@tool(name=DOWNLOAD_TOOL, context=True)
def run_script(url: str, tool_context: ToolContext) -> str:
    """Runs the analysis script, which downloads `url` through the sandbox's proxy.

    Args:
        url: The URL the script downloads.
    """
    return download(Turn.from_dict(tool_context.agent.state.get(TURN_KEY)), url)


def _agent(approval: StrandsApproval, state: dict[str, Any]) -> Agent:
    return Agent(model=ScriptedModel(state[URLS_KEY]), tools=[approval.tool, run_script],
                 hooks=[approval.batch_rule], state=state, callback_handler=None)


def ask(eg: Client, turn: Turn, urls: list[str]) -> Any:
    """The first run: until the card, or the final text (with the deny when unattended)."""
    approval = StrandsApproval(eg)
    agent = _agent(approval, {**approval.state_for(turn), URLS_KEY: urls})
    out = approval.ask(agent, "Download the data and show it to me.")
    return finished(out.text, _history(agent.messages)) if isinstance(out, Finished) else out


def resume(eg: Client, interrupt_id: str, user: str) -> Any:
    """The resumed run, in any process: the agent comes back from the card's snapshot."""
    approval = StrandsApproval(eg)
    # Built as at first from the snapshot's state; the snapshot then restores the rest.
    out = approval.resume(interrupt_id, user, lambda state: _agent(approval, state))
    return out.text if isinstance(out, Finished) else out


if __name__ == "__main__":
    run(Example(ask=ask, resume=resume))
