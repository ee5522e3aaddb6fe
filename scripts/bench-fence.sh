#!/usr/bin/env bash
# What the partition fence costs: N writers (default 4) on one Postgres
# catalog, each writing its own partitions, flushes pushed concurrently over
# Flight; prints rows/s and the mean flush time after the first five.
# BENCH_FENCE=false runs the same writers without DUCKLAKE_PARTITION_FENCE;
# WRITER_BIN compares another writer binary. Needs scripts/services.sh start.
#
# BENCH_WRITERS (4), BENCH_FLUSHES (10 per writer), BENCH_ROWS (20000 per
# flush), BENCH_PARTITIONS (16 per writer, all in every flush).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
eval "$(bash scripts/services.sh env)"
writers=${BENCH_WRITERS:-4}
bin=${WRITER_BIN:-$CARGO_TARGET_DIR/release/millpond-writer}
[ -n "${WRITER_BIN:-}" ] || cargo build --release -p millpond-writer --bins >&2
dir=$MILLPOND_STATE/bench-fence
db=millpond_bench_fence
rm -rf "$dir" && mkdir -p "$dir/data"
psql() { PGPASSWORD=$MILLPOND_TEST_PG_PASSWORD command psql -X -q -h "$MILLPOND_TEST_PG_HOST" -p "$MILLPOND_TEST_PG_PORT" -U "$MILLPOND_TEST_PG_USER" -d "$MILLPOND_TEST_PG_DB" -c "$1"; }
psql "DROP DATABASE IF EXISTS $db WITH (FORCE)" && psql "CREATE DATABASE $db"
pids=()
# Wait for the writers to exit, so a next run can take the same ports.
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
addrs=()
for i in $(seq 0 $((writers - 1))); do
    port=$((50300 + i)); http=$((8300 + i))
    DUCKLAKE_PARTITION_FENCE=${BENCH_FENCE:-true} DUCKLAKE_TABLE=events DUCKLAKE_RDS_HOST=$MILLPOND_TEST_PG_HOST DUCKLAKE_RDS_PORT=$MILLPOND_TEST_PG_PORT \
        DUCKLAKE_RDS_DATABASE=$db DUCKLAKE_RDS_USERNAME=$MILLPOND_TEST_PG_USER \
        DUCKLAKE_RDS_PASSWORD=$MILLPOND_TEST_PG_PASSWORD DUCKLAKE_DATA_PATH=$dir/data/ \
        POD_NAME=millpond-$i MILLPOND_WRITER_ADDR=127.0.0.1:$port MILLPOND_WRITER_HTTP_PORT=$http MILLPOND_LOG_FORMAT=text \
        "$bin" >"$dir/writer-$i.log" 2>&1 &
    pids+=($!)
    addrs+=("127.0.0.1:$port")
    ready=
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$http/readyz" >/dev/null && { ready=1; break; }; sleep 0.1; done
    [ -n "$ready" ] || millpond_die "writer $i not ready: $(tail -5 "$dir/writer-$i.log")"
done
IFS=,
"$MILLPOND_PYTHON" scripts/bench_fence.py "${addrs[*]}" "${BENCH_FLUSHES:-10}" "${BENCH_ROWS:-20000}" "${BENCH_PARTITIONS:-16}"
unset IFS
retries=$(cat "$dir"/writer-*.log | grep -c "write failed; retrying" || true)
echo "write retries across writers: $retries"
grep -h "flush durable" "$dir"/writer-*.log | sed -n 's/.*flush_id=w[0-9]*-f\([0-9]*\).* ms=\([0-9]*\).*/\1 \2/p' |
    awk '$1 >= 5 {s += $2; n++} END {if (n) printf "mean flush after the first five: %.0f ms\n", s / n}' 
