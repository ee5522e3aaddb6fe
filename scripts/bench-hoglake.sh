#!/usr/bin/env bash
# The hoglake writer against the DuckLake writer on the same flush: 100,000
# PostHog-like sample events converted once, written BENCH_FLUSHES times by
# each sink, each in its own process (writer/benches/sinks.rs):
#   hoglake         Parquet encode + upload to moto S3 + prepared commit to
#                   the hoglake emulator
#   ducklake-local  embedded catalog (SQLite) and local data files
#   ducklake-pg     Postgres catalog and data in moto S3
# Prints rows/s, wall and CPU-seconds (user + sys of the writing process;
# the catalog and S3 servers are not counted) per flush, and the peak RSS
# while the sink runs (whole process, and over the RSS it had with the
# flush built).
# Starts the test services itself (scripts/services.sh start).
#
# BENCH_ROWS (default 100000 per flush), BENCH_FLUSHES (default 5 timed,
# after one that creates the table), BENCH_STREAMED=1 (each flush handed
# over batch by batch, as the Flight server hands a streamed flush, to a
# sink that takes it so), BENCH_SINKS (default
# "hoglake ducklake-local ducklake-pg").
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
bash scripts/services.sh start >&2
eval "$(bash scripts/services.sh env)"
sinks=${BENCH_SINKS:-hoglake ducklake-local ducklake-pg}
dir=$MILLPOND_STATE/bench-hoglake
run=$(date +%s)-$$
db=millpond_bench_sinks
rm -rf "$dir" && mkdir -p "$dir"
cargo bench --profile release -p millpond-writer --bench sinks --no-run >&2

psql() { PGPASSWORD=$MILLPOND_TEST_PG_PASSWORD PGOPTIONS='-c client_min_messages=warning' command psql -X -q -h "$MILLPOND_TEST_PG_HOST" -p "$MILLPOND_TEST_PG_PORT" -U "$MILLPOND_TEST_PG_USER" -d "$MILLPOND_TEST_PG_DB" -c "$1"; }
# moto keeps objects in memory: drop this run's ~200 MB again.
s3_delete() {
    "$MILLPOND_PYTHON" - "$MILLPOND_TEST_S3_ENDPOINT" "$MILLPOND_TEST_S3_BUCKET" "$MILLPOND_TEST_S3_KEY_ID" \
        "$MILLPOND_TEST_S3_SECRET" "$MILLPOND_TEST_S3_REGION" "$@" <<'PY'
import sys
import boto3
from botocore.config import Config

endpoint, bucket, key, secret, region, *prefixes = sys.argv[1:]
s3 = boto3.resource("s3", endpoint_url=f"http://{endpoint}", aws_access_key_id=key,
                    aws_secret_access_key=secret, region_name=region,
                    config=Config(s3={"addressing_style": "path"}))
for prefix in prefixes:
    s3.Bucket(bucket).objects.filter(Prefix=prefix).delete()
PY
}
emulator=
cleanup() {
    [ -z "$emulator" ] || { kill "$emulator" 2>/dev/null || true; wait "$emulator" 2>/dev/null || true; }
    [[ " $sinks " != *" ducklake-pg "* ]] || psql "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
    s3_delete "bench-hoglake/$run/" "bench-ducklake/$run/" || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One sink: its settings as VAR=value arguments; appends its RESULT line.
bench() {
    local label=$1
    shift
    echo "==> $label" >&2
    env BENCH_LABEL="$label" "$@" cargo bench -q --profile release -p millpond-writer --bench sinks |
        grep '^RESULT' >>"$dir/results.tsv" || millpond_die "$label: the bench failed"
}

s3=(
    DUCKDB_S3_ACCESS_KEY_ID="$MILLPOND_TEST_S3_KEY_ID" DUCKDB_S3_SECRET_ACCESS_KEY="$MILLPOND_TEST_S3_SECRET"
    DUCKDB_S3_REGION="$MILLPOND_TEST_S3_REGION" DUCKDB_S3_ENDPOINT="$MILLPOND_TEST_S3_ENDPOINT"
    DUCKDB_S3_USE_SSL=false DUCKDB_S3_URL_STYLE=path
)
for sink in $sinks; do
    case $sink in
        hoglake)
            "$MILLPOND_PYTHON" tests/hoglake-emulator/hoglake_emulator.py --host 127.0.0.1 --port 0 \
                --port-file "$dir/emulator.port" >"$dir/emulator.out" 2>"$dir/emulator.log" &
            emulator=$!
            for _ in $(seq 100); do [ -s "$dir/emulator.port" ] && break; sleep 0.1; done
            [ -s "$dir/emulator.port" ] || millpond_die "the hoglake emulator did not start: $(tail -5 "$dir/emulator.log")"
            bench hoglake MILLPOND_DESTINATION=hoglake HOGLAKE_URL="http://127.0.0.1:$(cat "$dir/emulator.port")" \
                HOGLAKE_CATALOG=bench HOGLAKE_NAMESPACE=bench HOGLAKE_TABLE=events \
                HOGLAKE_DATA_PATH="s3://$MILLPOND_TEST_S3_BUCKET/bench-hoglake/$run" \
                HOGLAKE_S3_ENDPOINT="$MILLPOND_TEST_S3_ENDPOINT" HOGLAKE_S3_REGION="$MILLPOND_TEST_S3_REGION" \
                HOGLAKE_S3_ACCESS_KEY="$MILLPOND_TEST_S3_KEY_ID" HOGLAKE_S3_SECRET_KEY="$MILLPOND_TEST_S3_SECRET"
            ;;
        ducklake-local)
            bench ducklake-local DUCKLAKE_TABLE=events MILLPOND_LAKE_DIR="$dir/lake"
            ;;
        ducklake-pg)
            psql "DROP DATABASE IF EXISTS $db WITH (FORCE)" && psql "CREATE DATABASE $db"
            bench ducklake-pg DUCKLAKE_TABLE=events DUCKLAKE_RDS_HOST="$MILLPOND_TEST_PG_HOST" \
                DUCKLAKE_RDS_PORT="$MILLPOND_TEST_PG_PORT" DUCKLAKE_RDS_DATABASE=$db \
                DUCKLAKE_RDS_USERNAME="$MILLPOND_TEST_PG_USER" DUCKLAKE_RDS_PASSWORD="$MILLPOND_TEST_PG_PASSWORD" \
                DUCKLAKE_DATA_PATH="s3://$MILLPOND_TEST_S3_BUCKET/bench-ducklake/$run/" "${s3[@]}"
            ;;
        *) millpond_die "BENCH_SINKS: unknown sink $sink (hoglake, ducklake-local, ducklake-pg)" ;;
    esac
done

# RESULT label rows flushes arrow_mb rows/s wall/flush cpu/flush peak_rss base_rss
# (base: resident with the flush built, before the sink connected).
awk -F'\t' '
NR == 1 {
    printf "\n%s rows per flush (%s MB of Arrow), %s timed flushes per sink\n\n", $3, $5, $4
    printf "| %-14s | %9s | %12s | %11s | %13s | %13s | %14s |\n", "sink", "rows/s", "wall s/flush", "CPU-s/flush", "rows/CPU-s", "peak RSS (MB)", "over base (MB)"
    printf "|%s|%s|%s|%s|%s|%s|%s|\n", "----------------", "-----------", "--------------", "-------------", "---------------", "---------------", "----------------"
}
{ printf "| %-14s | %9d | %12.3f | %11.3f | %13d | %13d | %14d |\n", $2, $6, $7, $8, $3 / $8, $9, $9 - $10 }' "$dir/results.tsv"
