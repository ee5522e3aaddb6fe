#!/usr/bin/env bash
# Installs nisshi 0.8.1, a Kafka-compatible broker in Rust, used as the
# separate-process broker by the end-to-end tests (and by
# DEMO_BROKER=nisshi scripts/demo.sh). Only the storage engine they run is
# built: object_store's (`dynostore`, memory://), the tests', the demo's and
# the benchmark brokers' (none of them restarts its broker). SQLite
# (`libsql`) or Postgres would add their C and Rust to the build.
# Instant once ~/.cargo/bin/nisshi is there with it.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
want=0.8.1
features=dynostore
bin=${CARGO_HOME:-$HOME/.cargo}/bin/nisshi
# cargo records what it installed, features included.
installed() {
    python3 - "${CARGO_HOME:-$HOME/.cargo}/.crates2.json" "$want" "$features" <<'PY'
import json, sys
path, want, features = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
try:
    installs = json.load(open(path))["installs"]
except (OSError, ValueError, KeyError):
    sys.exit(1)
sys.exit(0 if any(k.startswith(f"nisshi {want} ") and features <= set(v.get("features", []))
                  for k, v in installs.items()) else 1)
PY
}
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "$want" && installed; then
    exit 0
fi
echo "installing nisshi $want (one-time, several minutes)" >&2
t0=$SECONDS
# Its own target dir: nisshi's dependency features must not disturb ours.
# opt-level 1: a test broker needs no peak speed, and the build is shorter.
# One codegen unit per crate, as our dependencies (Cargo.toml says why):
# less CPU in all, taken from the build that runs beside it.
# zstd from the system's libzstd-dev, as ours (Cargo.toml: zstd-pkg-config).
CARGO_TARGET_DIR=$MILLPOND_CACHE/nisshi-target CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 ZSTD_SYS_USE_PKG_CONFIG=1 \
    cargo install nisshi --version "$want" --locked --ignore-rust-version --quiet \
    --no-default-features --features "$features"
"$bin" --version >/dev/null
echo "setup-nisshi: nisshi $want installed in $((SECONDS - t0)) s" >&2
