#!/usr/bin/env bash
# The main job on a fresh machine, with nothing but this repo:
#   local Kafka-compatible broker (nisshi) with sample PostHog-like events
#   -> millpond-ingest -> Arrow Flight -> millpond-writer
#   -> embedded DuckLake (local catalog file + data folder)
# then a plain DuckDB query over the lake.
#
# Environment: DEMO_EVENTS (default 50000), DEMO_DIR (default
# $MILLPOND_STATE/demo; wiped at start), DEMO_BROKER (nisshi, the default,
# or mock for librdkafka's mock cluster, which needs no extra install).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

events=${DEMO_EVENTS:-50000}
dir=${DEMO_DIR:-$MILLPOND_STATE/demo}

bash scripts/setup-system.sh
bash scripts/setup-python.sh
bash scripts/setup-extensions.sh
echo "==> building (release; the first build compiles DuckDB and takes ~25 min on 2 cores)" >&2
cargo build --release --workspace --bins
bin=$CARGO_TARGET_DIR/release

rm -rf "$dir" && mkdir -p "$dir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

if [ "${DEMO_BROKER:-nisshi}" = nisshi ]; then
    bash scripts/setup-nisshi.sh
    nisshi=${CARGO_HOME:-$HOME/.cargo}/bin/nisshi
    port=${DEMO_KAFKA_PORT:-19092}
    echo "==> nisshi broker on 127.0.0.1:$port (sqlite storage in $dir/broker)" >&2
    mkdir -p "$dir/broker"
    (cd "$dir/broker" && exec "$nisshi" broker --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine sqlite://kafka.db) >"$dir/broker.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 300); do "$nisshi" topic list --broker "tcp://127.0.0.1:$port" >/dev/null 2>&1 && break; sleep 0.2; done
    "$nisshi" topic create --broker "tcp://127.0.0.1:$port" --partitions 4 events >/dev/null
    bootstrap=127.0.0.1:$port
    echo "==> producing $events sample events" >&2
    "$bin/millpond-sample-events" --bootstrap "$bootstrap" --topic events --count "$events"
else
    echo "==> mock broker with $events sample events" >&2
    "$bin/millpond-mock-broker" --topic events --partitions 4 --sample-events "$events" >"$dir/broker.out" 2>"$dir/broker.log" &
    pids+=($!)
    for _ in $(seq 600); do grep -q BOOTSTRAP= "$dir/broker.out" 2>/dev/null && break; sleep 0.1; done
    bootstrap=$(sed -n 's/^BOOTSTRAP=//p' "$dir/broker.out")
fi
[ -n "$bootstrap" ] || millpond_die "broker did not start: $(cat "$dir/broker.log")"

export DUCKLAKE_TABLE=events MILLPOND_LAKE_DIR=$dir/lake MILLPOND_LOG_FORMAT=text
export MILLPOND_WRITER_ADDR=127.0.0.1:${DEMO_WRITER_PORT:-50051}
export MILLPOND_WRITER_HTTP_PORT=${DEMO_WRITER_HTTP_PORT:-8001} MILLPOND_HTTP_PORT=${DEMO_HTTP_PORT:-8000}
echo "==> writer (embedded DuckLake in $dir/lake)" >&2
"$bin/millpond-writer" >"$dir/writer.log" 2>&1 &
writer=$!
pids+=("$writer")
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$MILLPOND_WRITER_HTTP_PORT/readyz" >/dev/null && break; sleep 0.1; done

echo "==> ingest (topic events, 1 replica)" >&2
KAFKA_BOOTSTRAP_SERVERS=$bootstrap KAFKA_TOPIC=events REPLICA_COUNT=1 POD_NAME=millpond-0 \
    FLUSH_INTERVAL_MS=2000 "$bin/millpond-ingest" >"$dir/ingest.log" 2>&1 &
ingest=$!
pids+=("$ingest")
metric() { curl -sf "http://127.0.0.1:$MILLPOND_HTTP_PORT/metrics" | awk -v m="$1" '$1 ~ "^"m"(\\{|$)" {s+=$2} END {print s+0}'; }
start=$SECONDS
until [ "$(metric millpond_last_committed_offset)" -ge "$events" ] 2>/dev/null; do
    kill -0 "$ingest" 2>/dev/null || millpond_die "ingest exited: $(tail -20 "$dir/ingest.log")"
    [ $((SECONDS - start)) -lt 300 ] || millpond_die "timed out; see $dir/*.log"
    sleep 1
done
echo "==> all $events events committed after $((SECONDS - start)) s; stopping (SIGTERM)" >&2
kill -TERM "$ingest"; wait "$ingest"
kill -TERM "$writer"; wait "$writer"

echo "==> querying the lake with plain DuckDB" >&2
"$MILLPOND_PYTHON" - "$dir/lake" "$DUCKDB_EXTENSION_DIR" <<'PY'
import sys, duckdb
lake, ext = sys.argv[1], sys.argv[2]
con = duckdb.connect(config={"extension_directory": ext, "autoinstall_known_extensions": False})
con.execute("LOAD ducklake")
con.execute(f"ATTACH 'ducklake:{lake}/catalog.ducklake' AS lake (DATA_PATH '{lake}/data/', READ_ONLY)")
print(con.sql("SELECT count(*) AS rows, count(DISTINCT uuid) AS distinct_uuids, min(_inserted_at) AS first_insert FROM lake.main.events"))
print(con.sql("SELECT event, count(*) AS n, count(DISTINCT team_id) AS teams FROM lake.main.events GROUP BY 1 ORDER BY 2 DESC"))
print(con.sql("SELECT kafka_partition, max(last_offset) AS last_offset FROM lake.main._millpond_offsets GROUP BY 1 ORDER BY 1"))
PY
echo "demo done: lake in $dir/lake, logs in $dir" >&2
