#!/usr/bin/env python3
"""A LangGraph-style adapter in plain Python (no model, no langgraph dependency): a node
calls `interrupt(value)`, the graph pauses and returns `__interrupt__`, and
`invoke(Command(resume=...))` re-runs the node, where `interrupt()` now returns the answer.

The node runs again from its start on resume, as in LangGraph, so the code before
`interrupt()` must be safe to repeat. Here it is: the approval tool's first call, made
again while the card waits, answers `pending` with the same interrupt id
(`INTERRUPT_PENDING`) instead of a second card. The interrupt value has the shape of
LangChain's human-in-the-loop middleware (action_requests / review_configs), and the
resume takes its decisions (`approve` / `reject`); anything else is refused before
anything is claimed.

Env: EGRESSGATE_CONTROL, EGRESSGATE_RUNTIME_TOKEN, EXAMPLE_URL. Args: --decline.
"""

import os
import sys
import uuid

from egressgate_http import api, open_turn, sandbox_download

TOOL = "request_egress_approval"
URL = os.environ.get("EXAMPLE_URL", "http://files.example.com:8000/data.csv")


class GraphInterrupt(Exception):
    def __init__(self, value):
        super().__init__("graph interrupted")
        self.value = value


class Command:
    def __init__(self, resume):
        self.resume = resume


_resume_value = []  # set while a node re-runs for a Command(resume=...)


def interrupt(value):
    """Pause the graph with `value`; on the resumed run, return the resume value."""
    if _resume_value:
        return _resume_value.pop()
    raise GraphInterrupt(value)


class Graph:
    """One node, a checkpoint per thread: enough to show the interrupt/resume contract."""

    def __init__(self, node):
        self.node = node
        self.checkpoints = {}  # thread id -> state

    def invoke(self, arg, thread_id):
        if isinstance(arg, Command):
            state = self.checkpoints[thread_id]
            _resume_value.append(arg.resume)
        else:
            state = dict(arg)
        try:
            result = self.node(state)
        except GraphInterrupt as gi:
            self.checkpoints[thread_id] = state
            return {"__interrupt__": [gi.value]}
        finally:
            _resume_value.clear()
        self.checkpoints.pop(thread_id, None)
        return {**result, "calls": state["calls"]}


SECRETS = {}  # interrupt id -> resume secret: the adapter's server-side record


def decision_payload(resume):
    """LangChain HITL decisions -> egressgate's resume entry payload (one call, one decision)."""
    decisions = (resume or {}).get("decisions")
    if not isinstance(decisions, list) or len(decisions) != 1:
        raise ValueError("send exactly one decision for the one proposed call")
    kind = decisions[0].get("type")
    if kind not in ("approve", "reject"):
        raise ValueError(f"decision {kind!r} is not allowed here (approve or reject)")
    return {"approved": kind == "approve"}


def egress_approval_node(state):
    """The approval step as a graph node."""
    turn = state["turn"]
    status, first = api("POST", f"/v1/turns/{turn['turn_id']}/approval-requests",
                        {"reason": "The analysis needs the public data file.", "urls": [URL]})
    if first.get("outcome") == "ask":
        status, reg = api("POST", "/v1/interrupts", {"draft_id": first["draft_id"]})
        iid, message = reg["interrupt"]["id"], reg["interrupt"]["message"]
        SECRETS[iid] = reg["resume_secret"]
        state["calls"].append("ask")
    elif first.get("outcome") == "pending":
        iid, message = first["interrupt_id"], first["message"]  # the card that waits
        state["calls"].append("pending")
    else:
        return {"result": first}
    card = first["card"]
    resume = interrupt({
        "interrupt_id": iid,
        "action_requests": [{"name": TOOL, "args": card, "description": message}],
        "review_configs": [{"action_name": TOOL, "allowed_decisions": ["approve", "reject"]}],
    })
    payload = decision_payload(resume)  # a bad decision raises here: nothing is claimed
    status, out = api("POST", f"/v1/interrupts/{iid}/resume", {
        "secret": SECRETS[iid], "resume": [{"interruptId": iid, "status": "resolved", "payload": payload}]},
        token=None)
    if status != 200:
        return {"result": out}
    if out["state"] == "claimed":
        api("POST", f"/v1/interrupts/{iid}/complete", {"claim_id": out["claim"]["claim_id"]}, token=None)
    return {"result": out["decision"], "replayed": bool(out.get("replayed"))}


def main():
    decline = "--decline" in sys.argv
    graph = Graph(egress_approval_node)
    thread = "lg-" + uuid.uuid4().hex[:8]
    turn = open_turn("lg-user", thread)
    print("script download:", sandbox_download(turn["proxy_url"], URL))
    out = graph.invoke({"turn": turn, "calls": []}, thread)
    value = out["__interrupt__"][0]
    print("__interrupt__:", value["action_requests"][0]["description"])
    try:
        graph.invoke(Command(resume={"decisions": [{"type": "edit"}]}), thread)
        print("FAILED: an edit decision was accepted")
        return 1
    except ValueError as e:
        print("refused before any claim:", e)
    status, o = api("GET", f"/v1/interrupts/{value['interrupt_id']}/outcome")
    print("state after the refused decision:", o["state"])
    decision = {"type": "reject"} if decline else {"type": "approve"}
    out = graph.invoke(Command(resume={"decisions": [decision]}), thread)
    print("the approval tool's answers across the node's runs:", ", ".join(out["calls"]))
    print("resumed:", out["result"]["outcome"])
    print("script download after the decision:", sandbox_download(turn["proxy_url"], URL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
