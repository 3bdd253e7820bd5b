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
# EG=path names the egressgate binary; by default the `profiling` build (the release build with
# its symbols, built here when missing: `perf` of the stripped release binary names no function).
# LOADGEN_TARGET as in bench/run.sh; run bench/run.sh once first (it builds the load generator).
set -euo pipefail
W=${1:?usage: bench/profile.sh WORKLOADS [DURATION]}
D=${2:-6}
# ROOT, LOADGEN; log, die, make_work, cleanup (stops PIDS on exit), new_tokens, start_origin,
# start_egressgate. The work directory is kept (the profile is in it).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
KEEP_WORKDIR=1
if [ -z "${EG:-}" ]; then
    log "building egressgate (profiling: release with symbols)"
    (cd "$ROOT" && cargo build --profile profiling --quiet --bin egressgate) \
        || die "egressgate profiling build failed"
fi
EGRESSGATE=${EG:-${CARGO_TARGET_DIR:-$ROOT/target}/profiling/egressgate}
[ -x "$LOADGEN" ] && [ -x "$EGRESSGATE" ] || die "build first: bash bench/run.sh"
make_work profile
ulimit -n "$(ulimit -Hn)"
start_origin --tls-listen 127.0.0.1:0 --cert-out "$WORK/origin-cert.der"
TLS_ORIGIN=$(wait_addr "$WORK/origin.log" "origin tls listening" "$ORIGIN_PID")
new_tokens
# shellcheck disable=SC2086
start_egressgate "$WORK/egressgate.log" --data-dir "$WORK/data" \
    --resolve bench.example.com=127.0.0.1 --allow-cidr 127.0.0.0/8 \
    --allow-port "${ORIGIN##*:}" --allow-port "${TLS_ORIGIN##*:}" --max-connections 20000 \
    ${EG_ARGS:-}
EP=$EG_PID
PX=$EG_PROXY
CT=$EG_CONTROL
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
