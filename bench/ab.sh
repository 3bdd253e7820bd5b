#!/usr/bin/env bash
# Two egressgate builds side by side in one run, for a change to the hot path:
#   A=/path/to/egressgate-before B=/path/to/egressgate-after bash bench/ab.sh
#
# Both run at once with the flags bench/run.sh gives egressgate (start_bench_gate), against one
# loopback origin, each idle while the other is measured. The slots interleave A B B A A B …
# (ROUNDS per build), so a drift of the machine falls on both, and every slot measures the
# origin directly too. Writes bench/results/$OUT_NAME.md (and $OUT_NAME-raw.txt): per workload
# and figure, the median [min–max] of direct, A and B, and B/A. A difference smaller than the
# spread of either build is noise.
# Knobs: A, B (required), WORKLOADS (1,2: the forwarded GETs), ROUNDS (4), DURATION (5),
# CONNS (32), OUT_NAME (ab), KEEP_WORKDIR=1 keeps logs. Two builds of one target directory:
# clean the workspace's packages in between (`cargo clean --release -p egressgate -p
# egressgate-proxy …`), or cargo may take the older sources' build for the newer.
set -euo pipefail
# ROOT, BENCH, RESULTS, LOADGEN; log, die, make_work, start_bench_origin, new_tokens, …
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# start_bench_gate and the inspected row's flags it adds.
source "$BENCH/gate_rows.sh"

HOST=bench.example.com
BLOCKED=unapproved.example.net
WORKLOADS=${WORKLOADS:-1,2}
ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-5}
CONNS=${CONNS:-32}
OUT_NAME=${OUT_NAME:-ab}
[ -x "${A:-}" ] && [ -x "${B:-}" ] || die "set A and B to two egressgate binaries"
[ -x "$LOADGEN" ] || (cd "$ROOT" && CARGO_TARGET_DIR=$LOADGEN_TARGET cargo build --release \
    --quiet --manifest-path bench/loadgen/Cargo.toml) || die "cannot build the load generator"
make_work ab
HARD_NOFILE=$(ulimit -Hn)
[ "$HARD_NOFILE" = unlimited ] && HARD_NOFILE=1048576
ulimit -n "$HARD_NOFILE"

start_bench_origin
new_tokens
declare -A PROXY CONTROL PID LOGFILE BIN=([A]=$A [B]=$B)
for v in A B; do
    EGRESSGATE=${BIN[$v]}
    start_bench_gate "$WORK/egressgate-$v.log" "$WORK/egressgate-data-$v"
    PROXY[$v]=$EG_PROXY CONTROL[$v]=$EG_CONTROL PID[$v]=$EG_PID LOGFILE[$v]=$WORK/egressgate-$v.log
    log "$v: ${BIN[$v]} (sha256 $(sha256sum "${BIN[$v]}" | cut -c1-12)), proxy $EG_PROXY"
done

RAW="$RESULTS/$OUT_NAME-raw.txt"
: >"$RAW"
STARTED="$(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
slot=0
for ((r = 0; r < ROUNDS; r++)); do
    order=(A B)
    (( r % 2 )) && order=(B A)
    for v in "${order[@]}"; do
        slot=$((slot + 1))
        log "slot $slot: workloads $WORKLOADS, direct and $v"
        "$LOADGEN" suite --origin "$ORIGIN" --host "$HOST" --blocked-host "$BLOCKED" \
            --proxy "egressgate,${PROXY[$v]},${PID[$v]}" \
            --control "${CONTROL[$v]}" --egressgate-log "${LOGFILE[$v]}" \
            --tls-origin "$TLS_ORIGIN" --tls-cert "$WORK/origin-cert.der" \
            --conns "$CONNS" --duration "$DURATION" --reps 1 --workloads "$WORKLOADS" \
            --clk-tck "$(getconf CLK_TCK)" --out "$WORK/slot$slot.md" \
            --raw "$WORK/slot$slot-raw.txt" --note "ab slot $slot" >/dev/null \
            2>>"$WORK/loadgen.log" || die "slot $slot failed (see $WORK/loadgen.log)"
        sed "s/ egressgate / $v /" "$WORK/slot$slot-raw.txt" >>"$RAW"
    done
done

python3 - "$RAW" "$RESULTS/$OUT_NAME.md" "$STARTED" "$A" "$B" "$ROUNDS" "$DURATION" "$CONNS" <<'PY'
import re, statistics, sys
raw, out, started, a, b, rounds, duration, conns = sys.argv[1:]
figures = {"rate": "req/s", "p50": "p50 ms", "p99": "p99 ms", "cpu_us_req": "proxy CPU µs/req"}
seen = {}
for line in open(raw):
    m = re.search(r" w(\d+) (\S+) rep\d+: (.*)", line)
    if not m:
        continue
    w, who, rest = m.groups()
    for key in figures:
        v = re.search(rf"\b{key}=([0-9.]+)", rest)
        if v:
            seen.setdefault((int(w), key), {}).setdefault(who, []).append(float(v.group(1)))
def cell(xs):
    if not xs:
        return "–"
    return f"{statistics.median(xs):,.2f} [{min(xs):,.2f}–{max(xs):,.2f}]"
rows = []
for (w, key), by in sorted(seen.items()):
    ma, mb = by.get("A"), by.get("B")
    ratio = f"{statistics.median(mb) / statistics.median(ma):.3f}" if ma and mb else "–"
    rows.append(f"| {w} | {figures[key]} | {cell(by.get('direct'))} | {cell(ma)} | {cell(mb)} | {ratio} |")
with open(out, "w") as f:
    f.write(f"# egressgate A/B\n\nRun {started} with `bash bench/ab.sh` (ROUNDS={rounds} per build, "
            f"DURATION={duration} s, CONNS={conns}; slots A B B A …).\n\n- A: `{a}`\n- B: `{b}`\n\n"
            "Median [min–max] over the slots; direct is measured in every slot.\n\n"
            "| workload | figure | direct | A | B | B/A |\n|---|---|---:|---:|---:|---:|\n")
    f.write("\n".join(rows) + "\n")
print(open(out).read())
PY
