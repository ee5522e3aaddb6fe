#!/usr/bin/env bash
# Test services for Millpond: a local Postgres (Debian cluster) and a moto S3
# server.
#
#   scripts/services.sh start   start Postgres (if down), make role/database
#                               millpond/millpond_test, start moto, make the
#                               bucket millpond-test. Idempotent.
#   scripts/services.sh stop    stop moto (Postgres is left running).
#   scripts/services.sh status  say what is running.
#   scripts/services.sh env     print `export ...` lines for the tests:
#                               eval "$(scripts/services.sh env)"
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

PG_HOST=127.0.0.1
PG_PORT=$MILLPOND_TEST_PG_PORT
PG_DB=${MILLPOND_TEST_PG_DB:-millpond_test}
PG_USER=${MILLPOND_TEST_PG_USER:-millpond}
PG_PASSWORD=${MILLPOND_TEST_PG_PASSWORD:-millpond}
S3_HOST=127.0.0.1
S3_PORT=$MILLPOND_TEST_S3_PORT
S3_BUCKET=${MILLPOND_TEST_S3_BUCKET:-millpond-test}
S3_KEY_ID="test"
S3_SECRET="test"
S3_REGION=us-east-1

MOTO_PID=$MILLPOND_STATE/moto-$S3_PORT.pid
MOTO_LOG=$MILLPOND_STATE/moto-$S3_PORT.log
MOTO_TMP=$MILLPOND_STATE/moto-$S3_PORT.tmp # moto spools large objects here

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)

# Run a command as the postgres OS user.
as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && su postgres -s /bin/sh -c "$(printf '%q ' "$@")")
    else
        (cd / && sudo -u postgres "$@")
    fi
}

# ---------------------------------------------------------------- Postgres

# The Debian cluster ("<version> <name>") that listens on $PG_PORT.
pg_cluster() {
    command -v pg_lsclusters >/dev/null || millpond_die "pg_lsclusters not found; run scripts/setup-system.sh"
    local c
    c=$(pg_lsclusters -h | awk -v port="$PG_PORT" '$3 == port { print $1, $2; exit }')
    [ -n "$c" ] || millpond_die "no Postgres cluster on port $PG_PORT (pg_lsclusters shows: $(pg_lsclusters -h | awk '{print $1"/"$2":"$3}' | tr '\n' ' '))"
    echo "$c"
}

pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" >/dev/null 2>&1; }

# A libpq conninfo value: single-quoted, with \ and ' escaped by a
# backslash, so a space or a quote in a setting cannot add a keyword.
pgq() {
    local v=${1//\\/\\\\}
    v=${v//\'/\\\'}
    printf "'%s'" "$v"
}

# The test role's conninfo, with `extra` keywords appended.
pg_conninfo() {
    printf 'host=%s port=%s dbname=%s user=%s sslmode=disable%s' \
        "$(pgq "$PG_HOST")" "$(pgq "$PG_PORT")" "$(pgq "$PG_DB")" "$(pgq "$PG_USER")" "${1:+ $1}"
}

# Can the test role log in over TCP with its password?
pg_login_ok() {
    PGPASSWORD=$PG_PASSWORD PGCONNECT_TIMEOUT=5 psql -X -q -w \
        "$(pg_conninfo)" \
        -tAc 'SELECT 1' 2>/dev/null | grep -qx 1
}

# `\set NAME 'VALUE'` for psql's stdin: inside single quotes psql reads
# '' as a quote and \\ as a backslash; a value cannot span lines.
psql_set() {
    case "$2" in *$'\n'*) millpond_die "services: $1 must be one line" ;; esac
    local v=${2//\\/\\\\}
    v=${v//\'/\'\'}
    printf '%s %s %s\n' '\set' "$1" "'$v'"
}

pg_start() {
    if ! pg_ready; then
        local cluster
        cluster=$(pg_cluster)
        # shellcheck disable=SC2086 # "<version> <name>" is two arguments
        "${as_root[@]}" pg_ctlcluster $cluster start 2>/dev/null || true
        local _
        for _ in $(seq 1 60); do
            pg_ready && break
            sleep 0.5
        done
        if ! pg_ready; then
            # shellcheck disable=SC2086
            pg_lsclusters >&2 || true
            millpond_die "Postgres cluster $cluster did not become ready on $PG_HOST:$PG_PORT (log: /var/log/postgresql/postgresql-${cluster/ /-}.log)"
        fi
    fi

    pg_login_ok && return 0

    # Role and database (created if absent; the password is (re)set so a
    # stale role from an older run still works). The values reach the SQL
    # only as psql variables, quoted by format(): %I an identifier, %L a
    # literal. They are set on stdin (never on the command line, which `ps`
    # shows), each a psql-quoted argument.
    {
        psql_set user "$PG_USER"
        psql_set password "$PG_PASSWORD"
        psql_set db "$PG_DB"
        cat <<'SQL'
SELECT format('CREATE ROLE %I', :'user')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user')\gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB PASSWORD %L', :'user', :'password')\gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'user')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db')\gexec
SQL
    } | as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$PG_PORT" -d postgres >/dev/null ||
        millpond_die "could not create role $PG_USER / database $PG_DB (psql as postgres failed)"

    pg_login_ok && return 0

    # Password login over TCP still fails: make sure pg_hba.conf has a
    # password rule for 127.0.0.1 (Debian's default already has one).
    local hba
    hba=$(as_postgres psql -X -q -p "$PG_PORT" -d postgres -tAc 'SHOW hba_file') ||
        millpond_die "cannot read hba_file setting"
    if ! "${as_root[@]}" grep -Eq "^[[:space:]]*host[[:space:]]+all[[:space:]]+(all|$PG_USER)[[:space:]]+127\.0\.0\.1/32[[:space:]]+(scram-sha-256|md5|password)" "$hba"; then
        echo "services: adding a scram-sha-256 rule for $PG_USER@127.0.0.1 to $hba" >&2
        "${as_root[@]}" sed -i "1i host all $PG_USER 127.0.0.1/32 scram-sha-256 # millpond tests" "$hba"
        as_postgres psql -X -q -p "$PG_PORT" -d postgres -tAc 'SELECT pg_reload_conf()' >/dev/null
        sleep 1
    fi
    pg_login_ok || millpond_die "cannot log in as $PG_USER to $PG_DB on $PG_HOST:$PG_PORT with a password; check $hba"
}

# ---------------------------------------------------------------- moto S3

moto_pid() {
    local pid
    [ -f "$MOTO_PID" ] || return 1
    pid=$(cat "$MOTO_PID")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q moto_server || return 1
    echo "$pid"
}

# Whether moto answers on the port: its dashboard page, which does not
# depend on what the server holds. (Its data.json dump answers 500 once the
# test suite has left an upload in a bucket it deleted, and a moto still
# running after a suite was then taken for "not moto".)
s3_answers() {
    curl -fs -o /dev/null --max-time 2 "http://$S3_HOST:$S3_PORT/moto-api/"
}

s3_bucket() {
    "$MILLPOND_PYTHON" - "http://$S3_HOST:$S3_PORT" "$S3_BUCKET" "$S3_KEY_ID" "$S3_SECRET" "$S3_REGION" <<'PY'
import sys
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, bucket, key, secret, region = sys.argv[1:]
s3 = boto3.client(
    "s3", endpoint_url=endpoint, aws_access_key_id=key,
    aws_secret_access_key=secret, region_name=region,
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
)
try:
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
            raise
        s3.create_bucket(Bucket=bucket)
        s3.head_bucket(Bucket=bucket)
except Exception as e:  # noqa: BLE001
    sys.exit(f"S3 bucket {bucket} at {endpoint}: {e}")
PY
}

moto_start() {
    local pid
    if pid=$(moto_pid); then
        s3_bucket || millpond_die "moto (pid $pid) is running but bucket $S3_BUCKET could not be created"
        return 0
    fi
    rm -f "$MOTO_PID"
    if s3_answers; then
        # Someone else's moto on our port (not started from this state dir).
        echo "services: reusing the moto server already on $S3_HOST:$S3_PORT (not started by this script)" >&2
        s3_bucket || millpond_die "something on $S3_HOST:$S3_PORT is not usable as S3; set MILLPOND_TEST_S3_PORT"
        return 0
    fi
    if curl -s -o /dev/null --max-time 2 "http://$S3_HOST:$S3_PORT/"; then
        millpond_die "port $S3_PORT is taken by something that is not moto; set MILLPOND_TEST_S3_PORT"
    fi
    [ -x "$MILLPOND_VENV/bin/moto_server" ] || millpond_die "$MILLPOND_VENV/bin/moto_server missing; run scripts/setup-python.sh"

    mkdir -p "$MILLPOND_STATE" "$MOTO_TMP"
    TMPDIR=$MOTO_TMP setsid nohup "$MILLPOND_VENV/bin/moto_server" -H "$S3_HOST" -p "$S3_PORT" \
        </dev/null >>"$MOTO_LOG" 2>&1 &
    pid=$!
    echo "$pid" >"$MOTO_PID"

    local _
    for _ in $(seq 1 120); do
        s3_answers && break
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$MOTO_LOG" >&2 || true
            rm -f "$MOTO_PID"
            millpond_die "moto_server exited at startup (log: $MOTO_LOG)"
        fi
        sleep 0.5
    done
    if ! s3_answers; then
        tail -n 30 "$MOTO_LOG" >&2 || true
        millpond_die "moto_server (pid $pid) did not answer on $S3_HOST:$S3_PORT within 60 s (log: $MOTO_LOG)"
    fi
    s3_bucket || millpond_die "could not create bucket $S3_BUCKET on moto (log: $MOTO_LOG)"
}

moto_stop() {
    local pid _
    if ! pid=$(moto_pid); then
        rm -f "$MOTO_PID"
        return 0
    fi
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$MOTO_PID"
    rm -rf "$MOTO_TMP"
}

# ---------------------------------------------------------------- commands

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

print_env() {
    local dsn
    dsn=$(pg_conninfo "password=$(pgq "$PG_PASSWORD")")
    local kv=(
        "MILLPOND_TEST_PG_DSN=$dsn"
        "MILLPOND_TEST_PG_HOST=$PG_HOST"
        "MILLPOND_TEST_PG_PORT=$PG_PORT"
        "MILLPOND_TEST_PG_DB=$PG_DB"
        "MILLPOND_TEST_PG_USER=$PG_USER"
        "MILLPOND_TEST_PG_PASSWORD=$PG_PASSWORD"
        "MILLPOND_TEST_S3_ENDPOINT=$S3_HOST:$S3_PORT"
        "MILLPOND_TEST_S3_BUCKET=$S3_BUCKET"
        "MILLPOND_TEST_S3_KEY_ID=$S3_KEY_ID"
        "MILLPOND_TEST_S3_SECRET=$S3_SECRET"
        "MILLPOND_TEST_S3_REGION=$S3_REGION"
        "DUCKDB_EXTENSION_DIR=$DUCKDB_EXTENSION_DIR"
        "MILLPOND_PYTHON=$MILLPOND_PYTHON"
    )
    local e
    for e in "${kv[@]}"; do
        echo "export ${e%%=*}=$(q "${e#*=}")"
    done
}

status() {
    local rc=0 pid
    if pg_ready; then
        if pg_login_ok; then echo "postgres: ready on $PG_HOST:$PG_PORT, $PG_USER@$PG_DB login ok"; else echo "postgres: ready on $PG_HOST:$PG_PORT, $PG_USER@$PG_DB login FAILS"; rc=1; fi
    else
        echo "postgres: not running on $PG_HOST:$PG_PORT"; rc=1
    fi
    if pid=$(moto_pid); then
        echo "moto: running (pid $pid) on $S3_HOST:$S3_PORT, log $MOTO_LOG"
    elif s3_answers; then
        echo "moto: something answers on $S3_HOST:$S3_PORT (not started by this script)"
    else
        echo "moto: not running on $S3_HOST:$S3_PORT"; rc=1
    fi
    return $rc
}

case "${1:-}" in
    start) pg_start; moto_start ;;
    stop) moto_stop ;;
    status) status ;;
    env) print_env ;;
    *)
        echo "usage: $0 start|stop|status|env" >&2
        exit 2
        ;;
esac
