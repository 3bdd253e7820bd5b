"""The framework-independent half of every adapter: the approval tool's first call, the card
registered with the framework's own serialised state as its snapshot, and the resumed run's
exactly-once claim (takeover of the person's click, heartbeat, complete, a chained card).

An adapter pauses its framework, serialises it, and only then registers the card
(`register`): a card always points at a state another process can load. After the person
answered, `Claim.take_over` makes this process the one that resumes (of any number of
processes exactly one wins), hands back the snapshot and the stored decision, and
`heartbeating()` keeps the lease while the framework works; `complete` ends the card with
the run's answer, or `chain` replaces it with the next card when the resumed run is refused
again.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .. import ApiError, Client, ToolUse

APPROVAL_TOOL = "request_egress_approval"
"""The approval tool's name, as the model sees it and as the batch rule keeps it."""

APPROVAL_DESCRIPTION = (
    "Ask the person to allow the sites or packages a script in the sandbox was refused. "
    "Name the URLs (or packages) and say in one sentence why the task needs them. "
    "Call this tool on its own: other tools in the same step are cancelled."
)
"""What the model reads about the approval tool: advice; the batch rule enforces it."""


@dataclass(frozen=True)
class Turn:
    """What a run needs of its turn. Adapters keep it inside the framework's own state, so a
    resume in another process downloads through the same turn's proxy."""

    turn_id: str
    proxy_url: str
    user: str
    chat: str

    def to_dict(self) -> dict[str, str]:
        """JSON for the framework's state."""
        return {"turn_id": self.turn_id, "proxy_url": self.proxy_url, "user": self.user, "chat": self.chat}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Turn:
        """Back from `to_dict`."""
        return cls(data["turn_id"], data["proxy_url"], data["user"], data["chat"])


TURN_KEY = "egressgate_turn"
"""Where every adapter keeps the turn in the framework's own saved state (Strands'
`agent.state`, the Agents SDK's run context, LangGraph's graph state), so a resume in another
process finds it in the snapshot."""


def with_turn(turn: Turn, **extra: Any) -> dict[str, Any]:
    """A framework's initial state: `extra` and the turn under `TURN_KEY`."""
    return {**extra, TURN_KEY: turn.to_dict()}


def open_turn(eg: Client, user: str, chat: str, *, unattended: bool = False) -> Turn:
    """One user message's turn. `unattended` is a run nobody watches: the approval tool then
    answers with a deterministic deny instead of a card nobody could answer."""
    t = eg.open_turn(user_id=user, chat_id=chat, can_ask_human=not unattended)
    return Turn(t["turn_id"], t["proxy_url"], user, chat)


def first_call(
    eg: Client, turn: Turn, *, reason: str, urls: Sequence[str] | None,
    packages: Sequence[str] | None, tool_call_id: str,
) -> dict[str, Any]:
    """The approval tool's first pass: the server merges what the proxy refused this turn and
    answers (`ask` with a draft, `denied`, `already_approved`, `pending`). A `422` is an
    answer for the model too, so it comes back as `{"outcome": "invalid", "code", "message"}`."""
    try:
        return dict(eg.request_approval(
            turn.turn_id, reason=reason, urls=list(urls) if urls else None,
            packages=list(packages) if packages else None, tool_call_id=tool_call_id))
    except ApiError as e:
        if e.status != 422:
            raise
        return {"outcome": "invalid", "code": e.code, "message": e.message}


def first_answer_text(answer: dict[str, Any]) -> str:
    """What the model reads for a first-pass answer that is not `ask`."""
    outcome = answer.get("outcome")
    if outcome == "already_approved":
        return "already approved: run the step again"
    if outcome == "pending":
        return (f"a card for this chat already waits for the person ({answer.get('interrupt_id')}); "
                "do not ask again, wait for the answer")
    code = answer.get("code")
    return f"{code}: {answer.get('message', '')}" if code else str(answer.get("message", outcome))


def resume_answer(card: dict[str, Any], decision: dict[str, Any] | None) -> str:
    """The resume branch's whole answer: built from the stored card and the stored decision
    only. The tool body runs again from the top on resume; merging refusals again there would
    find everything approved ("nothing to ask") or, after a deny, say the opposite of what the
    person decided."""
    outcome = (decision or {}).get("outcome", "declined")
    if outcome == "approved":
        granted = sorted((decision or {}).get("sites", [])) + sorted((decision or {}).get("packages", []))
        return "approved: " + ", ".join(granted) + " may be reached for the rest of this chat; run the step again"
    asked = sorted(card.get("sites", [])) + sorted(card.get("packages", []))
    return ("the person did not approve " + ", ".join(asked)
            + "; continue without that data and say so")


def batch_cancellations(eg: Client, uses: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The batch rule for one model step's tool calls (`(call id, tool name)` in order): the
    first approval call runs, every other call is cancelled with a text the model can act on
    (call id → text). The gate's `POST /v1/batches/decide` decides, so every runtime shares one
    rule and one wording; a step without an approval call cancels nothing and asks nobody."""
    if not any(name == APPROVAL_TOOL for _, name in uses):
        return {}
    tool_uses: list[ToolUse] = [{"toolUseId": use_id, "name": name} for use_id, name in uses]
    return dict(eg.decide_batch(approval_tool=APPROVAL_TOOL, tool_uses=tool_uses)["cancel"])


CANCEL_KEY = "egressgate_batch_cancel"
"""Where a tool-calling adapter keeps the batch rule's decision for the current step (call id
→ text) in the framework's per-run state, for its tool-call hook to read."""


def cancelled(state: Mapping[str, Any], call_id: str) -> str | None:
    """The text a call cancelled beside the approval call answers with, as the batch rule's
    decision under `CANCEL_KEY` has it; `None` for a call that runs."""
    text: str | None = state.get(CANCEL_KEY, {}).get(call_id)
    return text


class ToolApproval:
    """What an adapter whose approval step is a tool the model calls (Strands, the OpenAI
    Agents SDK) holds for one control API: the client, the framework's batch rule and the
    approval tool, built the same way for each. A subclass names its framework's hook as
    `batch_rule_type` (built with the client) and makes the tool in `_make_tool`."""

    batch_rule_type: Callable[[Client], Any]

    def __init__(self, eg: Client):
        self.eg = eg
        self.batch_rule = self.batch_rule_type(eg)
        self.tool = self._make_tool()

    def _make_tool(self) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Paused:
    """A registered card: what the runtime shows the person (`card_url` when the gate has a
    public URL, else the secret for its own card view) and keeps (`interrupt_id`)."""

    interrupt_id: str
    secret: str
    card_url: str | None
    card: dict[str, Any]
    interrupt: dict[str, Any] = field(default_factory=dict)
    """The AG-UI `Interrupt` the gate issued, for a runtime that ends its run with it."""

    def to_json(self) -> dict[str, Any]:
        """The example's output line: `{"interrupt_id", "card_url"?, "secret"}`."""
        out: dict[str, Any] = {"interrupt_id": self.interrupt_id}
        if self.card_url:
            out["card_url"] = self.card_url
        out["secret"] = self.secret
        return out


def register(eg: Client, draft_id: str, snapshot: bytes, claim_id: str | None = None) -> Paused:
    """Registers the draft card with `snapshot` (the paused framework's serialised state),
    which the gate stores and confirms before it writes the card. With `claim_id` it is the
    chained card that replaces the claimed one in place."""
    issued: dict[str, Any] = dict(eg.register_interrupt(
        draft_id=draft_id, snapshot=base64.b64encode(snapshot).decode(), claim_id=claim_id))
    return Paused(issued["interrupt"]["id"], issued["resume_secret"], issued.get("card_url"), issued["card"],
                  dict(issued["interrupt"]))


class StillPending(Exception):
    """The person has not answered yet: there is nothing to resume."""


class ClaimLost(Exception):
    """Another process holds (or just took) the claim: this one must not resume."""


@dataclass(frozen=True)
class AlreadyDone:
    """The card was completed before: nothing runs again."""

    interrupt_id: str
    decision: dict[str, Any] | None


def _parse_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


class Claim:
    """This process's claim on an answered card: the only process that may resume it."""

    def __init__(self, eg: Client, interrupt_id: str, user: str, answer: dict[str, Any], card: dict[str, Any]):
        self.eg = eg
        self.interrupt_id = interrupt_id
        self.user = user
        self.claim_id: str = answer["claim"]["claim_id"]
        self.lease_expires_at: str = answer["claim"]["lease_expires_at"]
        self.decision: dict[str, Any] | None = answer.get("decision")
        self.snapshot: bytes = base64.b64decode(answer.get("snapshot") or "")
        self.card = card
        self.heartbeats = 0

    @classmethod
    def take_over(cls, eg: Client, interrupt_id: str, user: str) -> Claim | AlreadyDone:
        """Takes over the claim the person's click made (the card page resumes with the secret
        alone, a *handoff* claim). A done card is `AlreadyDone`; an unanswered one raises
        `StillPending`; a claim another process took raises `ClaimLost`."""
        try:
            answer = dict(eg.take_over_claim(interrupt_id, user=user))
        except ApiError as e:
            if e.code != "CLAIM_LOST":
                raise
            outcome = eg.get_interrupt_outcome(interrupt_id, user=user)
            if outcome["state"] == "done":
                return AlreadyDone(interrupt_id, outcome.get("decision"))
            if outcome["state"] == "pending":
                raise StillPending(f"{interrupt_id} still waits for the person's answer") from e
            raise ClaimLost(f"{interrupt_id}: another process resumes it ({e.message})") from e
        card = dict(eg.get_interrupt_outcome(interrupt_id, user=user)["card"])
        return cls(eg, interrupt_id, user, answer, card)

    def heartbeat(self) -> None:
        """Renews the lease (never past the claim's deadline)."""
        self.lease_expires_at = self.eg.heartbeat_claim(self.interrupt_id, claim_id=self.claim_id)["lease_expires_at"]
        self.heartbeats += 1

    @contextmanager
    def heartbeating(self) -> Iterator[Claim]:
        """Heartbeats once at once, then at a third of the lease, while the block runs. A lost
        claim stops the beat; `complete` or `chain` then says so."""
        stop = threading.Event()
        self.heartbeat()

        def beat() -> None:
            while True:
                left = (_parse_time(self.lease_expires_at) - datetime.now(timezone.utc)).total_seconds()
                if stop.wait(max(left / 3, 0.2)):
                    return
                try:
                    self.heartbeat()
                except ApiError:
                    return

        thread = threading.Thread(target=beat, name="egressgate-heartbeat", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def complete(self, answer: Any) -> None:
        """Ends the card with the run's answer; a later resume replays it and runs nothing."""
        self.eg.complete_interrupt(self.interrupt_id, claim_id=self.claim_id, answer=answer)

    def chain(self, draft_id: str, snapshot: bytes) -> Paused:
        """The resumed run was refused again: the next card replaces this one in place (new id,
        fresh secret), written only while this process still holds the claim."""
        return register(self.eg, draft_id, snapshot, claim_id=self.claim_id)
