#!/usr/bin/env bash
# Regenerates proto/src/gen/ from proto/proto/ with a vendored protoc, or
# into the folder given as the first argument.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
out=${1:-proto/src/gen}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cargo run --release --quiet -p millpond-protogen -- "$out"
rustfmt --edition 2021 "$out"/*.rs
