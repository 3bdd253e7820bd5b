#!/usr/bin/env bash
# Cost flat as the data grows: `bash bench/scale.sh` (root; PostgreSQL too when initdb is
# installed or SCALE_PG_URL names a throwaway database).
#
# For each backend: egressgate `serve` on an empty database, `loadgen scale` times the
# cache-miss decision (a host first seen in a turn, refused and recorded, through the real
# proxy) and the approval tool's merge (the real control API); then egressgate stops, the
# database gets 100,000 turns, 1,000,000 refusal rows and 100,000 approval rows (plain SQL,
# live timestamps), egressgate starts on it again and the same is timed. Then the janitor:
# HOURS hours of past traffic (TURNS_PER_HOUR turns an hour, 10 refusals and one egress row
# each) are written with their real timestamps, egressgate starts with
# --interrupt-retention RETENTION, and the database is measured before and after its first
# janitor pass. Writes bench/results/scale.md.
#
# Knobs: SAMPLES (400), TURNS (100000), REFUSALS (1000000), APPROVALS (100000),
# HOURS (48), TURNS_PER_HOUR (2000), RETENTION (24h), SCALE_PG_URL, SCALE_PG=0 skips PostgreSQL.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SAMPLES=${SAMPLES:-400}
TURNS=${TURNS:-100000}
REFUSALS=${REFUSALS:-1000000}
APPROVALS=${APPROVALS:-100000}
HOURS=${HOURS:-48}
TURNS_PER_HOUR=${TURNS_PER_HOUR:-2000}
RETENTION=${RETENTION:-24h}
make_work scale
build_all
new_tokens

# --- PostgreSQL: a throwaway cluster, as .ci/run starts one ----------------------------------
PG_URL=${SCALE_PG_URL:-}
if [ -z "$PG_URL" ] && [ "${SCALE_PG:-1}" = 1 ]; then
    start_pg || log "no PostgreSQL (initdb not found): SQLite only"
fi

# --- egressgate on a backend -----------------------------------------------------------------
EG_PID=
start_eg() { # backend (sqlite|postgres), extra args...
    local backend=$1
    shift
    local db=(--data-dir "$WORK/data-$backend")
    [ "$backend" = postgres ] && db+=(--database-url "$PG_URL")
    # Every start appends to the backend's one log.
    start_egressgate "$WORK/egressgate-$backend.log" "${db[@]}" "$@"
}
stop_eg() {
    kill -TERM "$EG_PID" 2>/dev/null || true
    wait "$EG_PID" 2>/dev/null || true
}

# --- SQL -------------------------------------------------------------------------------------
sql() { # backend, text on stdin
    if [ "$1" = sqlite ]; then
        sqlite3 -bail "$WORK/data-sqlite/egressgate.db"
    else
        psql -q -v ON_ERROR_STOP=1 "$PG_URL" >/dev/null
    fi
}
# A series 0..N-1 as a FROM clause, per dialect.
series() { # backend, N
    if [ "$1" = sqlite ]; then
        echo "(WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $2 - 1) SELECT i FROM n) s"
    else
        echo "generate_series(0::bigint, $2 - 1) AS s(i)"
    fi
}
rand_hex() { if [ "$1" = sqlite ]; then echo "hex(randomblob(32))"; else echo "md5(random()::text)"; fi; }

# The loaded data: TURNS turns over TURNS/10 chats of 1,000 users, REFUSALS refusals spread
# evenly over the turns (hosts from a pool of 5,000, distinct within a turn for up to 10 per
# turn), APPROVALS site approvals spread over the
# chats. Every row is live (nothing the janitor may delete).
load_rows() { # backend
    local b=$1 now chats
    now=$(date +%s%3N)
    chats=$((TURNS / 10))
    sql "$b" <<SQL
BEGIN;
INSERT INTO chats (user_id, chat_id, turn_seq, created_at)
  SELECT 'load-u' || (i % 1000), 'load-c' || i, 10, $now FROM $(series "$b" "$chats");
INSERT INTO turns (turn_id, user_id, chat_id, seq, secret_hash, can_ask_human, sites, packages,
                   created_at, expires_at, refusal_overflow)
  SELECT 'load-t' || i, 'load-u' || ((i / 10) % 1000), 'load-c' || (i / 10), i % 10 + 1,
         $(rand_hex "$b"), 1, '[]', '[]', $now - 1800000, $now + 1800000, 0
  FROM $(series "$b" "$TURNS");
INSERT INTO refusals (turn_id, host, port, reason, url, count, first_seen, last_seen)
  SELECT 'load-t' || (i % $TURNS), 'h' || (((i % $TURNS) + (i / $TURNS) * 501) % 5000) || '.load.example', 443, 'not_approved',
         NULL, 1, $now - 1800000 + (i % 1000), $now - 1800000 + (i % 1000)
  FROM $(series "$b" "$REFUSALS");
INSERT INTO approvals (user_id, chat_id, kind, value, card_id, created_at, expires_at)
  SELECT 'load-u' || ((i % $chats) % 1000), 'load-c' || (i % $chats), 'site',
         'a' || i || '.load.example', 'load-card-' || (i % $chats), $now, $now + 86400000
  FROM $(series "$b" "$APPROVALS");
COMMIT;
SQL
}

# HOURS hours of past traffic: TURNS_PER_HOUR turns per hour, each 1 h long, 10 refusals and
# one egress row per turn, at the times they would have been written.
load_history() { # backend
    local b=$1 now n
    now=$(date +%s%3N)
    n=$((HOURS * TURNS_PER_HOUR))
    local at="($now - ($HOURS * 3600000) + (i * 3600000 / $TURNS_PER_HOUR))"
    sql "$b" <<SQL
BEGIN;
INSERT INTO turns (turn_id, user_id, chat_id, seq, secret_hash, can_ask_human, sites, packages,
                   created_at, expires_at, refusal_overflow)
  SELECT 'hist-t' || i, 'hist-u' || (i % 1000), 'hist-c' || (i % 1000), i + 1,
         $(rand_hex "$b"), 1, '[]', '[]', $at, $at + 3600000, 0
  FROM $(series "$b" "$n");
INSERT INTO refusals (turn_id, host, port, reason, url, count, first_seen, last_seen)
  SELECT t.turn_id, 'h' || k.i || '.hist.example', 443, 'not_approved', NULL, 1,
         t.created_at, t.created_at
  FROM turns t CROSS JOIN $(series "$b" 10 | sed 's/ s$/ k/; s/AS s(i)/AS k(i)/') WHERE t.turn_id LIKE 'hist-t%';
INSERT INTO egress (turn_id, host, connections, bytes_up, bytes_down, first_seen, last_seen)
  SELECT turn_id, 'files.hist.example', 3, 1000, 1000000, created_at, created_at
  FROM turns WHERE turn_id LIKE 'hist-t%';
COMMIT;
SQL
}

counts() { # backend → "turns refusals egress bytes"
    local b=$1 q="SELECT (SELECT COUNT(*) FROM turns) || ' ' || (SELECT COUNT(*) FROM refusals) || ' ' || (SELECT COUNT(*) FROM egress)"
    if [ "$b" = sqlite ]; then
        local rows pages
        rows=$(sqlite3 "$WORK/data-sqlite/egressgate.db" "$q;")
        # Pages in use (the file keeps freed pages for reuse; VACUUM would hand them back).
        pages=$(sqlite3 "$WORK/data-sqlite/egressgate.db" "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size();")
        echo "$rows $pages"
    else
        echo "$(psql -qtA "$PG_URL" -c "$q") $(psql -qtA "$PG_URL" -c "SELECT pg_database_size(current_database())")"
    fi
}

measure() { # backend label → the loadgen line
    "$LOADGEN" scale --proxy "$EG_PROXY" --control "$EG_CONTROL" --port 80 \
        --samples "$SAMPLES" --label "$2-$1" || die "loadgen scale failed on $1 ($2)"
}

field() { sed -e "s/.*$2=\([0-9]*\).*/\1/" <<<"$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# The janitor runs once at start (then every minute): wait for its log line.
wait_janitor() { # backend
    for _ in $(seq 600); do
        grep -q -a "janitor turn purge" "$WORK/egressgate-$1.log" && return 0
        sleep 0.1
    done
    die "no janitor pass logged"
}

BACKENDS=(sqlite)
[ -n "$PG_URL" ] && BACKENDS+=(postgres)
mkdir -p "$RESULTS"
OUT="$RESULTS/scale.md"
{
    printf '# Cost as the data grows\n\n'
    printf 'Run %s with `bash bench/scale.sh` (SAMPLES=%s) on %s cores, load average at start %s; egressgate %s. Each sample: a fresh turn in a fresh chat, then (decision) a GET through the proxy for a host the turn never named, on an open connection, answered 403 and recorded; (merge) `POST /v1/turns/{id}/approval-requests`, answered `ask`, over a new connection. Samples run one after another; %s untimed warm-up samples first.\n\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$SAMPLES" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$(eg_rev)" 40
    printf '| backend | database | decision p50 / p99 (µs) | merge p50 / p99 (µs) | loaded/empty p50, p99 (decision; merge) |\n|---|---|---:|---:|---|\n'
} >"$OUT"

for b in "${BACKENDS[@]}"; do
    log "$b: empty database"
    start_eg "$b"
    empty=$(measure "$b" empty)
    stop_eg
    log "$b: loading $TURNS turns, $REFUSALS refusals, $APPROVALS approvals"
    t0=$(date +%s)
    load_rows "$b"
    log "$b: loaded in $(( $(date +%s) - t0 )) s: $(counts "$b")"
    start_eg "$b"
    loaded=$(measure "$b" loaded)
    stop_eg
    r() { awk -v a="$(field "$loaded" "$1")" -v b="$(field "$empty" "$1")" 'BEGIN { printf "%.2f×", a / b }'; }
    {
        printf '| %s | empty | %s / %s | %s / %s | |\n' "$b" \
            "$(field "$empty" decision_p50_us)" "$(field "$empty" decision_p99_us)" \
            "$(field "$empty" merge_p50_us)" "$(field "$empty" merge_p99_us)"
        printf '| %s | %s turns, %s refusals, %s approvals | %s / %s | %s / %s | %s, %s; %s, %s |\n' "$b" \
            "$TURNS" "$REFUSALS" "$APPROVALS" \
            "$(field "$loaded" decision_p50_us)" "$(field "$loaded" decision_p99_us)" \
            "$(field "$loaded" merge_p50_us)" "$(field "$loaded" merge_p99_us)" \
            "$(r decision_p50_us)" "$(r decision_p99_us)" "$(r merge_p50_us)" "$(r merge_p99_us)"
    } >>"$OUT"
done

{
    printf '\n## The janitor under a steady stream of turns\n\n'
    printf '%s hours of past traffic, %s turns an hour (each 1 h long, 10 refusal rows and one egress row), written with their real timestamps on top of the loaded database above; egressgate then starts with `--interrupt-retention %s` and its first janitor pass deletes the turns that expired more than the retention ago, with their refusals and egress rows. Size: SQLite pages in use (the file keeps freed pages for reuse), PostgreSQL `pg_database_size` (freed space is reused after autovacuum, not returned).\n\n' \
        "$HOURS" "$TURNS_PER_HOUR" "$RETENTION"
    printf '| backend | | turns | refusals | egress rows | size |\n|---|---|---:|---:|---:|---:|\n'
} >>"$OUT"
for b in "${BACKENDS[@]}"; do
    log "$b: $HOURS hours of traffic"
    load_history "$b"
    read -r t rf e sz <<<"$(counts "$b")"
    printf '| %s | after %s h of traffic, before the janitor | %s | %s | %s | %s |\n' "$b" "$HOURS" "$t" "$rf" "$e" "$(mib "$sz")" >>"$OUT"
    EG_LOG_FILTER="info,egressgate=debug,sqlx=warn,hyper=warn" start_eg "$b" --interrupt-retention "$RETENTION"
    wait_janitor "$b"
    stop_eg
    read -r t rf e sz <<<"$(counts "$b")"
    printf '| %s | after the first janitor pass | %s | %s | %s | %s |\n' "$b" "$t" "$rf" "$e" "$(mib "$sz")" >>"$OUT"
done
cat "$OUT"
