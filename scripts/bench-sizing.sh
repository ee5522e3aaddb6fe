#!/usr/bin/env bash
# Sizing benchmark: what a pod needs at a given rate, flush interval and
# FLUSH_SIZE. Prints one Markdown table (docs/benchmarks.md, "Sizing"): per row the
# flushes and their triggers, Arrow and Parquet per flush, the largest data
# file, peak RSS of ingest and of the writer, and the peak of the writer's
# spool (in $TMPDIR: millpond-writer-spool-<uid>; the chart sets MILLPOND_SPOOL_DIR in its emptyDir).
#
# Each row runs the real pipeline as the chart deploys it: millpond-writer
# (with the writer images' MALLOC_ARENA_MAX=2) on a DuckLake with a Postgres
# catalog and data in S3 (scripts/services.sh's Postgres and moto, which must
# be running; a new database per row) and millpond-ingest, one pod's pair, on
# a nisshi topic of 4 partitions (memory storage) holding bench/gen_events.py
# events (~1.3 KB PostHog-like events, seed 42, no poison, so every record
# is a row; BENCH_INPUTS as for scripts/bench-e2e.sh).
#   RATE/INTERVAL_S/FLUSH_MIB[/VARIANT] rows (BENCH_SIZING_ROWS):
#   RATE=N   a producer sends N records/s for 2 x INTERVAL_S + 10 s (at least
#            45 s) while ingest consumes; then ingest is stopped (SIGTERM, a
#            final flush)
#   RATE=max ingest runs to the high watermarks of a topic preloaded with
#            BENCH_SIZING_PRELOAD records (1,200,000; ~1.5 GiB of Arrow)
#   VARIANT  "+"-joined: sort (MILLPOND_SORT_BY=team_id,timestamp: ingest
#            holds each flush whole), partitioned (DUCKLAKE_PARTITION_BY by
#            day of _inserted_at: the writer holds each flush whole for
#            DuckDB's insert), NAME=value (more env for both processes)
# Each row fails (and the script exits non-zero) when the lake does not hold
# every record produced. BENCH_BIN: a directory with the two binaries to run
# instead of building them. The runs stay in $MILLPOND_STATE/bench-sizing.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
eval "$(bash scripts/services.sh env)" || millpond_die "scripts/services.sh env failed: are the services running?"
dir=$MILLPOND_STATE/bench-sizing
rm -rf "$dir" && mkdir -p "$dir"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
rows=${BENCH_SIZING_ROWS:-"1000/60/100 10000/150/100 10000/10/256 10000/60/1024 max/60/64 max/60/100 max/60/256 max/60/1024 max/60/256/sort max/60/1024/sort max/60/100/partitioned max/60/256/partitioned max/60/1024/partitioned"}
preload=${BENCH_SIZING_PRELOAD:-1200000}
partitions=4
nisshi=${NISSHI:-${CARGO_HOME:-$HOME/.cargo}/bin/nisshi}
bin=${BENCH_BIN:-$CARGO_TARGET_DIR/release}
[ -f "$bench_inputs/gen_events.py" ] || millpond_die "$bench_inputs/gen_events.py missing (BENCH_INPUTS)"
[ -x "$nisshi" ] || millpond_die "$nisshi missing: run scripts/setup-nisshi.sh (or set NISSHI)"
[ -x /usr/bin/time ] || millpond_die "/usr/bin/time missing (apt-get install time)"
[ -n "${BENCH_BIN:-}" ] || cargo build --release -p millpond-ingest -p millpond-writer --bins >&2
psql_lake() {
    PGPASSWORD=$MILLPOND_TEST_PG_PASSWORD psql -X -q -A -t -h "$MILLPOND_TEST_PG_HOST" -p "$MILLPOND_TEST_PG_PORT" \
        -U "$MILLPOND_TEST_PG_USER" -d "$1" -c "$2"
}

# 200,000 distinct events, cycled by the producer.
"$MILLPOND_PYTHON" "$bench_inputs/gen_events.py" --count 200000 --seed 42 --poison-rate 0 \
    --out "$dir/events.jsonl" >"$dir/gen.json" || millpond_die "gen_events.py failed"

bootstrap=127.0.0.1:$(bench_port)
mkdir -p "$dir/nisshi"
(cd "$dir/nisshi" && exec "$nisshi" broker --listener-url "tcp://$bootstrap" \
    --advertised-listener-url "tcp://$bootstrap" --storage-engine memory://nisshi/) >"$dir/broker.log" 2>&1 &
broker=$!
for _ in $(seq 120); do
    "$nisshi" topic list --broker "tcp://$bootstrap" >/dev/null 2>&1 && break
    kill -0 "$broker" 2>/dev/null || millpond_die "nisshi exited: $(tail -3 "$dir/broker.log")"
    sleep 0.5
done
topic() {
    "$nisshi" topic create --broker "tcp://$bootstrap" --partitions "$partitions" "$1" >"$dir/topic-$1.log" 2>&1 \
        || millpond_die "topic create $1: $(cat "$dir/topic-$1.log")"
}
produce() { "$MILLPOND_PYTHON" scripts/bench_sizing.py produce "$bootstrap" "$1" "$dir/events.jsonl" "$partitions" "${@:2}"; }
case " $rows " in
    *" max/"*)
        topic preload
        echo "preloading $preload records" >&2
        produce preload --count "$preload" >"$dir/preload.json" || millpond_die "preload failed"
        ;;
esac

echo "sizing rows on $(nproc) cores, $(date -u +%Y-%m-%d); load average $(cut -d' ' -f1-3 /proc/loadavg)"
k=0 runs=() failed=0
for spec in $rows; do
    k=$((k + 1))
    IFS=/ read -r rate interval_s flush_mib variant <<<"$spec"
    run=$dir/row-$k
    mkdir -p "$run/tmp"
    flush_size=$((flush_mib * 1048576)) interval_ms=$((interval_s * 1000))
    extra=()
    IFS=+ read -r -a parts <<<"${variant:-}"
    for v in "${parts[@]}"; do
        case $v in
            sort) extra+=(MILLPOND_SORT_BY=team_id,timestamp) ;;
            partitioned) extra+=("DUCKLAKE_PARTITION_BY=year(_inserted_at),month(_inserted_at),day(_inserted_at)") ;;
            [A-Z]*=*) extra+=("$v") ;;
            *) millpond_die "row $spec: $v is not sort, partitioned or NAME=value" ;;
        esac
    done
    read -r -a lake <<<"$(bench_lake_env "sizing_$k" "$run")"
    echo "row $k: $spec" >&2
    flight=$(bench_port) writer_http=$(bench_port) ingest_http=$(bench_port)
    common=(MILLPOND_LOG_FORMAT=json LOG_LEVEL=info DUCKLAKE_TABLE=events DUCKLAKE_QUOTED_COLUMNS=true
        MILLPOND_WRITER_ADDR=127.0.0.1:$flight "${extra[@]}")
    # MALLOC_ARENA_MAX: as the writer images set it (deploy/docker/Dockerfile).
    env MALLOC_ARENA_MAX=2 "${common[@]}" "${lake[@]}" TMPDIR="$run/tmp" MILLPOND_WRITER_HTTP_PORT="$writer_http" \
        "$bin/millpond-writer" >"$run/writer.log" 2>&1 &
    writer=$!
    for _ in $(seq 600); do curl -sf "http://127.0.0.1:$writer_http/readyz" >/dev/null && break; sleep 0.1; done
    curl -sf "http://127.0.0.1:$writer_http/readyz" >/dev/null || millpond_die "writer not ready: $(tail -3 "$run/writer.log")"
    # The spool's peak, sampled every 0.2 s, and the writer's RSS each second
    # and ingest's each second (rss.series: seconds, writer kB, ingest kB), to
    # see whether they settle over the flushes.
    (
        peak=0 n=0
        while kill -0 "$writer" 2>/dev/null; do
            now=$(du -sb "$run/tmp" 2>/dev/null | cut -f1)
            [ "${now:-0}" -le "$peak" ] || { peak=$now; echo "$peak" >"$run/spool.peak"; }
            n=$((n + 1))
            if [ $((n % 5)) -eq 0 ]; then
                i=$(cat "$run/ingest.pid" 2>/dev/null || echo none)
                echo "$((n / 5)) $(awk '/VmRSS/ {print $2}' "/proc/$writer/status" 2>/dev/null)" \
                    "$(awk '/VmRSS/ {print $2}' "/proc/$i/status" 2>/dev/null)" >>"$run/rss.series"
            fi
            sleep 0.2
        done
    ) &
    spool_poller=$!
    ingest_env=(KAFKA_BOOTSTRAP_SERVERS="$bootstrap" GROUP_ID="sizing-$k" REPLICA_COUNT=1 POD_NAME=millpond-0
        MILLPOND_HTTP_PORT="$ingest_http" FLUSH_SIZE="$flush_size" FLUSH_INTERVAL_MS="$interval_ms")
    if [ "$rate" = max ]; then
        cp "$dir/preload.json" "$run/produce.json"
        produce_s=0
        env "${common[@]}" "${ingest_env[@]}" KAFKA_TOPIC=preload MILLPOND_RUN_TO_LATEST=true \
            /usr/bin/time -f '%e %U %S %M' -o "$run/ingest.time" "$bin/millpond-ingest" >"$run/ingest.log" 2>&1 &
        ingest_job=$!
        bench_child "$ingest_job" >"$run/ingest.pid" || true
        wait "$ingest_job" || millpond_die "row $spec: ingest failed: $(tail -3 "$run/ingest.log")"
    else
        produce_s=$((2 * interval_s + 10)); [ "$produce_s" -ge 45 ] || produce_s=45
        topic "live-$k"
        env "${common[@]}" "${ingest_env[@]}" KAFKA_TOPIC="live-$k" \
            /usr/bin/time -f '%e %U %S %M' -o "$run/ingest.time" "$bin/millpond-ingest" >"$run/ingest.log" 2>&1 &
        ingest_job=$!
        ingest=$(bench_child "$ingest_job") || millpond_die "millpond-ingest did not start"
        echo "$ingest" >"$run/ingest.pid"
        produce "live-$k" --rate "$rate" --seconds "$produce_s" >"$run/produce.json" \
            || millpond_die "row $spec: producer failed"
        # Let ingest read what was produced, then stop it: its final flush.
        want=$(sed -n 's/.*"produced": \([0-9]*\).*/\1/p' "$run/produce.json")
        for _ in $(seq 300); do
            got=$(curl -sf "http://127.0.0.1:$ingest_http/metrics" | awk '/^millpond_records_consumed_total/ {s += $2} END {printf "%d", s}')
            [ "${got:-0}" -lt "$want" ] || break
            sleep 0.1
        done
        kill -TERM "$ingest"
        wait "$ingest_job" || millpond_die "row $spec: ingest failed: $(tail -3 "$run/ingest.log")"
    fi
    writer_kb=$(awk '/VmHWM/ {print $2}' "/proc/$writer/status")
    kill -TERM "$writer"; wait "$writer" || true
    wait "$spool_poller" || true
    db=millpond_sizing_$k
    psql_lake "$db" "SELECT f.begin_snapshot || '|' || f.file_size_bytes || '|' || f.record_count
        FROM ducklake_data_file f JOIN ducklake_table t ON t.table_id = f.table_id
        WHERE t.table_name = 'events' AND t.end_snapshot IS NULL AND f.end_snapshot IS NULL" >"$run/files.txt"
    cat >"$run/row.samples" <<EOF
rate=$rate
interval_ms=$interval_ms
flush_size=$flush_size
variant=${variant:-}
produce_seconds=$produce_s
writer_peak_rss_kb=$writer_kb
spool_peak_bytes=$(cat "$run/spool.peak" 2>/dev/null || echo 0)
EOF
    "$MILLPOND_PYTHON" scripts/bench_sizing.py row "$run" >&2 || failed=1
    runs+=("$run")
done
kill "$broker"; wait "$broker" 2>/dev/null || true
"$MILLPOND_PYTHON" scripts/bench_sizing.py table "${runs[@]}" || failed=1
exit "$failed"
