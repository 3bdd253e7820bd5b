#!/usr/bin/env bash
# The approval gate's own latencies, one command: `bash bench/gate.sh` (root; PostgreSQL too
# when initdb is installed). Writes bench/results/gate.md.
#
# Two setups, each against the loopback origin (`loadgen origin`):
#   - one process: `egressgate serve` on SQLite;
#   - scale-out: two `egressgate proxy` processes and one `egressgate control` on one throwaway
#     PostgreSQL; the refused request goes through proxy 1, the request after the click and
#     the tunnels through proxy 2, every decision through the control process.
# `loadgen gate` then times, after 10 untimed warm-up trials, TRIALS times one after another: click to first allowed byte (the
# resume that approves a card → the sandbox's next request for the host answered 200) and
# revoke to closed (DELETE of that approval → the open tunnel's close); and EXPIRY_TRIALS times
# (EXPIRY_BATCH at once) an expiring grant: a user-scope approval (--user-grant-ttl
# GRANT_TTL) → its open tunnel's close. Every egressgate runs with its defaults otherwise
# (the epoch poll stays 1 s: what the figures show is the push).
#
# Knobs: TRIALS (200), EXPIRY_TRIALS (60), EXPIRY_BATCH (20), GRANT_TTL (3s), GATE_PG=0 skips
# PostgreSQL; EGRESSGATE=path skips the egressgate build, LOADGEN_TARGET as in lib.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=gate
HOST=bench.example.com
TRIALS=${TRIALS:-200}
EXPIRY_TRIALS=${EXPIRY_TRIALS:-60}
EXPIRY_BATCH=${EXPIRY_BATCH:-20}
GRANT_TTL=${GRANT_TTL:-3s}
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
make_work gate
build_all
new_tokens
start_origin
ORIGIN_PORT=${ORIGIN##*:}
# What every egressgate process of both setups is given.
COMMON=(--resolve "$HOST=127.0.0.1" --allow-cidr 127.0.0.0/8 --allow-port "$ORIGIN_PORT"
    --allow-user-scope --user-grant-ttl "$GRANT_TTL")

measure() { # label, --proxy ADDR [--proxy2 ADDR] --control ADDR → the loadgen line
    local label=$1
    shift
    "$LOADGEN" gate "$@" --host "$HOST" --port "$ORIGIN_PORT" --trials "$TRIALS" \
        --expiry-trials "$EXPIRY_TRIALS" --expiry-batch "$EXPIRY_BATCH" --label "$label" \
        || die "loadgen gate failed ($label)"
}
field() { sed -e "s/.*\(^\| \)$2=\([0-9.]*\).*/\2/" <<<"$1"; }

log "one process on SQLite"
start_egressgate "$WORK/serve.log" --data-dir "$WORK/data-sqlite" "${COMMON[@]}"
ONE=$(measure sqlite --proxy "$EG_PROXY" --control "$EG_CONTROL")
log "$ONE"

SCALED=
if [ "${GATE_PG:-1}" = 1 ] && start_pg; then
    log "two proxies and a control process on PostgreSQL"
    DB=(--database-url "$PG_URL" --data-dir "$WORK/data-pg")
    start_egressgate_as proxy "$WORK/proxy1.log" "${DB[@]}" "${COMMON[@]}"
    P1=$EG_PROXY
    start_egressgate_as proxy "$WORK/proxy2.log" "${DB[@]}" "${COMMON[@]}"
    P2=$EG_PROXY
    start_egressgate_as control "$WORK/control.log" "${DB[@]}" "${COMMON[@]}" \
        --proxy-public-url "$P1"
    CONTROL=$EG_CONTROL
    SCALED=$(measure postgres --proxy "$P1" --proxy2 "$P2" --control "$CONTROL")
    log "$SCALED"
else
    log "no PostgreSQL (GATE_PG=0 or initdb not found): one process only"
fi

mkdir -p "$RESULTS"
OUT="$RESULTS/gate.md"
EG_REV=$(eg_rev)
row() { # setup, loadgen line
    printf '| %s | %s / %s | %s / %s | %s / %s | %s; %s |\n' "$1" \
        "$(field "$2" click_p50_ms)" "$(field "$2" click_p99_ms)" \
        "$(field "$2" revoke_p50_ms)" "$(field "$2" revoke_p99_ms)" \
        "$(field "$2" expiry_p50_ms)" "$(field "$2" expiry_p99_ms)" \
        "$(field "$2" trials)" "$(field "$2" expiry_trials)"
}
{
    printf '# The approval gate'"'"'s own latencies\n\n'
    printf 'Run %s with `bash bench/gate.sh` (TRIALS=%s EXPIRY_TRIALS=%s EXPIRY_BATCH=%s GRANT_TTL=%s) on %s cores, load average at start %s; egressgate %s. Click: from sending the resume that approves a card to the answer `200` to the sandbox'"'"'s next request for the host (a new connection). Revoke: from sending `DELETE` of the approval to the close of a tunnel it let through. Expiring grant: from a user-scope approval'"'"'s `expires_at` to its tunnel'"'"'s close. On PostgreSQL the refusal goes through proxy 1, the 200 and the tunnels through proxy 2, the decisions through the control process.\n\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$TRIALS" "$EXPIRY_TRIALS" "$EXPIRY_BATCH" "$GRANT_TTL" \
        "$(nproc)" "$LOAD_START" "$EG_REV"
    printf '| setup | click to first allowed byte p50 / p99 (ms) | revoke to closed p50 / p99 (ms) | expiring grant to closed p50 / p99 (ms) | trials |\n|---|---:|---:|---:|---|\n'
    row "one process, SQLite" "$ONE"
    [ -n "$SCALED" ] && row "two proxies + a control, PostgreSQL" "$SCALED"
    printf '\nTargets (issue 29): click p99 ≤ 20 ms; revoke p99 ≤ 100 ms on both setups.\n'
} >"$OUT"
cat "$OUT"
