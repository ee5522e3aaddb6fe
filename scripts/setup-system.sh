#!/usr/bin/env bash
# Install the Debian packages the build, the test services and the image
# build (buildah, mmdebstrap: scripts/build-images.sh) need.
# Idempotent: does nothing (no apt-get update) when everything is installed.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

packages=(build-essential cmake pkg-config libssl-dev zlib1g-dev libzstd-dev libcurl4-openssl-dev libsasl2-dev postgresql curl unzip procps openssl
    buildah mmdebstrap)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done
# npm fetches DuckDB's prebuilt library (scripts/setup-duckdb.sh); machines
# that ship Node.js have it already, anything else gets Debian's.
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

command -v apt-get >/dev/null || millpond_die "missing packages (${missing[*]}) and no apt-get; install them by hand"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || millpond_die "missing packages (${missing[*]}); run as root or install sudo"
    sudo=(sudo)
fi

echo "setup-system: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${sudo[@]}" apt-get update -q >"$log" 2>&1 \
    || ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
    cat "$log" >&2
    millpond_die "apt-get install of ${missing[*]} failed"
fi
