#!/usr/bin/env python3
"""The agent side of egressgate's approval tool, runnable against `egressgate serve`.

It shows the two branches every integration needs:

  first call  - the tool validates nothing itself: it asks the server, which merges the hosts
                the sandbox was refused this turn, and either answers at once (denied /
                already_approved) or returns a card; the runtime then pauses the run and
                registers the interrupt (snapshot first, then the pointer, then the card).
  resume      - the tool body runs again after the person answers. It must NOT ask again or
                re-merge: it reads the stored card and decision (GET .../outcome) and turns
                them into the tool result.

Usage:  python3 examples/agent_tool.py [--decline] [--url URL]
Env:    EGRESSGATE_CONTROL (default http://127.0.0.1:8080), EGRESSGATE_RUNTIME_TOKEN
        (default: read from ./egressgate-data/tokens), EXAMPLE_URL (what the script downloads).
Only the standard library is used.
"""

import base64
import json
import os
import sys
import urllib.error
import urllib.request

from egressgate_http import CONTROL
from egressgate_http import api as control_api

APPROVAL_TOOL = "request_download_approval"


def fail(message):
    """One clear line on stderr and exit status 2: the example's edge, never a traceback."""
    print("agent_tool.py: " + message, file=sys.stderr)
    sys.exit(2)


def runtime_token():
    token = os.environ.get("EGRESSGATE_RUNTIME_TOKEN")
    if token:
        return token
    path = os.path.join(os.environ.get("EGRESSGATE_DATA_DIR", "egressgate-data"), "tokens")
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("EGRESSGATE_RUNTIME_TOKEN="):
                    return line.split("=", 1)[1].strip()
    except OSError as e:
        fail(f"no runtime token: set EGRESSGATE_RUNTIME_TOKEN, or EGRESSGATE_DATA_DIR to the "
             f"data directory `egressgate serve` wrote its tokens file into ({path}: {e.strerror})")
    fail(f"no runtime token: {path} has no EGRESSGATE_RUNTIME_TOKEN line")


def api(method, path, body=None, token=None, user=None):
    """One control-API call (the shared one, without its default token: this example passes
    its token where a call needs it), with an unreachable control plane as one clear line."""
    try:
        return control_api(method, path, body, token, user)
    except (urllib.error.URLError, OSError) as e:
        fail(f"cannot reach the control plane at {CONTROL} ({getattr(e, 'reason', e)}): "
             "is `egressgate serve` running? (EGRESSGATE_CONTROL sets the address)")


def sandbox_download(proxy_url, url):
    """What a script in the sandbox does: download through the turn's proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy_url, "https": proxy_url}))
    try:
        with opener.open(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        fail(f"cannot reach the proxy for {url} ({getattr(e, 'reason', e)})")


def approval_tool_first_call(token, turn_id, reason, tool_call_id):
    """Branch 1: ask the server; it computes the card. Returns (tool_result, interrupt)."""
    status, out = api("POST", f"/v1/turns/{turn_id}/approval-requests",
                      {"reason": reason, "tool_call_id": tool_call_id}, token)
    if status != 200:
        return {"error": out["error"]}, None          # e.g. NOTHING_TO_APPROVE: tell the model
    if out["outcome"] != "ask":
        return out, None                              # denied / already_approved: no pause
    # Pause the run: snapshot first (here a stand-in for the agent's serialized state).
    snapshot = base64.b64encode(json.dumps({"turn": turn_id, "pending_tool": tool_call_id}).encode()).decode()
    status, reg = api("POST", "/v1/interrupts", {"draft_id": out["draft_id"], "snapshot": snapshot}, token)
    if status != 201:
        return {"error": reg["error"]}, None          # 507 SNAPSHOT_FAILED: no card, carry on
    return None, reg                                  # the run ends with RUN_FINISHED.outcome.interrupts


def approval_tool_resume(token, interrupt_id):
    """Branch 2: the tool body runs again. Answer only from the stored card and decision."""
    status, out = api("GET", f"/v1/interrupts/{interrupt_id}/outcome", token=token)
    decision = out.get("decision") or {}
    if decision.get("outcome") == "approved":
        return {"approved": True, "sites": decision.get("sites", []), "packages": decision.get("packages", [])}
    blocked = ", ".join(out["card"]["sites"] + out["card"]["packages"])
    return {"approved": False, "message": f"Not approved: {blocked}. Continue without that data and say so."}


def main():
    decline = "--decline" in sys.argv
    url = os.environ.get("EXAMPLE_URL", "http://files.example.com:8000/data.csv")
    if "--url" in sys.argv:
        url = sys.argv[sys.argv.index("--url") + 1]
    token = runtime_token()
    user, chat = "example-user", "example-chat-" + base64.urlsafe_b64encode(os.urandom(6)).decode()

    status, turn = api("POST", "/v1/turns", {"user_id": user, "chat_id": chat, "can_ask_human": True}, token)
    if status != 201:
        fail(f"opening a turn failed with {status}: {turn}")
    print("turn opened:", turn["turn_id"])

    status, _ = sandbox_download(turn["proxy_url"], url)
    print("script download:", status)

    # The model emitted two tool calls in one step; only the approval tool may run.
    _, batch = api("POST", "/v1/batches/decide", {
        "tool_uses": [{"toolUseId": "tu_1", "name": APPROVAL_TOOL}, {"toolUseId": "tu_2", "name": "run_script"}],
        "approval_tool": APPROVAL_TOOL}, token)
    print("batch rule cancels:", batch["cancel"])

    result, interrupt = approval_tool_first_call(token, turn["turn_id"], "The analysis needs the public data file.", "tu_1")
    if interrupt is None:
        print("tool result (no pause):", result)
        return 0
    print("card:", interrupt["interrupt"]["message"])

    # The person answers in the UI; the UI holds the resume secret.
    iid = interrupt["interrupt"]["id"]
    status, resumed = api("POST", f"/v1/interrupts/{iid}/resume", {
        "secret": interrupt["resume_secret"],
        "resume": [{"interruptId": iid, "status": "resolved", "payload": {"approved": not decline}}]})
    if status != 200:
        fail(f"the resume failed with {status}: {resumed}")
    claim = resumed["claim"]["claim_id"]
    print("resume claimed; decision:", resumed["decision"]["outcome"])

    result = approval_tool_resume(token, iid)
    print("tool result on resume:", result)
    status, body = sandbox_download(turn["proxy_url"], url)
    print("script download after the decision:", status)
    api("POST", f"/v1/interrupts/{iid}/complete", {"claim_id": claim, "answer": json.dumps(result)})
    print("resume completed")
    if decline:
        return 0 if status == 403 else 1
    if status != 200:
        # Approved, yet the download failed: the gate let it through, the origin did not serve it.
        print(f"agent_tool.py: approved, but {url} answered {status}: does the origin serve "
              "that file? (the README's demo creates data.csv in the folder it serves)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
