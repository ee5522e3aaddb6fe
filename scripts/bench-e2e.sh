#!/usr/bin/env bash
# End-to-end benchmark: Millpond side by side with the model of the original
# Python hot path (the performance anchor), on one workload, in one run:
#   nisshi, memory storage <- bench/gen_events.py: BENCH_EVENTS PostHog-like events
#     (~1.3 KB; seed 42, 1 % poison: invalid JSON, arrays, scalars, tombstones,
#     empty values, integers past int64), 4 partitions
#   1. millpond-ingest (run to latest) + millpond-writer -> embedded DuckLake,
#      measured by scripts/bench-pipeline.sh
#   2. bench/py_baseline.py (the model) on the same topic, its own group ->
#      its own embedded DuckLake, under /usr/bin/time -v
# then checks both lakes against the generator and prints both lines and the
# ratios (scripts/bench_pipeline.py). Exits non-zero when a check fails.
#
# BENCH_INPUTS (a directory with another gen_events.py and py_baseline.py
# to run instead of bench/'s), BENCH_EVENTS (200000), BENCH_PARTITIONS (4),
# BENCH_SEED (42), BENCH_POISON_RATE (0.01), BENCH_FLUSH_SIZE (104857600),
# BENCH_EXTRA_ENV (VAR=value pairs for ingest and writer),
# BENCH_FLUSH_INTERVAL_MS and BENCH_LAKE_OPTIONS (scripts/bench-pipeline.sh:
# e.g. "parquet_compression=zstd" to compare codecs), NISSHI (default
# ~/.cargo/bin/nisshi from scripts/setup-nisshi.sh), BENCH_PERF=DIR (profile
# ingest, writer and the model with perf into DIR; see scripts/bench-lib.sh).
# BENCH_RUNS=N (default 1) measures both N times, one after the other, on
# the one topic, each run with its own consumer groups and lakes, then prints
# the median and range of each figure: the machine's speed moves single runs
# by more than most changes do. The run's files stay in $MILLPOND_STATE/bench
# (in run-1 ... run-N with BENCH_RUNS).
#
# BENCH_LAKE=postgres-s3 puts Millpond's lake where production has it: a
# Postgres catalog (a new database per run) and data in moto's S3, both
# from scripts/services.sh; the default, embedded, is a SQLite catalog and
# local data. The model keeps its own embedded lake either way.
#
# BENCH_JSONL=FILE measures Millpond alone on FILE's payloads (one per line)
# served by the mock broker (BENCH_PARTITIONS default 64 then: it keeps
# ~5 MiB per partition); scripts/bench-memory.sh uses it.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
dir=$MILLPOND_STATE/bench
rm -rf "$dir" && mkdir -p "$dir"
# Whatever of ours still runs when this script ends (a failure).
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
runs=${BENCH_RUNS:-1}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || millpond_die "BENCH_RUNS=$runs: want a count of runs"
[ "$runs" -eq 1 ] || [ -z "${BENCH_PERF:-}" ] || millpond_die "BENCH_PERF profiles one run: unset BENCH_RUNS"
[ "$runs" -eq 1 ] || [ -z "${BENCH_JSONL:-}" ] || millpond_die "BENCH_RUNS is for the anchor workload, not BENCH_JSONL"
lake_kind=${BENCH_LAKE:-embedded}
case $lake_kind in
    embedded) ;;
    postgres-s3)
        bash scripts/services.sh start >&2
        eval "$(bash scripts/services.sh env)"
        ;;
    *) millpond_die "BENCH_LAKE=$lake_kind: want embedded or postgres-s3" ;;
esac

if [ -n "${BENCH_JSONL:-}" ]; then
    [ -f "$BENCH_JSONL" ] || millpond_die "BENCH_JSONL=$BENCH_JSONL: no such file"
    events=$(grep -c . "$BENCH_JSONL")
    broker_bin=${BENCH_BIN:-$CARGO_TARGET_DIR/release}/millpond-mock-broker
    [ -n "${BENCH_BIN:-}" ] || cargo build --release -p millpond-ingest --bin millpond-mock-broker >&2
    "$broker_bin" --topic events --partitions "${BENCH_PARTITIONS:-64}" \
        --jsonl "$BENCH_JSONL" >"$dir/broker.out" 2>"$dir/broker.log" &
    broker=$!
    for _ in $(seq 1200); do grep -q BOOTSTRAP= "$dir/broker.out" 2>/dev/null && break; sleep 0.1; done
    bootstrap=$(sed -n 's/^BOOTSTRAP=//p' "$dir/broker.out")
    [ -n "$bootstrap" ] || { cat "$dir/broker.log" >&2; millpond_die "mock broker did not start"; }
    BENCH_BROKER_PID=$broker scripts/bench-pipeline.sh "$bootstrap" events "$events" "$dir" \
        || millpond_die "the mock broker keeps ~5 MiB per partition and drops the rest: if fewer than $events records were consumed, raise BENCH_PARTITIONS"
    kill "$broker"; wait "$broker" 2>/dev/null || true
    exit 0
fi

events=${BENCH_EVENTS:-200000}
partitions=${BENCH_PARTITIONS:-4}
flush_size=${BENCH_FLUSH_SIZE:-104857600}
nisshi=${NISSHI:-${CARGO_HOME:-$HOME/.cargo}/bin/nisshi}
for f in gen_events.py py_baseline.py; do
    [ -f "$bench_inputs/$f" ] || millpond_die "$bench_inputs/$f missing (BENCH_INPUTS)"
done
[ -x "$nisshi" ] || millpond_die "$nisshi missing: run scripts/setup-nisshi.sh (or set NISSHI)"
"$MILLPOND_PYTHON" -c 'import orjson, confluent_kafka, pyarrow, duckdb' 2>/dev/null \
    || millpond_die "$MILLPOND_PYTHON lacks orjson, confluent-kafka, pyarrow or duckdb: run scripts/setup-python.sh"
[ -s "$DUCKDB_EXTENSION_DIR/v$MILLPOND_DUCKDB_VERSION/$(millpond_duckdb_platform)/sqlite_scanner.duckdb_extension" ] \
    || millpond_die "DuckDB extensions missing: run scripts/setup-extensions.sh"
[ -x /usr/bin/time ] || millpond_die "/usr/bin/time missing (apt-get install time)"

bootstrap=127.0.0.1:$(bench_port)
mkdir -p "$dir/nisshi"
(cd "$dir/nisshi" && exec "$nisshi" broker --listener-url "tcp://$bootstrap" \
    --advertised-listener-url "tcp://$bootstrap" --storage-engine memory://nisshi/) >"$dir/broker.log" 2>&1 &
broker=$!
ready=false
for _ in $(seq 120); do
    kill -0 "$broker" 2>/dev/null || { tail "$dir/broker.log" >&2; millpond_die "nisshi exited during startup"; }
    "$nisshi" topic list --broker "tcp://$bootstrap" >/dev/null 2>&1 && { ready=true; break; }
    sleep 0.5
done
$ready || { tail "$dir/broker.log" >&2; millpond_die "nisshi did not answer on $bootstrap within 60 s"; }
"$nisshi" topic create --broker "tcp://$bootstrap" --partitions "$partitions" events >"$dir/topic.log" 2>&1 \
    || { cat "$dir/topic.log" >&2; millpond_die "topic create failed"; }
echo "producing $events events to nisshi on $bootstrap ($partitions partitions)" >&2
"$MILLPOND_PYTHON" "$bench_inputs/gen_events.py" --count "$events" --seed "${BENCH_SEED:-42}" \
    --poison-rate "${BENCH_POISON_RATE:-0.01}" --produce "$bootstrap" --topic events \
    --partitions "$partitions" --stats-out "$dir/gen.json" >"$dir/gen.log" \
    || millpond_die "gen_events.py failed: $(cat "$dir/gen.log")"

echo "workload: $events events from $bench_inputs/gen_events.py (seed ${BENCH_SEED:-42}, poison rate ${BENCH_POISON_RATE:-0.01}), nisshi memory storage, $partitions partitions, FLUSH_SIZE $flush_size, DuckLake: $lake_kind; load average $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
for k in $(seq "$runs"); do
    run=$dir group=millpond-bench py_group=py-baseline
    if [ "$runs" -gt 1 ]; then
        run=$dir/run-$k group=millpond-bench-$k py_group=py-baseline-$k
        mkdir -p "$run" && cp "$dir/gen.json" "$run/"
        echo "run $k of $runs"
    fi
    lake=""
    [ "$lake_kind" = embedded ] || lake=$(bench_lake_env "bench_$k" "$run")
    # "$"-prefixed keys become columns, as in the model (which quotes every name).
    BENCH_EXTRA_ENV="DUCKLAKE_QUOTED_COLUMNS=true $lake ${BENCH_EXTRA_ENV:-}" BENCH_BROKER_PID=$broker \
        BENCH_FLUSH_SIZE=$flush_size BENCH_GROUP_ID=$group scripts/bench-pipeline.sh "$bootstrap" events "$events" "$run" \
        || { failed=1; continue; }

    # The model on the same broker and topic.
    mkdir -p "$run/py-lake/data"
    broker0=$(bench_cpu "$broker")
    bench_perf_prefix baseline
    FLUSH_SIZE=$flush_size FLUSH_INTERVAL_MS=60000 CONSUME_BATCH_SIZE=1000 "${bench_prefix[@]}" \
        /usr/bin/time -v -o "$run/baseline.time" "$MILLPOND_PYTHON" "$bench_inputs/py_baseline.py" \
        --bootstrap "$bootstrap" --topic events --group-id "$py_group" \
        --catalog "$run/py-lake/catalog.ducklake" --data-path "$run/py-lake/data/" \
        --ext-dir "$DUCKDB_EXTENSION_DIR" >"$run/baseline.json" 2>"$run/baseline.err" &
    rc=0; wait $! || rc=$?
    [ "$rc" -eq 0 ] || { cat "$run/baseline.err" "$run/baseline.json" >&2; millpond_die "py_baseline.py exited $rc"; }
    printf 'broker_cpu_s=%s\next_dir=%s\n' "$(awk -v a="$broker0" -v b="$(bench_cpu "$broker")" 'BEGIN {printf "%.2f", b - a}')" \
        "$DUCKDB_EXTENSION_DIR" >"$run/baseline.samples"
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$MILLPOND_PYTHON" scripts/bench_pipeline.py compare "$run" || failed=1
done
kill "$broker"; wait "$broker" 2>/dev/null || true
if [ "$runs" -gt 1 ]; then
    run_dirs=()
    for k in $(seq "$runs"); do [ -f "$dir/run-$k/summary.json" ] && run_dirs+=("$dir/run-$k"); done
    [ "${#run_dirs[@]}" -eq 0 ] || "$MILLPOND_PYTHON" scripts/bench_pipeline.py runs "${run_dirs[@]}" || failed=1
fi
exit "$failed"
