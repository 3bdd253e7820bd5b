// The approval card page. The resume secret lives in the URL fragment (#secret=…), which
// browsers never send to a server; this script reads it, asks for the card with it, and
// answers with it. Nothing of the card is shown without a secret the server accepts.
// As soon as it is read, the secret leaves the address bar and the tab's history and waits in
// this tab's sessionStorage (fragment.js).
"use strict";
(function () {
  const main = document.getElementById("main");
  const id = main.dataset.interruptId || "";
  // The secret from the fragment (kept for this tab), else the one this tab kept before.
  const secret = window.egressgateTakeSecret("egressgate-card-secret:" + id,
    (fragment) => new URLSearchParams(fragment).get("secret") || "");
  const $ = (x) => document.getElementById(x);
  let expiresAt = null;
  let timer = null;

  function status(text) { $("status").textContent = text; }

  function list(ul, items, block) {
    ul.replaceChildren();
    for (const item of items) {
      const li = document.createElement("li");
      li.textContent = item;
      ul.appendChild(li);
    }
    $(block).hidden = items.length === 0;
  }

  // A final state: the card is hidden and one heading plus one sentence say what happened.
  function result(title, detail, ok) {
    if (timer) { clearInterval(timer); timer = null; }
    $("card").hidden = true;
    status("");
    const h = $("result-title");
    h.textContent = title;
    h.className = ok === true ? "ok" : ok === false ? "bad" : "";
    $("result-detail").textContent = detail;
    $("result").hidden = false;
    h.focus();
  }

  function invalid() {
    result("This link is no longer valid",
      "It may be old or mistyped, or a newer link replaced it. Ask for the request again in the chat.", false);
  }

  function words(list) {
    if (list.length <= 1) return list.join("");
    return list.slice(0, -1).join(", ") + " and " + list[list.length - 1];
  }

  function decided(decision, finished) {
    const sites = (decision && decision.sites) || [];
    const pkgs = (decision && decision.packages) || [];
    const what = words(sites.concat(pkgs));
    if (decision && decision.outcome === "approved") {
      return finished
        ? ["Already approved", "This request was approved" + (what ? " (" + what + ")" : "") + " and the agent has finished its work."]
        : ["Approved", "The agent continues with access to " + (what || "what you approved") + " for the rest of this chat."];
    }
    return finished
      ? ["Already denied", "This request was denied and the agent has finished without it."]
      : ["Denied", "The agent continues without it and will say so."];
  }

  // A time of the proxy's record, in the reader's own clock.
  function when(e) {
    const first = new Date(e.first_at).toLocaleString();
    const last = new Date(e.last_at).toLocaleString();
    return first === last ? first : first + " to " + last;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }

  // The proxy's record of what was tried, apart from what the agent only named; an upload is
  // said in words before the buttons.
  function evidence(entries) {
    const tried = entries.filter((e) => e.tried !== false);
    const body = $("evidence-rows");
    body.replaceChildren();
    for (const e of tried) {
      const tr = document.createElement("tr");
      const method = e.method || "not seen (encrypted)";
      cell(tr, e.upload ? method + " (sends data)" : method);
      const where = e.url || e.host + ":" + e.port;
      cell(tr, e.package ? where + " (package " + e.package + ")" : where, "address");
      cell(tr, String(e.count));
      cell(tr, when(e));
      body.appendChild(tr);
    }
    $("evidence-block").hidden = tried.length === 0;
    list($("untried"), entries.filter((e) => e.tried === false).map((e) => e.url || e.host), "untried-block");
    const uploads = Array.from(new Set(tried.filter((e) => e.upload).map((e) => e.host))).sort();
    const warning = $("upload-warning");
    warning.textContent = uploads.length
      ? "The script tried to send data to " + words(uploads) + ". Approving lets it send data there."
      : "";
    warning.hidden = uploads.length === 0;
  }

  function countdown() {
    const left = Math.max(0, Math.floor((expiresAt - Date.now()) / 1000));
    const m = Math.floor(left / 60), s = left % 60;
    $("countdown").textContent = left >= 60 ? m + " min " + String(s).padStart(2, "0") + " s" : s + " seconds";
    if (left === 0) {
      result("This request expired", "It can no longer be answered. The agent continued without it.", false);
    }
  }

  function show(view) {
    if (view.state !== "pending") {
      const [t, d] = decided(view.decision, view.state === "done");
      return result(t, d, view.decision && view.decision.outcome === "approved");
    }
    $("question").textContent = view.message;
    $("reason").textContent = view.card.reason;
    list($("sites"), view.card.sites, "sites-block");
    list($("urls"), view.card.urls, "urls-block");
    evidence(view.card.evidence || []);
    const ul = $("packages");
    ul.replaceChildren();
    view.card.packages.forEach((name, i) => {
      const li = document.createElement("li");
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = true;
      box.value = name;
      box.id = "pkg-" + i;
      box.setAttribute("aria-describedby", "packages-hint");
      label.appendChild(box);
      label.appendChild(document.createTextNode(name));
      li.appendChild(label);
      ul.appendChild(li);
    });
    $("packages-block").hidden = view.card.packages.length === 0;
    expiresAt = Date.parse(view.expires_at);
    countdown();
    timer = setInterval(countdown, 1000);
    status("");
    $("card").hidden = false;
    $("approve").focus();
  }

  async function post(path, body) {
    const res = await fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
    let json = null;
    try { json = await res.json(); } catch (_) { json = null; }
    return { status: res.status, json: json };
  }

  function code(r) { return r.json && r.json.error ? r.json.error.code : ""; }
  function message(r) { return r.json && r.json.error ? r.json.error.message : ""; }

  function answered(r) {
    if (r.status === 200 && r.json && r.json.state === "claimed") {
      const [t, d] = decided(r.json.decision, false);
      return result(t, d, r.json.decision.outcome === "approved");
    }
    if (r.status === 200 && r.json && r.json.state === "done") {
      const [t, d] = decided(r.json.decision, true);
      return result(t, d, r.json.decision && r.json.decision.outcome === "approved");
    }
    if (r.status === 404) return invalid();
    if (code(r) === "RESUME_IN_PROGRESS") {
      return result("Already being answered",
        "Someone answered this request a moment ago (another tab or device) and the agent is working on it. Nothing more to do here.");
    }
    if (code(r) === "DECISION_CONFLICT") {
      return result("Already answered differently",
        "This request was answered the other way before; your answer was not applied.", false);
    }
    if (r.status === 410) {
      return result("This request can no longer be answered",
        "It expired, or the conversation moved on (a newer message was sent, or the chat was closed). " +
        "The agent continued without it.", false);
    }
    if (code(r) === "BUSY") {
      enable(true);
      return status("Too many answers are being processed for you right now. Wait a moment and try again.");
    }
    enable(true);
    status("That did not work (" + (message(r) || "error " + r.status) + "). Try again.");
  }

  function enable(on) {
    $("approve").disabled = !on;
    $("deny").disabled = !on;
  }

  async function answer(approved) {
    enable(false);
    status(approved ? "Approving…" : "Denying…");
    const packages = Array.from(document.querySelectorAll("#packages input[type=checkbox]"))
      .filter((b) => b.checked).map((b) => b.value);
    const payload = approved ? { approved: true, packages: packages } : { approved: false };
    try {
      answered(await post("/v1/interrupts/" + encodeURIComponent(id) + "/resume", {
        secret: secret,
        resume: [{ interruptId: id, status: "resolved", payload: payload }],
      }));
    } catch (_) {
      enable(true);
      status("The server could not be reached. Check the connection and try again.");
    }
  }

  $("approve").addEventListener("click", () => answer(true));
  $("deny").addEventListener("click", () => answer(false));

  async function load() {
    if (!id || !secret) return invalid();
    try {
      const r = await post("/v1/interrupts/" + encodeURIComponent(id) + "/view", { secret: secret });
      if (r.status === 200 && r.json) return show(r.json);
      if (r.status === 404) return invalid();
      if (r.status === 410) {
        return result("This request expired", "It can no longer be answered. The agent continued without it.", false);
      }
      status("The request could not be loaded (" + (message(r) || "error " + r.status) + "). Reload to try again.");
    } catch (_) {
      status("The server could not be reached. Reload to try again.");
    }
  }
  load();
})();
