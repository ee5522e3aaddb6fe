# shellcheck shell=bash
# What scripts/bench-e2e.sh and scripts/bench-pipeline.sh measure with.
# Source it after scripts/env.sh.

# The directory holding the benchmark's workload generator (gen_events.py)
# and its model of the original Python Millpond (py_baseline.py): bench/ in
# the repository, or BENCH_INPUTS, e.g. to measure another version of either.
# shellcheck disable=SC2034 # read by the scripts that source this file
bench_inputs=${BENCH_INPUTS:-$MILLPOND_ROOT/bench}

# CPU seconds of every thread of a live process so far (utime + stime).
bench_cpu() {
    awk -v t="$(getconf CLK_TCK)" '{printf "%.3f", ($14+$15)/t}' "/proc/$1/stat"
}

# A free TCP port on 127.0.0.1.
bench_port() {
    "$MILLPOND_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The child of a launcher such as /usr/bin/time, once it has started.
bench_child() {
    local child=""
    for _ in $(seq 500); do
        child=$(pgrep -P "$1" || true)
        [ -n "$child" ] && { echo "$child"; return 0; }
        sleep 0.01
    done
    return 1
}

# BENCH_PERF=DIR: sets bench_prefix to the command prefix that samples the
# process it starts, every thread, into DIR/NAME.data (perf's cpu-clock
# event, DWARF call graphs, wall-clock timestamps so a phase can be cut out
# with perf report --time); empty without BENCH_PERF. perf costs CPU itself:
# a profiled run's figures are not the benchmark's.
bench_prefix=()
bench_perf_prefix() {
    bench_prefix=()
    [ -n "${BENCH_PERF:-}" ] || return 0
    command -v perf >/dev/null || millpond_die "BENCH_PERF: perf missing (apt-get install linux-perf)"
    mkdir -p "$BENCH_PERF"
    bench_prefix=(perf record -q -k CLOCK_REALTIME -e cpu-clock -F "${BENCH_PERF_FREQ:-999}"
        --call-graph "dwarf,${BENCH_PERF_STACK:-16384}" -o "$BENCH_PERF/$1.data" --)
}

# The process that "${bench_prefix[@]}" started as PID's child (PID itself
# without a prefix).
bench_unwrap() {
    if [ ${#bench_prefix[@]} -gt 0 ]; then bench_child "$1"; else echo "$1"; fi
}

# A lake where production keeps it, from scripts/services.sh's Postgres and
# moto S3 (`services.sh env` evaluated): a new catalog database millpond_$1
# and a data folder for it; prints the writer's settings and leaves them for
# the lake checks in $2/millpond-lake.kv.
bench_lake_env() {
    local db=millpond_$1 data="s3://$MILLPOND_TEST_S3_BUCKET/bench/$$-$1/"
    PGPASSWORD=$MILLPOND_TEST_PG_PASSWORD PGOPTIONS='-c client_min_messages=warning' psql -X -q \
        -h "$MILLPOND_TEST_PG_HOST" -p "$MILLPOND_TEST_PG_PORT" -U "$MILLPOND_TEST_PG_USER" -d "$MILLPOND_TEST_PG_DB" \
        -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >&2
    local s3_host=${MILLPOND_TEST_S3_ENDPOINT#http://}
    # The test services' credentials: readable by this user only.
    (umask 077 && : >"$2/millpond-lake.kv")
    cat >"$2/millpond-lake.kv" <<KV
catalog=postgres:host=$MILLPOND_TEST_PG_HOST port=$MILLPOND_TEST_PG_PORT dbname=$db user=$MILLPOND_TEST_PG_USER password=$MILLPOND_TEST_PG_PASSWORD
data=$data
s3_key_id=$MILLPOND_TEST_S3_KEY_ID
s3_secret=$MILLPOND_TEST_S3_SECRET
s3_region=$MILLPOND_TEST_S3_REGION
s3_endpoint=$s3_host
KV
    echo "DUCKLAKE_RDS_HOST=$MILLPOND_TEST_PG_HOST DUCKLAKE_RDS_PORT=$MILLPOND_TEST_PG_PORT" \
        "DUCKLAKE_RDS_DATABASE=$db DUCKLAKE_RDS_USERNAME=$MILLPOND_TEST_PG_USER" \
        "DUCKLAKE_RDS_PASSWORD=$MILLPOND_TEST_PG_PASSWORD DUCKLAKE_DATA_PATH=$data" \
        "DUCKDB_S3_ACCESS_KEY_ID=$MILLPOND_TEST_S3_KEY_ID DUCKDB_S3_SECRET_ACCESS_KEY=$MILLPOND_TEST_S3_SECRET" \
        "DUCKDB_S3_REGION=$MILLPOND_TEST_S3_REGION DUCKDB_S3_ENDPOINT=$s3_host DUCKDB_S3_USE_SSL=false DUCKDB_S3_URL_STYLE=path"
}

# Starts millpond-writer ($bench_writer_bin) as pod number $1 with the
# settings in $2 (VAR=value words, the lake's), logging to $3, and waits
# for it to be ready. Sets bench_writer_pid, bench_writer_addr (Flight) and
# bench_writer_metrics (its /metrics URL).
bench_start_writer() {
    local port http
    port=$(bench_port)
    http=$(bench_port)
    # shellcheck disable=SC2086
    env $2 DUCKLAKE_TABLE="${BENCH_TABLE:-events}" POD_NAME="millpond-$1" \
        MILLPOND_WRITER_ADDR="127.0.0.1:$port" MILLPOND_WRITER_HTTP_PORT="$http" MILLPOND_LOG_FORMAT=text \
        "$bench_writer_bin" >"$3" 2>&1 &
    bench_writer_pid=$!
    bench_writer_addr=127.0.0.1:$port
    bench_writer_metrics=http://127.0.0.1:$http/metrics
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$http/readyz" >/dev/null && return 0
        kill -0 "$bench_writer_pid" 2>/dev/null || break
        sleep 0.1
    done
    millpond_die "writer $1 not ready: $(tail -5 "$3")"
}

# A new, empty Postgres database $1 on scripts/services.sh's server
# (`services.sh env` evaluated); exports the PG* variables psql reads.
bench_pg_database() {
    export PGHOST=$MILLPOND_TEST_PG_HOST PGPORT=$MILLPOND_TEST_PG_PORT PGUSER=$MILLPOND_TEST_PG_USER
    export PGPASSWORD=$MILLPOND_TEST_PG_PASSWORD PGOPTIONS='-c client_min_messages=warning'
    psql -X -q -d "$MILLPOND_TEST_PG_DB" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >&2
}
