#!/usr/bin/env bash
# Fails when a test-only dependency turns on a feature of a crate the
# binaries also use. Cargo then resolves that crate, and everything built on
# it (tokio, serde, arrow, tonic...), differently for `cargo build` and
# `cargo test`, and a fresh machine compiles the whole tree twice. The fix is
# to turn the feature on in the workspace's own dependency (Cargo.toml), or
# to stop needing it in the tests.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

# "name version features" of every crate, without cargo's repeat marker.
resolved() {
    cargo tree --workspace --prefix none -f '{p} {f}' "$@" | sed 's/ (\*)$//' | sort -u
}
normal=$(resolved -e no-dev)
all=$(resolved)
# A crate of the normal tree must not appear with other features in the tree
# that includes the tests' dependencies (crates only tests use may differ).
differ=$(comm -13 <(echo "$normal") <(echo "$all") \
    | awk 'NR == FNR { built[$1 " " $2] = 1; next } ($1 " " $2) in built' <(echo "$normal") -)
if [ -n "$differ" ]; then
    echo "check-features: test-only dependencies change these crates' features:" >&2
    while read -r line; do
        name=$(cut -d' ' -f1,2 <<<"$line")
        grep -F "$name " <<<"$normal" | sed 's/^/  build: /' >&2
        echo "  test:  $line" >&2
    done <<<"$differ"
    millpond_die "turn the missing features on in Cargo.toml's [workspace.dependencies]"
fi
echo "check-features: cargo build and cargo test resolve the shared crates alike"
