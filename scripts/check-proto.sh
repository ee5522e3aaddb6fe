#!/usr/bin/env bash
# Fails when the committed generated protobuf code is not what the .proto
# files produce.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
scripts/gen-proto.sh
if ! git diff --exit-code -- proto/src/gen; then
  echo "proto/src/gen is stale: run scripts/gen-proto.sh and commit" >&2
  exit 1
fi
