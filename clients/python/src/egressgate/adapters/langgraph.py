"""egressgate's approval loop in LangGraph (`pip install 'egressgate[langgraph]'`): two
approval nodes, the second calling `interrupt()` with LangChain's human-in-the-loop shape
(`action_requests`, `review_configs`) and resumed with
`Command(resume={"decisions": [...]})`, and `LangGraphApproval`, which checkpoints the graph
with `SqliteSaver`, registers the card with that checkpoint database as its snapshot and
resumes it, exactly once, in any process.

    approval = LangGraphApproval(eg)
    builder = StateGraph(MyState)            # MyState extends ApprovalState
    approval.add_nodes(builder, then="agent")
    # an agent node that wants approval sets state["approval_call"] and goes to approval.entry
    outcome = approval.ask(lambda cp: builder.compile(checkpointer=cp), {...}, thread_id)
    # later, in any process, after the person answered:
    outcome = approval.resume(interrupt_id, user, lambda cp: builder.compile(checkpointer=cp))

LangGraph runs an interrupted node again from its top on resume, so the node that pauses
does nothing before `interrupt()` but read the card the first node stored in the graph's
state: the resume answers from the stored card and the person's decision only and never asks
the server to merge refusals again. The first node (`egress_approval`) makes the server's
first call and writes the draft card; only the second (`egress_approval_wait`) pauses.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.types import Command, interrupt

from .. import Client
from .claim import APPROVAL_TOOL, AlreadyDone, Claim, Paused, Turn, register
from .claim import first_answer_text, first_call, resume_answer

ENTRY = "egress_approval"
"""The node an agent node routes to when it set `approval_call`."""

WAIT = "egress_approval_wait"
"""The node that pauses on the card."""

ALLOWED = ["approve", "reject"]
"""The decisions the card accepts: the person may approve or reject, not edit the request."""


class ApprovalState(TypedDict, total=False):
    """The graph state the approval nodes read and write (extend it with your own keys)."""

    egressgate_turn: dict[str, str]
    """The turn (`Turn.to_dict()`): kept in the checkpoint so a resume has it."""
    approval_call: dict[str, Any] | None
    """What the model asked: `{"id", "reason", "urls"?, "packages"?}`."""
    approval_card: dict[str, Any] | None
    """The card waiting for the person: `{"call_id", "draft_id", "card", "message"}`."""
    approval_answer: dict[str, Any] | None
    """What the model reads back: `{"call_id", "ok", "text"}`."""


def hitl_request(card: dict[str, Any], message: str) -> dict[str, Any]:
    """The interrupt value in LangChain's human-in-the-loop shape: one proposed call, one
    review config, paired by position."""
    return {
        "action_requests": [{"name": APPROVAL_TOOL, "args": card, "description": message}],
        "review_configs": [{"action_name": APPROVAL_TOOL, "allowed_decisions": ALLOWED}],
    }


def hitl_decisions(decision: dict[str, Any] | None, card: dict[str, Any]) -> dict[str, Any]:
    """egressgate's stored decision as the resume value `{"decisions": [...]}`: `approve`, or
    `reject` with the text the model should act on (fail closed: anything but an approval
    rejects)."""
    if (decision or {}).get("outcome") == "approved":
        return {"decisions": [{"type": "approve"}]}
    return {"decisions": [{"type": "reject", "message": resume_answer(card, decision)}]}


class LangGraphApproval:
    """The approval nodes and the pause/resume runner for one control API."""

    def __init__(self, eg: Client):
        self.eg = eg

    def add_nodes(self, builder: StateGraph, *, then: str) -> None:
        """Adds `egress_approval` (the server's first call) and `egress_approval_wait` (the
        pause); both go on to `then` with `approval_answer` set."""
        builder.add_node(ENTRY, self._request)
        builder.add_node(WAIT, _wait)
        builder.add_conditional_edges(ENTRY, lambda s: WAIT if s.get("approval_card") else then, [WAIT, then])
        builder.add_edge(WAIT, then)

    def _request(self, state: ApprovalState) -> dict[str, Any]:
        """FIRST CALL: the server merges what was refused this turn and answers."""
        call = state["approval_call"] or {}
        answer = first_call(self.eg, Turn.from_dict(state["egressgate_turn"]), reason=call["reason"],
                            urls=call.get("urls"), packages=call.get("packages"), tool_call_id=call["id"])
        if answer["outcome"] != "ask":
            return {"approval_call": None, "approval_card": None,
                    "approval_answer": {"call_id": call["id"], "ok": False, "text": first_answer_text(answer)}}
        message = "Allow " + ", ".join(answer["card"]["sites"] + answer["card"]["packages"]) + "?"
        return {"approval_call": None, "approval_answer": None, "approval_card": {
            "call_id": call["id"], "draft_id": answer["draft_id"], "card": answer["card"], "message": message}}

    def _settle(self, graph: Any, out: dict[str, Any], config: dict[str, Any], conn: sqlite3.Connection,
                claim: Claim | None) -> Paused | dict[str, Any]:
        """After the graph stopped: the card to register (chained when this run holds a
        claim), with the checkpoint database as the snapshot, or the final state."""
        if "__interrupt__" not in out:
            return out
        pending = graph.get_state(config).values["approval_card"]
        snapshot = json.dumps({"thread_id": config["configurable"]["thread_id"],
                               "checkpoints": base64.b64encode(conn.serialize()).decode()}).encode()
        if claim:
            return claim.chain(pending["draft_id"], snapshot)
        return register(self.eg, pending["draft_id"], snapshot)

    def ask(self, make_graph: Callable[[SqliteSaver], Any], values: dict[str, Any], thread_id: str) -> Paused | dict[str, Any]:
        """Runs the graph from `values` until it finishes (its final state) or pauses on a
        card (`Paused`, registered after the graph stopped and checkpointed)."""
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        graph = make_graph(SqliteSaver(conn))
        config = {"configurable": {"thread_id": thread_id}}
        return self._settle(graph, graph.invoke(values, config), config, conn, None)

    def resume(self, interrupt_id: str, user: str,
               make_graph: Callable[[SqliteSaver], Any]) -> Paused | dict[str, Any] | AlreadyDone:
        """Takes over the person's click on `interrupt_id`, loads the checkpoint database from
        the card's snapshot and resumes the thread with `Command(resume={"decisions": ...})`
        while heartbeating; completes the card with the final state's `final`, or chains the
        next card. A done card is `AlreadyDone`; `StillPending` and `ClaimLost` are raised."""
        claim = Claim.take_over(self.eg, interrupt_id, user)
        if isinstance(claim, AlreadyDone):
            return claim
        saved = json.loads(claim.snapshot)
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.deserialize(base64.b64decode(saved["checkpoints"]))
        graph = make_graph(SqliteSaver(conn))
        config = {"configurable": {"thread_id": saved["thread_id"]}}
        with claim.heartbeating():
            out = graph.invoke(Command(resume=hitl_decisions(claim.decision, claim.card)), config)
            outcome = self._settle(graph, out, config, conn, claim)
            if not isinstance(outcome, Paused):
                claim.complete({"final": outcome.get("final")})
        return outcome


def _wait(state: ApprovalState) -> dict[str, Any]:
    """The pause, and on resume (this node runs again from its top) the answer, from the
    stored card and the decisions only. A decision the card does not allow raises before
    anything is answered."""
    pending = state["approval_card"] or {}
    resume = interrupt(hitl_request(pending["card"], pending["message"]))
    decisions = (resume or {}).get("decisions") if isinstance(resume, dict) else None
    if not isinstance(decisions, list) or len(decisions) != 1:
        raise ValueError("send exactly one decision for the one proposed call")
    kind = decisions[0].get("type")
    if kind not in ALLOWED:
        raise ValueError(f"decision {kind!r} is not allowed here ({' or '.join(ALLOWED)})")
    card = pending["card"]
    if kind == "approve":
        text = resume_answer(card, {"outcome": "approved", "sites": card["sites"], "packages": card["packages"]})
    else:
        text = str(decisions[0].get("message") or resume_answer(card, None))
    return {"approval_card": None,
            "approval_answer": {"call_id": pending["call_id"], "ok": kind == "approve", "text": text}}
