"""`python -m egressgate.examples.openai_agents ask --user U --chat C --url URL [--unattended]` and
`... resume --interrupt-id ID`: an OpenAI Agents SDK agent with a scripted model (a `Model`
that plays `next_move`; no OpenAI API, tracing off) whose sandbox tool downloads through the
turn's proxy, is refused, calls the approval tool (`needs_approval`), stops with
`result.interruptions`, and, resumed in a new process from the card's `RunState` after the
person answered, finishes with the downloaded text. Reads EGRESSGATE_CONTROL and
EGRESSGATE_RUNTIME_TOKEN.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelSettings, RunConfig, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.tool_context import ToolContext
from agents.usage import Usage

from .. import Client
from ..adapters.claim import APPROVAL_TOOL, Turn
from ..adapters.openai_agents import TURN_KEY, Finished, OpenAIAgentsApproval
from ._script import DOWNLOAD_TOOL, REASON, Example, Step, download, finished, next_move, run

URLS_KEY = "example_urls"

RUN_CONFIG = RunConfig(tracing_disabled=True)
"""No trace leaves the machine (the SDK exports traces to OpenAI by default)."""


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _history(items: list[Any]) -> list[Step]:
    """The tool results the model has seen, in order, with the URL each was about."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    steps: list[Step] = []
    for item in items:
        kind = _field(item, "type")
        if kind == "function_call":
            calls[_field(item, "call_id")] = (_field(item, "name"), json.loads(_field(item, "arguments") or "{}"))
        elif kind == "function_call_output":
            name, args = calls[_field(item, "call_id")]
            url = args.get("url") or (args.get("urls") or [None])[0]
            output = _field(item, "output")
            steps.append(Step(name, url, output if isinstance(output, str) else json.dumps(output)))
    return steps


class ScriptedModel(Model):
    """An Agents SDK model that plays `next_move` over the run's input items: no network, the
    same moves for the same items, so a resumed run continues where the first one stopped."""

    def __init__(self, urls: list[str]):
        self.urls = urls

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        """One model step."""
        items = [] if isinstance(input, str) else list(input)
        move, arg = next_move(self.urls, _history(items))
        n = len(items)
        if move == "final":
            output: list[Any] = [assistant_message(arg)]
        elif move == "download":
            output = [function_call(DOWNLOAD_TOOL, {"url": arg}, call_id=f"call_{n}_0")]
        else:
            # The approval call, and beside it a retry the batch rule cancels (this model
            # ignores `parallel_tool_calls=False`, as some models do).
            output = [function_call(APPROVAL_TOOL, {"reason": REASON, "urls": [arg], "packages": None},
                                    call_id=f"call_{n}_0"),
                      function_call(DOWNLOAD_TOOL, {"url": arg}, call_id=f"call_{n}_1")]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Not used by the example."""
        raise NotImplementedError


@function_tool(name_override=DOWNLOAD_TOOL)
def run_script(ctx: ToolContext[Any], url: str) -> str:
    """Runs the analysis script, which downloads `url` through the sandbox's proxy.

    Args:
        url: The URL the script downloads.
    """
    return download(Turn.from_dict(ctx.context[TURN_KEY]), url)


def _agent(approval: OpenAIAgentsApproval, context: dict[str, Any]) -> Agent[Any]:
    return Agent(name="analyst", model=ScriptedModel(context[URLS_KEY]), tools=approval.tools(run_script),
                 model_settings=ModelSettings(parallel_tool_calls=False))


def ask(eg: Client, turn: Turn, urls: list[str]) -> Any:
    """The first run: until the card, or the final text (with the deny when unattended)."""
    approval = OpenAIAgentsApproval(eg)
    context = approval.context_for(turn, **{URLS_KEY: urls})
    out = asyncio.run(approval.ask(_agent(approval, context), "Download the data and show it to me.",
                                   context, RUN_CONFIG))
    return finished(out.text, _history(out.items)) if isinstance(out, Finished) else out


def resume(eg: Client, interrupt_id: str, user: str) -> Any:
    """The resumed run, in any process: the agent comes back from the card's `RunState`."""
    approval = OpenAIAgentsApproval(eg)
    out = asyncio.run(approval.resume(interrupt_id, user, lambda context: _agent(approval, context), RUN_CONFIG))
    return out.text if isinstance(out, Finished) else out


if __name__ == "__main__":
    set_tracing_disabled(True)
    run(Example(ask=ask, resume=resume))
