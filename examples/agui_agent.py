#!/usr/bin/env python3
"""An AG-UI 1.0 agent (the Python `ag-ui-protocol` types, no model) that pauses on
egressgate's approval card and resumes exactly once.

Run 1  the user asks for data; the sandbox download is refused; the agent calls the
       approval tool (with its tool call id), registers the interrupt and ends the run with
       RUN_FINISHED whose outcome is the interrupt egressgate returned, as is.
Run 2  the client sends RunAgentInput.resume; the agent forwards each entry to
       POST /v1/interrupts/{id}/resume with the card's secret (kept server-side, never sent
       to the client), heartbeats, downloads, completes, and finishes with success.
Run 3  the same resume entry again (a retried request): the resume endpoint replays the
       done card, nothing is claimed twice, and the agent says the request is no longer
       waiting.

Env: EGRESSGATE_CONTROL, EGRESSGATE_RUNTIME_TOKEN, EXAMPLE_URL. Args: --decline.
Prints the SSE stream of each run (ag_ui's EventEncoder) and one summary line per step.
"""

import json
import os
import sys
import uuid

from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder

from egressgate_http import api, open_turn, sandbox_download

TOOL = "request_egress_approval"
URL = os.environ.get("EXAMPLE_URL", "http://files.example.com:8000/data.csv")


class Agent:
    """The agent server. PENDING maps each interrupt it issued to what resuming it needs."""

    def __init__(self):
        self.pending = {}  # interrupt id -> {"secret", "proxy_url"}
        self.turns = {}  # thread id -> the turn of its latest user message

    def say(self, text):
        mid = str(uuid.uuid4())
        return [TextMessageStartEvent(message_id=mid, role="assistant"),
                TextMessageContentEvent(message_id=mid, delta=text),
                TextMessageEndEvent(message_id=mid)]

    def run(self, run: RunAgentInput):
        events = [RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id)]
        if run.resume:
            events += self.resumed(run)
            return events + [RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id)]
        # A new user message is a new turn (the design: one turn per user message).
        turn = open_turn("agui-user", run.thread_id)
        self.turns[run.thread_id] = turn
        status = sandbox_download(turn["proxy_url"], URL)
        events += self.say(f"The download was refused ({status}); asking for approval.")
        call_id = "call_" + uuid.uuid4().hex[:12]
        args = {"reason": "The analysis needs the public data file.", "urls": [URL]}
        events += [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=TOOL),
                   ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(args)),
                   ToolCallEndEvent(tool_call_id=call_id)]
        status, first = api("POST", f"/v1/turns/{turn['turn_id']}/approval-requests",
                            {**args, "tool_call_id": call_id})
        if status != 200 or first["outcome"] != "ask":
            events += self.say(f"No approval needed or possible: {first}")
            return events + [RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id)]
        status, reg = api("POST", "/v1/interrupts", {"draft_id": first["draft_id"]})
        if status != 201:
            raise RuntimeError(f"registration: {status} {reg}")
        # egressgate's interrupt is an AG-UI 1.0 Interrupt: it goes into the outcome as is.
        interrupt = Interrupt.model_validate(reg["interrupt"])
        self.pending[interrupt.id] = {"secret": reg["resume_secret"], "proxy_url": turn["proxy_url"]}
        outcome = RunFinishedInterruptOutcome(interrupts=[interrupt])
        return events + [RunFinishedEvent(thread_id=run.thread_id, run_id=run.run_id, outcome=outcome)]

    def resumed(self, run: RunAgentInput):
        events = []
        for entry in run.resume:
            held = self.pending.get(entry.interrupt_id)
            if held is None:
                events += self.say("That request is no longer waiting for approval.")
                continue
            body = {"secret": held["secret"],
                    "resume": [entry.model_dump(by_alias=True, exclude_none=True)]}
            status, out = api("POST", f"/v1/interrupts/{entry.interrupt_id}/resume", body, token=None)
            if status == 200 and out.get("replayed"):
                self.pending.pop(entry.interrupt_id, None)
                events += self.say("That request is no longer waiting for approval.")
                continue
            if status != 200:
                events += self.say(f"The answer could not be applied: {out['error']['code']}.")
                continue
            claim = out["claim"]["claim_id"]
            api("POST", f"/v1/interrupts/{entry.interrupt_id}/heartbeat", {"claim_id": claim}, token=None)
            decision = out["decision"]["outcome"]
            if decision == "approved":
                status = sandbox_download(held["proxy_url"], URL)
                text = f"Approved; the download now answers {status}."
            else:
                text = "Not approved: continuing without that data."
            api("POST", f"/v1/interrupts/{entry.interrupt_id}/complete",
                {"claim_id": claim, "answer": {"text": text}}, token=None)
            # The entry stays known so a retried resume is answered as a replay.
            events += self.say(text)
        return events


def stream(events):
    enc = EventEncoder()
    for e in events:
        sys.stdout.write(enc.encode(e))
    sys.stdout.flush()


def texts(events):
    return [e.delta for e in events if isinstance(e, TextMessageContentEvent)]


def main():
    decline = "--decline" in sys.argv
    agent = Agent()
    thread = "agui-thread-" + uuid.uuid4().hex[:8]
    run1 = RunAgentInput(thread_id=thread, run_id="run-1", state={}, tools=[], context=[], forwarded_props={},
                         messages=[UserMessage(id="m1", content="Analyse the public data file.")])
    events = agent.run(run1)
    stream(events)
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome.type == "interrupt", finished
    interrupt = finished.outcome.interrupts[0]
    print("RUN_FINISHED outcome:", finished.outcome.type, "reason:", interrupt.reason,
          "toolCallId:", bool(interrupt.tool_call_id))
    print("card:", interrupt.message)

    # The client collects the person's decision and sends it as the next run's resume.
    entry = ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload={"approved": not decline})
    run2 = RunAgentInput(thread_id=thread, run_id="run-2", state={}, tools=[], context=[], forwarded_props={},
                         messages=[], resume=[entry])
    events = agent.run(run2)
    stream(events)
    print("run 2:", " ".join(texts(events)))
    run3 = run2.model_copy(update={"run_id": "run-3"})
    events = agent.run(run3)
    print("run 3 (same resume again):", " ".join(texts(events)))
    status, out = api("GET", f"/v1/interrupts/{interrupt.id}/outcome")
    print("stored:", out["state"], out["decision"]["outcome"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
