#!/usr/bin/env bash
# The hoglake writer image's binary: millpond-writer built without its
# default `ducklake` feature. Lints it, builds it the
# way the image does (scripts/image/build-binaries.sh writer-hoglake), and
# checks that the binary links no DuckDB (so the image needs neither
# libduckdb nor the extensions) and refuses DuckLake at startup.
#
#   check-hoglake-writer.sh                all of the above
#   check-hoglake-writer.sh --binary FILE  only the binary checks, on FILE
#                                          (scripts/check-images.sh: the
#                                          staged writer-hoglake binary)
#
# The build leaves the hoglake-only binary as target/<profile>/millpond-writer:
# run it before building the default binaries.
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

flags=(--release -p millpond-writer --no-default-features)
cargo clippy "${flags[@]}" --all-targets -- -D warnings
# Its unit tests are the default writer's, run by the workspace's tests; what
# only this build does (refuse DuckLake) is checked on the binary below.
# Running them here would compile the whole tree once more with these
# features and the test-only dependencies.
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
bash scripts/image/build-binaries.sh writer-hoglake "$dest"
check_binary "$dest/usr/local/bin/millpond-writer"
