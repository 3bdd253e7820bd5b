# Shared by the bench scripts (sourced, not run: `source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`):
# where things are (ROOT, BENCH, RESULTS, LOADGEN), logging, a work directory WORK whose
# processes (PIDS) are stopped on exit (WORK is removed unless KEEP_WORKDIR=1 or the run
# failed), the revision a report names (eg_rev), building the two binaries, starting the
# origin and egressgate, and waiting for a process to log its address or to listen.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
RESULTS="$BENCH/results"
# The load generator is its own cargo project, built into LOADGEN_TARGET.
LOADGEN_TARGET=${LOADGEN_TARGET:-/var/tmp/egressgate-bench-target}
LOADGEN="$LOADGEN_TARGET/release/loadgen"
PIDS=()
# Commands cleanup runs before it stops PIDS (a throwaway PostgreSQL's stop, say).
EXIT_HOOKS=()
WORK=
# egressgate's log filter for one start_egressgate call (`EG_LOG_FILTER=… start_egressgate …`);
# empty: its default (info), as shipped. Not read from the caller's environment.
EG_LOG_FILTER=

log() { printf '[%s %s] %s\n' "${LOG_TAG:-bench}" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# Creates WORK, /tmp/egressgate-NAME.XXXXXX, readable by all (a sandboxed client runs as
# nobody and must read its script).
make_work() {
    WORK=$(mktemp -d "/tmp/egressgate-$1.XXXXXX")
    chmod 755 "$WORK"
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    local hook
    for hook in "${EXIT_HOOKS[@]}"; do
        eval "$hook" || true
    done
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for _ in $(seq 50); do
        local alive=0
        for pid in "${PIDS[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ -z "$WORK" ]; then
        :
    elif [ "${KEEP_WORKDIR:-0}" = 1 ] || [ "$rc" != 0 ]; then
        log "configs and logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until FILE has a line containing PATTERN after its first SKIP lines (default 0: a log
# appended to by several starts skips the earlier starts' lines) and prints the value after
# "addr=".
wait_addr() {
    local file=$1 pattern=$2 pid=$3 skip=${4:-0}
    for _ in $(seq 300); do
        local line
        line=$(tail -n +"$((skip + 1))" "$file" 2>/dev/null | grep -m1 -a "$pattern" || true)
        local addr
        addr=$(sed -e 's/\x1b\[[0-9;]*m//g' <<<"$line" | grep -o 'addr=[^ ]*' | head -1 | cut -d= -f2)
        # A line caught while it is still being written has no address yet: read it again.
        if [ -n "$addr" ]; then
            echo "$addr"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { tail -20 "$file" >&2; die "process $pid exited before logging '$pattern'"; }
        sleep 0.1
    done
    tail -20 "$file" >&2
    die "timed out waiting for '$pattern' in $file"
}

# Waits until 127.0.0.1:PORT accepts connections.
wait_port() {
    local port=$1 pid=$2 name=$3
    for _ in $(seq 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "$name exited during start-up (logs in $WORK)"
        sleep 0.1
    done
    die "$name did not listen on 127.0.0.1:$port"
}

# Notes PID (started just now, listening on PORT) for the stop on exit, and waits for it.
started() {
    local pid=$1 port=$2 name=$3
    PIDS+=("$pid")
    wait_port "$port" "$pid" "$name"
    log "$name on 127.0.0.1:$port (pid $pid)"
}

# Builds egressgate (release, into CARGO_TARGET_DIR or the repository's target/) and the load
# generator (into LOADGEN_TARGET); sets EGRESSGATE. EGRESSGATE=path in the environment skips
# the egressgate build.
build_all() {
    if [ -z "${EGRESSGATE:-}" ]; then
        log "building egressgate (release)"
        (cd "$ROOT" && cargo build --release --quiet --workspace --bin egressgate) \
            || die "egressgate release build failed"
        EGRESSGATE="${CARGO_TARGET_DIR:-$ROOT/target}/release/egressgate"
    fi
    [ -x "$EGRESSGATE" ] || die "no egressgate binary at $EGRESSGATE"
    log "building the load generator (release)"
    CARGO_TARGET_DIR=$LOADGEN_TARGET cargo build --release --quiet \
        --manifest-path "$BENCH/loadgen/Cargo.toml" || die "loadgen build failed"
}

# The revision a report names: HEAD, and "+ uncommitted changes" when the checkout differs
# from it outside bench/results (which the run itself writes: bench/gate.sh, run after the
# workloads, would otherwise call every full run's build dirty).
eg_rev() {
    local rev
    rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [ -n "$(git -C "$ROOT" status --porcelain -- . ':!bench/results' 2>/dev/null | head -1)" ]; then
        rev="$rev + uncommitted changes"
    fi
    echo "$rev"
}

# Fresh admin and runtime tokens for this run's egressgate, exported (loadgen reads the
# runtime one to open turns).
new_tokens() {
    local admin runtime
    admin=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    runtime=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    export EGRESSGATE_ADMIN_TOKEN="bench-admin-$admin"
    export EGRESSGATE_RUNTIME_TOKEN="bench-runtime-$runtime"
}

# Starts the loopback origin (more `loadgen origin` flags in "$@"), logging to
# $WORK/origin.log; sets ORIGIN_PID and ORIGIN (its address).
start_origin() {
    "$LOADGEN" origin --listen 127.0.0.1:0 "$@" 2>"$WORK/origin.log" &
    ORIGIN_PID=$!
    PIDS+=("$ORIGIN_PID")
    ORIGIN=$(wait_addr "$WORK/origin.log" "origin listening" "$ORIGIN_PID")
}

# Starts the run's origin on loopback: plain HTTP, and TLS 1.3 whose certificate also names
# every host below inspect.$HOST (the inspected row's hosts: egressgate inspects them and
# verifies the origin's certificate for each); sets ORIGIN, ORIGIN_PORT, TLS_ORIGIN, TLS_PORT.
start_bench_origin() {
    start_origin --tls-listen 127.0.0.1:0 --tls-name "$HOST" --tls-name "*.inspect.$HOST" \
        --cert-out "$WORK/origin-cert.der" --cert-pem-out "$WORK/origin-cert.pem"
    ORIGIN_PORT=${ORIGIN##*:}
    TLS_ORIGIN=$(wait_addr "$WORK/origin.log" "origin tls listening" "$ORIGIN_PID")
    TLS_PORT=${TLS_ORIGIN##*:}
}

# Starts `egressgate serve` with both listeners on a free loopback port and "$@" added,
# appending its log to LOG; sets EG_PID, EG_PROXY and EG_CONTROL. Logging as EG_LOG_FILTER
# says; no log filter or database URL from the caller's environment.
start_egressgate() {
    local log=$1
    shift
    start_egressgate_as serve "$log" "$@"
}

# Starts `egressgate CMD` (serve, proxy or control) with its listeners on free loopback ports
# and "$@" added, appending its log to LOG; sets EG_PID, and EG_PROXY and EG_CONTROL as the
# command has them. As start_egressgate otherwise.
start_egressgate_as() {
    local cmd=$1 log=$2 skip
    shift 2
    touch "$log"
    skip=$(wc -l <"$log")
    local logenv=(-u EGRESSGATE_LOG) listen=()
    [ -n "$EG_LOG_FILTER" ] && logenv=("EGRESSGATE_LOG=$EG_LOG_FILTER")
    [ "$cmd" != control ] && listen+=(--proxy-listen 127.0.0.1:0)
    [ "$cmd" != proxy ] && listen+=(--control-listen 127.0.0.1:0)
    env -u DATABASE_URL -u EGRESSGATE_DATABASE_URL "${logenv[@]}" \
        "$EGRESSGATE" "$cmd" "${listen[@]}" "$@" 2>>"$log" >/dev/null &
    EG_PID=$!
    PIDS+=("$EG_PID")
    if [ "$cmd" != control ]; then
        EG_PROXY=$(wait_addr "$log" "proxy listening" "$EG_PID" "$skip")
    fi
    if [ "$cmd" != proxy ]; then
        EG_CONTROL=$(wait_addr "$log" "control plane listening" "$EG_PID" "$skip")
    fi
}

# Starts a throwaway PostgreSQL cluster in $WORK/pg (as the postgres user when root; fsync off:
# nothing in it outlives the run) on a free loopback port, stopped on exit; sets PG_URL and
# PG_PID (the postmaster). Returns 1, starting nothing, when no initdb is installed.
start_pg() {
    local pg_bin='' d port
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && pg_bin="$d"; done
    [ -n "$pg_bin" ] || return 1
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    mkdir -p "$WORK/pg" && chown postgres "$WORK/pg"
    port=$("$LOADGEN" free-ports 1)
    as_pg "'$pg_bin/initdb' -D '$WORK/pg/data' -A trust -U postgres --no-sync >'$WORK/pg/initdb.log'"
    as_pg "'$pg_bin/pg_ctl' -D '$WORK/pg/data' -l '$WORK/pg/server.log' -w -o \"-p $port -k '$WORK/pg' -c listen_addresses=127.0.0.1 -c fsync=off\" start >/dev/null"
    EXIT_HOOKS+=("as_pg \"'$pg_bin/pg_ctl' -D '$WORK/pg/data' -m immediate stop\" >/dev/null 2>&1")
    PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
    PG_PID=$(head -1 "$WORK/pg/data/postmaster.pid")
    log "throwaway PostgreSQL on 127.0.0.1:$port (pid $PG_PID)"
}

# Runs a shell command line as the postgres user (as the caller when not root).
as_pg() { if [ "$(id -u)" = 0 ]; then su -s /bin/sh postgres -c "$*"; else sh -c "$*"; fi; }
