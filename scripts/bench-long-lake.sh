#!/usr/bin/env bash
# A long-lived lake: does a flush cost the same after BENCH_FLUSHES flushes
# as at the first? One millpond-writer is sent small flushes back to back
# over Flight (scripts/bench_flushes.py, as ingest sends them: each its own
# offsets, for one partition), and every BENCH_WINDOW flushes prints one
# JSON line: wall and p99 per flush, the writer's CPU-ms per flush (and
# Postgres' own), and what the catalog then holds (snapshots, data files,
# their column stats, inlined rows, its size). The last line compares the
# last window with the first (goal: within 20 %).
#
#   scripts/bench-long-lake.sh                                  # SQLite catalog
#   BENCH_CATALOG=postgres scripts/bench-long-lake.sh           # needs scripts/services.sh start
#   BENCH_MAINTAIN=1 scripts/bench-long-lake.sh                 # with millpond-lake maintain
#
# BENCH_FLUSHES (20000), BENCH_ROWS (100 per flush), BENCH_WINDOW (1000),
# BENCH_PAUSE_MS (0; a pause after each flush, left out of wall_ms),
# BENCH_LAST_RECORDS (1: ranges carry their last record as ingest's do; the
# docs/benchmarks.md's curves before its last row ran without it, BENCH_LAST_RECORDS=0).
# BENCH_MAINTAIN=1 runs `millpond-lake maintain --yes` with
# --expire-older-than BENCH_EXPIRE_OLDER_THAN (5m) and --cleanup-older-than
# 1m: the Helm CronJob's chain, its ages scaled down so the run reaches the
# steady state a lake reaches after a week. It runs between flushes, every
# BENCH_MAINTAIN_EVERY (4000, about 5 minutes of this run), its time left
# out of wall_ms: flushes sent back to back commit 14 times a second, and
# maintain's large commits (compacting thousands of files) lose every race
# to them, on SQLite ("database is locked") and on Postgres alike, where
# production intervals leave them gaps (docs/operating/maintenance.md).
# BENCH_MAINTAIN_MODE=meanwhile runs it beside the flushes instead, every
# BENCH_MAINTAIN_EVERY_S (300).
# Data files are local either way, so the figures are the catalog's.
# WRITER_BIN / LAKE_BIN: other binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
catalog=${BENCH_CATALOG:-sqlite}
maintain=${BENCH_MAINTAIN:-0}
bench_writer_bin=${WRITER_BIN:-$CARGO_TARGET_DIR/release/millpond-writer}
lake_bin=${LAKE_BIN:-$CARGO_TARGET_DIR/release/millpond-lake}
[ -n "${WRITER_BIN:-}" ] || cargo build --release -p millpond-writer -p millpond-lake --bins >&2
dir=$MILLPOND_STATE/bench-long-lake-$catalog-maintain$maintain
rm -rf "$dir" && mkdir -p "$dir/data"
case $catalog in
sqlite)
    settings="MILLPOND_LAKE_DIR=$dir/data"
    where=sqlite:$dir/data/catalog.sqlite
    ;;
postgres)
    eval "$(bash scripts/services.sh env)"
    db=millpond_bench_long_lake_maintain$maintain
    bench_pg_database "$db"
    settings="DUCKLAKE_RDS_HOST=$PGHOST DUCKLAKE_RDS_PORT=$PGPORT DUCKLAKE_RDS_DATABASE=$db"
    settings+=" DUCKLAKE_RDS_USERNAME=$PGUSER DUCKLAKE_RDS_PASSWORD=$PGPASSWORD DUCKLAKE_DATA_PATH=$dir/data/"
    where=postgres:$db
    ;;
*) millpond_die "BENCH_CATALOG must be sqlite or postgres (got $catalog)" ;;
esac
pids=()
# A maintain run still going when the flushes end is stopped with its loop.
# The parent first, so a loop cannot start another child meanwhile.
kill_tree() {
    local children
    children=$(pgrep -P "$1" || true)
    kill "$1" 2>/dev/null || true
    for child in $children; do kill_tree "$child"; done
}
trap 'for p in ${pids[@]+"${pids[@]}"}; do kill_tree "$p"; done; wait' EXIT
bench_start_writer 0 "$settings" "$dir/writer.log"
pids+=("$bench_writer_pid")
# shellcheck disable=SC2086 # $settings is a list of NAME=value words
printf -v maintain_cmd '%q ' env $settings DUCKLAKE_TABLE="${BENCH_TABLE:-events}" "$lake_bin" maintain --yes \
    --expire-older-than "${BENCH_EXPIRE_OLDER_THAN:-5m}" --cleanup-older-than 1m
maintain_cmd+=">>$(printf '%q' "$dir/maintain.log") 2>&1"
mode=${BENCH_MAINTAIN_MODE:-between}
if [ "$maintain" = 1 ] && [ "$mode" = meanwhile ]; then
    (
        while sleep "${BENCH_MAINTAIN_EVERY_S:-300}"; do
            bash -c "$maintain_cmd" || echo "maintain failed: see $dir/maintain.log" >&2
        done
    ) &
    pids+=($!)
elif [ "$maintain" = 1 ]; then
    export MAINTAIN_CMD=$maintain_cmd MAINTAIN_EVERY=${BENCH_MAINTAIN_EVERY:-4000}
fi
echo "# $(nproc) cores, $catalog catalog, maintain=$maintain ($mode), ${BENCH_FLUSHES:-20000} flushes of ${BENCH_ROWS:-100} rows, last records ${BENCH_LAST_RECORDS:-1}"
"$MILLPOND_PYTHON" scripts/bench_flushes.py long "$bench_writer_addr" "$bench_writer_pid" \
    "${BENCH_FLUSHES:-20000}" "${BENCH_ROWS:-100}" "${BENCH_WINDOW:-1000}" "$where" "${BENCH_PAUSE_MS:-0}"
if [ "$maintain" = 1 ]; then
    echo "# maintain runs: $(grep -c '^maintain: after' "$dir/maintain.log" || true), last: $(grep '^maintain: after' "$dir/maintain.log" | tail -1)"
fi
