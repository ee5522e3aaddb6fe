#!/usr/bin/env bash
# Build the binaries of the three images and install each image's into
# <stage-root>/<image>/usr/local/bin (a RUN step of deploy/docker/Dockerfile).
# Every cargo command that builds an image's binaries is here.
#
#   ingest           millpond-ingest, millpond-replay
#   writer-ducklake  millpond-writer and millpond-lake (the maintenance CLI),
#                    linking libduckdb.so
#   writer-hoglake   millpond-writer without its default `ducklake` feature:
#                    no DuckDB at all
#
# ingest and writer-ducklake come from `cargo build --workspace --bins`, the
# build scripts/test.sh tests, so an image carries binaries with the tested
# features. Linking them needs DuckDB's library (scripts/setup-duckdb.sh,
# which checks its download with the venv's Python: scripts/setup-python.sh
# first). The hoglake writer builds into a target directory of its own
# ($CARGO_TARGET_DIR/hoglake-writer), so its millpond-writer never takes the
# place of the default one.
#
# Usage: build-binaries.sh <stage-root>
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$MILLPOND_ROOT"

root=${1:-}
[ -n "$root" ] && [ $# -eq 1 ] || millpond_die "usage: build-binaries.sh <stage-root>"
# A builder that mounts a machine's cargo registry at that machine's path
# names it here (the Dockerfile's ARG MILLPOND_CARGO_HOME).
if [ -n "${MILLPOND_CARGO_HOME:-}" ]; then
    export CARGO_HOME=$MILLPOND_CARGO_HOME
fi

bash scripts/setup-python.sh
bash scripts/setup-duckdb.sh
hoglake_target=$CARGO_TARGET_DIR/hoglake-writer
echo "build-binaries: cargo build --release --locked --workspace --bins" >&2
cargo build --release --locked --workspace --bins
echo "build-binaries: cargo build --release --locked -p millpond-writer --no-default-features (target $hoglake_target)" >&2
CARGO_TARGET_DIR=$hoglake_target cargo build --release --locked -p millpond-writer --no-default-features --bin millpond-writer

install_bins() {
    local image=$1 from=$2
    shift 2
    install -d "$root/$image/usr/local/bin"
    for bin in "$@"; do
        # Stripped of the symbol table (debug info is already off): about a
        # fifth of each binary; a panic's backtrace then lacks function names.
        install -s -m 0755 "$from/$bin" "$root/$image/usr/local/bin/$bin"
    done
    echo "build-binaries: $image: $* in $root/$image/usr/local/bin" >&2
}
install_bins ingest "$CARGO_TARGET_DIR/release" millpond-ingest millpond-replay
install_bins writer-ducklake "$CARGO_TARGET_DIR/release" millpond-writer millpond-lake
install_bins writer-hoglake "$hoglake_target/release" millpond-writer
