"""The card page, the person's inbox and the admin console in headless Chromium, against the
real binary.

Started by tests/browser_ui.rs, which passes a JSON file naming the running gates, the tokens,
the browser and axe-core. The script plays both the person (in the browser) and the agent
runtime (plain HTTP with the runtime token) and exits non-zero on the first failed check.
Every secret it sees is written to `secrets_out`, so the Rust side can prove none of them
reached a server log line.

It is longer than other files because it is one browser session walked through every state of
both pages in order (one Chromium start is most of the suite's time); its helpers sit at the top.
"""

import base64
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from playwright.sync_api import sync_playwright

CFG = json.load(open(sys.argv[1]))
RUNTIME = CFG["runtime"]
ADMIN = CFG["admin"]
FILES = CFG["files_host"]
SECRETS = []
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def api(base, method, path, body=None, token=RUNTIME, user=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if body is not None:
        req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", "Bearer " + token)
    if user:
        req.add_header("x-egressgate-user", user)
    try:
        with NO_PROXY.open(req, timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


def through_proxy(proxy_url, url, data=None):
    """One request through the gate with the turn's credential (a POST when `data` is given):
    the HTTP status."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy_url}))
    try:
        with opener.open(urllib.request.Request(url, data=data), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def marked_connect(proxy_url, authority, command):
    """A `CONNECT` marked as a captured connection's, naming `command` as the sandbox would:
    the status of the answer (the refusal is recorded before it)."""
    parts = urllib.parse.urlsplit(proxy_url)
    cred = urllib.parse.unquote(parts.netloc.rsplit("@", 1)[0])
    auth = base64.b64encode(cred.encode()).decode()
    head = (f"CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\nproxy-authorization: Basic {auth}\r\n"
            f"Egress-Capture: 1\r\nEgress-Command: {command}\r\n\r\n")
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
        s.sendall(head.encode())
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(1024)
            if not chunk:
                break
            got += chunk
    return int(got.split()[1]) if got else 0


class Card:
    """A refused download turned into a registered card, as the runtime does it."""

    def __init__(self, base, user, chat, packages=(), name_url=False, script=None, named=(),
                 path="/data.csv"):
        self.base, self.user, self.chat = base, user, chat
        s, t = api(base, "POST", "/v1/turns", {"user_id": user, "chat_id": chat, "can_ask_human": True})
        check(s == 201, f"turn: {s} {t}")
        self.turn = t["turn_id"]
        self.proxy_url = t["proxy_url"]
        SECRETS.append(self.proxy_url.split("@")[0].split(":")[-1])
        self.url = f"http://{FILES}:{CFG['origin_port']}{path}"
        check(through_proxy(self.proxy_url, self.url) == 403, "refused before approval")
        if script:
            script(self.proxy_url)
        urls = ([self.url] if name_url else []) + list(named)
        s, a = api(base, "POST", f"/v1/turns/{self.turn}/approval-requests",
                   {"reason": "The analysis needs the public data file.", "packages": list(packages),
                    "urls": urls})
        check(s == 200 and a["outcome"] == "ask", f"approval tool: {s} {a}")
        s, r = api(base, "POST", "/v1/interrupts", {"draft_id": a["draft_id"], "snapshot": "cGF1c2Vk"})
        check(s == 201, f"register: {s} {r}")
        self.id = r["interrupt"]["id"]
        self.secret = r["resume_secret"]
        SECRETS.append(self.secret)
        self.link = f"{base}/ui/cards/{self.id}#secret={self.secret}"

    def runtime_resume(self, approved):
        s, r = api(self.base, "POST", f"/v1/interrupts/{self.id}/resume",
                   {"secret": self.secret, "resume": [{"interruptId": self.id, "status": "resolved",
                                                       "payload": {"approved": approved}}]},
                   user=self.user)
        check(s == 200, f"runtime resume: {s} {r}")
        SECRETS.append(r["claim"]["claim_id"])
        return r["claim"]["claim_id"]

    def outcome(self):
        s, o = api(self.base, "GET", f"/v1/interrupts/{self.id}/outcome")
        check(s == 200, f"outcome {s} {o}")
        return o


class Events(threading.Thread):
    """The chat's event stream, read in the background as a runtime would."""

    def __init__(self, base, user, chat):
        super().__init__(daemon=True)
        import http.client
        host = base.split("//")[1]
        self.conn = http.client.HTTPConnection(host, timeout=30)
        self.conn.request("GET", f"/v1/chats/{chat}/events",
                          headers={"authorization": "Bearer " + RUNTIME, "x-egressgate-user": user})
        self.resp = self.conn.getresponse()
        check(self.resp.status == 200, f"events: {self.resp.status}")
        self.events = []
        self.cond = threading.Condition()
        self.start()

    def run(self):
        kind, data = None, None
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:].strip())
            elif line == "" and kind:
                with self.cond:
                    self.events.append((kind, data))
                    self.cond.notify_all()
                kind, data = None, None

    def wait_for(self, kind, timeout=10):
        end = time.time() + timeout
        with self.cond:
            while True:
                for k, d in self.events:
                    if k == kind:
                        return d
                left = end - time.time()
                check(left > 0, f"no {kind} event; got {self.events}")
                self.cond.wait(left)


def inbox_link(base, user):
    """The runtime asks for `user`'s inbox link (path-only: the gates have no public URL):
    (the link to open, its secret)."""
    s, r = api(base, "POST", f"/v1/users/{user}/inbox-link", user=user)
    check(s == 201 and r["url"].startswith("/ui/inbox#"), f"inbox link: {s} {r}")
    secret = r["url"].split("#", 1)[1]
    SECRETS.append(secret)
    return base + r["url"], secret


CONSOLE = []  # (page label, type, text)


def browser_page(ctx, label):
    page = ctx.new_page()
    page.on("console", lambda m: CONSOLE.append((label, m.type, m.text)))
    page.on("pageerror", lambda e: CONSOLE.append((label, "pageerror", str(e))))
    return page


def open_card(ctx, card, label):
    page = browser_page(ctx, label)
    page.goto(card.link)
    page.wait_for_selector("#card:not([hidden]), #result:not([hidden])", timeout=10000)
    return page


def no_secret_in_address(ctx, page, secret, what):
    """Neither the address bar nor any entry of the tab's session history holds `secret`."""
    href = page.evaluate("location.href")
    check(secret not in href and "#" not in href, f"{what}: secret in the address bar: {href}")
    check(secret not in json.dumps(page.evaluate("history.state")), f"{what}: secret in history.state")
    cdp = ctx.new_cdp_session(page)
    entries = cdp.send("Page.getNavigationHistory")["entries"]
    cdp.detach()
    urls = [e["url"] for e in entries]
    check(urls and all(secret not in u for u in urls), f"{what}: secret in the tab's history: {urls}")


def result_of(page):
    page.wait_for_selector("#result:not([hidden])", timeout=10000)
    return page.inner_text("#result-title"), page.inner_text("#result-detail")


def no_errors(label):
    bad = [c for c in CONSOLE if c[0] == label and c[1] in ("error", "pageerror")]
    check(not bad, f"console errors on {label}: {bad}")


def fits(page, what):
    w = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    check(w[0] <= w[1], f"{what}: horizontal scroll {w}")


def axe(ctx_axe, url, what):
    page = ctx_axe.new_page()
    page.goto(url)
    page.wait_for_selector("#card:not([hidden]), #result:not([hidden]), #signin-form, #sites-table, "
                           "#inbox:not([hidden])", timeout=10000)
    page.wait_for_timeout(300)
    page.add_script_tag(path=CFG["axe"])
    res = page.evaluate("async () => (await axe.run(document)).violations"
                        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length}))")
    bad = [v for v in res if v["impact"] in ("serious", "critical")]
    check(not bad, f"axe on {what}: {bad}")
    page.close()
    return res


def main():
    base, base2 = CFG["base"], CFG["base2"]
    shots = CFG["shots"]
    with sync_playwright() as p:
        # Playwright's launch() always starts from a fresh temporary profile (it refuses an
        # explicit --user-data-dir), so no state leaks between runs.
        browser = p.chromium.launch(
            executable_path=CFG["chromium"],
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        ctx = browser.new_context(viewport={"width": 1100, "height": 900})
        # axe-core is injected as a script, which our CSP rightly forbids: a separate context.
        ctx_axe = browser.new_context(bypass_csp=True)

        # 1. Approve in the browser; the runtime learns of it, takes the claim over, and the
        #    turn's very next download passes.
        c = Card(base, "alice", "approve", packages=["pandas"], name_url=True)
        ev = Events(base, "alice", "approve")
        page = open_card(ctx, c, "approve")
        check(page.get_attribute("#card", "role") == "group", "role=group")
        check(page.get_attribute("#card", "aria-labelledby") == "question", "aria-labelledby")
        check(FILES in page.inner_text("#question"), "consequence sentence")
        check("Allow connections" in page.inner_text("#question"), "consequence sentence wording")
        check(FILES in page.inner_text("#sites"), "sites")
        check("public data file" in page.inner_text("#reason"), "reason")
        check(page.inner_text("#countdown").strip() != "", "countdown")
        check("/data.csv" in page.inner_text("#urls"), "sample URL")
        check(page.is_checked("#packages input[value=pandas]"), "package offered, ticked")
        page.screenshot(path=f"{shots}/card.png", full_page=True)
        page.click("#approve")
        title, detail = result_of(page)
        check(title == "Approved", f"approved title: {title}")
        check(FILES in detail, detail)
        resolved = ev.wait_for("approval.resolved")
        check(resolved["decision"]["outcome"] == "approved", f"event {resolved}")
        o = c.outcome()
        check(o["state"] == "claimed" and o["handoff"] is True, f"outcome {o}")
        s, t = api(base, "POST", f"/v1/interrupts/{c.id}/takeover", {}, user="alice")
        check(s == 200, f"takeover {s} {t}")
        claim = t["claim"]["claim_id"]
        SECRETS.append(claim)
        s, _ = api(base, "POST", f"/v1/interrupts/{c.id}/heartbeat", {"claim_id": claim}, token=None)
        check(s == 200, f"heartbeat {s}")
        check(through_proxy(c.proxy_url, c.url) == 200, "the very next request after Approve")
        s, _ = api(base, "POST", f"/v1/interrupts/{c.id}/complete", {"claim_id": claim, "answer": "ok"},
                   token=None)
        check(s == 200, f"complete {s}")
        no_errors("approve")

        # 1b. Evidence: the script POSTed to one host's /upload and GETed another; the agent
        #     also names a URL nothing tried. The page lists what was tried apart from what
        #     was only named, and says in words, before the buttons, that data was sent.
        upload_host = CFG["upload_host"]
        upload_url = f"http://{upload_host}:{CFG['origin_port']}/upload/all-the-data"
        named = "http://holidays.example.org/calendar.ics"

        tunnel = f"{upload_host}:{CFG['origin_port']}"
        claimed = "curl -sS http://example.org/"

        def script(proxy_url):
            for _ in range(2):
                check(through_proxy(proxy_url, upload_url, data=b"secret rows") == 403, "upload refused")
            check(marked_connect(proxy_url, tunnel, claimed) == 200, "captured connection refused")

        c = Card(base, "erin", "evidence", name_url=True, script=script, named=[named])
        page = open_card(ctx, c, "evidence")
        warning = page.inner_text("#upload-warning")
        check(page.is_visible("#upload-warning"), "upload sentence shown")
        check(f"The script tried to send data to {upload_host}." in warning, f"upload sentence: {warning}")
        before = page.evaluate("!!(document.getElementById('upload-warning').compareDocumentPosition("
                               "document.getElementById('approve')) & Node.DOCUMENT_POSITION_FOLLOWING)")
        check(before, "the upload sentence comes before the buttons")
        rows = page.eval_on_selector_all(
            "#evidence-rows tr", "trs => trs.map(tr => Array.from(tr.cells).map(td => td.innerText))")
        check(len(rows) == 3, f"three kinds of request tried: {rows}")
        by_url = {r[1]: r for r in rows}
        post = by_url.get(upload_url)
        check(post is not None and post[0] == "POST (sends data)" and post[2] == "2", f"the POST row: {rows}")
        get = by_url.get(c.url)
        check(get is not None and get[0] == "GET" and get[2] == "1", f"the GET row: {rows}")
        captured = [r for r in rows if r[1].startswith(tunnel)]
        check(len(captured) == 1 and captured[0][0] == "not seen (encrypted)", f"the tunnel row: {rows}")
        check(captured[0][1] == f"{tunnel}\nCommand (reported by the sandbox): {claimed}",
              f"the sandbox's command, labelled: {rows}")
        check(all(r[3].strip() for r in rows), f"when: {rows}")
        untried = page.inner_text("#untried")
        check(named in untried and upload_url not in untried and c.url not in untried, f"untried: {untried}")
        check("not tried by the script" in page.inner_text("#untried-block"), "untried heading")
        page.screenshot(path=f"{shots}/card-evidence.png", full_page=True)
        axe(ctx_axe, c.link, "card page with evidence")
        no_errors("evidence")

        # 1c. A narrow grant (the third gate inspects FILES and allows user scope). The script
        #     only read, under /pub/data/: `read` is pre-selected and that directory offered.
        #     Chosen by keyboard alone: once, downloads only, under /pub/data/; the sentence
        #     before the buttons follows each choice and the payload holds exactly those fields.
        base3 = CFG["base3"]
        other = f"http://{FILES}:{CFG['origin_port']}/pub/data/b.csv"
        c = Card(base3, "nora", "narrow", path="/pub/data/a.csv",
                 script=lambda proxy_url: check(through_proxy(proxy_url, other) == 403, "b.csv refused"))
        page = open_card(ctx, c, "narrow")
        sentence = lambda: page.inner_text("#consequence")
        check(page.is_checked("input[name=access][value=read]"), "only reads tried: read pre-selected")
        check(page.is_visible("#scope-user") and page.is_visible("#paths-choice"), "user scope and paths offered")
        check(page.inner_text("#path-prefix") == "/pub/data/", page.inner_text("#path-prefix"))
        check(sentence() == f"If you approve: {FILES} will be reachable from this chat, downloads only.",
              sentence())
        check(page.evaluate("document.activeElement.id") == "approve", "Approve has focus")
        page.keyboard.press("Shift+Tab")  # the paths group, on "the whole site"
        check(page.evaluate("document.activeElement.name") == "paths", "Shift+Tab reaches the paths")
        page.keyboard.press("ArrowDown")
        check(page.is_checked("input[name=paths][value=prefix]"), "the prefix chosen by arrow key")
        check(sentence().endswith("downloads only, only under /pub/data/."), sentence())
        page.keyboard.press("Shift+Tab")  # the access group, on "download only"
        page.keyboard.press("Shift+Tab")  # the number of times
        check(page.evaluate("document.activeElement.id") == "uses-n", "the number input")
        page.keyboard.press("Shift+Tab")  # the uses group, on "as many as needed"
        check(page.evaluate("document.activeElement.name") == "uses", "the uses group")
        page.keyboard.press("ArrowDown")
        check(page.is_checked("input[name=uses][value=once]"), "once chosen by arrow key")
        check(sentence() == f"If you approve: {FILES} will be reachable once from this chat, "
                            "downloads only, only under /pub/data/.", sentence())
        for _ in range(4):  # the number, access, paths, Approve
            page.keyboard.press("Tab")
        check(page.evaluate("document.activeElement.id") == "approve", "Tab back to Approve")
        page.keyboard.press("Enter")
        title, detail = result_of(page)
        check(title == "Approved" and "for the rest of this chat" in detail, f"{title}: {detail}")
        d = c.outcome()["decision"]
        check({k: d.get(k) for k in ("scope", "max_uses", "access", "paths")}
              == {"scope": None, "max_uses": 1, "access": "read", "paths": ["/pub/data/"]}, f"decision {d}")
        s, rows = api(base3, "GET", "/v1/chats/narrow/approvals", user="nora")
        row = [r for r in rows["approvals"] if r["value"] == FILES]
        check(s == 200 and len(row) == 1, f"approval rows {s} {rows}")
        row = row[0]
        check(row["uses_left"] == 1 and row["access"] == "read" and row["paths"] == ["/pub/data/"]
              and row["scope"] == "chat", f"the approval row {row}")
        check(through_proxy(c.proxy_url, other) == 200, "the one use")
        check(through_proxy(c.proxy_url, other) == 403, "spent after one use")
        no_errors("narrow")
        # Every choice changes the sentence; a number, a scope; a bad number blocks Approve.
        c = Card(base3, "nora", "narrow2", packages=["requests"])
        page = open_card(ctx, c, "narrow2")
        check(page.is_hidden("#paths-choice"), "no directory below the root: no path choice")
        page.screenshot(path=f"{shots}/card-narrow.png", full_page=True)
        page.check("input[name=scope][value=turn]")
        check(sentence() == f"If you approve: {FILES} will be reachable in this turn only, downloads only. "
                            "requests can be installed in this turn only.", sentence())
        page.check("input[name=scope][value=user]")
        page.check("input[name=access][value=full]")
        page.fill("#uses-n", "3")
        check(page.is_checked("#uses-number"), "typing a number chooses it")
        check(sentence().startswith(f"If you approve: {FILES} will be reachable 3 times from all your chats."),
              sentence())
        page.fill("#uses-n", "0")
        check("whole number" in sentence(), sentence())
        page.click("#approve")
        page.wait_for_selector("#status:has-text('whole number')")
        check(c.outcome()["state"] == "pending", "nothing sent with a bad number")
        axe(ctx_axe, c.link, "card page with every narrowing choice")
        no_errors("narrow2")

        # 2. Deny: the next request stays refused. The secret left the address bar and the
        #    tab's history as soon as the page read it, and a reload still shows the card.
        c = Card(base, "alice", "deny")
        page = open_card(ctx, c, "deny")
        no_secret_in_address(ctx, page, c.secret, "after load")
        page.reload()
        page.wait_for_selector("#card:not([hidden])", timeout=10000)
        check("public data file" in page.inner_text("#reason"), "the card after a reload")
        check(page.is_hidden("#scope-user") and page.is_hidden("#access-choice") and page.is_hidden("#paths-choice"),
              "no user scope, read or paths where the gate cannot keep them")
        check(page.inner_text("#consequence") == f"If you approve: {FILES} will be reachable from this chat.",
              page.inner_text("#consequence"))
        no_secret_in_address(ctx, page, c.secret, "after reload")
        page.click("#deny")
        title, _ = result_of(page)
        check(title == "Denied", f"denied title {title}")
        check(c.outcome()["decision"]["outcome"] == "declined", "declined")
        check(through_proxy(c.proxy_url, c.url) == 403, "the very next request after Deny")
        no_errors("deny")

        # 3. Keyboard only, and unticking a package (the only edit).
        c = Card(base, "kay", "keyboard", packages=["requests", "numpy"])
        page = open_card(ctx, c, "keyboard")
        check(page.evaluate("document.activeElement.id") == "approve", "Approve has focus")
        page.keyboard.press("Shift+Tab")  # onto the last package's checkbox
        dropped = page.evaluate("document.activeElement.type === 'checkbox' && document.activeElement.value")
        check(dropped in ("requests", "numpy"), f"Shift+Tab reaches a package checkbox: {dropped}")
        kept = "numpy" if dropped == "requests" else "requests"
        page.keyboard.press("Space")
        check(not page.evaluate("document.activeElement.checked"), f"{dropped} unticked")
        check(page.is_checked(f"#packages input[value={kept}]"), f"{kept} still ticked")
        page.keyboard.press("Tab")
        check(page.evaluate("document.activeElement.id") == "approve", "back on Approve")
        page.keyboard.press("Tab")
        check(page.evaluate("document.activeElement.id") == "deny", "Deny is reachable")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Enter")
        title, detail = result_of(page)
        check(title == "Approved" and kept in detail and dropped not in detail, detail)
        d = c.outcome()["decision"]
        check(d["packages"] == [kept], f"narrowed packages {d}")
        check(page.evaluate("document.activeElement.id") == "result-title", "focus moves to the result")
        no_errors("keyboard")

        # 4. Every other answer a resume can give, in words.
        # In progress: the runtime claimed it meanwhile (live lease).
        c = Card(base, "ivy", "inprogress")
        page = open_card(ctx, c, "inprogress")
        c.runtime_resume(True)
        page.click("#approve")
        check(result_of(page)[0] == "Already being answered", "RESUME_IN_PROGRESS")
        # Done: claimed and completed meanwhile; the click replays.
        c = Card(base, "dan", "done")
        page = open_card(ctx, c, "done")
        claim = c.runtime_resume(True)
        s, _ = api(base, "POST", f"/v1/interrupts/{c.id}/complete", {"claim_id": claim}, token=None)
        check(s == 200, "complete")
        page.click("#approve")
        check(result_of(page)[0] == "Already approved", "done/replayed")
        # A done card opened later shows its answer.
        page = open_card(ctx, c, "done-later")
        check(result_of(page)[0] == "Already approved", "done card on load")
        # The chat moved on: a new turn after the card was shown.
        c = Card(base, "mo", "movedon")
        page = open_card(ctx, c, "movedon")
        api(base, "POST", "/v1/turns", {"user_id": "mo", "chat_id": "movedon", "can_ask_human": True})
        page.click("#approve")
        title, detail = result_of(page)
        check(title == "This request can no longer be answered", title)
        check("moved on" in detail, detail)
        # Busy: both of the user's resume slots are held by other cards.
        held = [Card(base, "bob", f"slot{i}") for i in range(2)]
        for h in held:
            h.runtime_resume(True)
        c = Card(base, "bob", "busy")
        page = open_card(ctx, c, "busy")
        page.click("#approve")
        page.wait_for_selector("#status:has-text('Too many')")
        check(page.is_enabled("#approve"), "buttons usable again after BUSY")
        check(c.outcome()["state"] == "pending", "nothing claimed when busy")
        # Invalid link: a wrong secret shows nothing of the card.
        c = Card(base, "alice", "invalid")
        page = browser_page(ctx, "invalid")
        page.goto(f"{base}/ui/cards/{c.id}#secret=not-the-secret")
        check(result_of(page)[0] == "This link is no longer valid", "invalid link")
        body = page.inner_text("body")
        check(FILES not in body and "public data file" not in body, "nothing of the card")
        check(page.is_hidden("#card"), "card hidden")
        page = browser_page(ctx, "nosecret")
        page.goto(f"{base}/ui/cards/{c.id}")
        check(result_of(page)[0] == "This link is no longer valid", "no secret")
        # Conflict (lease 1 s on the second gate): approved by a worker that died, then denied.
        c = Card(base2, "carol", "conflict")
        page = open_card(ctx, c, "conflict")
        c.runtime_resume(True)
        time.sleep(1.5)  # the first worker's lease lapses (the claim is not renewed)
        page.click("#deny")
        title, _ = result_of(page)
        check(title == "Already answered differently", f"DECISION_CONFLICT: {title}")
        # Expired (interrupt-ttl 10 s on the second gate): the page says so on load.
        c = Card(base2, "carol", "expired")
        page = open_card(ctx, c, "expiring")
        page.wait_for_selector("#result-title:has-text('expired')",
                               timeout=25000)
        page = open_card(ctx, c, "expired")
        check(result_of(page)[0] == "This request expired", "expired on load")

        # 5. Phone and 200 % zoom (half the width, doubled pixels): no sideways scrolling.
        phone = browser.new_context(viewport={"width": 360, "height": 740}, device_scale_factor=2,
                                    is_mobile=True, has_touch=True)
        c = Card(base, "alice", "phone", packages=["requests"])
        page = open_card(phone, c, "phone")
        fits(page, "phone")
        page.screenshot(path=f"{shots}/card-phone.png", full_page=True)
        zoom = browser.new_context(viewport={"width": 550, "height": 450}, device_scale_factor=2)
        page = open_card(zoom, c, "zoom")
        fits(page, "200% zoom")
        check(page.is_visible("#approve") and page.is_visible("#deny"), "buttons at 200%")
        axe(ctx_axe, c.link, "card page")

        # 6. The admin console: sign in, add with a note, dry run, remove, users, audit.
        # Leaves a refusal of FILES and a card asking for requests, to dry-run against.
        admin_turn = Card(base, "dave", "admin-dry", packages=["requests"])
        page = browser_page(ctx, "admin-wrong-token")
        page.goto(f"{base}/ui/admin")
        page.fill("#token", "wrong-token-0000000")
        page.press("#token", "Enter")
        page.wait_for_selector("#status:has-text('failed')")
        page.close()
        page = browser_page(ctx, "admin")
        page.goto(f"{base}/ui/admin")
        page.fill("#token", ADMIN)
        page.click("#signin-form button")
        page.wait_for_selector("#sites-table")
        page.wait_for_selector("#status:has-text('Signed in')")
        check(page.evaluate("document.cookie") == "", "the session cookie is HttpOnly")
        page.fill("#site-pattern", "*.example.com")
        page.fill("#dry-days", "1")
        page.click("#site-dry-run")
        page.wait_for_selector("#dry-run:not([hidden])")
        summary = page.inner_text("#dry-run-summary")
        check(FILES in summary and "would have allowed" in summary, summary)
        s, sites = api(base, "GET", "/v1/admin/sites", token=ADMIN)
        check(sites["sites"] == [], "a dry run saves nothing")
        page.fill("#site-note", "public datasets")
        page.click("#site-form button[type=submit]")
        page.wait_for_selector("#sites:has-text('*.example.com')")
        check("public datasets" in page.inner_text("#sites"), "note shown")
        check(through_proxy(admin_turn.proxy_url, admin_turn.url) == 200, "pre-approved: next request passes")
        page.fill("#package-name", "Requests")
        page.click("#package-dry-run")
        page.wait_for_selector("#dry-run-summary:has-text('would have been pre-approved')")
        check("requests" in page.inner_text("#dry-run-summary"), page.inner_text("#dry-run-summary"))
        check("admin-dry" in page.inner_text("#dry-run-list"), "the card that asked for it")
        page.click("#package-form button[type=submit]")
        page.wait_for_selector("#packages:has-text('requests')")
        page.fill("#user-id", "erin")
        page.select_option("#user-can", "false")
        page.click("#user-form button[type=submit]")
        page.wait_for_selector("#status:has-text('may not approve')")
        page.select_option("#audit-kind", "admin_change")
        page.click("#audit-form button[type=submit]")
        page.wait_for_selector("#audit:has-text('admin_change')")
        kinds = page.eval_on_selector_all("#audit tr td:nth-child(2)", "tds => tds.map(t => t.textContent)")
        check(kinds and all(k == "admin_change" for k in kinds), f"audit filter {kinds}")
        # Webhooks: added with one event (its secret shown once, never listed), its
        # deliveries opened, then removed.
        hook_url = f"http://{FILES}:{CFG['origin_port']}/hook"
        page.fill("#webhook-url", hook_url)
        page.fill("#webhook-description", "team inbox")
        page.check("#webhook-form input[value='approval.requested']")
        page.click("#webhook-form button[type=submit]")
        page.wait_for_selector("#webhook-secret:not([hidden])")
        hook_secret = page.inner_text("#webhook-secret-value")
        check(hook_secret.startswith("whsec_"), f"secret shown once: {hook_secret!r}")
        page.wait_for_selector(f"#webhooks:has-text('{hook_url}')")
        check("approval.requested" in page.inner_text("#webhooks"), "the chosen event listed")
        s, hooks = api(base, "GET", "/v1/admin/webhooks", token=ADMIN)
        check([h["events"] for h in hooks["webhooks"]] == [["approval.requested"]], f"saved {hooks}")
        check(hook_secret not in json.dumps(hooks), "the secret is never listed")
        page.click(f"button[aria-label='Deliveries of {hook_url}']")
        page.wait_for_selector("#deliveries-panel:not([hidden])")
        check(hook_url in page.inner_text("#deliveries-h"), "deliveries of the chosen endpoint")
        page.screenshot(path=f"{shots}/admin.png", full_page=True)
        page.click(f"button[aria-label='Remove {hook_url}']")
        page.wait_for_selector(f"#webhooks:has-text('{hook_url}')", state="detached")
        s, hooks = api(base, "GET", "/v1/admin/webhooks", token=ADMIN)
        check(hooks["webhooks"] == [], f"webhook removed {hooks}")
        page.click("button[aria-label='Remove *.example.com']")
        page.wait_for_selector("#sites:has-text('*.example.com')", state="detached")
        s, sites = api(base, "GET", "/v1/admin/sites", token=ADMIN)
        check(sites["sites"] == [], f"removed {sites}")
        axe(ctx_axe, f"{base}/ui/admin", "console sign-in")
        r = ctx_axe.request.post(f"{base}/ui/admin/session", data=json.dumps({"token": ADMIN}),
                                 headers={"content-type": "application/json"})
        check(r.status == 204, f"sign-in for axe: {r.status}")
        axe(ctx_axe, f"{base}/ui/admin", "console")
        page.click("#signout-form button")
        page.wait_for_selector("#signin-form")
        no_errors("admin")

        # 7. The person's inbox: the runtime asks for a link; the page moves its secret out of
        #    the address bar, lists the pending card, shows a new one live, opens a card by
        #    keyboard, and drops a card approved on its own page.
        first = Card(base, "ines", "inbox1", packages=["polars"])
        link, secret = inbox_link(base, "ines")
        page = browser_page(ctx, "inbox")
        page.goto(link)
        page.wait_for_selector(f"#cards a[href*='{first.id}']", timeout=10000)
        no_secret_in_address(ctx, page, secret, "inbox after load")
        item = page.inner_text("#cards li")
        check(FILES in item and "polars" in item and "Asked" in item and "Answer within" in item,
              f"the pending card: {item}")
        second = Card(base, "ines", "inbox2")
        page.wait_for_selector(f"#cards a[href*='{second.id}']", timeout=10000)
        check(len(page.query_selector_all("#cards li")) == 2, "the new card appeared live")
        Card(base, "olga", "inbox-other")  # another person's card is never listed
        page.screenshot(path=f"{shots}/inbox.png", full_page=True)
        href = page.get_attribute(f"#cards a[href*='{second.id}']", "href")
        card_page = browser_page(ctx, "inbox-card")
        card_page.goto(base + href)
        card_page.wait_for_selector("#card:not([hidden])", timeout=10000)
        no_secret_in_address(ctx, card_page, secret, "card opened from the inbox")
        card_page.click("#approve")
        check(result_of(card_page)[0] == "Approved", "approved from its card page")
        page.wait_for_selector(f"#cards a[href*='{second.id}']", state="detached", timeout=10000)
        check(len(page.query_selector_all("#cards li")) == 1, "the approved card left the inbox")
        check("olga" not in page.inner_text("body") and "inbox-other" not in page.inner_text("body"),
              "only this person's cards")
        axe(ctx_axe, link, "inbox")
        # Keyboard only: Tab reaches the card's link and Enter opens its card page.
        page.reload()
        page.wait_for_selector(f"#cards a[href*='{first.id}']", timeout=10000)
        for _ in range(5):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.tagName") == "A":
                break
        check(first.id in page.evaluate("document.activeElement.href"), "Tab reaches the card's link")
        page.keyboard.press("Enter")
        page.wait_for_selector("#card:not([hidden])", timeout=10000)
        check("public data file" in page.inner_text("#reason"), "the card opened from the inbox")
        no_errors("inbox")
        no_errors("inbox-card")
        # A wrong or expired link says so (inbox-link-ttl 2 s on the second gate).
        page = browser_page(ctx, "inbox-invalid")
        page.goto(f"{base}/ui/inbox#inb_{'x' * 22}.not-the-secret")
        check(result_of(page)[0] == "This link is not valid", "invalid inbox link")
        Card(base2, "carol", "inbox")
        link, _ = inbox_link(base2, "carol")
        time.sleep(2.5)  # the link's 2 s run out
        page = browser_page(ctx, "inbox-expired")
        page.goto(link)
        title, detail = result_of(page)
        check(title == "This link expired" and "new one" in detail, f"expired inbox link: {title}")
        check(page.is_hidden("#inbox"), "nothing listed")

        # 8. CSP honoured: no violation and no script error anywhere in our pages; and the
        #    browser does enforce it (an injected inline script is refused).
        probe = open_card(ctx, c, "csp-probe")
        try:
            probe.add_script_tag(content="window.__inline = 1;")
        except Exception:
            pass
        check(probe.evaluate("window.__inline === undefined"), "an inline script ran despite the CSP")
        is_csp = lambda c: "Content Security Policy" in c[2] or "Content-Security-Policy" in c[2]
        check(any(is_csp(c) for c in CONSOLE if c[0] == "csp-probe"), "the CSP refusal was reported")
        csp = [c for c in CONSOLE if is_csp(c) and c[0] != "csp-probe"]
        check(not csp, f"CSP violations: {csp}")
        errors = [c for c in CONSOLE if c[1] == "pageerror"]
        check(not errors, f"script errors: {errors}")
        browser.close()
    json.dump(SECRETS, open(CFG["secrets_out"], "w"))
    print(f"browser checks passed; {len(SECRETS)} secrets recorded; console: {len(CONSOLE)} messages")


if __name__ == "__main__":
    main()
