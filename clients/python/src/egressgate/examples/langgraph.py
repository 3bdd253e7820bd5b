"""`python -m egressgate.examples.langgraph ask --user U --chat C --url URL [--unattended]` and
`... resume --interrupt-id ID`: a LangGraph graph with a scripted agent node (no network
model) whose sandbox node downloads through the turn's proxy, is refused, asks through the
approval nodes, pauses on `interrupt()` (checkpointed with SqliteSaver), and, resumed in a new
process with `Command(resume={"decisions": [...]})` after the person answered, finishes with
the downloaded text. Reads EGRESSGATE_CONTROL and EGRESSGATE_RUNTIME_TOKEN.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph

from .. import Client
from ..adapters.claim import APPROVAL_TOOL, Turn
from ..adapters.langgraph import ENTRY, ApprovalState, LangGraphApproval
from ._script import DOWNLOAD_TOOL, REASON, Example, Step, download, next_move, run


class State(ApprovalState, total=False):
    """The example's graph state: the URLs, the tool results seen, the next move, the end."""

    urls: list[str]
    history: Annotated[list[dict[str, Any]], operator.add]
    asked: str | None
    fetch: str | None
    final: str | None


def agent(state: State) -> dict[str, Any]:
    """The scripted model: reads the approval's answer back, then makes its next move."""
    seen = list(state.get("history", []))
    update: dict[str, Any] = {}
    answer = state.get("approval_answer")
    if answer:
        step = {"tool": APPROVAL_TOOL, "url": state.get("asked"), "text": answer["text"]}
        seen.append(step)
        update = {"history": [step], "approval_answer": None}
    move, arg = next_move(state["urls"], [Step(s["tool"], s["url"], s["text"]) for s in seen])
    if move == "download":
        return {**update, "fetch": arg}
    if move == "ask":
        call = {"id": f"call_{len(seen)}", "reason": REASON, "urls": [arg]}
        return {**update, "asked": arg, "approval_call": call}
    return {**update, "final": arg}


def run_script(state: State) -> dict[str, Any]:
    """The sandbox: the script downloads one URL through the turn's proxy."""
    url = str(state["fetch"])
    text = download(Turn.from_dict(state["egressgate_turn"]), url)
    return {"fetch": None, "history": [{"tool": DOWNLOAD_TOOL, "url": url, "text": text}]}


def _route(state: State) -> str:
    if state.get("approval_call"):
        return ENTRY
    return "run_script" if state.get("fetch") else END


def _graph(approval: LangGraphApproval) -> Any:
    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("run_script", run_script)
    approval.add_nodes(builder, then="agent")
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, [ENTRY, "run_script", END])
    builder.add_edge("run_script", "agent")
    return lambda checkpointer: builder.compile(checkpointer=checkpointer)


def ask(eg: Client, turn: Turn, urls: list[str]) -> Any:
    """The first run: until the card, or the final text (with the deny when unattended)."""
    approval = LangGraphApproval(eg)
    out = approval.ask(_graph(approval), {"egressgate_turn": turn.to_dict(), "urls": urls, "history": []},
                       thread_id="lg-" + uuid.uuid4().hex)
    if not isinstance(out, dict):
        return out
    denied = [s["text"] for s in out["history"] if s["tool"] == APPROVAL_TOOL]
    return out["final"], denied[-1] if denied else None


def resume(eg: Client, interrupt_id: str, user: str) -> Any:
    """The resumed run, in any process: the graph comes back from the card's checkpoint."""
    approval = LangGraphApproval(eg)
    out = approval.resume(interrupt_id, user, _graph(approval))
    return out["final"] if isinstance(out, dict) else out


if __name__ == "__main__":
    run(Example(ask=ask, resume=resume))
