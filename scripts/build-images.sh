#!/usr/bin/env bash
# Build the three images of deploy/docker/Dockerfile (ingest, writer-ducklake,
# writer-hoglake) with buildah, no Docker daemon needed, then check each
# inside the built image (scripts/image/check-built.sh). Part of
# scripts/test.sh. Prints each image's size and the disk its storage uses.
#
# Nothing is compiled inside an image build: the binaries are built here, on
# this machine (scripts/image/build-binaries.sh: `cargo build --workspace
# --bins`, which test.sh's build then extends with the failpoints, and the
# hoglake-only writer, both in $CARGO_TARGET_DIR), staged with
# scripts/image/stage.sh, and handed to the Dockerfile as its `prebuilt`
# binaries (--build-context staged=...). So the host must be what the
# runtime base is, Debian bookworm; the checks run every binary inside its
# image. The runtime base image comes from Debian's packages
# (scripts/image/buildah.sh). Intermediate images are removed at the end;
# the base and the three images stay (localhost/millpond-<image>).
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
# The previous run's images and cached layers go: the runtime stage's RUN
# mounts its install script, which a layer cache does not see change.
bh rm --all >/dev/null
for target in "${TARGETS[@]}"; do
    bh rmi "localhost/millpond-$target" >/dev/null 2>&1 || true
done
bh rmi --prune >/dev/null 2>&1 || true
ensure_base_images

stage=$MILLPOND_IMAGES_HOME/stage
rm -rf "$stage"
t=$SECONDS
bash scripts/image/build-binaries.sh "$stage"
bash scripts/image/stage.sh "$stage"
echo "images: binaries built and staged in $stage in $((SECONDS - t)) s" >&2

# --format docker: an OCI image has no HEALTHCHECK.
bud_args=(--pull=never --isolation chroot --layers --format docker -f deploy/docker/Dockerfile
    --build-arg BINARIES=prebuilt --build-context "staged=$stage")
logs=$MILLPOND_IMAGES_HOME/logs
mkdir -p "$logs"
for target in "${TARGETS[@]}"; do
    t=$SECONDS
    log=$logs/$target.log
    echo "images: buildah bud --target $target -t localhost/millpond-$target (log: $log)" >&2
    if ! bh bud "${bud_args[@]}" --target "$target" -t "localhost/millpond-$target" . >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        millpond_die "buildah bud --target $target failed (deploy/docker/Dockerfile; full log: $log)"
    fi
    echo "images: built localhost/millpond-$target in $((SECONDS - t)) s" >&2
done

bash scripts/image/check-built.sh

bh rm --all >/dev/null
bh rmi --prune >/dev/null 2>&1 || true
echo "images: storage $MILLPOND_IMAGES_HOME uses $(du -sh "$MILLPOND_IMAGES_HOME" | cut -f1); done in $((SECONDS - t0)) s"
