// The approval loop with `@egressgate/client` against a running `egressgate serve`: open a
// turn, a refusal through the proxy, request approval (a card), read the pending cards,
// resume approved with the card's secret, the event stream yields the chat's events, revoke
// the approval; a bad token is an `ApiError` with status 401 and code `UNAUTHORIZED`. Then
// the coverage check: every operation of the served document is a method of `Client`, and
// the other way round. Prints one line per step; `tests/client_libraries.rs` checks them.

import { connect } from "node:net";

import { ApiError, Client, OPERATIONS } from "../src/index.js";
import type { OpenApiDocument } from "../src/index.js";

const control = process.env["EGRESSGATE_CONTROL"] ?? "";
const token = process.env["EGRESSGATE_RUNTIME_TOKEN"] ?? "";
const url = new URL(process.env["EXAMPLE_URL"] ?? "");

/** What a script in the sandbox does: a GET through the turn's proxy; the status. */
function download(proxyUrl: string): Promise<number> {
  const proxy = new URL(proxyUrl);
  const credential = btoa(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(proxy.port), proxy.hostname);
    let head = "";
    socket.on("data", (chunk) => {
      head += new TextDecoder().decode(chunk);
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(Number(head.split(" ")[1])));
    socket.write(
      `GET ${url.href} HTTP/1.1\r\nHost: ${url.host}\r\nProxy-Authorization: Basic ${credential}\r\nConnection: close\r\n\r\n`,
    );
  });
}

async function loop(eg: Client): Promise<void> {
  const user = "ts-user";
  const chat = "ts-chat";
  const turn = await eg.openTurn({ user_id: user, chat_id: chat, can_ask_human: true });
  console.log(`ts: turn opened ${turn.turn_id}`);
  console.log(`ts: download ${await download(turn.proxy_url)}`);
  const refused = await eg.listRefusals(turn.turn_id);
  console.log(`ts: refused ${refused.refusals.map((r) => r.host).join(", ")}`);
  const answer = await eg.requestApproval(turn.turn_id, {
    reason: "the analysis needs the data file",
    urls: [url.href],
    tool_call_id: "tc_1",
  });
  if (answer.outcome !== "ask") throw new Error(`no card: ${JSON.stringify(answer)}`);
  console.log(`ts: approval tool ${answer.outcome}, card sites ${JSON.stringify(answer.card.sites)}`);
  const issued = await eg.registerInterrupt({ draft_id: answer.draft_id, snapshot: btoa("the paused run") });
  const id = issued.interrupt.id;
  const pending = await eg.listPendingInterrupts(user);
  console.log(`ts: pending ${JSON.stringify(pending.interrupts.map((p) => p.interrupt_id === id))}`);
  const resumed = await eg.resumeInterrupt(id, {
    secret: issued.resume_secret,
    resume: [{ interruptId: id, status: "resolved", payload: { approved: true } }],
  });
  console.log(`ts: resume ${resumed.state}, decision ${resumed.decision?.outcome}`);
  const outcome = await eg.getInterruptOutcome(id);
  console.log(`ts: outcome ${outcome.state} ${JSON.stringify(outcome.decision?.sites)}`);
  console.log(`ts: download after approval ${await download(turn.proxy_url)}`);
  const claim = resumed.claim?.claim_id ?? "";
  await eg.heartbeatClaim(id, { claim_id: claim });
  const completed = await eg.completeInterrupt(id, { claim_id: claim, answer: "downloaded" });
  console.log(`ts: complete ${completed.state}`);
  const approvals = await eg.listChatApprovals(chat, { user });
  console.log(`ts: approvals ${JSON.stringify(approvals.approvals.map((a) => a.value))}`);
  const revoked = await eg.revokeApproval(chat, "site", url.hostname, { user });
  console.log(`ts: revoked ${revoked.revoked.kind} ${revoked.revoked.value}`);
  const seen: string[] = [];
  for await (const e of eg.streamChatEvents(chat, { user, lastEventId: "0" })) {
    if (!seen.includes(e.event)) seen.push(e.event);
    if (e.event === "approval.revoked") break;
  }
  console.log(`ts: events ${seen.join(" ")}`);
  try {
    await eg.getInterruptOutcome("i_no_such_card");
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    console.log(`ts: unknown card ${e.status} ${e.code}`);
  }
}

/** The document's operations `client` lacks. */
function missing(doc: OpenApiDocument, client: object): string[] {
  const paths = doc["paths"] as Record<string, Record<string, { operationId: string }>>;
  const ids = Object.values(paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
  return ids.filter((id) => typeof (client as Record<string, unknown>)[id] !== "function").sort();
}

async function main(): Promise<void> {
  const eg = new Client(control, { token });
  await loop(eg);
  try {
    await new Client(control, { token: "not-a-token-0123456789" }).listRefusals("t_whatever");
    console.log("ts: bad token accepted");
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    console.log(`ts: bad token ${e.status} ${e.code} (${e.message})`);
  }
  const doc = await eg.getOpenApiDocument();
  const ids = Object.values(doc["paths"] as Record<string, Record<string, { operationId: string }>>)
    .flatMap((item) => Object.values(item).map((op) => op.operationId));
  console.log(`coverage Client: ${Object.keys(OPERATIONS).length} operations, missing ${JSON.stringify(missing(doc, eg))}`);
  console.log(`coverage extra: ${JSON.stringify(Object.keys(OPERATIONS).filter((id) => !ids.includes(id)))}`);
  const grown = { ...doc, paths: { ...(doc["paths"] as object), "/v1/widgets": { post: { operationId: "frobnicateWidget" } } } };
  console.log(`coverage of a document with a new operation: missing ${JSON.stringify(missing(grown, eg))}`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
