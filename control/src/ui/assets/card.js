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

  const LASTS = { turn: "for this turn only", chat: "for the rest of this chat", user: "in all your chats" };

  function decided(decision, finished) {
    const sites = (decision && decision.sites) || [];
    const pkgs = (decision && decision.packages) || [];
    const what = words(sites.concat(pkgs));
    if (decision && decision.outcome === "approved") {
      return finished
        ? ["Already approved", "This request was approved" + (what ? " (" + what + ")" : "") + " and the agent has finished its work."]
        : ["Approved", "The agent continues with access to " + (what || "what you approved") + " " +
           (LASTS[decision.scope] || LASTS.chat) + "."];
    }
    return finished
      ? ["Already denied", "This request was denied and the agent has finished without it."]
      : ["Denied", "The agent continues without it and will say so."];
  }

  // The narrowing choice (payload fields scope, max_uses, access, paths; docs/approval-flow.md
  // "Narrow grants"). Only choices the resume would keep are offered: `user` where allowed,
  // `read` and a path prefix only when every site on the card is inspected.
  const SPANS = { turn: "in this turn only", chat: "from this chat", user: "from all your chats" };
  let view = null;

  function radio(name) {
    const on = document.querySelector("input[name=" + name + "]:checked");
    return on ? on.value : "";
  }

  function pick(name, value) {
    const box = document.querySelector("input[name=" + name + "][value=" + value + "]");
    if (box) box.checked = true;
  }

  // The tried requests on the card's sites (not its packages).
  function siteRequests(card) {
    return (card.evidence || []).filter((e) => e.tried !== false && !e.package && card.sites.includes(e.host));
  }

  // The longest directory (ending in "/") holding every tried URL's path, or "" when that is
  // the root, some request was not seen, or a path is not plainly in normal form.
  function commonDirectory(requests) {
    let common = null;
    for (const e of requests) {
      if (!e.url) return "";
      let path;
      try { path = new URL(e.url).pathname; } catch (_) { return ""; }
      if (/[%;\\]|\/\//.test(path)) return "";
      const dir = path.slice(0, path.lastIndexOf("/") + 1).split("/");
      if (common === null) { common = dir; continue; }
      let i = 0;
      while (i < common.length && i < dir.length && common[i] === dir[i]) i++;
      common = common.slice(0, i);
    }
    const prefix = common ? common.join("/") : "";
    return prefix.length > 1 && prefix.endsWith("/") ? prefix : "";
  }

  function offerChoices(v) {
    const card = v.card;
    const options = v.grant_options || { user_scope: false, inspected_sites: [] };
    $("scope-user").hidden = !options.user_scope;
    const hasSites = card.sites.length > 0;
    $("uses-choice").hidden = !hasSites;
    const inspected = hasSites && card.sites.every((s) => options.inspected_sites.includes(s));
    const requests = siteRequests(card);
    $("access-choice").hidden = !inspected;
    const onlyReads = requests.length > 0 && requests.every((e) => e.method === "GET" || e.method === "HEAD");
    pick("access", inspected && onlyReads ? "read" : "full");
    const prefix = inspected ? commonDirectory(requests) : "";
    $("path-prefix").textContent = prefix;
    $("paths-choice").hidden = !prefix;
    pick("paths", "whole");
  }

  // The chosen fields, each left out when it is the card's own (chat, unlimited, full, the
  // whole host); null when the number of uses is not a whole number from 1 to 10000.
  function choice() {
    const out = {};
    if (radio("scope") !== "chat") out.scope = radio("scope");
    if (!$("uses-choice").hidden && radio("uses") !== "unlimited") {
      const n = radio("uses") === "once" ? 1 : Number($("uses-n").value);
      if (!Number.isInteger(n) || n < 1 || n > 10000) return null;
      out.max_uses = n;
    }
    if (!$("access-choice").hidden && radio("access") === "read") out.access = "read";
    if (!$("paths-choice").hidden && radio("paths") === "prefix") out.paths = [$("path-prefix").textContent];
    return out;
  }

  function times(n) {
    return n === 1 ? "once" : n === 2 ? "twice" : n + " times";
  }

  function checkedPackages() {
    return Array.from(document.querySelectorAll("#packages input[type=checkbox]"))
      .filter((b) => b.checked).map((b) => b.value);
  }

  // The sentence before the buttons: what approving does with the current choice.
  function consequence() {
    if (!view) return;
    const c = choice();
    if (c === null) {
      $("consequence").textContent = "Enter a whole number of connections from 1 to 10000.";
      return;
    }
    const span = SPANS[c.scope || "chat"];
    const parts = [];
    if (view.card.sites.length) {
      const limits = [];
      if (c.access === "read") limits.push("downloads only");
      if (c.paths) limits.push("only under " + c.paths[0]);
      parts.push(words(view.card.sites) + " will be reachable" + (c.max_uses ? " " + times(c.max_uses) : "") +
        " " + span + (limits.length ? ", " + limits.join(", ") : "") + ".");
    }
    const pkgs = checkedPackages();
    if (pkgs.length) parts.push(words(pkgs) + " can be installed " + span + ".");
    $("consequence").textContent = "If you approve: " + parts.join(" ");
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
    return td;
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
      const address = cell(tr, e.package ? where + " (package " + e.package + ")" : where, "address");
      // The sandbox's claim, not the proxy's fact: labelled as such (see docs/sandbox.md).
      if (e.command) {
        const claim = document.createElement("div");
        claim.className = "reported";
        claim.textContent = "Command (reported by the sandbox): " + e.command;
        address.appendChild(claim);
      }
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

  function show(v) {
    if (v.state !== "pending") {
      const [t, d] = decided(v.decision, v.state === "done");
      return result(t, d, v.decision && v.decision.outcome === "approved");
    }
    $("question").textContent = v.message;
    $("reason").textContent = v.card.reason;
    list($("sites"), v.card.sites, "sites-block");
    list($("urls"), v.card.urls, "urls-block");
    evidence(v.card.evidence || []);
    const ul = $("packages");
    ul.replaceChildren();
    v.card.packages.forEach((name, i) => {
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
    $("packages-block").hidden = v.card.packages.length === 0;
    offerChoices(v);
    view = v;
    consequence();
    expiresAt = Date.parse(v.expires_at);
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
    const narrowed = approved ? choice() : {};
    if (narrowed === null) {
      enable(true);
      $("uses-n").focus();
      return status("Enter a whole number of connections from 1 to 10000, or choose another option.");
    }
    const payload = approved
      ? Object.assign({ approved: true, packages: checkedPackages() }, narrowed)
      : { approved: false };
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

  $("card").addEventListener("change", consequence);
  $("uses-n").addEventListener("input", () => { $("uses-number").checked = true; consequence(); });
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
