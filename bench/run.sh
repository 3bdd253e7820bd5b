#!/usr/bin/env bash
# egressgate benchmark: one command, `bash bench/run.sh`.
#
# Installs tinyproxy, squid and apache2 (Debian packages) when missing, builds egressgate and the
# load generator in release mode, starts a loopback origin, egressgate, tinyproxy, squid and
# Apache httpd (all on 127.0.0.1, configs and logs in a temporary directory), runs every workload
# against the origin itself ("direct") and each proxy, then egressgate's own rows (ROWS), and
# writes bench/results/latest.md (also printed).
# Every process it starts is stopped on exit; it exits non-zero if anything failed.
# Longer than the house's ~400 lines on purpose: it is the one fair run, read top to bottom as
# the order things start and are measured in; each peer's own configuration lives beside it
# (apache.sh), and what several scripts share in lib.sh.
#
# Knobs (environment): DURATION (s per measurement, 5), REPS (3), CONNS (32), BULK_MIB (256),
# BULK_STREAMS (8), IDLE (idle tunnels per proxy, 500), IDLE_EGRESSGATE (10000, capped by the
# open-file limit), WORKLOADS (1,2,3,4,5,6,7,8,9), KEEP_WORKDIR=1 keeps configs and logs,
# GATE_ROWS=0 skips the gate's own latencies (bench/gate.sh, run after the workloads).
# The peers' settings (their best by default; bench/sweep.sh varies them): PEER_BY (ip: the
# peers are sent the origin's address; name: the benchmark host, answered from a hosts file),
# TP_LOGLEVEL (Critical), TP_MAXCLIENTS (4096), SQ_ACCESS_LOG (none), SQ_WORKERS (2), and
# Apache's AP_SERVERS, AP_THREADS, AP_KEEPALIVE, AP_ACCESS_LOG, AP_POOL (bench/apache.sh).
# egressgate's own rows (bench/gate_rows.sh): ROWS (miss,inspected,capture; empty: none),
# MISS_PG_URL (a throwaway PostgreSQL database for the two-proxy cache-miss row; without it
# one is started when initdb is installed, MISS_PG=0 skips PostgreSQL), MINT_NAMES (300),
# CAPTURE_N (2000).
# EGRESSGATE=path skips the egressgate build; LOADGEN_TARGET is where the load generator is
# built (/var/tmp/egressgate-bench-target).
set -euo pipefail
# ROOT, BENCH, RESULTS, LOADGEN; log, die, make_work, cleanup (stops PIDS on exit), wait_addr,
# wait_port, started, build_all, new_tokens, start_origin, start_egressgate.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# apache_conf, APACHE and the AP_* settings.
source "$BENCH/apache.sh"
# gate_rows (egressgate's own rows after the suite), inspect_flags, ROWS and their knobs.
source "$BENCH/gate_rows.sh"

HOST=bench.example.com
BLOCKED=unapproved.example.net
DURATION=${DURATION:-5}
REPS=${REPS:-3}
CONNS=${CONNS:-32}
BULK_MIB=${BULK_MIB:-256}
BULK_STREAMS=${BULK_STREAMS:-8}
IDLE=${IDLE:-500}
IDLE_EGRESSGATE=${IDLE_EGRESSGATE:-10000}
WORKLOADS=${WORKLOADS:-1,2,3,4,5,6,7,8,9}
PEER_BY=${PEER_BY:-ip}
TP_LOGLEVEL=${TP_LOGLEVEL:-Critical}
TP_MAXCLIENTS=${TP_MAXCLIENTS:-4096}
SQ_ACCESS_LOG=${SQ_ACCESS_LOG:-none}
SQ_WORKERS=${SQ_WORKERS:-2}
# The report is written to bench/results/$OUT_NAME.md (and $OUT_NAME-raw.txt).
OUT_NAME=${OUT_NAME:-latest}
COMMAND="bash bench/run.sh"
make_work bench

# --- limits ---------------------------------------------------------------------------------
HARD_NOFILE=$(ulimit -Hn)
if [ "$HARD_NOFILE" = unlimited ]; then HARD_NOFILE=1048576; fi
ulimit -n "$HARD_NOFILE"
# Each idle tunnel holds two descriptors in the proxy (client and origin side).
FD_CAP=$(( (HARD_NOFILE - 256) / 2 ))
if [ "$IDLE_EGRESSGATE" -gt "$FD_CAP" ]; then
    log "open-file limit is $HARD_NOFILE (hard): egressgate idle tunnels capped at $FD_CAP instead of $IDLE_EGRESSGATE"
    IDLE_EGRESSGATE=$FD_CAP
fi

# --- install the peers ----------------------------------------------------------------------
if [ ! -x /usr/bin/tinyproxy ] || [ ! -x /usr/sbin/squid ] || [ ! -x "$APACHE" ]; then
    log "installing tinyproxy, squid and apache2"
    apt-get update -qq
    # policy-rc.d or not, the services the packages enable are not used: every peer runs from
    # this run's own config in the foreground.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tinyproxy squid apache2 >/dev/null
fi
TINYPROXY=/usr/bin/tinyproxy
SQUID=/usr/sbin/squid
[ -x "$TINYPROXY" ] || die "tinyproxy is not installed"
[ -x "$SQUID" ] || die "squid is not installed"
[ -x "$APACHE" ] || die "apache2 is not installed"

# --- build ----------------------------------------------------------------------------------
build_all
# --- origin ---------------------------------------------------------------------------------
start_bench_origin
log "origin on $ORIGIN, TLS 1.3 on $TLS_ORIGIN"

# --- egressgate -----------------------------------------------------------------------------
new_tokens
start_bench_gate "$WORK/egressgate.log" "$WORK/egressgate-data"
log "egressgate proxy on $EG_PROXY, control plane on $EG_CONTROL (pid $EG_PID)"

# --- tinyproxy, squid and apache ------------------------------------------------------------
mapfile -t PORTS < <("$LOADGEN" free-ports 3)
[ "${#PORTS[@]}" = 3 ] || die "could not pick three free ports"
TP_PORT=${PORTS[0]}
SQ_PORT=${PORTS[1]}
AP_PORT=${PORTS[2]}
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$HOST" >"$WORK/hosts"
chmod 644 "$WORK/hosts"

mkdir -p "$WORK/tinyproxy"
cat >"$WORK/tinyproxy/tinyproxy.conf" <<EOF
Port $TP_PORT
Listen 127.0.0.1
Timeout 600
MaxClients $TP_MAXCLIENTS
Allow 127.0.0.1
ConnectPort $ORIGIN_PORT
ConnectPort $TLS_PORT
LogFile "$WORK/tinyproxy/tinyproxy.log"
LogLevel $TP_LOGLEVEL
PidFile "$WORK/tinyproxy/tinyproxy.pid"
EOF
case "$PEER_BY" in
ip)
    # The peers are sent the origin's address: they resolve nothing (egressgate gets the
    # name and answers it from --resolve, which costs no lookup either).
    PEER_HOST=127.0.0.1
    "$TINYPROXY" -d -c "$WORK/tinyproxy/tinyproxy.conf" >"$WORK/tinyproxy/stdout.log" 2>&1 &
    ;;
name)
    # tinyproxy resolves with the system resolver: a private /etc/hosts that names the
    # benchmark host, in its own mount namespace (the machine's /etc/hosts is untouched).
    PEER_HOST=$HOST
    unshare -m sh -c 'mount --bind "$1" /etc/hosts && exec "$2" -d -c "$3"' sh \
        "$WORK/hosts" "$TINYPROXY" "$WORK/tinyproxy/tinyproxy.conf" \
        >"$WORK/tinyproxy/stdout.log" 2>&1 &
    ;;
*) die "PEER_BY must be ip or name" ;;
esac
TP_PID=$!
started "$TP_PID" "$TP_PORT" tinyproxy

mkdir -p "$WORK/squid"
cat >"$WORK/squid/squid.conf" <<EOF
http_port 127.0.0.1:$SQ_PORT
visible_hostname egressgate-bench
pid_filename $WORK/squid/squid.pid
cache_log $WORK/squid/cache.log
access_log $( [ "$SQ_ACCESS_LOG" = none ] && echo none || echo "stdio:$WORK/squid/access.log")
workers $SQ_WORKERS
cache_store_log none
coredump_dir $WORK/squid
hosts_file $WORK/hosts
dns_nameservers 127.0.0.1
pinger_enable off
icp_port 0
htcp_port 0
cache deny all
cache_mem 8 MB
max_filedescriptors 16384
shutdown_lifetime 1 seconds
acl bench_ports port $ORIGIN_PORT $TLS_PORT
acl bench_connect method CONNECT
http_access deny bench_connect !bench_ports
http_access deny !bench_ports
http_access allow localhost
http_access deny all
EOF
chown -R proxy:proxy "$WORK/squid" 2>/dev/null || chmod 777 "$WORK/squid"
# -N (no daemon, no kids) runs one worker; SMP workers need the master in the foreground
# (and then the CPU column counts only the master, not its kids).
if [ "$SQ_WORKERS" = 1 ]; then SQ_MODE=-N; else SQ_MODE=--foreground; fi
"$SQUID" "$SQ_MODE" -f "$WORK/squid/squid.conf" >"$WORK/squid/stdout.log" 2>&1 &
SQ_PID=$!
started "$SQ_PID" "$SQ_PORT" squid

mkdir -p "$WORK/apache"
apache_conf "$WORK/apache" "$AP_PORT" "$ORIGIN_PORT" "$TLS_PORT" "$PEER_HOST"
# -DFOREGROUND: the parent stays in the foreground (its children are the workers; the load
# generator counts the CPU and memory of the whole process tree).
if [ "$PEER_BY" = name ]; then
    unshare -m sh -c 'mount --bind "$1" /etc/hosts && exec "$2" -f "$3" -DFOREGROUND' sh \
        "$WORK/hosts" "$APACHE" "$WORK/apache/httpd.conf" >"$WORK/apache/stdout.log" 2>&1 &
else
    "$APACHE" -f "$WORK/apache/httpd.conf" -DFOREGROUND >"$WORK/apache/stdout.log" 2>&1 &
fi
AP_PID=$!
started "$AP_PID" "$AP_PORT" apache

# --- run ------------------------------------------------------------------------------------
mkdir -p "$RESULTS"
CPU_MODEL=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
EG_REV=$(eg_rev)
NOTE="Run $(date -u +%Y-%m-%dT%H:%MZ) with \`$COMMAND\` (DURATION=$DURATION REPS=$REPS CONNS=$CONNS; peers: PEER_BY=$PEER_BY TP_LOGLEVEL=$TP_LOGLEVEL TP_MAXCLIENTS=$TP_MAXCLIENTS SQ_ACCESS_LOG=$SQ_ACCESS_LOG SQ_WORKERS=$SQ_WORKERS AP_SERVERS=$AP_SERVERS AP_THREADS=$AP_THREADS AP_KEEPALIVE=$AP_KEEPALIVE AP_ACCESS_LOG=$AP_ACCESS_LOG AP_POOL=$AP_POOL) on $(nproc) cores (${CPU_MODEL:-unknown CPU}), kernel $(uname -r), load average at start $(cut -d' ' -f1-3 /proc/loadavg). egressgate $EG_REV (release build, default info logging to a file), $("$TINYPROXY" -v 2>&1 | head -1), $("$SQUID" -v | head -1 | sed 's/ Cache: Version//'), $("$APACHE" -v | head -1 | sed 's/^Server version: //') (event MPM). The origin, the load generator and the proxy share the same $(nproc) cores."

log "running workloads $WORKLOADS (this takes several minutes)"
set +e
"$LOADGEN" suite --origin "$ORIGIN" --host "$HOST" --blocked-host "$BLOCKED" \
    --proxy "egressgate,$EG_PROXY,$EG_PID" \
    --proxy "tinyproxy,127.0.0.1:$TP_PORT,$TP_PID,$PEER_HOST" \
    --proxy "squid,127.0.0.1:$SQ_PORT,$SQ_PID,$PEER_HOST" \
    --proxy "apache,127.0.0.1:$AP_PORT,$AP_PID,$PEER_HOST" \
    --control "$EG_CONTROL" --egressgate-log "$WORK/egressgate.log" \
    --tls-origin "$TLS_ORIGIN" --tls-cert "$WORK/origin-cert.der" \
    --conns "$CONNS" --duration "$DURATION" --reps "$REPS" \
    --bulk-mib "$BULK_MIB" --bulk-streams "$BULK_STREAMS" \
    --idle "$IDLE" --idle-egressgate "$IDLE_EGRESSGATE" \
    --workloads "$WORKLOADS" --clk-tck "$(getconf CLK_TCK)" \
    --out "$RESULTS/$OUT_NAME.md" --raw "$RESULTS/$OUT_NAME-raw.txt" \
    --note "$NOTE" >/dev/null
SUITE_RC=$?
set -e
if [ -n "$ROWS" ]; then
    log "egressgate's own rows: $ROWS"
    gate_rows
    [ -f "$RESULTS/$OUT_NAME.md" ] && cat "$WORK/rows.md" >>"$RESULTS/$OUT_NAME.md"
    [ "$ROWS_RC" = 0 ] || SUITE_RC=1
fi

# The approval gate's own latencies (click to first allowed byte, revoke to closed) on one
# process and on two proxies + a control on PostgreSQL: bench/gate.sh, with this build, its
# own processes, writing bench/results/gate.md. GATE_ROWS=0 skips them.
if [ "${GATE_ROWS:-1}" = 1 ]; then
    log "the gate's own latencies (bench/gate.sh)"
    rm -f "$RESULTS/gate.md"
    EGRESSGATE=$EGRESSGATE bash "$BENCH/gate.sh" >/dev/null || { log "bench/gate.sh failed"; SUITE_RC=1; }
fi

# What egressgate logged, so a warning or error under load is not missed.
if [ -f "$RESULTS/$OUT_NAME.md" ]; then
    {
        printf '\n## egressgate log during the run\n\n'
        printf '%s lines (%s bytes); %s WARN, %s ERROR.\n' \
            "$(wc -l <"$WORK/egressgate.log")" "$(wc -c <"$WORK/egressgate.log")" \
            "$(grep -c ' WARN ' "$WORK/egressgate.log" || true)" "$(grep -c ' ERROR ' "$WORK/egressgate.log" || true)"
        if grep -qE ' (WARN|ERROR) ' "$WORK/egressgate.log"; then
            printf '\nDistinct warnings and errors (count, message):\n\n```\n'
            grep -E ' (WARN|ERROR) ' "$WORK/egressgate.log" | sed -e 's/^[^ ]* *//' | sort | uniq -c | sort -rn | head -10
            printf '```\n'
        fi
        if [ "${GATE_ROWS:-1}" = 1 ] && [ -f "$RESULTS/gate.md" ]; then
            sed -e '1s/^# /\n## /' "$RESULTS/gate.md"
        fi
    } >>"$RESULTS/$OUT_NAME.md"
    cat "$RESULTS/$OUT_NAME.md"
fi

for pid in "$ORIGIN_PID" "$EG_PID" "$TP_PID" "$SQ_PID" "$AP_PID"; do
    kill -0 "$pid" 2>/dev/null || { log "process $pid died during the run"; SUITE_RC=1; }
done
[ "$SUITE_RC" = 0 ] || die "the suite reported failures (exit $SUITE_RC); see $RESULTS/$OUT_NAME.md"
log "done: $RESULTS/$OUT_NAME.md"
