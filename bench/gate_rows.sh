# egressgate's own rows for bench/run.sh (sourced, not run), after the suite: cache-miss
# decisions per second (the run's `serve` on SQLite, then two `proxy` processes and a
# `control` on one PostgreSQL), inspected TLS against opaque with the cost of minting a leaf,
# and transparent capture against a proxy-aware client (bench/capture.sh). Each row appends
# its markdown section to $WORK/rows.md; a row that fails sets ROWS_RC=1.
# Needs from run.sh: LOADGEN, EGRESSGATE, WORK, HOST, ORIGIN_PORT, TLS_ORIGIN, EG_PROXY,
# EG_CONTROL, EG_PID, DURATION, REPS, CONNS.
# shellcheck shell=bash

ROWS=${ROWS-miss,inspected,capture}
MISS_PG_URL=${MISS_PG_URL:-}
MINT_NAMES=${MINT_NAMES:-300}
CAPTURE_N=${CAPTURE_N:-2000}
ROWS_RC=0

# Whether ROWS names $1.
row_wanted() { [[ ",$ROWS," == *",$1,"* ]]; }

# The egressgate flags the inspected row needs on the run's `serve`: the hosts below
# inspect.$HOST inspected and answered from --resolve (i.…, and m0.… to m{MINT_NAMES-1}.…
# for the mint series), the origin's certificate trusted upstream.
inspect_flags() {
    row_wanted inspected || return 0
    local i
    printf '%s\n' --inspect "*.inspect.$HOST" --upstream-ca "$WORK/origin-cert.pem" \
        --resolve "i.inspect.$HOST=127.0.0.1"
    for ((i = 0; i < MINT_NAMES; i++)); do
        printf '%s\n' --resolve "m$i.inspect.$HOST=127.0.0.1"
    done
}

# Starts the run's `egressgate serve` (log LOG, data in DATA) as every comparison measures it:
# the benchmark host answered from --resolve, loopback dialable on the origin's two ports, a
# connection cap above the idle tunnels, and the inspected row's hosts; sets EG_* as
# start_egressgate does.
start_bench_gate() {
    local log=$1 data=$2 flags
    mapfile -t flags < <(inspect_flags)
    start_egressgate "$log" --data-dir "$data" \
        --resolve "$HOST=127.0.0.1" --allow-cidr 127.0.0.0/8 \
        --allow-port "$ORIGIN_PORT" --allow-port "$TLS_PORT" --max-connections 20000 \
        "${flags[@]}"
}

# Runs `loadgen NAME …`, appending what it prints to rows.md; a failure is noted, not fatal
# (the other rows still run; run.sh exits non-zero at the end).
row() {
    local name=$1
    shift
    log "row: $name"
    "$LOADGEN" "$@" >>"$WORK/rows.md" 2>>"$WORK/rows.log" || {
        log "row $name failed (exit $?); see $WORK/rows.log"
        ROWS_RC=1
    }
}

# Cache-miss decisions on the run's `serve` (SQLite in the process).
row_miss_sqlite() {
    row miss miss --proxy "$EG_PROXY,$EG_PID" --control "$EG_CONTROL" --db-in-proxy \
        --port "$ORIGIN_PORT" --setup "one process (\`serve\`), SQLite" --label sq \
        --conns "$CONNS" --duration "$DURATION" --reps "$REPS" --with-head
}

# Cache-miss decisions on two `proxy` processes and a `control` sharing one PostgreSQL:
# MISS_PG_URL, or a throwaway cluster (MISS_PG=0 skips the row).
row_miss_pg() {
    local url=$MISS_PG_URL db=() a b
    # start_egressgate_as sets EG_*: the run's `serve` gets them back at the end.
    local serve=("$EG_PID" "$EG_PROXY" "$EG_CONTROL")
    if [ -z "$url" ]; then
        [ "${MISS_PG:-1}" = 1 ] || return 0
        start_pg || {
            log "no PostgreSQL (initdb not found): the two-proxy cache-miss row is skipped"
            printf '\n(No PostgreSQL on this machine: the two-proxy row was not run.)\n' >>"$WORK/rows.md"
            return 0
        }
        url=$PG_URL
        db=(--db-pid "$PG_PID")
    fi
    # The seal key lets the proxies keep the deployment CA on PostgreSQL (else each logs that
    # inspection is off); nothing here is inspected.
    local common=(--database-url "$url" --resolve "$HOST=127.0.0.1" --allow-cidr 127.0.0.0/8
        --allow-port "$ORIGIN_PORT" --max-connections 20000)
    local seal
    seal=$(head -c 32 /dev/urandom | base64)
    EGRESSGATE_CA_SEAL_KEY=$seal start_egressgate_as proxy "$WORK/pg-proxy-a.log" "${common[@]}"
    a="$EG_PROXY,$EG_PID"
    EGRESSGATE_CA_SEAL_KEY=$seal start_egressgate_as proxy "$WORK/pg-proxy-b.log" "${common[@]}"
    b="$EG_PROXY,$EG_PID"
    EGRESSGATE_CA_SEAL_KEY=$seal start_egressgate_as control "$WORK/pg-control.log" \
        "${common[@]}" --proxy-public-url "${a%,*}"
    row miss miss --proxy "$a" --proxy "$b" --control "$EG_CONTROL" "${db[@]}" \
        --port "$ORIGIN_PORT" --setup "two \`proxy\` processes + \`control\`, PostgreSQL" \
        --label pg --conns "$CONNS" --duration "$DURATION" --reps "$REPS"
    # Stopped now, so they cost nothing during the next rows.
    kill -TERM "${a#*,}" "${b#*,}" "$EG_PID" 2>/dev/null || true
    EG_PID=${serve[0]} EG_PROXY=${serve[1]} EG_CONTROL=${serve[2]}
}

# Inspected TLS against opaque, and minting (the client trusts the deployment CA, fetched
# from the control plane, for the inspected hosts).
row_inspected() {
    curl -sSf "http://$EG_CONTROL/v1/ca.pem" | openssl x509 -outform der >"$WORK/deployment-ca.der" || {
        log "cannot fetch the deployment CA"
        ROWS_RC=1
        return 0
    }
    row inspected inspected --proxy "$EG_PROXY,$EG_PID" --control "$EG_CONTROL" \
        --tls-origin "$TLS_ORIGIN" --tls-cert "$WORK/origin-cert.der" \
        --ca "$WORK/deployment-ca.der" --host "$HOST" --suffix "inspect.$HOST" \
        --mint-names "$MINT_NAMES" --conns "$CONNS" --duration "$DURATION" --reps "$REPS"
}

# Transparent capture against a proxy-aware client: bench/capture.sh with this run's binaries
# (its own origin and egressgate, as it needs a sandbox), its table appended.
row_capture() {
    log "row: capture"
    if LOADGEN_TARGET=$LOADGEN_TARGET EGRESSGATE=$EGRESSGATE N=$CAPTURE_N \
        CAPTURE_OUT="$WORK/capture.md" bash "$BENCH/capture.sh" >>"$WORK/rows.log" 2>&1; then
        printf '\n## Transparent capture (egressgate)\n\n' >>"$WORK/rows.md"
        tail -n +3 "$WORK/capture.md" >>"$WORK/rows.md"
    else
        log "row capture failed; see $WORK/rows.log"
        ROWS_RC=1
    fi
}

# Every row ROWS names, in order.
gate_rows() {
    : >"$WORK/rows.md"
    if row_wanted miss; then
        row_miss_sqlite
        row_miss_pg
    fi
    if row_wanted inspected; then row_inspected; fi
    if row_wanted capture; then row_capture; fi
}
