#!/usr/bin/env bash
# The Debian packages of an image stage (a RUN step of deploy/docker/Dockerfile).
#
#   install-packages.sh build     the build stage: cmake, pkg-config and the -dev
#                                 packages of the Rust build, python3-venv and npm
#                                 (scripts/setup-python.sh, scripts/setup-duckdb.sh),
#                                 unzip (scripts/setup-extensions.sh)
#   install-packages.sh runtime   the runtime base: the shared libraries the binaries
#                                 link (libssl3 and libzstd1; glibc, libgcc, libstdc++
#                                 and zlib are in debian:bookworm-slim already, and
#                                 so is libzstd1, for dpkg), CA certificates, curl
#                                 for the HEALTHCHECK; and the user millpond
#                                 (uid 10001, home /home/millpond)
#
# Standalone (no scripts/env.sh): the runtime stage has only this folder.
set -euo pipefail

die() {
    echo "install-packages: $*" >&2
    exit 1
}

user=millpond
uid=10001
case "${1:-}" in
    build) packages=(cmake pkg-config libssl-dev zlib1g-dev libzstd-dev libcurl4-openssl-dev libsasl2-dev python3-venv unzip npm) ;;
    runtime) packages=(ca-certificates libssl3 libzstd1 curl) ;;
    *) die "usage: install-packages.sh build|runtime" ;;
esac

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${packages[@]}"
rm -rf /var/lib/apt/lists/*
if [ "$1" = runtime ]; then
    useradd --uid "$uid" --user-group --create-home --shell /usr/sbin/nologin "$user"
fi
