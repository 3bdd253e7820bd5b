"""A loopback server speaking the parts of Slack that egressgate uses, for tests/slack.rs.

Arguments: SIGNING_SECRET BOT_TOKEN LOG_FILE. Prints "listening PORT" once ready.

- POST /api/chat.postMessage: checks the bot token, records the message (channel, text,
  blocks) and answers like Slack ({"ok": true, "channel", "ts"}; {"ok": false, "error":
  "invalid_auth"} for a wrong token).
- POST /services/hook: an incoming webhook; records the message, answers "ok".
- POST /respond/<n>: a click's response_url; records the replacement, answers "ok".
- POST /click {"gate" (a URL or a list), "user", "action_id", "value", "sign": "good"|"bad"|
  "stale"|"none", "times": n}: plays Slack sending an interaction payload, signed with the
  signing secret (v0 HMAC-SHA256 of "v0:{timestamp}:{body}"): the same signed request to each
  gate, `times` times over; answers the gates' answers [{"status", "body"}].

Each record is one JSON line in LOG_FILE. Standard library only.
"""

import hashlib
import hmac
import itertools
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET, TOKEN, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
COUNTER = itertools.count(1)


def record(entry):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def sign(secret, ts, body):
    mac = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    return "v0=" + mac.hexdigest()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/api/chat.postMessage":
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.answer(200, {"ok": False, "error": "invalid_auth"})
            msg = json.loads(raw)
            record({"kind": "dm", "host": self.headers.get("Host"), "body": msg})
            ts = f"{int(time.time())}.{next(COUNTER):06d}"
            return self.answer(200, {"ok": True, "channel": "D0" + msg.get("channel", ""), "ts": ts})
        if self.path == "/services/hook":
            record({"kind": "webhook", "body": json.loads(raw)})
            return self.answer(200, "ok", "text/plain")
        if self.path.startswith("/respond/"):
            record({"kind": "response", "path": self.path, "body": json.loads(raw)})
            return self.answer(200, "ok", "text/plain")
        if self.path == "/click":
            return self.answer(200, self.click(json.loads(raw)))
        return self.answer(404, {"ok": False, "error": "unknown_method"})

    def click(self, c):
        port = self.server.server_address[1]
        payload = {
            "type": "block_actions",
            "user": {"id": c["user"], "username": c["user"].lower()},
            "actions": [{"type": "button", "action_id": c["action_id"], "value": c["value"],
                         "block_id": "egressgate:" + c["value"]}],
            "response_url": f"http://slack.test:{port}/respond/{next(COUNTER)}",
        }
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        ts = int(time.time()) - (600 if c.get("sign") == "stale" else 0)
        secret = "not-the-secret" if c.get("sign") == "bad" else SECRET
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if c.get("sign") != "none":
            headers["X-Slack-Request-Timestamp"] = str(ts)
            headers["X-Slack-Signature"] = sign(secret, ts, body)
        out = []
        gates = c["gate"] if isinstance(c["gate"], list) else [c["gate"]]
        for gate in gates * c.get("times", 1):
            req = urllib.request.Request(gate + "/v1/slack/interactions", body, headers)
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    out.append({"status": r.status, "body": json.loads(r.read() or b"null")})
            except urllib.error.HTTPError as e:
                out.append({"status": e.code, "body": json.loads(e.read() or b"null")})
        return out


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
