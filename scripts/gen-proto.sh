#!/usr/bin/env bash
# Regenerates proto/src/gen/ from proto/proto/ with a vendored protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
cargo run --release --quiet -p millpond-protogen
cargo fmt -p millpond-proto 2>/dev/null || true
