#!/usr/bin/env bash
# Profiles egressgate alone on one or more bench workloads: the evidence behind the "What
# limits egressgate" notes in bench/README.md.
#
#   bash bench/profile.sh WORKLOADS [DURATION]      e.g. bash bench/profile.sh 2 6
#
# Starts the loopback origin and a release egressgate (as bench/run.sh does, no peers), runs
# `loadgen suite` on the workloads (direct first, then egressgate), and while egressgate is
# measured records it with `perf record -g` (PERF_DELAY seconds after the start, for PERF_SECS
# seconds), then prints the hottest symbols. STRACE=1 counts system calls with `strace -c -f`
# instead; NOPERF=1 only measures; EG_ARGS adds egressgate flags (e.g. "--log-allowed none");
# IDLE and IDLE_EGRESSGATE set workload 7's tunnel counts (as in bench/run.sh).
# Run bench/run.sh once first (it builds both binaries).
set -euo pipefail
W=${1:?usage: bench/profile.sh WORKLOADS [DURATION]}
D=${2:-6}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOADGEN=/var/tmp/egressgate-bench-target/release/loadgen
EG=${EG:-${CARGO_TARGET_DIR:-$ROOT/target}/release/egressgate}
[ -x "$LOADGEN" ] && [ -x "$EG" ] || { echo "build first: bash bench/run.sh" >&2; exit 1; }
WORK=$(mktemp -d /tmp/egressgate-profile.XXXXXX)
ulimit -n "$(ulimit -Hn)"
strip() { sed 's/\x1b\[[0-9;]*m//g'; }
addr_in() { for _ in $(seq 100); do a=$(strip <"$1" | grep "$2" | grep -o 'addr=[^ ]*' | head -1 | cut -d= -f2); [ -n "$a" ] && { echo "$a"; return; }; sleep 0.1; done; exit 1; }
"$LOADGEN" origin --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --cert-out "$WORK/origin-cert.der" \
    2>"$WORK/origin.log" & OP=$!
ORIGIN=$(addr_in "$WORK/origin.log" "origin listening")
TLS_ORIGIN=$(addr_in "$WORK/origin.log" "origin tls listening")
export EGRESSGATE_ADMIN_TOKEN="profile-admin-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export EGRESSGATE_RUNTIME_TOKEN="profile-runtime-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
env -u EGRESSGATE_LOG "$EG" serve --data-dir "$WORK/data" --proxy-listen 127.0.0.1:0 \
    --control-listen 127.0.0.1:0 --resolve bench.example.com=127.0.0.1 --allow-cidr 127.0.0.0/8 \
    --allow-port "${ORIGIN##*:}" --allow-port "${TLS_ORIGIN##*:}" --max-connections 20000 \
    ${EG_ARGS:-} \
    2>"$WORK/egressgate.log" >/dev/null & EP=$!
trap 'kill $EP $OP 2>/dev/null || true' EXIT
PX=$(addr_in "$WORK/egressgate.log" "proxy listening")
CT=$(addr_in "$WORK/egressgate.log" "control plane listening")
RECORDER=
if [ -z "${NOPERF:-}" ]; then
    (
        sleep "${PERF_DELAY:-$((D + 2))}"
        if [ -n "${STRACE:-}" ]; then
            timeout -s INT "${PERF_SECS:-4}" strace -c -f -p "$EP" -o "$WORK/strace.txt" || true
        else
            perf record -F 999 -g -p "$EP" -o "$WORK/perf.data" -- sleep "${PERF_SECS:-4}" >/dev/null 2>&1
        fi
    ) &
    RECORDER=$!
fi
"$LOADGEN" suite --origin "$ORIGIN" --proxy "egressgate,$PX,$EP" --control "$CT" \
    --egressgate-log "$WORK/egressgate.log" --tls-origin "$TLS_ORIGIN" \
    --tls-cert "$WORK/origin-cert.der" --conns 32 --duration "$D" --reps 1 \
    --idle "${IDLE:-500}" --idle-egressgate "${IDLE_EGRESSGATE:-10000}" \
    --workloads "$W" --clk-tck "$(getconf CLK_TCK)" --out "$WORK/out.md" --raw "$WORK/raw.txt" \
    >/dev/null 2>"$WORK/suite.log" || true
[ -z "$RECORDER" ] || wait "$RECORDER" || true
grep -E ' (direct|egressgate) ' "$WORK/suite.log" | grep -v logged || true
if [ -f "$WORK/strace.txt" ]; then
    cat "$WORK/strace.txt"
elif [ -f "$WORK/perf.data" ]; then
    perf report -i "$WORK/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep '%' | grep -v '^#' | head -5
    perf report -i "$WORK/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep '%' | grep -v '^#' | head -6
    perf report -i "$WORK/perf.data" --no-children --percent-limit "${LIMIT:-0.8}" --stdio -g none 2>/dev/null \
        | grep '%' | grep -v '^#' | head -"${TOP:-40}"
fi
echo "work directory: $WORK"
