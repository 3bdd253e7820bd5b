"""What every framework example shares: the scripted model's one decision rule (no network
model), the sandbox script's download through the turn's proxy, and the command line
(`ask --user U --chat C --url URL [--unattended]`, `resume --interrupt-id ID`) with its JSON
output lines.

The scripted model downloads each `--url` in order; a refused download makes it ask for that
URL's host with the approval tool (and, to show the batch rule, try the download again in the
same step); an approval makes it download again; a deny ends the run saying so; when every
download worked its final text is the downloaded bodies.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import ApiError, Client
from ..adapters.claim import AlreadyDone, ClaimLost, Paused, StillPending, Turn, open_turn

DOWNLOAD_TOOL = "run_script"
"""The sandbox tool: a script that downloads one URL through the turn's proxy."""

REASON = "The task needs the data file at this URL."


def download(turn: Turn, url: str) -> str:
    """What the script in the sandbox does: GET `url` through the turn's proxy. The tool
    result is JSON: `{"url", "status", "body"}` (the proxy's refusal text on a 403)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": turn.proxy_url, "https": turn.proxy_url}))
    try:
        with opener.open(url, timeout=10) as r:
            status, body = r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode(errors="replace")
    return json.dumps({"url": url, "status": status, "body": body})


@dataclass(frozen=True)
class Step:
    """One tool result the model has seen: the tool, the URL it was about, its text."""

    tool: str
    url: str | None
    text: str


def next_move(urls: list[str], history: list[Step]) -> tuple[str, str]:
    """The scripted model's decision from what it has seen: `("download", url)`,
    `("ask", url)` or `("final", text)`. Deterministic: the same history, the same move. A
    download the batch rule cancelled beside an approval call (its text is not the script's
    JSON) downloaded nothing: the model acts on the approval's answer in the same step."""
    acted = [s for s in history if s.tool != DOWNLOAD_TOOL or s.text.startswith("{")]
    if acted and acted[-1].tool != DOWNLOAD_TOOL:
        answer = acted[-1]
        if answer.text.startswith("approved") and answer.url:
            return "download", answer.url
        return "final", f"I could not get {answer.url}: {answer.text}"
    fetched: dict[str, dict[str, Any]] = {}
    for step in acted:
        if step.tool == DOWNLOAD_TOOL:
            fetched[str(step.url)] = json.loads(step.text)
    for url in urls:
        got = fetched.get(url)
        if got is None:
            return "download", url
        if got["status"] != 200:
            return "ask", url
    return "final", "\n".join(fetched[u]["body"] for u in urls)


def finished(text: str, history: list[Step]) -> tuple[str, str | None]:
    """A first run that ended without a card: its final text and the last answer of the
    approval tool (the deny, when nobody could answer), as `Example.ask` returns them."""
    answers = [s.text for s in history if s.tool != DOWNLOAD_TOOL]
    return text, answers[-1] if answers else None


def _print(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def card_user(eg: Client, interrupt_id: str) -> str:
    """Whose card `interrupt_id` is, from the stored outcome: the takeover names them, and a
    resume in a new process knows nothing but the id."""
    return str(eg.get_interrupt_outcome(interrupt_id)["user_id"])


@dataclass(frozen=True)
class Example:
    """One framework's example: `ask(eg, turn, urls)` returns a `Paused` card or the final
    text with the deny the model got (`(text, deny)`); `resume(eg, interrupt_id, user)`
    returns a `Paused` chained card, the final text, or `AlreadyDone`."""

    ask: Callable[[Client, Turn, list[str]], Paused | tuple[str, str | None]]
    resume: Callable[[Client, str, str], Paused | str | AlreadyDone]


def main(example: Example, argv: list[str] | None = None) -> int:
    """The command line every example shares; one JSON line out."""
    parser = argparse.ArgumentParser(description="egressgate's approval loop in a framework, with a scripted model")
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="run until the pause; print the card")
    ask.add_argument("--user", required=True)
    ask.add_argument("--chat", required=True)
    ask.add_argument("--url", required=True, action="append", help="a URL to download (repeat for more)")
    ask.add_argument("--unattended", action="store_true", help="nobody can answer: the deny, no card")
    resume = sub.add_parser("resume", help="resume after the person answered")
    resume.add_argument("--interrupt-id", required=True)
    args = parser.parse_args(argv)
    control = os.environ.get("EGRESSGATE_CONTROL", "http://127.0.0.1:8080")
    with Client(control, token=os.environ.get("EGRESSGATE_RUNTIME_TOKEN")) as eg:
        try:
            if args.command == "ask":
                turn = open_turn(eg, args.user, args.chat, unattended=args.unattended)
                out = example.ask(eg, turn, args.url)
                if isinstance(out, Paused):
                    _print(out.to_json())
                else:
                    text, deny = out
                    _print({"deny": deny, "final": text} if deny else {"final": text})
                return 0
            user = card_user(eg, args.interrupt_id)
            res = example.resume(eg, args.interrupt_id, user)
            if isinstance(res, AlreadyDone):
                _print({"already_done": True, "interrupt_id": res.interrupt_id,
                        "message": "the card is already done; nothing ran again"})
            elif isinstance(res, Paused):
                _print(res.to_json())
            else:
                _print({"final": res})
            return 0
        except StillPending as e:
            _print({"error": {"code": "STILL_PENDING", "message": str(e)}})
            return 2
        except ClaimLost as e:
            _print({"error": {"code": "CLAIM_LOST", "message": str(e)}})
            return 3
        except ApiError as e:
            _print({"error": {"code": e.code, "message": e.message}})
            return 1


def run(example: Example) -> None:
    """`python -m egressgate.examples.NAME`."""
    sys.exit(main(example))
