#!/usr/bin/env python3
"""An MCP client (the official Python `mcp` SDK) using egressgate's MCP server, as an agent
host would: list the tools, ask what was refused, request approval, answer the person's
input request, and replay that answer to show that nothing is claimed twice.

Transports:
  --transport stdio   starts `egressgate mcp --control-url URL --turn TURN` (the runtime token
                      travels in EGRESSGATE_RUNTIME_TOKEN; only JSON-RPC on its stdout)
  --transport http    connects to URL/mcp with the runtime token and X-Egressgate-Turn
Protocols:
  --protocol 2026-07-28   the server answers `input_required` with a sealed requestState; the
                          client (playing the person) answers the form and retries; then it
                          replays the same requestState: the answer comes back `replayed`
  --protocol 2025-11-25   the server asks through an elicitation request (URL mode: the card
                          page `/ui/cards/{id}#secret=...`); the callback plays the page and
                          answers the card with the secret in the URL's fragment
  --form-only             (with 2025-11-25) a client without URL mode (no browser): the
                          server asks with a yes/no form and applies the answer itself

Env: EGRESSGATE_CONTROL (the control API), EGRESSGATE_RUNTIME_TOKEN, EGRESSGATE_BIN (the
binary for stdio), EXAMPLE_URL (what the sandbox script downloads).
Prints one line per step; exits non-zero when a step does not behave as described.
"""

import argparse
import asyncio
import json
import os
import sys
import urllib.parse

import httpx2
import mcp.types as types
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from egressgate_http import CONTROL, TOKEN, api, open_turn, sandbox_download

def check(ok, what):
    if not ok:
        print("FAILED:", what, flush=True)
        sys.exit(1)


def payload(result):
    """The tool's JSON answer (structured content, else the text)."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


class Person:
    """Plays the person: answers the form, or (URL mode) does what the card page does."""

    def __init__(self, approve):
        self.approve = approve
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params.mode if hasattr(params, "mode") else "form")
        if getattr(params, "mode", "form") == "url":
            parsed = urllib.parse.urlparse(params.url)
            interrupt_id = parsed.path.rsplit("/", 1)[-1]
            secret = urllib.parse.parse_qs(parsed.fragment)["secret"][0]
            print("card page:", parsed.path, flush=True)
            status, out = api("POST", f"/v1/interrupts/{interrupt_id}/resume", {
                "secret": secret,
                "resume": [{"interruptId": interrupt_id, "status": "resolved",
                            "payload": {"approved": self.approve}}]}, token=None)
            check(status == 200, f"the page's resume: {status} {out}")
            api("POST", f"/v1/interrupts/{interrupt_id}/complete", {"claim_id": out["claim"]["claim_id"]}, token=None)
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"approved": self.approve})


def form_answer(approve):
    return {"approval": {"action": "accept", "content": {"approved": approve}}}


async def run(args):
    turn = open_turn("mcp-user", "mcp-chat-" + os.urandom(4).hex())
    turn_id = turn["turn_id"]
    url = os.environ.get("EXAMPLE_URL", "http://files.example.com:8000/data.csv")
    print("script download:", sandbox_download(turn["proxy_url"], url), flush=True)

    if args.transport == "stdio":
        server = StdioServerParameters(
            command=os.environ.get("EGRESSGATE_BIN", "egressgate"),
            args=["mcp", "--control-url", CONTROL, "--turn", turn_id],
            env={"EGRESSGATE_RUNTIME_TOKEN": TOKEN, "EGRESSGATE_LOG": "warn", "PATH": os.environ.get("PATH", "")})
    else:
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + TOKEN, "X-Egressgate-Turn": turn_id},
                                  timeout=30)
        server = streamable_http_client(CONTROL + "/mcp", http_client=http)

    if args.form_only:
        # A client that offers only form elicitation (no browser to open a URL in).
        advertised = ClientSession._build_capabilities

        def form_only(self, version):
            caps = advertised(self, version)
            if caps.elicitation is not None:
                caps.elicitation.url = None
            return caps

        ClientSession._build_capabilities = form_only
    person = Person(approve=not args.decline)
    mode = "legacy" if args.protocol == "2025-11-25" else args.protocol
    async with Client(server, mode=mode, elicitation_callback=person, cache=None) as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        check(names == ["egress_refusals", "request_egress_approval"], f"tools: {names}")
        check(all(t.input_schema.get("type") == "object" for t in tools.tools), "root type object")
        check("turn" not in json.dumps(tools.tools[1].input_schema.get("properties", {})), "no turn argument")
        print("tools:", ", ".join(names), flush=True)

        refused = payload(await client.call_tool("egress_refusals", {}))
        hosts = [r["host"] for r in refused["refusals"] if r["approvable"]]
        print("refused this turn:", ", ".join(hosts), flush=True)

        # The turn is bound by the server's start or the HTTP header, never by an argument.
        forged = await client.call_tool("request_egress_approval", {"reason": "x", "turn_id": "t_other"})
        check(forged.is_error, f"a turn argument was accepted: {forged}")

        call = {"reason": "The analysis needs the public data file."}
        if args.protocol == "2026-07-28":
            first = await client.session.call_tool("request_egress_approval", call, allow_input_required=True)
            check(isinstance(first, types.InputRequiredResult), f"input_required: {first}")
            check(first.request_state and "approval" in first.input_requests, "a sealed state and one input request")
            print("input required:", first.input_requests["approval"].params.message, flush=True)
            # A retry that carries no answer is refused and changes nothing (the answer below
            # still applies to a pending card).
            try:
                await client.session.call_tool("request_egress_approval", call,
                                               request_state=first.request_state, allow_input_required=True)
                check(False, "a retry without an answer was accepted")
            except Exception as e:
                print("retry without an answer refused:", type(e).__name__, flush=True)
            answer = form_answer(not args.decline)
            done = await client.session.call_tool("request_egress_approval", call, input_responses=answer,
                                                  request_state=first.request_state, allow_input_required=True)
            result = payload(done)
            print("answer:", result["outcome"], flush=True)
            # The same state again (a retried request, or a replay attack): nothing is claimed
            # twice, the stored answer comes back.
            again = payload(await client.session.call_tool(
                "request_egress_approval", call, input_responses=form_answer(True),
                request_state=first.request_state, allow_input_required=True))
            check(again.get("replayed") is True and again["outcome"] == result["outcome"], f"replay: {again}")
            print("replayed:", again["outcome"], "(no second claim)", flush=True)
            tampered = first.request_state[:-2] + ("AA" if not first.request_state.endswith("AA") else "BB")
            try:
                await client.session.call_tool("request_egress_approval", call, input_responses=answer,
                                               request_state=tampered, allow_input_required=True)
                check(False, "a tampered requestState was accepted")
            except Exception as e:  # the SDK raises the server's JSON-RPC error
                print("tampered state refused:", type(e).__name__, flush=True)
        else:
            result = payload(await client.call_tool("request_egress_approval", call))
            want = ["form"] if args.form_only else ["url"]
            check(person.asked == want, f"asked through: {person.asked}")
            print("asked through:", want[0], flush=True)
            print("answer:", result["outcome"], flush=True)
        iid = result["interrupt_id"]
        status, out = api("GET", f"/v1/interrupts/{iid}/outcome")
        print("stored state:", out["state"], flush=True)

    print("script download after the decision:", sandbox_download(turn["proxy_url"], url), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--protocol", choices=["2026-07-28", "2025-11-25"], default="2026-07-28")
    p.add_argument("--decline", action="store_true")
    p.add_argument("--form-only", action="store_true")
    return asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
