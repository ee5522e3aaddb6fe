#!/usr/bin/env bash
# Many pods on one table: BENCH_WRITERS millpond-writers on one Postgres
# catalog (scripts/services.sh's, which must be running; a new database),
# each sent BENCH_RATE flushes of BENCH_ROWS rows per second for its own
# partition for BENCH_SECONDS, as that many ingest processes would
# (scripts/bench_flushes.py). Prints one JSON line per writer count:
# commits per second (against those offered), p50/p99/max commit latency
# (send to ack), how late sends fell behind the schedule (commits queueing),
# the writers' errors by type and retries per commit, and CPU split between
# the writers and Postgres, per commit; then the catalog connections held and
# the catalog's transactions committed and rolled back (DuckLake rolls back
# every commit attempt that met another commit). Exits non-zero when a writer failed
# (exhausted retries end a writer).
#
#   scripts/bench-many-writers.sh                          # 8, 16 and 32 writers, 10 minutes each
#   BENCH_WRITERS="4" BENCH_SECONDS=60 scripts/bench-many-writers.sh
#
# BENCH_WRITERS ("8 16 32"), BENCH_RATE (1), BENCH_SECONDS (600),
# BENCH_ROWS (100). Data files are local, so the figures are the catalog's.
# Ranges carry their last record as ingest's do (BENCH_LAST_RECORDS=0: without).
# WRITER_BIN: another writer binary.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
eval "$(bash scripts/services.sh env)"
bench_writer_bin=${WRITER_BIN:-$CARGO_TARGET_DIR/release/millpond-writer}
[ -n "${WRITER_BIN:-}" ] || cargo build --release -p millpond-writer --bins >&2
db=millpond_bench_many_writers
# A writer holds two catalog connections (the lake's, the commit lock's; three for a
# moment at startup); the run needs room for the largest count, or writers are refused
# connections and exit.
most=0
for n in ${BENCH_WRITERS:-8 16 32}; do [ "$n" -gt "$most" ] && most=$n; done
slots=$(psql -X -At "$MILLPOND_TEST_PG_DSN" -c "SHOW max_connections")
if [ "$slots" -lt $((most * 3 + 10)) ]; then
    echo "bench-many-writers: Postgres max_connections is $slots; $most writers need at least $((most * 3 + 10))." >&2
    echo "  as postgres: psql -c 'ALTER SYSTEM SET max_connections = $((most * 4 + 20))', then restart the cluster (pg_ctlcluster <version> <name> restart)" >&2
    exit 2
fi
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
for n in ${BENCH_WRITERS:-8 16 32}; do
    dir=$MILLPOND_STATE/bench-many-writers/$n
    rm -rf "$dir" && mkdir -p "$dir/data"
    bench_pg_database "$db"
    settings="DUCKLAKE_RDS_HOST=$PGHOST DUCKLAKE_RDS_PORT=$PGPORT DUCKLAKE_RDS_DATABASE=$db"
    settings+=" DUCKLAKE_RDS_USERNAME=$PGUSER DUCKLAKE_RDS_PASSWORD=$PGPASSWORD DUCKLAKE_DATA_PATH=$dir/data/"
    addrs=() wpids=() urls=()
    for i in $(seq 0 $((n - 1))); do
        bench_start_writer "$i" "$settings" "$dir/writer-$i.log"
        pids+=("$bench_writer_pid") wpids+=("$bench_writer_pid")
        addrs+=("$bench_writer_addr") urls+=("$bench_writer_metrics")
    done
    IFS=,
    "$MILLPOND_PYTHON" scripts/bench_flushes.py many "${addrs[*]}" "${wpids[*]}" \
        "${BENCH_RATE:-1}" "${BENCH_SECONDS:-600}" "${BENCH_ROWS:-100}" "${urls[*]}"
    unset IFS
    echo "# $n writers hold $(psql -X -At -d "$MILLPOND_TEST_PG_DB" -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'") catalog connections"
    # DuckLake rolls back each commit attempt that met another commit and retries it.
    echo "# $n writers: catalog transactions $(psql -X -At -d "$MILLPOND_TEST_PG_DB" -c "SELECT xact_commit || ' committed, ' || xact_rollback || ' rolled back' FROM pg_stat_database WHERE datname = '$db'")"
    for p in "${wpids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait "${wpids[@]}" 2>/dev/null || true
    pids=()
done
