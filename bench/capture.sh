#!/usr/bin/env bash
# What transparent capture costs per connection, against a proxy-aware client: one client
# inside `egressgate sandbox run` opens N fresh connections one after another, each doing
# `GET /small` on the loopback origin, first by name with no proxy settings (resolver +
# capture listener + CONNECT sent by the launcher), then as a proxy-aware client sending its
# own CONNECT to the forwarder; then both again with 8 threads. Same client (Python), same
# sandbox, same proxy, same origin: the difference is the capture's own work.
#
#   bash bench/capture.sh            (root: capture loads an nftables ruleset)
#   N=2000 EGRESSGATE=path/to/egressgate bash bench/capture.sh
#
# Writes bench/results/capture.md (or CAPTURE_OUT; bench/run.sh puts it in its own report).
# No traffic leaves 127.0.0.1.
set -euo pipefail
# ROOT, BENCH, LOADGEN; log, die, make_work, cleanup (stops PIDS on exit), build_all,
# new_tokens, start_origin, start_egressgate.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=capture-bench
N=${N:-2000}
OUT=${CAPTURE_OUT:-$BENCH/results/capture.md}
HOST=bench.example.com

[ "$(id -u)" = 0 ] || die "run as root (capture needs it)"
command -v python3 >/dev/null || die "python3 is needed"
command -v nft >/dev/null || die "nft is needed (package nftables)"

make_work capture-bench
build_all
start_origin
PORT=${ORIGIN##*:}
new_tokens
start_egressgate "$WORK/egressgate.log" --data-dir "$WORK/data" \
    --resolve "$HOST=127.0.0.1" --allow-cidr 127.0.0.0/8 --allow-port "$PORT"
CONTROL=$EG_CONTROL
PROXY_URL=$(curl -sS --fail -X POST "http://$CONTROL/v1/turns" \
    -H "Authorization: Bearer $EGRESSGATE_RUNTIME_TOKEN" -H 'content-type: application/json' \
    -d "{\"user_id\":\"bench\",\"chat_id\":\"capture\",\"can_ask_human\":true,\"sites\":[\"$HOST\"]}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["proxy_url"])')

cat >"$WORK/client.py" <<'PY'
import base64, os, socket, statistics, sys, threading, time, urllib.parse
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{urllib.parse.unquote(proxy.username)}:{urllib.parse.unquote(proxy.password)}".encode()).decode()
get = f"GET /small HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()

def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data

def captured():
    s = socket.create_connection((host, port))
    s.sendall(get); read_head(s); s.close()

pool_addr = None

def captured_by_address():
    s = socket.create_connection((pool_addr, port))
    s.sendall(get); read_head(s); s.close()

def proxied():
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
    if not read_head(s).startswith(b"HTTP/1.1 200"):
        raise OSError("refused")
    s.sendall(get); read_head(s); s.close()

def run(kind, threads):
    fn = {"capture": captured, "capture, no lookup": captured_by_address, "proxy-aware": proxied}[kind]
    times, lock = [], threading.Lock()
    def worker(count):
        for _ in range(count):
            t = time.perf_counter(); fn(); d = time.perf_counter() - t
            with lock: times.append(d)
    for _ in range(50): fn()  # warm-up (the name's first lookup included)
    start = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(n // threads,)) for _ in range(threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    wall = time.perf_counter() - start
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))] * 1e6
    print(f"| {kind} | {threads} | {len(times)} | {len(times) / wall:.0f} | {q(0.5):.0f} | {q(0.99):.0f} |")

pool_addr = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
for threads in (1, 8):
    for kind in ("proxy-aware", "capture", "capture, no lookup"):
        run(kind, threads)
PY

log "measuring $N connections per row"
ROWS=$(EGRESSGATE_PROXY_URL="$PROXY_URL" "$EGRESSGATE" sandbox run -- python3 "$WORK/client.py" "$HOST" "$PORT" "$N")
mkdir -p "$(dirname "$OUT")"
{
    printf '# Capture: cost per connection against a proxy-aware client\n\n'
    printf 'Run %s with `bash bench/capture.sh` (N=%s) on %s cores, kernel %s, load average at start %s; egressgate %s (%s).\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$N" "$(nproc)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$(eg_rev)" "$EGRESSGATE"
    printf 'Each connection: connect, `GET /small`, read the answer, close; one Python client inside the sandbox. A capture row includes the lookup Python makes for every connection (answered by the sandbox resolver; Python caches nothing), a no-lookup row connects to the pool address looked up once; a proxy-aware row dials the forwarder at 127.0.0.1 and sends its own CONNECT. Both cross one listener inside (forwarder or capture), the Unix socket and the outside relay to the same proxy.\n\n'
    printf '| client | threads | connections | conn/s | p50 µs | p99 µs |\n|---|---|---|---|---|---|\n'
    printf '%s\n' "$ROWS"
} >"$OUT"
cat "$OUT"
