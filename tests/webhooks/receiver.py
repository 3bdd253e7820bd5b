"""A webhook receiver for tests/webhooks.rs: verifies every delivery with the Standard
Webhooks reference library and appends one JSON line per request to LOG:
{"id", "verified", "type", "body"}. Answers 503 while the file DOWN exists, and to the first
FAIL_FIRST requests; 204 otherwise. The signing secret is read from SECRET_FILE per request
(the endpoint is created after the receiver is listening). Prints "listening PORT".

usage: receiver.py SECRET_FILE LOG DOWN FAIL_FIRST
"""

import http.server
import json
import sys
import os
import threading

from standardwebhooks.webhooks import Webhook

secret_file, log_path, down_path, fail_first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lock = threading.Lock()
seen = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with open(secret_file) as f:
            secret = f.read().strip()
        try:
            Webhook(secret).verify(body, headers)
            verified = True
        except Exception as e:  # the record says why
            verified = repr(e)
        with lock:
            seen[0] += 1
            n = seen[0]
            with open(log_path, "a") as f:
                f.write(json.dumps({"id": headers.get("webhook-id"), "verified": verified,
                                    "body": body.decode()}) + "\n")
        status = 503 if (os.path.exists(down_path) or n <= fail_first) else 204
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening", server.server_address[1], flush=True)
server.serve_forever()
