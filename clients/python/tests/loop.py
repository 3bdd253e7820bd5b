#!/usr/bin/env python3
"""The approval loop with the `egressgate` package, blocking (`Client`) and awaited
(`AsyncClient`), against a running `egressgate serve`: open a turn, a refusal through the
proxy, request approval (a card), read the pending cards, resume approved with the card's
secret, the event stream yields the chat's events, revoke the approval; a bad token is an
`ApiError` with status 401 and code `UNAUTHORIZED`. Then the coverage check: every operation
of the served document is a method of both clients, and the other way round.

Env: EGRESSGATE_CONTROL, EGRESSGATE_RUNTIME_TOKEN, EXAMPLE_URL (what the sandbox downloads).
Prints one line per step; `tests/client_libraries.rs` checks them.
"""

import asyncio
import base64
import inspect
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import egressgate
from egressgate import ApiError, AsyncClient, Client

CONTROL = os.environ["EGRESSGATE_CONTROL"]
TOKEN = os.environ["EGRESSGATE_RUNTIME_TOKEN"]
URL = os.environ["EXAMPLE_URL"]


async def done(value):
    """The value of a call of either client (the async one returns an awaitable)."""
    return await value if inspect.isawaitable(value) else value


async def events(stream):
    """The events of either client's stream."""
    if hasattr(stream, "__aiter__"):
        async for e in stream:
            yield e
    else:
        for e in stream:
            yield e


def download(proxy_url):
    """What a script in the sandbox does: download through the turn's proxy."""
    handler = urllib.request.ProxyHandler({"http": proxy_url})
    try:
        with urllib.request.build_opener(handler).open(URL, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def loop(eg, kind):
    user, chat = f"{kind}-user", f"{kind}-chat"
    host = urllib.parse.urlsplit(URL).hostname
    turn = await done(eg.open_turn(user_id=user, chat_id=chat, can_ask_human=True))
    print(f"{kind}: turn opened {turn['turn_id']}")
    print(f"{kind}: download {download(turn['proxy_url'])}")
    refused = await done(eg.list_refusals(turn["turn_id"]))
    print(f"{kind}: refused {', '.join(r['host'] for r in refused['refusals'])}")
    answer = await done(eg.request_approval(turn["turn_id"], reason="the analysis needs the data file",
                                            urls=[URL], tool_call_id="tc_1"))
    print(f"{kind}: approval tool {answer['outcome']}, card sites {json.dumps(answer['card']['sites'])}")
    snapshot = base64.b64encode(b"the paused run").decode()
    issued = await done(eg.register_interrupt(draft_id=answer["draft_id"], snapshot=snapshot))
    iid, secret = issued["interrupt"]["id"], issued["resume_secret"]
    pending = await done(eg.list_pending_interrupts(user))
    print(f"{kind}: pending {json.dumps([p['interrupt_id'] == iid for p in pending['interrupts']])}")
    resumed = await done(eg.resume_interrupt(iid, secret=secret, resume=[
        {"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]))
    print(f"{kind}: resume {resumed['state']}, decision {resumed['decision']['outcome']}")
    outcome = await done(eg.get_interrupt_outcome(iid))
    print(f"{kind}: outcome {outcome['state']} {json.dumps(outcome['decision']['sites'])}")
    print(f"{kind}: download after approval {download(turn['proxy_url'])}")
    await done(eg.heartbeat_claim(iid, claim_id=resumed["claim"]["claim_id"]))
    completed = await done(eg.complete_interrupt(iid, claim_id=resumed["claim"]["claim_id"],
                                                 answer="downloaded"))
    print(f"{kind}: complete {completed['state']}")
    approvals = await done(eg.list_chat_approvals(chat, user=user))
    print(f"{kind}: approvals {json.dumps([a['value'] for a in approvals['approvals']])}")
    revoked = await done(eg.revoke_approval(chat, "site", host, user=user))
    print(f"{kind}: revoked {revoked['revoked']['kind']} {revoked['revoked']['value']}")
    seen = []
    async for e in events(eg.stream_chat_events(chat, user=user, last_event_id="0")):
        seen.append(e.event)
        if e.event == "approval.revoked":
            assert e.data["chat_id"] == chat, e
            break
    print(f"{kind}: events {' '.join(dict.fromkeys(seen))}")
    try:
        await done(eg.get_interrupt_outcome("i_no_such_card"))
    except ApiError as e:
        print(f"{kind}: unknown card {e.status} {e.code}")


async def bad_token(eg, kind):
    try:
        await done(eg.list_refusals("t_whatever"))
    except ApiError as e:
        print(f"{kind}: bad token {e.status} {e.code} ({e.message})")
    else:
        print(f"{kind}: bad token accepted")


def missing(doc, names):
    """The document's operations that `names` (a client's methods) lack, in snake_case."""
    ops = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    return sorted({snake(o) for o in ops} - set(names))


def snake(operation_id):
    return "".join("_" + c.lower() if c.isupper() else c for c in operation_id)


def coverage(doc):
    for cls in (Client, AsyncClient):
        methods = [n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))]
        lacking = missing(doc, methods)
        print(f"coverage {cls.__name__}: {len(egressgate.OPERATIONS)} operations, missing {json.dumps(lacking)}")
    ops = {op["operationId"] for item in doc["paths"].values() for op in item.values()}
    print(f"coverage extra: {json.dumps(sorted(set(egressgate.OPERATIONS) - ops))}")
    # The check itself fails on an operation the client lacks.
    doc["paths"]["/v1/widgets"] = {"post": {"operationId": "frobnicateWidget"}}
    methods = [n for n in dir(Client) if not n.startswith("_")]
    print(f"coverage of a document with a new operation: missing {json.dumps(missing(doc, methods))}")


async def main():
    with Client(CONTROL, token=TOKEN) as eg:
        await loop(eg, "sync")
        doc = eg.get_open_api_document()
    with Client(CONTROL, token="not-a-token-0123456789") as eg:
        await bad_token(eg, "sync")
    async with AsyncClient(CONTROL, token=TOKEN) as eg:
        await loop(eg, "async")
    async with AsyncClient(CONTROL, token="not-a-token-0123456789") as eg:
        await bad_token(eg, "async")
    coverage(doc)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
