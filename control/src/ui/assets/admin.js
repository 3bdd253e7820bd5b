// The admin console: signs in once with the admin token (exchanged for an HttpOnly session
// cookie), then drives the admin API with that cookie and the page's CSRF token.
"use strict";
(function () {
  const $ = (x) => document.getElementById(x);
  const csrfInput = $("csrf");
  const csrf = csrfInput ? csrfInput.value : "";
  function status(text) { $("status").textContent = text; }

  async function call(method, path, body) {
    const headers = { "x-egressgate-csrf": csrf };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(path, {
      method: method, headers: headers, credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let json = null;
    try { json = await res.json(); } catch (_) { json = null; }
    if (!res.ok) {
      const msg = json && json.error ? json.error.message : "error " + res.status;
      if (res.status === 401) { location.reload(); }
      throw new Error(msg);
    }
    return json;
  }

  // Replaces the rows of the table body `id` with one row per item, drawn by `row(tr, item)`.
  function fill(id, items, row) {
    const body = $(id);
    body.replaceChildren();
    for (const item of items) {
      const tr = document.createElement("tr");
      row(tr, item);
      body.appendChild(tr);
    }
    return body;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  async function loadList(kind, key) {
    const data = await call("GET", "/v1/admin/" + kind);
    fill(kind, data[kind], (tr, e) => {
      cell(tr, e[key]);
      cell(tr, e.note);
      cell(tr, e.created_at);
      const td = cell(tr, "");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "secondary";
      b.textContent = "Remove";
      b.setAttribute("aria-label", "Remove " + e[key]);
      b.addEventListener("click", async () => {
        try {
          await call("DELETE", "/v1/admin/" + kind + "/" + encodeURIComponent(e[key]));
          status("Removed " + e[key] + ".");
          await loadList(kind, key);
        } catch (err) { status("Could not remove " + e[key] + ": " + err.message); }
      });
      td.appendChild(b);
    });
  }

  function onSubmit(form, fn) {
    $(form).addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try { await fn(); } catch (err) { status(err.message); }
    });
  }

  function item(list, text) {
    const li = document.createElement("li");
    li.textContent = text;
    list.appendChild(li);
  }

  // A dry run of a site pattern (refusals it would have allowed) or of a package (cards that
  // asked for it); nothing is saved either way.
  async function dryRun(kind) {
    const value = kind === "pattern" ? $("site-pattern").value.trim() : $("package-name").value.trim();
    const days = $("dry-days").value || "7";
    const out = await call("GET", "/v1/admin/dry-run?" + kind + "=" + encodeURIComponent(value) +
      "&days=" + encodeURIComponent(days));
    const list = $("dry-run-list");
    list.replaceChildren();
    let summary;
    if (kind === "pattern") {
      for (const r of out.would_allow) {
        item(list, r.host + ":" + r.port + " — refused " + r.count + "× for " + r.user_id +
          " in chat " + r.chat_id + " (last " + r.last_seen + ")");
      }
      summary = out.would_allow.length === 0
        ? "No refusal of the last " + out.days + " days matches " + out.pattern + "."
        : out.pattern + " would have allowed " + out.would_allow.length + " refused destination(s) in the last " +
          out.days + " days: " + out.hosts.join(", ") + ".";
    } else {
      for (const c of out.cards) {
        item(list, "card " + c.interrupt_id + " for " + c.user_id + " in chat " + c.chat_id + " (" + c.at + ")");
      }
      summary = out.cards.length === 0
        ? "No card of the last " + out.days + " days asked for " + out.package + "."
        : out.package + " would have been pre-approved for " + out.cards.length + " card(s) in the last " +
          out.days + " days.";
    }
    $("dry-run-summary").textContent = summary + (out.truncated ? " (Older rows were not scanned.)" : "");
    $("dry-run").hidden = false;
    status("Dry run done; nothing was saved.");
  }

  function button(td, text, label, fn) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "secondary";
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", async () => {
      try { await fn(); } catch (err) { status(label + " failed: " + err.message); }
    });
    td.appendChild(b);
  }

  // The webhook endpoints: a table with each one's deliveries and removal, and a form that adds
  // one and shows its signing secret once.
  async function loadWebhooks() {
    const data = await call("GET", "/v1/admin/webhooks");
    fill("webhooks", data.webhooks, (tr, w) => {
      cell(tr, w.url);
      cell(tr, w.events.length === 0 ? "every event" : w.events.join(", "));
      cell(tr, w.description);
      cell(tr, w.created_at);
      const td = cell(tr, "");
      button(td, "Deliveries", "Deliveries of " + w.url, () => deliveries(w));
      button(td, "Remove", "Remove " + w.url, async () => {
        await call("DELETE", "/v1/admin/webhooks/" + encodeURIComponent(w.id));
        status("Removed the webhook " + w.url + ".");
        $("deliveries-panel").hidden = true;
        await loadWebhooks();
      });
    });
  }

  async function deliveries(w) {
    const out = await call("GET", "/v1/admin/webhooks/" + encodeURIComponent(w.id) + "/deliveries");
    const body = fill("deliveries", out.deliveries, (tr, d) => {
      cell(tr, d.type);
      cell(tr, d.status);
      cell(tr, d.attempts);
      cell(tr, d.last_status != null ? d.last_status : (d.last_error || ""));
      cell(tr, d.next_try_at);
      const td = cell(tr, "");
      if (d.status !== "delivered") {
        button(td, "Retry now", "Retry delivery " + d.id, async () => {
          await call("POST", "/v1/admin/webhooks/" + encodeURIComponent(w.id) + "/deliveries/" +
            encodeURIComponent(d.id) + "/retry");
          status("Delivery " + d.id + " is due now.");
          await deliveries(w);
        });
      }
    });
    if (out.deliveries.length === 0) {
      const tr = document.createElement("tr");
      const td = cell(tr, "No delivery yet: one is made for each event this endpoint receives.");
      td.colSpan = 6;
      body.appendChild(tr);
    }
    $("deliveries-h").textContent = "Deliveries to " + w.url;
    $("deliveries-panel").hidden = false;
    status(out.deliveries.length + " deliver" + (out.deliveries.length === 1 ? "y" : "ies") + " to " + w.url + ".");
  }

  async function audit() {
    const q = new URLSearchParams();
    const kind = $("audit-kind").value;
    if (kind) q.set("kind", kind);
    const since = $("audit-since").value;
    if (since) q.set("since", new Date(since).toISOString());
    q.set("limit", $("audit-limit").value || "100");
    const out = await call("GET", "/v1/admin/audit?" + q.toString());
    fill("audit", out.audit, (tr, a) => {
      cell(tr, a.at);
      cell(tr, a.kind);
      cell(tr, a.actor);
      cell(tr, a.chat_id ? (a.user_id || "") + " / " + a.chat_id : "");
      cell(tr, JSON.stringify(a.detail), "detail");
    });
    status(out.audit.length + " audit row(s).");
  }

  if ($("signin-form")) {
    onSubmit("signin-form", async () => {
      const res = await fetch("/ui/admin/session", {
        method: "POST", headers: { "content-type": "application/json" }, credentials: "same-origin",
        body: JSON.stringify({ token: $("token").value }),
      });
      $("token").value = "";
      if (res.status === 204) { location.reload(); return; }
      status("Sign-in failed: that is not the admin token.");
      $("token").focus();
    });
    return;
  }

  onSubmit("signout-form", async () => {
    await call("POST", "/ui/admin/signout");
    location.reload();
  });
  // Each pre-approved list's form adds its value (with a note when one is given).
  for (const [one, kind, key] of [["site", "sites", "pattern"], ["package", "packages", "name"]]) {
    onSubmit(one + "-form", async () => {
      const value = $(one + "-" + key).value.trim();
      const note = $(one + "-note").value.trim();
      const body = { [key]: value };
      if (note) body.note = note;
      await call("POST", "/v1/admin/" + kind, body);
      status("Added " + value + ".");
      $(one + "-" + key).value = ""; $(one + "-note").value = "";
      await loadList(kind, key);
    });
  }
  for (const [button, kind] of [["site-dry-run", "pattern"], ["package-dry-run", "package"]]) {
    $(button).addEventListener("click", async () => {
      try { await dryRun(kind); } catch (err) { status("Dry run failed: " + err.message); }
    });
  }
  onSubmit("user-form", async () => {
    const user = $("user-id").value.trim();
    const can = $("user-can").value === "true";
    await call("PUT", "/v1/admin/users/" + encodeURIComponent(user), { can_approve: can });
    status(user + (can ? " may approve." : " may not approve."));
  });
  onSubmit("audit-form", audit);
  onSubmit("webhook-form", async () => {
    const body = { url: $("webhook-url").value.trim() };
    const description = $("webhook-description").value.trim();
    if (description) body.description = description;
    const events = Array.from(document.querySelectorAll("#webhook-form input[name=events]:checked"))
      .map((e) => e.value);
    if (events.length > 0) body.events = events;
    if ($("webhook-link").checked) body.include_link = true;
    const made = await call("POST", "/v1/admin/webhooks", body);
    $("webhook-secret-value").textContent = made.secret;
    $("webhook-secret").hidden = false;
    status("Added the webhook " + body.url + "; copy its signing secret now, it is not shown again.");
    $("webhook-form").reset();
    await loadWebhooks();
  });

  Promise.all([loadList("sites", "pattern"), loadList("packages", "name"), loadWebhooks(), audit()])
    .then(() => status("Signed in."))
    .catch((err) => status("Could not load: " + err.message));
})();
