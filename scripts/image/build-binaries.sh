#!/usr/bin/env bash
# Build the binaries of the three images and install each image's into
# <stage-root>/<image>/usr/local/bin. scripts/build-images.sh runs it on the
# host (then the images copy the tree in); deploy/docker/Dockerfile's build
# stage runs it inside for `docker build`. Every cargo command that builds an
# image's binaries is here.
#
#   ingest           millpond-ingest, millpond-replay
#   writer-ducklake  millpond-writer and millpond-lake (the maintenance CLI),
#                    linking libduckdb.so
#   writer-hoglake   millpond-writer without its default `ducklake` feature:
#                    no DuckDB at all
#
# ingest and writer-ducklake come from `cargo build --workspace --bins`, the
# build scripts/test.sh tests less its `failpoints` features, which only the
# workspace's own crates see: their dependencies are the tested ones,
# compiled once. The hoglake-only writer is built into the same target
# directory, so cargo compiles only millpond-writer again
# (scripts/check-features.sh keeps the crates it shares resolved alike); its
# binary is installed before the workspace build puts the default one back
# in $CARGO_TARGET_DIR/release. Linking needs DuckDB's library
# (scripts/setup-duckdb.sh).
#
# Usage: build-binaries.sh <stage-root>
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$MILLPOND_ROOT"

root=${1:-}
[ -n "$root" ] && [ $# -eq 1 ] || millpond_die "usage: build-binaries.sh <stage-root>"

bash scripts/setup-duckdb.sh

install_bins() {
    local image=$1
    shift
    install -d "$root/$image/usr/local/bin"
    for bin in "$@"; do
        # Stripped of the symbol table (debug info is already off): about a
        # fifth of each binary; a panic's backtrace then lacks function names.
        install -s -m 0755 "$CARGO_TARGET_DIR/release/$bin" "$root/$image/usr/local/bin/$bin"
    done
    echo "build-binaries: $image: $* in $root/$image/usr/local/bin" >&2
}
# millpond-ingest, selected but not built, resolves the crates the two share
# as the workspace build does.
hoglake=(-p millpond-writer -p millpond-ingest --no-default-features --bin millpond-writer)
echo "build-binaries: cargo build --release --locked ${hoglake[*]}" >&2
cargo build --release --locked "${hoglake[@]}"
install_bins writer-hoglake millpond-writer
echo "build-binaries: cargo build --release --locked --workspace --bins" >&2
cargo build --release --locked --workspace --bins
install_bins ingest millpond-ingest millpond-replay
install_bins writer-ducklake millpond-writer millpond-lake
