#!/usr/bin/env bash
# The Debian packages of an image stage (a RUN step of deploy/docker/Dockerfile).
#
#   install-packages.sh build     the build stage: cmake, pkg-config and the -dev
#                                 packages of the Rust build, python3-venv and npm
#                                 (scripts/setup-python.sh, scripts/setup-duckdb.sh),
#                                 unzip (scripts/setup-extensions.sh)
#   install-packages.sh runtime   the runtime base: the shared libraries the binaries
#                                 link (libssl3; glibc, libgcc, libstdc++ and zlib are
#                                 in debian:bookworm-slim already), CA certificates,
#                                 curl for the HEALTHCHECK; and the user millpond
#                                 (uid 10001, home /home/millpond)
#
# Standalone (no scripts/env.sh): the runtime stage has only this folder.
# With MILLPOND_IMAGE_DRY_RUN=1 (scripts/check-images.sh) nothing changes:
# apt-get only simulates the install onto an empty system (so what this
# machine has installed does not matter), which fails on an unknown package
# or unresolvable dependencies, and stdout lists `package <name>` and
# `user <name> <uid>` for the checks.
set -euo pipefail

die() {
    echo "install-packages: $*" >&2
    exit 1
}

user=millpond
uid=10001
case "${1:-}" in
    build) packages=(cmake pkg-config libssl-dev zlib1g-dev libcurl4-openssl-dev libsasl2-dev python3-venv unzip npm) ;;
    runtime) packages=(ca-certificates libssl3 curl) ;;
    *) die "usage: install-packages.sh build|runtime" ;;
esac

export DEBIAN_FRONTEND=noninteractive
if [ "${MILLPOND_IMAGE_DRY_RUN:-}" = 1 ]; then
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    apt-get install -s -q -o Dir::State::status=/dev/null --no-install-recommends "${packages[@]}" >"$log" 2>&1 ||
        { cat "$log" >&2; die "apt-get cannot install ${packages[*]}"; }
    printf 'package %s\n' "${packages[@]}"
    [ "$1" = runtime ] && echo "user $user $uid"
    exit 0
fi

apt-get update -q
apt-get install -y -q --no-install-recommends "${packages[@]}"
rm -rf /var/lib/apt/lists/*
if [ "$1" = runtime ]; then
    useradd --uid "$uid" --user-group --create-home --shell /usr/sbin/nologin "$user"
fi
