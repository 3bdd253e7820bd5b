"""The two HTTP calls every example makes, standard library only: the control API (JSON,
bearer token) and a sandbox script's download through the turn's proxy."""

import json
import os
import urllib.error
import urllib.request

CONTROL = os.environ.get("EGRESSGATE_CONTROL", "http://127.0.0.1:8080")
TOKEN = os.environ.get("EGRESSGATE_RUNTIME_TOKEN", "")


def api(method, path, body=None, token=TOKEN, user=None):
    """One control-API call: (status, JSON body)."""
    req = urllib.request.Request(CONTROL + path, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if user:
        req.add_header("X-Egressgate-User", user)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, data, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def sandbox_download(proxy_url, url):
    """What a script in the sandbox does: download through the turn's proxy; the status."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy_url, "https": proxy_url}))
    try:
        with opener.open(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def open_turn(user, chat):
    """POST /v1/turns: the turn for one user message."""
    status, turn = api("POST", "/v1/turns", {"user_id": user, "chat_id": chat, "can_ask_human": True})
    if status != 201:
        raise RuntimeError(f"open a turn: {status} {turn}")
    return turn
