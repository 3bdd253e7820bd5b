// The person's inbox. The link's secret is the whole URL fragment (#<secret>), which browsers
// never send to a server; like the card page, this script moves it out of the address bar and
// the tab's history at once (into this tab's sessionStorage, so a reload still works:
// fragment.js), then presents it to list the person's pending cards and to follow their
// events, so a new card appears and an answered one disappears while the page is open.
"use strict";
(function () {
  const $ = (x) => document.getElementById(x);
  const secret = window.egressgateTakeSecret("egressgate-inbox-secret", (fragment) => fragment);
  let cards = [];
  let linkExpires = null;
  let lastEventId = null;
  let refreshing = null;
  let ticker = null;

  function status(text) { $("status").textContent = text; }

  // A final state: the list is hidden and one heading plus one sentence say why.
  function result(title, detail) {
    if (ticker) { clearInterval(ticker); ticker = null; }
    $("inbox").hidden = true;
    status("");
    const h = $("result-title");
    h.textContent = title;
    h.className = "bad";
    $("result-detail").textContent = detail;
    $("result").hidden = false;
    h.focus();
  }

  function invalid() {
    result("This link is not valid",
      "It may be mistyped or incomplete. Ask in the chat for a new link to your requests.");
  }

  function expired() {
    result("This link expired",
      "Links to your requests work for a short time only. Ask in the chat for a new one.");
  }

  // Whether the server refused the link (then the page says why and stops).
  function refused(status) {
    if (status === 410) expired();
    else if (status === 401) invalid();
    else return false;
    return true;
  }

  // "3 minutes" from milliseconds, for ages and time left.
  function span(ms) {
    const min = Math.round(Math.max(0, ms) / 60000);
    if (min < 1) return "less than a minute";
    if (min < 120) return min + (min === 1 ? " minute" : " minutes");
    return Math.round(min / 60) + " hours";
  }

  function line(parent, label, text) {
    const p = document.createElement("p");
    p.className = "meta";
    const b = document.createElement("strong");
    b.textContent = label + ": ";
    p.appendChild(b);
    p.appendChild(document.createTextNode(text));
    parent.appendChild(p);
  }

  function render() {
    const now = Date.now();
    cards = cards.filter((c) => Date.parse(c.expires_at) > now);
    const ul = $("cards");
    ul.replaceChildren();
    for (const c of cards) {
      const li = document.createElement("li");
      li.className = "inbox-card";
      const h = document.createElement("h3");
      const a = document.createElement("a");
      a.href = "/ui/cards/" + encodeURIComponent(c.interrupt_id) + "#secret=" + encodeURIComponent(secret);
      a.textContent = c.message;
      h.appendChild(a);
      li.appendChild(h);
      const card = c.card || {};
      if ((card.sites || []).length) line(li, "Sites", card.sites.join(", "));
      if ((card.packages || []).length) line(li, "Packages", card.packages.join(", "));
      line(li, "Asked", span(now - Date.parse(c.created_at)) + " ago");
      line(li, "Answer within", span(Date.parse(c.expires_at) - now));
      ul.appendChild(li);
    }
    $("empty").hidden = cards.length !== 0;
    status(cards.length === 0 ? "" : cards.length === 1 ? "1 request waits for you." : cards.length + " requests wait for you.");
    if (linkExpires && linkExpires <= now) expired();
  }

  async function post(path, headers) {
    return fetch(path, {
      method: "POST",
      headers: Object.assign({ "content-type": "application/json" }, headers || {}),
      body: JSON.stringify({ secret: secret }),
      credentials: "omit",
      cache: "no-store",
    });
  }

  async function load() {
    try {
      const r = await post("/v1/inbox/cards");
      if (refused(r.status)) return;
      if (r.status !== 200) return status("Your requests could not be loaded (error " + r.status + "). Reload to try again.");
      const v = await r.json();
      cards = v.interrupts || [];
      linkExpires = Date.parse(v.expires_at);
      $("link-expiry").textContent = new Date(linkExpires).toLocaleTimeString();
      $("inbox").hidden = false;
      render();
      if (!ticker) ticker = setInterval(render, 15000);
    } catch (_) {
      status("The server could not be reached. Reload to try again.");
    }
  }

  // Many events in a burst cause one reload of the list.
  function refresh() {
    if (refreshing) return;
    refreshing = setTimeout(() => { refreshing = null; load(); }, 150);
  }

  // Follows the person's events (server-sent events over a POST, so the secret is in a body,
  // never in a URL); reconnects from the last event id until the link expires.
  async function follow() {
    let r;
    try {
      r = await post("/v1/inbox/events", lastEventId ? { "last-event-id": lastEventId } : {});
    } catch (_) {
      return setTimeout(follow, 3000);
    }
    if (refused(r.status)) return;
    if (r.status !== 200 || !r.body) {
      status("Live updates stopped (error " + r.status + "). Reload to try again.");
      return;
    }
    await load();
    const reader = r.body.getReader();
    const text = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += text.decode(value, { stream: true });
        let at;
        while ((at = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          let event = null;
          for (const l of block.split("\n")) {
            if (l.startsWith("id:")) lastEventId = l.slice(3).trim();
            if (l.startsWith("event:")) event = l.slice(6).trim();
          }
          if (event) refresh();
        }
      }
    } catch (_) {
      // The connection dropped: reconnect below.
    }
    if (linkExpires && linkExpires <= Date.now()) return expired();
    setTimeout(follow, 1000);
  }

  if (!secret) return invalid();
  follow();
})();
