#!/usr/bin/env bash
# End-to-end benchmark: a local broker preloaded with PostHog-like events
# (~1.3 KB each) -> ingest -> writer -> embedded DuckLake. Prints records/s,
# records per CPU-second and peak RSS per process.
#
# BENCH_EVENTS (default 200000), BENCH_PARTITIONS (default 64; the mock
# broker keeps ~5 MiB per partition), BENCH_FLUSH_SIZE (default 104857600),
# BENCH_JSONL (a file of payloads, one per line, instead of sample events),
# BENCH_TIMEOUT_S (default 900: the run fails rather than wait forever),
# BENCH_EXTRA_ENV (space-separated VAR=value pairs for ingest and writer).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
events=${BENCH_EVENTS:-200000}
jsonl=${BENCH_JSONL:-}
timeout_s=${BENCH_TIMEOUT_S:-900}
read -r -a extra_env <<<"${BENCH_EXTRA_ENV:-}"
if [ -n "$jsonl" ]; then
    [ -f "$jsonl" ] || millpond_die "BENCH_JSONL=$jsonl: no such file"
    events=$(grep -c . "$jsonl")
fi
partitions=${BENCH_PARTITIONS:-64}
flush_size=${BENCH_FLUSH_SIZE:-104857600}
dir=$MILLPOND_STATE/bench
bin=$CARGO_TARGET_DIR/release
cargo build --release --workspace --bins >&2
rm -rf "$dir" && mkdir -p "$dir"
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT
trap 'exit 130' INT TERM

if [ -n "$jsonl" ]; then
    load=(--jsonl "$jsonl")
else
    load=(--sample-events "$events")
fi
"$bin/millpond-mock-broker" --topic events --partitions "$partitions" "${load[@]}" >"$dir/broker.out" 2>"$dir/broker.log" &
pids+=($!)
for _ in $(seq 1200); do grep -q BOOTSTRAP= "$dir/broker.out" 2>/dev/null && break; sleep 0.1; done
bootstrap=$(sed -n 's/^BOOTSTRAP=//p' "$dir/broker.out")
[ -n "$bootstrap" ] || { cat "$dir/broker.log" >&2; millpond_die "mock broker did not start"; }

export DUCKLAKE_TABLE=events MILLPOND_LAKE_DIR=$dir/lake MILLPOND_LOG_FORMAT=text LOG_LEVEL=info
export MILLPOND_WRITER_ADDR=127.0.0.1:50151 MILLPOND_WRITER_HTTP_PORT=8101 MILLPOND_HTTP_PORT=8100
env "${extra_env[@]}" "$bin/millpond-writer" >"$dir/writer.log" 2>&1 &
writer=$!; pids+=("$writer")
for _ in $(seq 300); do curl -sf http://127.0.0.1:8101/readyz >/dev/null && break; sleep 0.1; done
curl -sf http://127.0.0.1:8101/readyz >/dev/null || { tail "$dir/writer.log" >&2; millpond_die "writer not ready"; }

tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{printf "%.2f", ($14+$15)/t}' "/proc/$1/stat"; }
# The writer's startup (DuckDB, extensions, catalog attach) is not per record.
cw0=$(cpu "$writer")
start=$(date +%s.%N)
env "${extra_env[@]}" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" KAFKA_TOPIC=events REPLICA_COUNT=1 POD_NAME=millpond-0 \
    FLUSH_SIZE="$flush_size" FLUSH_INTERVAL_MS=5000 "$bin/millpond-ingest" >"$dir/ingest.log" 2>&1 &
ingest=$!; pids+=("$ingest")
metric() { curl -sf "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 ~ "^"m"(\\{|$)" {s+=$2} END {printf "%d", s}'; }
deadline=$((SECONDS + timeout_s))
until [ "$(metric 8100 millpond_last_committed_offset)" -ge "$events" ]; do
    kill -0 "$ingest" || { tail "$dir/ingest.log"; exit 1; }
    [ "$SECONDS" -lt "$deadline" ] || { tail "$dir/ingest.log" >&2; millpond_die "not all $events records committed within ${timeout_s}s"; }
    sleep 0.2
done
end=$(date +%s.%N)
rss() { awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
ci=$(cpu "$ingest"); cw=$(awk -v a="$(cpu "$writer")" -v b="$cw0" 'BEGIN {printf "%.2f", a - b}'); ri=$(rss "$ingest"); rw=$(rss "$writer")
written=$(metric 8101 millpond_records_written_total)
consumed=$(metric 8100 millpond_records_consumed_total)
[ "$consumed" -eq "$events" ] || millpond_die "ingest consumed $consumed of $events records: the mock broker keeps ~5 MiB per partition and dropped the rest; raise BENCH_PARTITIONS"
bytes=$(curl -sf http://127.0.0.1:8101/metrics | awk '$1 ~ /^millpond_flush_size_bytes_sum/ {printf "%d", $2}')
kill -TERM "$ingest"; wait "$ingest" || true
kill -TERM "$writer"; wait "$writer" || true
awk -v n="$events" -v w="$written" -v s="$start" -v e="$end" -v ci="$ci" -v cw="$cw" -v ri="$ri" -v rw="$rw" -v b="$bytes" -v w0="$cw0" 'BEGIN {
  wall = e - s
  printf "events %d, written %d, wall %.2f s, %.0f records/s, Arrow %.1f MB/s\n", n, w, wall, n / wall, b / 1e6 / wall
  printf "cpu: ingest %.2f s (incl. startup), writer %.2f s (after startup) -> %.0f records per CPU-second\n", ci, cw, n / (ci + cw)
  printf "writer startup cpu %.2f s (not counted)\n", w0
  printf "peak RSS: ingest %.1f MB, writer %.1f MB, together %.1f MB\n", ri, rw, ri + rw
}'
