#!/usr/bin/env bash
# The main job on a fresh machine, with nothing but this repo:
#   a local Kafka-compatible broker with sample PostHog-like events
#   -> millpond-ingest -> Arrow Flight -> millpond-writer
#   -> embedded DuckLake (SQLite catalog file + data folder)
# printing the lake's row count, read live by a separate DuckDB, as it grows.
#
# Environment:
#   DEMO_EVENTS   sample events to produce (default 50000)
#   DEMO_DIR      state folder, wiped at start (default $MILLPOND_STATE/demo)
#   DEMO_BROKER   mock (default): the project's own millpond-mock-broker
#                 (librdkafka's mock cluster, nothing to install); nisshi: a
#                 separate Kafka-compatible broker (one-time ~7 min install)
#   KAFKA_BOOTSTRAP_SERVERS  use this existing broker instead of starting one;
#                 the events go to KAFKA_TOPIC (default events), which must
#                 exist or be auto-created; DEMO_EVENTS=0 produces none
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

events=${DEMO_EVENTS:-50000}
dir=${DEMO_DIR:-$MILLPOND_STATE/demo}
topic=${KAFKA_TOPIC:-events}
t0=$SECONDS

# Where the time goes: each phase's seconds, printed at the end.
times=()
timed() {
    local name=$1 t=$SECONDS
    shift
    "$@"
    times+=("$name $((SECONDS - t)) s")
}
timed setup-system bash scripts/setup-system.sh
timed setup-duckdb bash scripts/setup-duckdb.sh
rm -rf "$dir" && mkdir -p "$dir"
# The Python venv, with only the lake's reader (DuckDB), and DuckDB's
# extensions download while cargo compiles; the demo waits for them after
# the build.
(bash scripts/setup-python.sh --reader && bash scripts/setup-extensions.sh) >"$dir/setup.log" 2>&1 &
setup_pid=$!
# Only the binaries this demo runs, resolved as the whole workspace is
# (`--workspace`), so that scripts/test.sh later finds every crate they
# share already compiled.
if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ] || [ "${DEMO_BROKER:-mock}" = nisshi ]; then
    broker_bin=millpond-sample-events
else
    broker_bin=millpond-mock-broker
fi
echo "==> building (release; a few minutes the first time)" >&2
timed build cargo build --release --workspace --bin millpond-writer --bin millpond-ingest --bin "$broker_bin"
bin=$CARGO_TARGET_DIR/release
t=$SECONDS
wait "$setup_pid" || { cat "$dir/setup.log" >&2; millpond_die "setting up the venv or the extensions failed"; }
times+=("venv and extensions (beside the build) then $((SECONDS - t)) s more")

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    local limit=$1 start=$SECONDS
    shift
    until "$@" >/dev/null 2>&1; do
        [ $((SECONDS - start)) -lt "$limit" ] || return 1
        sleep 0.2
    done
}

tb=$SECONDS
if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
    bootstrap=$KAFKA_BOOTSTRAP_SERVERS
    echo "==> using the broker at $bootstrap, topic $topic" >&2
    if [ "$events" -gt 0 ]; then
        "$bin/millpond-sample-events" --bootstrap "$bootstrap" --topic "$topic" --count "$events"
    fi
elif [ "${DEMO_BROKER:-mock}" = nisshi ]; then
    timed setup-nisshi bash scripts/setup-nisshi.sh
    nisshi=${CARGO_HOME:-$HOME/.cargo}/bin/nisshi
    port=${DEMO_KAFKA_PORT:-19092}
    echo "==> nisshi broker on 127.0.0.1:$port (memory storage: the topic lives as long as the demo)" >&2
    "$nisshi" broker --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://nisshi/ >"$dir/broker.log" 2>&1 &
    pids+=($!)
    wait_for 60 "$nisshi" topic list --broker "tcp://127.0.0.1:$port" ||
        millpond_die "nisshi did not answer within 60 s: $(tail -20 "$dir/broker.log")"
    "$nisshi" topic create --broker "tcp://127.0.0.1:$port" --partitions 4 "$topic" >/dev/null
    bootstrap=127.0.0.1:$port
    echo "==> producing $events sample events" >&2
    "$bin/millpond-sample-events" --bootstrap "$bootstrap" --topic "$topic" --count "$events"
else
    echo "==> mock broker (librdkafka's mock cluster) with $events sample events" >&2
    "$bin/millpond-mock-broker" --topic "$topic" --partitions 4 --sample-events "$events" >"$dir/broker.out" 2>"$dir/broker.log" &
    pids+=($!)
    wait_for 120 grep -q BOOTSTRAP= "$dir/broker.out" ||
        millpond_die "mock broker did not start: $(tail -20 "$dir/broker.log")"
    bootstrap=$(sed -n 's/^BOOTSTRAP=//p' "$dir/broker.out")
fi
times+=("broker and events $((SECONDS - tb)) s")

export DUCKLAKE_TABLE=events MILLPOND_LAKE_DIR=$dir/lake MILLPOND_LOG_FORMAT=text
export MILLPOND_WRITER_ADDR=127.0.0.1:${DEMO_WRITER_PORT:-50051}
export MILLPOND_WRITER_HTTP_PORT=${DEMO_WRITER_HTTP_PORT:-8001} MILLPOND_HTTP_PORT=${DEMO_HTTP_PORT:-8000}
echo "==> writer (embedded DuckLake in $dir/lake)" >&2
"$bin/millpond-writer" >"$dir/writer.log" 2>&1 &
writer=$!
pids+=("$writer")
wait_for 60 curl -sf "http://127.0.0.1:$MILLPOND_WRITER_HTTP_PORT/readyz" ||
    millpond_die "writer not ready within 60 s: $(tail -20 "$dir/writer.log")"

# Ingest reads up to the high watermarks it finds at startup (the sample
# events, or whatever the topic of your broker holds), commits and exits.
echo "==> ingest (topic $topic, 1 replica, up to the topic's current end)" >&2
KAFKA_BOOTSTRAP_SERVERS=$bootstrap KAFKA_TOPIC=$topic REPLICA_COUNT=1 POD_NAME=millpond-0 \
    FLUSH_INTERVAL_MS=2000 MILLPOND_RUN_TO_LATEST=true "$bin/millpond-ingest" >"$dir/ingest.log" 2>&1 &
ingest=$!
pids+=("$ingest")
metric() { curl -sf "http://127.0.0.1:$MILLPOND_HTTP_PORT/metrics" | awk -v m="$1" '$1 ~ "^"m"(\\{|$)" {s+=$2} END {print s+0}'; }
echo "==> the lake while it fills; query it yourself meanwhile with:" >&2
echo "    MILLPOND_LAKE_DIR=$dir/lake scripts/query-lake.sh \"SELECT count(*) FROM events\"" >&2
live_rows() {
    MILLPOND_LAKE_DIR=$dir/lake scripts/query-lake.sh --value "SELECT count(*) FROM events" 2>/dev/null || echo 0
}
start=$SECONDS
while kill -0 "$ingest" 2>/dev/null; do
    [ $((SECONDS - start)) -lt 300 ] || millpond_die "timed out; see $dir/*.log"
    echo "    $((SECONDS - start)) s: $(live_rows) rows in the lake, $(metric millpond_last_committed_offset) offsets committed" >&2
    sleep 2
done
wait "$ingest" || millpond_die "ingest failed: $(tail -20 "$dir/ingest.log")"
times+=("pipeline $((SECONDS - start)) s")
echo "==> every record up to the topic's end committed after $((SECONDS - start)) s ($((SECONDS - t0)) s since the demo started); stopping the writer (SIGTERM)" >&2
kill -TERM "$writer"; wait "$writer"

echo "==> querying the lake with plain DuckDB" >&2
queries=("SELECT count(*) AS rows, min(_inserted_at) AS first_insert FROM events")
if [ "$events" -gt 0 ]; then
    # The sample events' own columns.
    queries+=("SELECT event, count(*) AS n, count(DISTINCT uuid) AS distinct_uuids, count(DISTINCT team_id) AS teams FROM events GROUP BY 1 ORDER BY 2 DESC")
else
    queries+=("DESCRIBE events")
fi
queries+=("SELECT kafka_partition, max(last_offset) AS last_offset FROM _millpond_offsets GROUP BY 1 ORDER BY 1")
MILLPOND_LAKE_DIR=$dir/lake scripts/query-lake.sh "${queries[@]}"
echo "demo done: lake in $dir/lake, logs in $dir" >&2
(
    IFS=,
    echo "demo: $((SECONDS - t0)) s in all; ${times[*]}" | sed 's/,/, /g' >&2
)
