#!/usr/bin/env bash
# Check the three built images from inside (run by scripts/build-images.sh,
# after it built localhost/millpond-{ingest,writer-ducklake,writer-hoglake,runtime}).
# This is the one place that says what an image must hold.
#
# Each image, through `buildah run` in a working container of it:
#   - holds exactly its files under /usr/local and /opt (contents below), and
#     every ELF file there finds its shared libraries in the image (ldd);
#   - runs as its USER, which is not root, and its binaries start as that user;
#   - is no bigger than its files' ceiling (STAGED_MB) plus the runtime base.
# The hoglake writer image holds no DuckDB file, links none, and refuses
# DuckLake at startup (scripts/check-hoglake-writer.sh --binary, inside it).
# Then two pipelines run from the images, with a mock broker (the
# workspace's millpond-mock-broker) on this machine:
#   - in a network namespace of their own, on the binaries' default ports:
#     the ingest image -> the DuckLake writer image, which loads its
#     extensions from the image's folder (the image is its whole root) and
#     writes an embedded lake to a volume, read back with the image's
#     millpond-lake;
#   - on this machine's network, on free ports: the ingest image -> the
#     hoglake writer image -> the hoglake emulator, data in the moto bucket
#     of scripts/services.sh; the emulator's log must show the rows published.
# While each runs, its image's HEALTHCHECK command must pass inside it (and
# fail for a port nobody serves).
#
# Usage: check-built.sh [ducklake-pipeline]   (the latter: the first
# pipeline alone, in the current network namespace)
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/image/buildah.sh
. scripts/image/buildah.sh

IMAGES=(ingest writer-ducklake writer-hoglake)
# Ceilings of each image's own files (its /stage/<image> tree), in MB: the
# image may be at most this plus its runtime base. Issue 30 quoted the
# unstripped trees of its day (ingest 48.5, writer-ducklake 233.6,
# writer-hoglake 27.7 MB); unstripped they grew to 51.7, 254.3 and 27.9
# (millpond-lake's maintenance recipes); stripped binaries bring ingest and
# hoglake under the old figures. writer-ducklake is 200.5 MB of DuckDB
# (libduckdb 70.5, four extensions 130) plus 42 MB of binaries and files.
# writer-hoglake 22 -> 23: its binary now shares the workspace build's
# features of the crates both use (zstd's legacy formats among them: +234 KB,
# 21.84 -> 22.08 MB stripped) so that it compiles no dependency again (issue
# 46). Raise one deliberately, never just to pass.
declare -A STAGED_MB=([ingest]=43 [writer-ducklake]=246 [writer-hoglake]=23)
EVENTS=200

# The files an image holds under /usr/local and /opt, one a line.
contents() {
    local bin=/usr/local/bin
    case $1 in
        ingest) printf '%s\n' $bin/millpond-ingest $bin/millpond-replay $bin/millpond-healthcheck ;;
        writer-ducklake)
            printf '%s\n' $bin/millpond-writer $bin/millpond-lake $bin/millpond-healthcheck /usr/local/lib/libduckdb.so
            local dir
            dir=/opt/duckdb-extensions/v$MILLPOND_DUCKDB_VERSION/$(millpond_duckdb_platform)
            sed -e 's/#.*//' -e '/^[[:space:]]*$/d' writer/duckdb-extensions.txt |
                while read -r name _; do echo "$dir/$name.duckdb_extension"; done
            ;;
        writer-hoglake) printf '%s\n' $bin/millpond-writer $bin/millpond-healthcheck ;;
    esac
}

ok() { echo "images: $1: ok: $2"; }
fail() { millpond_die "images: $1: $2"; }

CTRS=()
PIDS=()
work=$(mktemp -d)
# The process a background job started, the deepest of its tree (the binary
# inside the container, under buildah and its chroot helper; buildah does
# not pass signals on).
leaf() {
    local p=$1 c
    while c=$(ps -o pid= --ppid "$p" | head -n1 | tr -d ' ') && [ -n "$c" ]; do p=$c; done
    echo "$p"
}
cleanup() {
    local pid ctr
    for pid in "${PIDS[@]}"; do kill "$(leaf "$pid")" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    for ctr in "${CTRS[@]}"; do bh rm "$ctr" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# A new working container of an image (in $ctr), removed at exit.
new_container() {
    ctr=$(bh from --pull=never "localhost/millpond-$1")
    CTRS+=("$ctr")
}
in_ctr() {
    local c=$1
    shift
    bh run --isolation chroot "$c" -- "$@"
}
# A field of an image's config (a path into `buildah inspect`'s JSON, e.g.
# Docker.config.User), lists joined by spaces, empty when absent.
config() {
    bh inspect --type image "localhost/millpond-$1" | python3 -c '
import json, sys
v = json.load(sys.stdin)
for key in sys.argv[1].split("."):
    v = (v or {}).get(key)
print(" ".join(v) if isinstance(v, list) else v or "")' "$2"
}
# The bytes of an image's root filesystem.
image_bytes() {
    local c bytes
    c=$(bh from --pull=never "localhost/millpond-$1")
    bytes=$(du -sb "$(bh mount "$c")" | cut -f1)
    bh rm "$c" >/dev/null
    echo "$bytes"
}
limit_bytes() { python3 -c "print(int($RUNTIME_BYTES + ${STAGED_MB[$1]} * 1e6))"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# healthcheck IMAGE CONTAINER [buildah run options]: the image's HEALTHCHECK
# command, run inside the container.
healthcheck() {
    local image=$1 c=$2 cmd
    shift 2
    cmd=$(config "$image" Docker.config.Healthcheck.Test)
    [ "${cmd%% *}" = CMD ] || fail "$image" "HEALTHCHECK is not in the exec form: $cmd"
    # shellcheck disable=SC2086
    bh run --isolation chroot "$@" "$c" -- ${cmd#CMD } >/dev/null 2>&1
}
# run_entrypoint IMAGE LOG [buildah run options]: the image's ENTRYPOINT in a
# new container, in the background; sets $ctr and $pid.
run_entrypoint() {
    local image=$1 logfile=$2 entry
    shift 2
    entry=$(config "$image" Docker.config.Entrypoint)
    new_container "$image"
    # shellcheck disable=SC2086
    bh run --isolation chroot "$@" "$ctr" -- $entry >"$logfile" 2>&1 &
    pid=$!
    PIDS+=("$pid")
}
# check_healthcheck IMAGE LOG PORT-VARIABLE [buildah run options]: wait for
# the image's HEALTHCHECK to pass in $ctr while $pid runs, then check it
# fails for a port nobody serves.
check_healthcheck() {
    local image=$1 logfile=$2 port_var=$3 until=$((SECONDS + 90))
    shift 3
    until healthcheck "$image" "$ctr" "$@"; do
        kill -0 "$pid" 2>/dev/null || { tail -n 40 "$logfile" >&2; fail "$image" "exited before its HEALTHCHECK passed"; }
        [ $SECONDS -lt $until ] || { tail -n 40 "$logfile" >&2; fail "$image" "HEALTHCHECK did not pass within 90 s"; }
        sleep 1
    done
    if healthcheck "$image" "$ctr" "$@" --env "$port_var=$(free_port)"; then
        fail "$image" "its HEALTHCHECK passes for a port nobody serves"
    fi
}
start_broker() {
    local broker_bin=$CARGO_TARGET_DIR/release/millpond-mock-broker
    [ -x "$broker_bin" ] || millpond_die "$broker_bin missing (build-binaries.sh builds the workspace's binaries)"
    "$broker_bin" --topic events --partitions 2 --sample-events "$EVENTS" >"$work/broker.out" 2>"$work/broker.log" &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q '^BOOTSTRAP=' "$work/broker.out" && break; sleep 0.2; done
    bootstrap=$(sed -n 's/^BOOTSTRAP=//p' "$work/broker.out")
    [ -n "$bootstrap" ] || millpond_die "millpond-mock-broker printed no BOOTSTRAP= line: $(cat "$work/broker.log")"
}
# wait_for WHAT IMAGE TIMEOUT LOGS... -- COMMAND...: until COMMAND succeeds.
wait_for() {
    local what=$1 image=$2 until=$((SECONDS + $3)) logs=()
    shift 3
    while [ "$1" != -- ]; do logs+=("$1"); shift; done
    shift
    until "$@"; do
        [ $SECONDS -lt $until ] || { tail -n 30 "${logs[@]}" >&2; fail "$image" "$what: not within the time limit"; }
        sleep 1
    done
}

ducklake_pipeline() {
    ip link set lo up
    start_broker
    local lake=$work/lake w_pid i_pid rows files out
    mkdir -p "$lake"
    chmod 0777 "$lake"
    # No port variables: the binaries' defaults, which the HEALTHCHECK
    # script must agree with.
    run_entrypoint writer-ducklake "$work/writer.log" \
        --env DUCKLAKE_TABLE=events --env MILLPOND_LAKE_DIR=/lake --env POD_NAME=millpond-0 -v "$lake:/lake"
    check_healthcheck writer-ducklake "$work/writer.log" MILLPOND_WRITER_HTTP_PORT
    ok writer-ducklake "HEALTHCHECK passes inside the running image (default port), fails for a dead port"
    w_pid=$pid
    run_entrypoint ingest "$work/ingest.log" --env "KAFKA_BOOTSTRAP_SERVERS=$bootstrap" --env KAFKA_TOPIC=events \
        --env REPLICA_COUNT=1 --env POD_NAME=millpond-0 --env DUCKLAKE_TABLE=events --env FLUSH_INTERVAL_MS=1000
    check_healthcheck ingest "$work/ingest.log" MILLPOND_HTTP_PORT
    ok ingest "HEALTHCHECK passes inside the running image (default port), fails for a dead port"
    i_pid=$pid
    written() {
        [ "$(curl -fsS http://127.0.0.1:8001/metrics 2>/dev/null |
            awk '/^millpond_records_written_total/ { n += $2 } END { print n + 0 }')" -ge "$EVENTS" ]
    }
    wait_for "$EVENTS events written" writer-ducklake 120 "$work/writer.log" "$work/ingest.log" -- written
    # Read back inside the image too: its millpond-lake, its extensions.
    new_container writer-ducklake
    out=$(bh run --isolation chroot --env MILLPOND_LAKE_DIR=/lake --env DUCKLAKE_TABLE=events -v "$lake:/lake" "$ctr" -- \
        millpond-lake shell --sql "SELECT 'rows=' || count(*) FROM events" 2>&1) || true
    rows=$(grep -o 'rows=[0-9][0-9]*' <<<"$out" | head -n1 | cut -d= -f2)
    [ "$rows" = "$EVENTS" ] || { printf '%s\n' "$out" >&2; fail writer-ducklake "the lake holds ${rows:-no} rows, want $EVENTS"; }
    files=$(find "$lake" -name '*.parquet' | wc -l)
    [ "$files" -gt 0 ] || fail writer-ducklake "no Parquet files in the lake"
    # SIGTERM, as a container stop sends it: both must stop cleanly.
    kill "$(leaf "$i_pid")"
    wait "$i_pid" || { tail -n 30 "$work/ingest.log" >&2; fail ingest "exited $? after SIGTERM"; }
    kill "$(leaf "$w_pid")"
    wait "$w_pid" || { tail -n 30 "$work/writer.log" >&2; fail writer-ducklake "exited $? after SIGTERM"; }
    ok writer-ducklake "loaded its extensions from /opt/duckdb-extensions; wrote the embedded lake: $rows rows in $files Parquet files, read back by its millpond-lake (broker -> ingest image -> writer-ducklake image); both stopped cleanly on SIGTERM"
}

hoglake_pipeline() {
    start_broker
    "$MILLPOND_PYTHON" tests/hoglake-emulator/hoglake_emulator.py --host 127.0.0.1 --port 0 \
        >"$work/emulator.out" 2>"$work/emulator.log" &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q '^LISTENING ' "$work/emulator.out" && break; sleep 0.2; done
    local emulator h_http h_flight
    emulator=http://127.0.0.1:$(sed -n 's/^LISTENING //p' "$work/emulator.out")
    [ "$emulator" != http://127.0.0.1: ] || millpond_die "the hoglake emulator printed no LISTENING line: $(cat "$work/emulator.log")"
    h_http=$(free_port) h_flight=$(free_port)
    run_entrypoint writer-hoglake "$work/writer-hoglake.log" --env "HOGLAKE_URL=$emulator" --env HOGLAKE_CATALOG=images \
        --env HOGLAKE_NAMESPACE=analytics --env HOGLAKE_TABLE=events \
        --env "HOGLAKE_DATA_PATH=s3://$MILLPOND_TEST_S3_BUCKET/images/$(date +%s%N)" \
        --env "HOGLAKE_S3_ENDPOINT=$MILLPOND_TEST_S3_ENDPOINT" --env "HOGLAKE_S3_REGION=$MILLPOND_TEST_S3_REGION" \
        --env "HOGLAKE_S3_ACCESS_KEY=$MILLPOND_TEST_S3_KEY_ID" --env "HOGLAKE_S3_SECRET_KEY=$MILLPOND_TEST_S3_SECRET" \
        --env POD_NAME=millpond-0 --env "MILLPOND_WRITER_HTTP_PORT=$h_http" --env "MILLPOND_WRITER_ADDR=127.0.0.1:$h_flight"
    check_healthcheck writer-hoglake "$work/writer-hoglake.log" MILLPOND_WRITER_HTTP_PORT --env "MILLPOND_WRITER_HTTP_PORT=$h_http"
    ok writer-hoglake "HEALTHCHECK passes inside the running image, fails for a dead port"
    run_entrypoint ingest "$work/ingest-hoglake.log" --env "KAFKA_BOOTSTRAP_SERVERS=$bootstrap" --env KAFKA_TOPIC=events \
        --env REPLICA_COUNT=1 --env POD_NAME=millpond-0 --env MILLPOND_DESTINATION=hoglake --env HOGLAKE_TABLE=events \
        --env FLUSH_INTERVAL_MS=1000 --env "MILLPOND_HTTP_PORT=$(free_port)" --env "MILLPOND_WRITER_ADDR=127.0.0.1:$h_flight"
    published() {
        curl -fsS "$emulator/_emulator/requests?path=/prepared$" 2>/dev/null | python3 -c '
import json, sys
print(sum(f["record_count"] for c in json.load(sys.stdin) if c.get("status") == 200
          for a in c["body"]["appends"] if a["table"] == "events" for f in a["files"]))' 2>/dev/null || echo 0
    }
    all_published() { [ "$(published)" -ge "$EVENTS" ]; }
    wait_for "$EVENTS events published" writer-hoglake 120 "$work/writer-hoglake.log" "$work/ingest-hoglake.log" -- all_published
    ok writer-hoglake "published $(published) rows to the hoglake catalog, data in S3 (broker -> ingest image -> writer-hoglake image)"
}

if [ "${1:-}" = ducklake-pipeline ]; then
    ducklake_pipeline
    exit 0
fi

declare -A SIZE_BYTES=()
RUNTIME_BYTES=$(image_bytes runtime)
for image in "${IMAGES[@]}"; do
    new_container "$image"
    # Files: exactly the list, and each ELF file finds its libraries.
    want=$(contents "$image" | sort)
    got=$(in_ctr "$ctr" find /usr/local /opt -type f | sort)
    if [ "$got" != "$want" ]; then
        diff <(echo "$want") <(echo "$got") >&2 || true
        fail "$image" "its files under /usr/local and /opt differ from the list (< wanted, > found)"
    fi
    # shellcheck disable=SC2016
    missing=$(in_ctr "$ctr" sh -c 'for f in $(find /usr/local /opt -type f); do
        head -c4 "$f" | grep -q ELF || continue; ldd "$f" | sed -n "/not found/s|^|$f: |p"; done')
    [ -z "$missing" ] || fail "$image" "shared libraries missing: $missing"
    ok "$image" "holds exactly its $(echo "$want" | wc -l) files; each ELF file finds its libraries"

    # The user: not root, and the binaries start as it (--help where they
    # have it; the services print their configuration errors: they loaded
    # and ran main).
    user=$(config "$image" Docker.config.User)
    uid=$(in_ctr "$ctr" id -u)
    [ -n "$user" ] && [ "$uid" != 0 ] || fail "$image" "runs as root (USER '$user', uid $uid)"
    for bin in $(contents "$image" | grep '^/usr/local/bin/millpond-' | grep -v healthcheck); do
        out=$(in_ctr "$ctr" sh -c "$bin --help 2>&1" </dev/null 2>/dev/null || true)
        if ! grep -Eq '^Usage:|configuration error' <<<"$out"; then
            printf '%s\n' "$out" >&2
            fail "$image" "$bin did not start as $user"
        fi
    done
    ok "$image" "runs as $user (uid $uid); its binaries start as that user"

    SIZE_BYTES[$image]=$(image_bytes "$image")
    limit=$(limit_bytes "$image")
    [ "${SIZE_BYTES[$image]}" -le "$limit" ] ||
        fail "$image" "$((SIZE_BYTES[$image] / 1000000)) MB, over its limit of $((limit / 1000000)) MB (files ${STAGED_MB[$image]} MB + the runtime base)"
    ok "$image" "$((SIZE_BYTES[$image] / 1000000)) MB, under its limit of $((limit / 1000000)) MB (files ${STAGED_MB[$image]} MB + the runtime base)"
done

# The hoglake writer: nothing of DuckDB.
new_container writer-hoglake
# shellcheck disable=SC2016
found=$(bh run --isolation chroot --user root "$ctr" -- \
    sh -c 'find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -iname "*duckdb*" -print')
[ -z "$found" ] || fail writer-hoglake "holds DuckDB files: $found"
bh run --isolation chroot -v "$MILLPOND_ROOT/scripts:/tmp/millpond/scripts:ro" "$ctr" -- \
    bash /tmp/millpond/scripts/check-hoglake-writer.sh --binary /usr/local/bin/millpond-writer >/dev/null ||
    fail writer-hoglake "scripts/check-hoglake-writer.sh --binary failed inside the image"
ok writer-hoglake "holds no DuckDB file, links no libduckdb, refuses MILLPOND_DESTINATION=ducklake"

unshare --net -- bash "$0" ducklake-pipeline
hoglake_pipeline

echo "image                               size    limit"
for image in "${IMAGES[@]}"; do
    printf '%-34s %4d MB  %4d MB\n' "localhost/millpond-$image" $((SIZE_BYTES[$image] / 1000000)) $(($(limit_bytes "$image") / 1000000))
done
