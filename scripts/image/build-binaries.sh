#!/usr/bin/env bash
# Build the binaries of one image and install them into <destdir>/usr/local/bin
# (a RUN step of deploy/docker/Dockerfile; scripts/check-images.sh runs the
# same command into a scratch root).
#
#   build-binaries.sh ingest <destdir>           millpond-ingest, millpond-replay
#   build-binaries.sh writer-ducklake <destdir>  millpond-writer and millpond-lake (the
#                                                maintenance CLI), linking libduckdb.so
#   build-binaries.sh writer-hoglake <destdir>   millpond-writer without its default
#                                                `ducklake` feature: no DuckDB at all
#
# ingest and writer-ducklake come from `cargo build --workspace --bins`, the
# build scripts/test.sh tests, so an image carries binaries with the tested
# features. Both need DuckDB's library to link (the workspace holds the
# writer), fetched by scripts/setup-duckdb.sh, which checks its download
# with the venv's Python: the venv is made first (scripts/setup-python.sh).
# The writer-hoglake build is the one scripts/check-hoglake-writer.sh checks.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$MILLPOND_ROOT"

image=${1:-}
dest=${2:-}
case "$image" in
    ingest)
        bins=(millpond-ingest millpond-replay)
        cargo_args=(--workspace --bins)
        ;;
    writer-ducklake)
        bins=(millpond-writer millpond-lake)
        cargo_args=(--workspace --bins)
        ;;
    writer-hoglake)
        bins=(millpond-writer)
        cargo_args=(-p millpond-writer --no-default-features --bin millpond-writer)
        ;;
    *) millpond_die "usage: build-binaries.sh ingest|writer-ducklake|writer-hoglake <destdir>" ;;
esac
[ -n "$dest" ] || millpond_die "build-binaries.sh $image: no destdir"

if [ "$image" != writer-hoglake ]; then
    bash scripts/setup-python.sh
    bash scripts/setup-duckdb.sh
fi
echo "build-binaries: $image: cargo build --release --locked ${cargo_args[*]}" >&2
cargo build --release --locked "${cargo_args[@]}"

install -d "$dest/usr/local/bin"
for bin in "${bins[@]}"; do
    install -m 0755 "$CARGO_TARGET_DIR/release/$bin" "$dest/usr/local/bin/$bin"
done
echo "build-binaries: $image: ${bins[*]} in $dest/usr/local/bin" >&2
