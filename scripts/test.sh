#!/usr/bin/env bash
# The Millpond test command: prepares the machine (Debian packages, Python
# venv, DuckDB's prebuilt library and extensions, the nisshi broker,
# Postgres + moto S3), then runs rustfmt, clippy, the proto check, the image
# check and the whole test suite. Everything cargo does uses the release
# profile, so each dependency is compiled once per machine (into
# $CARGO_TARGET_DIR, default ~/.cache/millpond/target); the images are made
# from the binaries built here, not compiled again.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

t0=$SECONDS
summary=()
current=

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
steps_done() {
    local IFS=, s
    s="${summary[*]:-none}"
    echo "${s//,/, }"
}

finish() {
    local rc=$?
    local total
    # A failed run leaves no nisshi build behind (its own process group).
    [ -z "${nisshi_pid:-}" ] || kill -- -"$nisshi_pid" 2>/dev/null || true
    total=$(fmt_secs $((SECONDS - t0)))
    if [ "$rc" -eq 0 ]; then
        echo "test.sh: PASSED in $total ($(steps_done))"
    else
        echo "test.sh: FAILED at '$current' (exit $rc) after $total (passed: $(steps_done))" >&2
    fi
}
trap finish EXIT

step() {
    local name=$1 t=$SECONDS
    shift
    current=$name
    echo "==> $name" >&2
    "$@"
    summary+=("$name $(fmt_secs $((SECONDS - t)))")
    current=
}

step setup-system bash scripts/setup-system.sh
step setup-python bash scripts/setup-python.sh
step setup-duckdb bash scripts/setup-duckdb.sh
step setup-extensions bash scripts/setup-extensions.sh
# nisshi compiles for about ten minutes on a new machine and only the tests
# need it: it builds beside the steps below (much of which waits on disk and
# network) and the test step waits for it.
nisshi_log=$MILLPOND_CACHE/setup-nisshi.log
mkdir -p "$MILLPOND_CACHE"
echo "==> setup-nisshi (in the background; log: $nisshi_log)" >&2
setsid bash scripts/setup-nisshi.sh >"$nisshi_log" 2>&1 &
nisshi_pid=$!
nisshi_wait() {
    local rc=0
    wait "$nisshi_pid" || rc=$?
    nisshi_pid=
    cat "$nisshi_log" >&2
    [ "$rc" -eq 0 ] || millpond_die "scripts/setup-nisshi.sh failed (exit $rc; log: $nisshi_log)"
}
step services bash scripts/services.sh start
eval "$(bash scripts/services.sh env)"

command -v cargo >/dev/null || millpond_die "cargo not found (install Rust with rustup)"
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    command -v rustup >/dev/null || millpond_die "cargo fmt / cargo clippy missing and no rustup to add them"
    step rustup-components rustup component add rustfmt clippy
fi

# The test builds carry the failpoints (MILLPOND_FAILPOINT) that the
# end-to-end tests arm; release binaries and images are built without them.
features=(--features millpond-writer/failpoints,millpond-ingest/failpoints)

step fmt cargo fmt --all --check
step features bash scripts/check-features.sh
step clippy cargo clippy --release --workspace --all-targets "${features[@]}" -- -D warnings
step check-proto bash scripts/check-proto.sh
step hoglake-writer bash scripts/check-hoglake-writer.sh
# The release binaries without the failpoints (`cargo build --workspace
# --bins` and the hoglake-only writer), then the three images made from
# them with buildah and checked inside.
step images bash scripts/build-images.sh
# The end-to-end tests run the real binaries; cargo test alone does not
# build another package's binaries. The failpoints change only the
# workspace's own crates, so this recompiles those and nothing else.
step build cargo build --release --workspace --bins "${features[@]}"
step setup-nisshi nisshi_wait
step test cargo test --release --workspace "${features[@]}" -- --test-threads=2
