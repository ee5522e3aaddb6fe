#!/usr/bin/env bash
# Runs Millpond once against a broker that already holds the records, and
# measures it: millpond-writer on an embedded DuckLake, then millpond-ingest
# with MILLPOND_RUN_TO_LATEST=true (it consumes to the high watermarks read at
# startup, makes its final flush, commits and exits 0). The one place that
# says how Millpond is run and measured in a benchmark; scripts/bench-e2e.sh
# prepares the broker and calls it.
#
# usage: bench-pipeline.sh BOOTSTRAP TOPIC RECORDS RUN_DIR
#   RECORDS: how many records the topic holds (tombstones included)
# BENCH_FLUSH_SIZE (104857600), BENCH_FLUSH_INTERVAL_MS (60000),
# BENCH_GROUP_ID (millpond-bench), BENCH_TIMEOUT_S (900), BENCH_EXTRA_ENV
# (VAR=value pairs for both processes; the writer runs with the images'
# MALLOC_ARENA_MAX=2 unless they say otherwise), BENCH_BROKER_PID (also
# report that process's CPU), BENCH_PERF (profile both processes,
# scripts/bench-lib.sh), BENCH_BIN (a directory holding the binaries to run
# instead of building them, to measure another build),
# BENCH_LAKE_OPTIONS (NAME=value pairs set on the new lake with
# `millpond-lake shell` before the writer that measures starts, e.g.
# "parquet_compression=zstd parquet_compression_level=1").
#
# Measured: CPU of every thread (/proc/<pid>/stat utime+stime) of the
# writer from ready to ingest's exit (its startup is reported apart) and of
# ingest from its first consume to its exit (/usr/bin/time; its startup, up
# to the log line that starts the loop, is reported apart); wall time of the
# loop from ingest's own log; peak RSS of each, and the writer's RSS once
# ready (its base: DuckDB, the extensions, the attached catalog). The
# counters are scraped before either process exits. Writes
# RUN_DIR/millpond.json and prints the "millpond:" lines
# (scripts/bench_pipeline.py); exits non-zero when ingest did not consume
# RECORDS records or conservation fails.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
[ $# -eq 4 ] || { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bootstrap=$1 topic=$2 records=$3 run=$4
flush_size=${BENCH_FLUSH_SIZE:-104857600}
timeout_s=${BENCH_TIMEOUT_S:-900}
read -r -a extra_env <<<"${BENCH_EXTRA_ENV:-}"
bin=${BENCH_BIN:-$CARGO_TARGET_DIR/release}
[ -x /usr/bin/time ] || millpond_die "/usr/bin/time missing (apt-get install time)"
[ -x "$MILLPOND_PYTHON" ] || millpond_die "$MILLPOND_PYTHON missing; run scripts/setup-python.sh"
read -r -a lake_options <<<"${BENCH_LAKE_OPTIONS:-}"
[ -n "${BENCH_BIN:-}" ] || cargo build --release -p millpond-ingest -p millpond-writer --bins \
    ${BENCH_LAKE_OPTIONS:+-p millpond-lake} >&2
mkdir -p "$run"
lake=$run/millpond-lake
rm -rf "$lake"

# Whatever of ours still runs when this script ends (a failure).
trap 'kill -9 $(jobs -p) 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
flight_port=$(bench_port) writer_http=$(bench_port) ingest_http=$(bench_port)

export DUCKLAKE_TABLE=events MILLPOND_LAKE_DIR=$lake MILLPOND_LOG_FORMAT=json LOG_LEVEL=info
export MILLPOND_WRITER_ADDR=127.0.0.1:$flight_port MILLPOND_WRITER_HTTP_PORT=$writer_http
if [ ${#lake_options[@]} -gt 0 ]; then
    # The writer creates the lake; its options are read when it attaches.
    env "${extra_env[@]}" "$bin/millpond-writer" >"$run/writer-create.log" 2>&1 &
    creator=$!
    for _ in $(seq 600); do curl -sf "http://127.0.0.1:$writer_http/readyz" >/dev/null && break; sleep 0.1; done
    curl -sf "http://127.0.0.1:$writer_http/readyz" >/dev/null \
        || { tail "$run/writer-create.log" >&2; millpond_die "the writer creating the lake was not ready"; }
    kill -TERM "$creator" 2>/dev/null || true; wait "$creator" || true
    for option in "${lake_options[@]}"; do
        env "${extra_env[@]}" "$bin/millpond-lake" shell --sql "CALL lake.set_option('${option%%=*}', '${option#*=}')" >&2 \
            || millpond_die "could not set $option on the lake"
    done
fi
bench_perf_prefix writer
# MALLOC_ARENA_MAX: as the writer images set it (deploy/docker/Dockerfile).
env MALLOC_ARENA_MAX=2 "${extra_env[@]}" "${bench_prefix[@]}" "$bin/millpond-writer" >"$run/writer.log" 2>&1 &
writer_job=$!
writer=$(bench_unwrap "$writer_job") || millpond_die "millpond-writer did not start"
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$writer_http/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$writer_http/readyz" >/dev/null \
    || { tail "$run/writer.log" >&2; millpond_die "writer not ready"; }
# The writer's startup (DuckDB, extensions, catalog attach) is not per record.
writer_startup=$(bench_cpu "$writer")
writer_ready_rss_kb=$(awk '/VmRSS/ {print $2}' "/proc/$writer/status")
writer_ready=$(date +%s.%N)
broker0=$( [ -n "${BENCH_BROKER_PID:-}" ] && bench_cpu "$BENCH_BROKER_PID" || echo 0)

bench_perf_prefix ingest
env "${extra_env[@]}" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" KAFKA_TOPIC="$topic" \
    GROUP_ID="${BENCH_GROUP_ID:-millpond-bench}" REPLICA_COUNT=1 POD_NAME=millpond-0 \
    MILLPOND_HTTP_PORT="$ingest_http" MILLPOND_RUN_TO_LATEST=true FLUSH_SIZE="$flush_size" \
    FLUSH_INTERVAL_MS="${BENCH_FLUSH_INTERVAL_MS:-60000}" "${bench_prefix[@]}" \
    /usr/bin/time -f '%e %U %S %M' -o "$run/ingest.time" "$bin/millpond-ingest" >"$run/ingest.log" 2>&1 &
ingest_job=$!
if ! timer=$(bench_unwrap "$ingest_job") || ! ingest=$(bench_child "$timer"); then
    millpond_die "millpond-ingest did not start"
fi
# Ingest's startup ends where its loop starts: the run-to-latest targets are
# logged right before the first consume. Its final counters are read once
# the last record is counted (the "final flush" line), while it flushes.
ingest_startup="" deadline=$((SECONDS + timeout_s))
rm -f "$run/ingest.metrics"
while kill -0 "$ingest" 2>/dev/null; do
    if [ -z "$ingest_startup" ] && grep -q 'running to the high watermarks read at startup' "$run/ingest.log"; then
        ingest_startup=$(bench_cpu "$ingest" 2>/dev/null || true)
    fi
    if [ ! -s "$run/ingest.metrics" ] && grep -q 'startup high watermark; final flush' "$run/ingest.log"; then
        curl -sf "http://127.0.0.1:$ingest_http/metrics" >"$run/ingest.metrics.part" 2>/dev/null \
            && mv "$run/ingest.metrics.part" "$run/ingest.metrics"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { tail "$run/ingest.log" >&2; millpond_die "ingest did not finish within ${timeout_s}s"; }
    sleep 0.02
done
rc=0; wait "$ingest_job" || rc=$?
writer_total=$(bench_cpu "$writer")
broker1=$( [ -n "${BENCH_BROKER_PID:-}" ] && bench_cpu "$BENCH_BROKER_PID" || echo 0)
writer_hwm_kb=$(awk '/VmHWM/ {print $2}' "/proc/$writer/status")
curl -sf "http://127.0.0.1:$writer_http/metrics" >"$run/writer.metrics" || millpond_die "writer metrics not readable"
[ "$rc" -eq 0 ] || { tail -n 20 "$run/ingest.log" >&2; millpond_die "millpond-ingest exited $rc"; }
[ -s "$run/ingest.metrics" ] || millpond_die "ingest exited before its final counters were scraped"
kill -TERM "$writer"; wait "$writer_job" || true

cat >"$run/millpond.samples" <<EOF
records=$records
writer_startup_cpu_s=$writer_startup
writer_ready_epoch_s=$writer_ready
writer_total_cpu_s=$writer_total
writer_peak_rss_kb=$writer_hwm_kb
writer_ready_rss_kb=$writer_ready_rss_kb
ingest_startup_cpu_s=${ingest_startup:-0}
broker_cpu_s=$(awk -v a="$broker0" -v b="$broker1" 'BEGIN {printf "%.2f", b - a}')
flush_size=$flush_size
EOF
"$MILLPOND_PYTHON" scripts/bench_pipeline.py millpond "$run"
