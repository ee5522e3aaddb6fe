#!/usr/bin/env bash
# Installs nisshi 0.8.1, a Kafka-compatible broker in Rust, used as the
# separate-process broker by the end-to-end tests (and by
# DEMO_BROKER=nisshi scripts/demo.sh). Only its SQLite storage is built (the
# tests' storage; the S3 and Postgres engines would double the build).
# Instant once ~/.cargo/bin/nisshi is there.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
want=0.8.1
bin=${CARGO_HOME:-$HOME/.cargo}/bin/nisshi
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "$want"; then
    exit 0
fi
echo "installing nisshi $want (one-time, several minutes)" >&2
# Its own target dir: nisshi's dependency features must not disturb ours.
# opt-level 1: a test broker needs no peak speed, and the build is shorter.
CARGO_TARGET_DIR=$MILLPOND_CACHE/nisshi-target CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    cargo install nisshi --version "$want" --locked --ignore-rust-version --quiet \
    --no-default-features --features libsql
"$bin" --version >/dev/null
