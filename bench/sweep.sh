#!/usr/bin/env bash
# Shows that the peers run at their best in bench/run.sh: runs the new-tunnel workloads (3 and
# 9 by default) once with the peers' default settings and once per changed setting, and writes
# every peer figure to bench/results/peer-sweep.md. Each variant is one run.sh run, so direct
# and egressgate are measured beside the peers at the same moment (same background noise).
#
# Knobs: DURATION (2), REPS (3), SWEEP_WORKLOADS (3,9), the rest as in run.sh.
set -euo pipefail
# ROOT, BENCH, RESULTS; log.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=sweep
OUT="$RESULTS/peer-sweep.md"
export DURATION=${DURATION:-2} REPS=${REPS:-3}
export WORKLOADS=${SWEEP_WORKLOADS:-3,9}

# label | environment for run.sh (the defaults are the peers' best settings).
VARIANTS=(
    "defaults (by IP, tinyproxy Critical/4096, squid no access log, 1 worker)|"
    "peers sent the host name (tinyproxy: bind-mounted hosts file)|PEER_BY=name"
    "tinyproxy LogLevel Info|TP_LOGLEVEL=Info"
    "tinyproxy MaxClients 512|TP_MAXCLIENTS=512"
    "tinyproxy MaxClients 16384|TP_MAXCLIENTS=16384"
    "squid access log to a file|SQ_ACCESS_LOG=file"
    "squid 2 workers (SMP)|SQ_WORKERS=2"
)

mkdir -p "$RESULTS"
{
    printf '# Peer settings sweep\n\n'
    printf 'Run %s with `bash bench/sweep.sh` (DURATION=%s REPS=%s, workloads %s), %s cores, load average at start %s. Medians of %s repetitions; every variant is one `bench/run.sh` run with direct and egressgate measured beside the peers.\n\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$DURATION" "$REPS" "$WORKLOADS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$REPS"
    printf '| variant | workload | direct | egressgate | tinyproxy | squid | tinyproxy/direct | squid/direct |\n|---|---|---:|---:|---:|---:|---:|---:|\n'
} >"$OUT"
for v in "${VARIANTS[@]}"; do
    label=${v%%|*}
    envs=${v#*|}
    log "$label"
    # shellcheck disable=SC2086
    env $envs OUT_NAME=sweep bash "$BENCH/run.sh" >/dev/null
    # The throughput rows of the report, each peer also as a share of direct in the same run
    # (which cancels most of the machine's background load between variants).
    grep -E '^\| (3|9)\. ' "$RESULTS/sweep.md" | head -2 | while IFS='|' read -r _ w d e t s _; do
        ratios=$(awk -v d="${d//,/}" -v t="${t//,/}" -v s="${s//,/}" \
            'BEGIN { printf "%.2f× | %.2f×", t / d, s / d }')
        printf '| %s |%s|%s|%s|%s|%s| %s |\n' "$label" "$w" "$d" "$e" "$t" "$s" "$ratios"
    done >>"$OUT"
done
rm -f "$RESULTS/sweep.md" "$RESULTS/sweep-raw.txt"
cat "$OUT"
