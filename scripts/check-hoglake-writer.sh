#!/usr/bin/env bash
# The hoglake writer image's binary: millpond-writer built without its
# default `ducklake` feature. Lints it, runs its unit tests, and checks that
# the binary links no DuckDB (so the image needs neither libduckdb nor the
# extensions). Run it before building the default binaries: it replaces
# target/<profile>/millpond-writer with the hoglake-only one.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

flags=(--release -p millpond-writer --no-default-features)
cargo clippy "${flags[@]}" --all-targets -- -D warnings
cargo test "${flags[@]}" --lib -- --test-threads=2
cargo build "${flags[@]}" --bin millpond-writer
bin="$CARGO_TARGET_DIR/release/millpond-writer"
if ldd "$bin" | grep -i duckdb; then
    millpond_die "the hoglake-only writer links DuckDB ($bin)"
fi
if DUCKLAKE_TABLE=x timeout 20 "$bin" >/dev/null 2>&1; then
    millpond_die "the hoglake-only writer accepted MILLPOND_DESTINATION=ducklake"
fi
echo "hoglake-only writer: no DuckDB linked; DuckLake refused at startup"
