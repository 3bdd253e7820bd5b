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
# Writes bench/results/capture.md. No traffic leaves 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH="$ROOT/bench"
N=${N:-2000}
HOST=bench.example.com
LOADGEN_TARGET=/var/tmp/egressgate-bench-target
LOADGEN="$LOADGEN_TARGET/release/loadgen"

log() { printf '[capture-bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (capture needs it)"
command -v python3 >/dev/null || die "python3 is needed"
command -v nft >/dev/null || die "nft is needed (package nftables)"

WORK=$(mktemp -d /tmp/egressgate-capture-bench.XXXXXX)
# The sandboxed client runs as `nobody` (the launcher's --as-user default): it must read its script.
chmod 755 "$WORK"
PIDS=()
cleanup() {
    local rc=$?
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT

wait_addr() {
    local file=$1 pattern=$2 pid=$3
    for _ in $(seq 300); do
        local line
        line=$(grep -m1 -a "$pattern" "$file" 2>/dev/null || true)
        if [ -n "$line" ]; then
            sed -e 's/\x1b\[[0-9;]*m//g' <<<"$line" | grep -o 'addr=[^ ]*' | head -1 | cut -d= -f2
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "process $pid exited before logging '$pattern'"
        sleep 0.1
    done
    die "timed out waiting for '$pattern' in $file"
}

if [ -z "${EGRESSGATE:-}" ]; then
    log "building egressgate (release)"
    (cd "$ROOT" && cargo build --release --quiet --bin egressgate) || die "egressgate build failed"
    EGRESSGATE="${CARGO_TARGET_DIR:-$ROOT/target}/release/egressgate"
fi
log "building the load generator's origin (release)"
CARGO_TARGET_DIR=$LOADGEN_TARGET cargo build --release --quiet --manifest-path "$BENCH/loadgen/Cargo.toml" \
    || die "loadgen build failed"

"$LOADGEN" origin --listen 127.0.0.1:0 2>"$WORK/origin.log" &
PIDS+=("$!")
ORIGIN=$(wait_addr "$WORK/origin.log" "origin listening" "$!")
PORT=${ORIGIN##*:}

token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
export EGRESSGATE_ADMIN_TOKEN="bench-admin-$(token)"
export EGRESSGATE_RUNTIME_TOKEN="bench-runtime-$(token)"
env -u EGRESSGATE_LOG -u DATABASE_URL -u EGRESSGATE_DATABASE_URL \
    "$EGRESSGATE" serve --data-dir "$WORK/data" \
    --proxy-listen 127.0.0.1:0 --control-listen 127.0.0.1:0 \
    --resolve "$HOST=127.0.0.1" --allow-cidr 127.0.0.0/8 --allow-port "$PORT" \
    2>"$WORK/egressgate.log" >/dev/null &
EG_PID=$!
PIDS+=("$EG_PID")
CONTROL=$(wait_addr "$WORK/egressgate.log" "control plane listening" "$EG_PID")
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
mkdir -p "$BENCH/results"
{
    printf '# Capture: cost per connection against a proxy-aware client\n\n'
    printf 'Run %s with `bash bench/capture.sh` (N=%s) on %s cores, kernel %s, load average at start %s; egressgate %s (%s).\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$N" "$(nproc)" "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" "$EGRESSGATE"
    printf 'Each connection: connect, `GET /small`, read the answer, close; one Python client inside the sandbox. A capture row includes the lookup Python makes for every connection (answered by the sandbox resolver; Python caches nothing), a no-lookup row connects to the pool address looked up once; a proxy-aware row dials the forwarder at 127.0.0.1 and sends its own CONNECT. Both cross one listener inside (forwarder or capture), the Unix socket and the outside relay to the same proxy.\n\n'
    printf '| client | threads | connections | conn/s | p50 µs | p99 µs |\n|---|---|---|---|---|---|\n'
    printf '%s\n' "$ROWS"
} >"$BENCH/results/capture.md"
cat "$BENCH/results/capture.md"
