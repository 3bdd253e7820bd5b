# Shared by bench/run.sh and bench/scale.sh (sourced, not run): logging, stopping every process
# in PIDS on exit (and removing WORK unless KEEP_WORKDIR=1 or the run failed), and waiting for
# a process to log its address or to listen.
# shellcheck shell=bash

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
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
    if [ "${KEEP_WORKDIR:-0}" = 1 ] || [ "$rc" != 0 ]; then
        log "configs and logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until FILE has a line containing PATTERN and prints the value after "addr=".
wait_addr() {
    local file=$1 pattern=$2 pid=$3
    for _ in $(seq 300); do
        local line
        line=$(grep -m1 -a "$pattern" "$file" 2>/dev/null || true)
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


# Builds egressgate (release, into CARGO_TARGET_DIR or the repository's target/) and the load
# generator (its own cargo project, into /var/tmp/egressgate-bench-target); sets EGRESSGATE
# and LOADGEN. EGRESSGATE=path in the environment skips the egressgate build.
build_all() {
    if [ -z "${EGRESSGATE:-}" ]; then
        log "building egressgate (release)"
        (cd "$ROOT" && cargo build --release --quiet --workspace --bin egressgate) \
            || die "egressgate release build failed"
        EGRESSGATE="${CARGO_TARGET_DIR:-$ROOT/target}/release/egressgate"
    fi
    [ -x "$EGRESSGATE" ] || die "no egressgate binary at $EGRESSGATE"
    log "building the load generator (release)"
    CARGO_TARGET_DIR=/var/tmp/egressgate-bench-target cargo build --release --quiet \
        --manifest-path "$ROOT/bench/loadgen/Cargo.toml" || die "loadgen build failed"
    LOADGEN=/var/tmp/egressgate-bench-target/release/loadgen
}
