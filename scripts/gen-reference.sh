#!/usr/bin/env bash
# Renders docs/reference/ from the code: configuration.md (the variables the
# binaries read, with shared/src/config/variables.toml's defaults and
# meanings) and metrics.md (the metrics each process registers). Commit
# what it writes; the test suite fails while a page is stale.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
python3 tests/python/check_reference.py --write
MILLPOND_WRITE_REFERENCE=1 cargo test --release -p millpond-shared --lib -- \
    metrics::reference::tests::the_metrics_reference_page_is_current --quiet
echo "wrote docs/reference/metrics.md"
