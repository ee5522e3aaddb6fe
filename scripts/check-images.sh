#!/usr/bin/env bash
# Check deploy/docker/Dockerfile without Docker: run its RUN steps (the
# scripts of scripts/image/, same arguments) into a scratch root, check each
# image's staged tree (ingest, writer-ducklake, writer-hoglake) and run the
# staged ingest and DuckLake writer with their HEALTHCHECK. Prints the staged
# size per image. `--keep` keeps the scratch root. Details:
# scripts/image/check_images.py.
#
# It builds with cargo (release, $CARGO_TARGET_DIR) and needs the venv
# (scripts/setup-python.sh). The writer-hoglake build runs first, so the
# target dir ends with the default millpond-writer, as the tests need it.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

bash scripts/setup-python.sh
# The apt steps simulate installs against the package index: a machine whose
# packages were all preinstalled may never have fetched one.
if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -q >/dev/null || millpond_die "apt-get update failed (the image check needs the package index)"
fi
exec "$MILLPOND_PYTHON" scripts/image/check_images.py "$@"
