#!/usr/bin/env bash
# Build the three images of deploy/docker/Dockerfile (ingest, writer-ducklake,
# writer-hoglake) with buildah, no Docker daemon needed, then check each
# inside the built image (scripts/image/check-built.sh). Part of
# scripts/test.sh. Prints each image's size and the disk its storage uses.
#
# The base images come from Debian's packages (scripts/image/buildah.sh).
# The build stage gets this machine's paths as build arguments and mounts
# its cargo target directory and registry there, so cargo finds the
# artifacts of the workspace build fresh and a warm run compiles nothing
# (the hoglake writer builds into $CARGO_TARGET_DIR/hoglake-writer).
# Intermediate images are removed at the end; the bases and the three
# images stay (localhost/millpond-<image>).
#
# Needs root (buildah's chroot isolation) and the packages of
# scripts/setup-system.sh. Set MILLPOND_IMAGES_HOME to move the storage.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/image/buildah.sh
. scripts/image/buildah.sh

# The hoglake pipeline of the checks writes to the test services' S3.
[ -n "${MILLPOND_TEST_S3_ENDPOINT:-}" ] || eval "$(bash scripts/services.sh env)"
[ "$(id -u)" -eq 0 ] || millpond_die "build-images.sh needs root (buildah with chroot isolation)"
t0=$SECONDS
# `runtime` too: the size limits count from the runtime base.
TARGETS=(ingest writer-ducklake writer-hoglake runtime)
buildah_setup
# The previous run's images and cached layers go: the build stage mounts the
# sources, which a layer cache does not see change. build-base (the build
# stage's packages, keyed by the install script it copies) stays.
bh rm --all >/dev/null
for target in "${TARGETS[@]}"; do
    bh rmi "localhost/millpond-$target" >/dev/null 2>&1 || true
done
bh rmi --prune >/dev/null 2>&1 || true
ensure_base_images

cargo_home=${CARGO_HOME:-$HOME/.cargo}
mkdir -p "$CARGO_TARGET_DIR" "$cargo_home/registry"
# --format docker: an OCI image has no HEALTHCHECK.
bud_args=(--pull=never --isolation chroot --layers --format docker -f deploy/docker/Dockerfile
    --build-arg "MILLPOND_SRC=$MILLPOND_ROOT"
    --build-arg "CARGO_TARGET_DIR=$CARGO_TARGET_DIR"
    --build-arg "MILLPOND_CARGO_HOME=$cargo_home"
    --build-arg "DUCKDB_LIB_DIR=$DUCKDB_LIB_DIR"
    -v "$CARGO_TARGET_DIR:$CARGO_TARGET_DIR"
    -v "$cargo_home/registry:$cargo_home/registry")
logs=$MILLPOND_IMAGES_HOME/logs
mkdir -p "$logs"
for target in build-base "${TARGETS[@]}"; do
    t=$SECONDS
    log=$logs/$target.log
    echo "images: buildah bud --target $target -t localhost/millpond-$target (log: $log)" >&2
    if ! bh bud "${bud_args[@]}" --target "$target" -t "localhost/millpond-$target" . >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        millpond_die "buildah bud --target $target failed (deploy/docker/Dockerfile; full log: $log)"
    fi
    grep -E '^STEP [0-9]+/[0-9]+: (FROM|RUN)|Finished .release|^build-binaries: cargo' "$log" | sed 's/^/    /' >&2 || true
    echo "images: built localhost/millpond-$target in $((SECONDS - t)) s" >&2
done

bash scripts/image/check-built.sh

bh rm --all >/dev/null
bh rmi --prune >/dev/null 2>&1 || true
echo "images: storage $MILLPOND_IMAGES_HOME uses $(du -sh "$MILLPOND_IMAGES_HOME" | cut -f1); done in $((SECONDS - t0)) s"
