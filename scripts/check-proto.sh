#!/usr/bin/env bash
# Fails when the generated protobuf code in proto/src/gen is not exactly what
# the .proto files produce (changed, missing or extra files alike).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
scripts/gen-proto.sh "$fresh" >/dev/null
if ! diff -r "$fresh" proto/src/gen; then
  echo "proto/src/gen is stale: run scripts/gen-proto.sh and commit" >&2
  exit 1
fi
