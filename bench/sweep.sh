#!/usr/bin/env bash
# Shows that the peers run at their best in bench/run.sh: runs the chosen workloads (2, 3 and 9
# by default: keep-alive forwarding, new tunnels, new TLS tunnels) once with the peers' default
# settings and once per changed setting, and writes every peer figure to
# bench/results/peer-sweep.md. Each variant is one run.sh run, so direct and egressgate are
# measured beside the peers at the same moment (same background noise), and each peer is also
# shown as a share of direct in that run.
#
# Knobs: DURATION (2), REPS (3), SWEEP_WORKLOADS (2,3,9), the rest as in run.sh.
set -euo pipefail
# ROOT, BENCH, RESULTS; log.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=sweep
OUT="$RESULTS/peer-sweep.md"
export DURATION=${DURATION:-2} REPS=${REPS:-3}
export WORKLOADS=${SWEEP_WORKLOADS:-2,3,9}
# Only the workloads: egressgate's own rows and its gate latencies do not depend on the peers
# (and bench/gate.sh would overwrite bench/results/gate.md with every variant).
export ROWS= GATE_ROWS=0

# label | environment for run.sh (the defaults are the peers' best settings).
VARIANTS=(
    "defaults (by IP; tinyproxy Critical/4096; squid no access log, 2 workers; apache 2×320 threads, KeepAlive On, pooled origin worker, no access log)|"
    "peers sent the host name (tinyproxy, apache: bind-mounted hosts file)|PEER_BY=name"
    "tinyproxy LogLevel Info|TP_LOGLEVEL=Info"
    "tinyproxy MaxClients 512|TP_MAXCLIENTS=512"
    "tinyproxy MaxClients 16384|TP_MAXCLIENTS=16384"
    "squid access log to a file|SQ_ACCESS_LOG=file"
    "squid 1 worker (no SMP, -N)|SQ_WORKERS=1"
    "apache 1 child × 640 threads|AP_SERVERS=1 AP_THREADS=640"
    "apache 4 children × 160 threads|AP_SERVERS=4 AP_THREADS=160"
    "apache 2 children × 64 threads|AP_SERVERS=2 AP_THREADS=64"
    "apache KeepAlive Off|AP_KEEPALIVE=Off"
    "apache default forward worker (no pooled origin worker)|AP_POOL=off"
    "apache access log to a file|AP_ACCESS_LOG=file"
)

mkdir -p "$RESULTS"
{
    printf '# Peer settings sweep\n\n'
    printf 'Run %s with `bash bench/sweep.sh` (DURATION=%s REPS=%s, workloads %s), %s cores, load average at start %s. Medians of %s repetitions; every variant is one `bench/run.sh` run with direct and egressgate measured beside the peers.\n\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$DURATION" "$REPS" "$WORKLOADS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$REPS"
    printf '| variant | workload | direct | egressgate | tinyproxy | squid | apache | tinyproxy/direct | squid/direct | apache/direct |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
} >"$OUT"
# The report's throughput rows for the chosen workloads ("^| 3. " …).
ROW_RE="^\\| ($(tr ',' '|' <<<"$WORKLOADS"))\\. "
for v in "${VARIANTS[@]}"; do
    label=${v%%|*}
    envs=${v#*|}
    log "$label"
    # A variant that fails (a peer that cannot take a setting) is shown as failed, not fatal.
    # shellcheck disable=SC2086
    if ! env $envs OUT_NAME=sweep bash "$BENCH/run.sh" >/dev/null; then
        printf '| %s | run failed (see the run'"'"'s log) | | | | | | | | |\n' "$label" >>"$OUT"
        continue
    fi
    # Each peer also as a share of direct in the same run (which cancels most of the machine's
    # background load between variants). The first table of the report is throughput.
    awk '/^## /{n++} n==1' "$RESULTS/sweep.md" | grep -E "$ROW_RE" | while IFS='|' read -r _ w d e t s a _; do
        ratios=$(awk -v d="${d//,/}" -v t="${t//,/}" -v s="${s//,/}" -v a="${a//,/}" \
            'BEGIN { printf "%.2f× | %.2f× | %.2f×", t / d, s / d, a / d }')
        printf '| %s |%s|%s|%s|%s|%s|%s| %s |\n' "$label" "$w" "$d" "$e" "$t" "$s" "$a" "$ratios"
    done >>"$OUT"
done
rm -f "$RESULTS/sweep.md" "$RESULTS/sweep-raw.txt"
cat "$OUT"
