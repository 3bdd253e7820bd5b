// The AG-UI adapter seen from an AG-UI frontend: @ag-ui/client's HttpAgent (the pinned package
// in EGRESSGATE_TEST_AGUI) against the Python endpoint at AGUI_URL
// (`python -m egressgate.examples.agui serve`), with the person answering through the gate's
// API at EGRESSGATE_CONTROL in between, as the card page does. Each thread is a chat whose
// user message asks for EXAMPLE_URL. Asserts what the frontend sees; prints one JSON line per
// thread, `{"thread", "interrupt_id", ...}`, for the test to check the gate's side.
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(`${process.env.EGRESSGATE_TEST_AGUI}/package.json`);
const { HttpAgent, buildResumeArray } = require("@ag-ui/client");

const APPROVAL = "request_egress_approval";
const url = process.env.AGUI_URL;
const control = process.env.EGRESSGATE_CONTROL;
const file = process.env.EXAMPLE_URL;
const host = new URL(file).hostname;

/** A frontend thread whose user asks for the file. */
function thread(name) {
  const agent = new HttpAgent({ url, threadId: name });
  agent.addMessage({ id: `user-${name}`, role: "user", content: `Download these files and show them to me:\n${file}` });
  return agent;
}

/** One run: every event the client applied, and the error it rejected with (if any). */
async function run(agent, params = {}) {
  const events = [];
  let error = null;
  try {
    await agent.runAgent(params, { onEvent: ({ event }) => { events.push(event); } });
  } catch (e) {
    error = e;
  }
  return { events, error, last: events[events.length - 1] };
}

/** The first run: it ends with the interrupt outcome, and the card is pending in the client. */
async function paused(agent) {
  const { events, error, last } = await run(agent);
  assert.equal(error, null, String(error));
  assert.equal(last.type, "RUN_FINISHED");
  assert.equal(last.outcome.type, "interrupt");
  assert.equal(agent.pendingInterrupts.length, 1);
  const interrupt = agent.pendingInterrupts[0];
  assert.deepEqual(last.outcome.interrupts.map((i) => i.id), [interrupt.id]);
  // The interrupt is the approval call's, and the retry beside it was cancelled (batch rule).
  const starts = events.filter((e) => e.type === "TOOL_CALL_START");
  const approval = starts.find((e) => e.toolCallName === APPROVAL);
  assert.equal(interrupt.reason, "tool_call");
  assert.equal(interrupt.toolCallId, approval.toolCallId);
  const retry = starts.filter((e) => e.toolCallName === "run_script").at(-1);
  const cancelled = events.find((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === retry.toolCallId);
  assert.equal(cancelled.content, "call the approval tool on its own");
  assert.ok(!events.some((e) => e.type === "TOOL_CALL_RESULT" && e.toolCallId === approval.toolCallId));
  const shown = interrupt.metadata.egressgate;
  assert.deepEqual(shown.card.sites, [host]);
  assert.ok(shown.secret.length > 20);
  assert.match(interrupt.message, new RegExp(host.replaceAll(".", "\\.")));
  return { interrupt, secret: shown.secret };
}

/** What the person does on the card page: answer with the card's secret alone. */
async function person(interrupt, secret, approved) {
  const r = await fetch(`${control}/v1/interrupts/${interrupt.id}/resume`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ secret, resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved } }] }),
  });
  assert.equal(r.status, 200, await r.text());
}

/** A resumed run that finished: its final text (also the run's result). */
function finished({ events, error, last }, agent) {
  assert.equal(error, null, String(error));
  assert.equal(last.type, "RUN_FINISHED");
  assert.ok(last.outcome === undefined || last.outcome.type === "success", JSON.stringify(last.outcome));
  assert.equal(agent.pendingInterrupts.length, 0);
  const text = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
  assert.equal(last.result.final, text);
  return text;
}

function approvalResult(events) {
  const start = events.find((e) => e.type === "TOOL_CALL_RESULT");
  return start && start.content;
}

const out = (line) => console.log(JSON.stringify(line));

// 1. Approved on the card page: the next run's resolved entry takes the click over.
{
  const agent = thread("agui-approve");
  const { interrupt, secret } = await paused(agent);
  // Before the person answered: the run fails, and the interrupt stays pending.
  const early = await run(agent, { resume: [{ interruptId: interrupt.id, status: "resolved" }] });
  assert.equal(early.last.type, "RUN_ERROR");
  assert.equal(early.last.code, "STILL_PENDING");
  assert.equal(agent.pendingInterrupts.length, 1);
  await person(interrupt, secret, true);
  const resumed = await run(agent, { resume: [{ interruptId: interrupt.id, status: "resolved" }] });
  assert.match(approvalResult(resumed.events), new RegExp(`^approved: ${host.replaceAll(".", "\\.")}`));
  const text = finished(resumed, agent);
  assert.ok(agent.messages.some((m) => m.role === "assistant" && m.content === text));
  // The same entry again: nothing runs again.
  const again = await run(agent, { resume: [{ interruptId: interrupt.id, status: "resolved" }] });
  assert.equal(again.error, null);
  assert.equal(again.last.result.already_done, true);
  assert.ok(!again.events.some((e) => e.type === "TOOL_CALL_START"));
  out({ thread: "approve", interrupt_id: interrupt.id, final: text });
}

// 2. Cancelled in the chat: the entry (with the card's secret) declines the card.
{
  const agent = thread("agui-cancel");
  const { interrupt, secret } = await paused(agent);
  const resume = buildResumeArray(agent.pendingInterrupts, {
    [interrupt.id]: { status: "cancelled", metadata: { egressgate: { secret } } },
  });
  const resumed = await run(agent, { resume });
  assert.match(approvalResult(resumed.events), /^the person did not approve/);
  out({ thread: "cancel", interrupt_id: interrupt.id, final: finished(resumed, agent) });
}

// 3. Approved in the chat: the resolved entry carries the answer and the secret.
{
  const agent = thread("agui-chat");
  const { interrupt, secret } = await paused(agent);
  const resume = buildResumeArray(agent.pendingInterrupts, {
    [interrupt.id]: { status: "resolved", payload: { approved: true }, metadata: { egressgate: { secret } } },
  });
  out({ thread: "chat", interrupt_id: interrupt.id, final: finished(await run(agent, { resume }), agent) });
}

// 4. Cancelled without the secret, nobody answered: withdrawn, nothing claimed or run.
{
  const agent = thread("agui-withdraw");
  const { interrupt } = await paused(agent);
  const withdrawn = await run(agent, { resume: [{ interruptId: interrupt.id, status: "cancelled" }] });
  assert.equal(withdrawn.error, null);
  assert.equal(withdrawn.last.result.withdrawn, true);
  assert.equal(agent.pendingInterrupts.length, 0);
  assert.ok(!withdrawn.events.some((e) => e.type === "TOOL_CALL_START"));
  out({ thread: "withdraw", interrupt_id: interrupt.id });
}
