#!/usr/bin/env bash
# The hoglake writer image's binary: millpond-writer built without its
# default `ducklake` feature.
#
#   check-hoglake-writer.sh                clippy on that build (part of
#                                          scripts/test.sh)
#   check-hoglake-writer.sh --binary FILE  FILE links no DuckDB (so the image
#                                          needs neither libduckdb nor the
#                                          extensions) and refuses DuckLake at
#                                          startup; scripts/image/check-built.sh
#                                          runs it inside the writer-hoglake image
#
# The binary itself is built only by scripts/image/build-binaries.sh (the
# image build), into a target directory of its own.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

check_binary() {
    local bin=$1
    [ -x "$bin" ] || millpond_die "$bin is not an executable"
    if ldd "$bin" | grep -i duckdb; then
        millpond_die "the hoglake-only writer links DuckDB ($bin)"
    fi
    local err
    if err=$(env -i PATH="$PATH" DUCKLAKE_TABLE=x timeout 20 "$bin" 2>&1 >/dev/null); then
        millpond_die "the hoglake-only writer accepted MILLPOND_DESTINATION=ducklake ($bin)"
    fi
    if ! grep -q "MILLPOND_DESTINATION.*built without DuckLake" <<<"$err"; then
        printf '%s\n' "$err" >&2
        millpond_die "the hoglake-only writer did not name MILLPOND_DESTINATION and the missing DuckLake ($bin)"
    fi
    echo "hoglake-only writer: no DuckDB linked; DuckLake refused at startup ($bin)"
}

if [ "${1:-}" = --binary ]; then
    [ $# -eq 2 ] || millpond_die "usage: check-hoglake-writer.sh [--binary FILE]"
    check_binary "$2"
    exit 0
fi
[ $# -eq 0 ] || millpond_die "usage: check-hoglake-writer.sh [--binary FILE]"

# Its unit tests are the default writer's, run by the workspace's tests;
# what only this build does (refuse DuckLake) is checked on the binary in
# the image. clippy writes no binary, so nothing here takes the place of
# the default millpond-writer.
cargo clippy --release -p millpond-writer --no-default-features --all-targets -- -D warnings
