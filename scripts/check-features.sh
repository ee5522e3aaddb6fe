#!/usr/bin/env bash
# Fails when a crate the binaries use would be compiled twice on one machine
# because two of the test command's builds resolve its features differently
# (cargo then compiles that crate, and everything built on it: tokio, serde,
# arrow, tonic..., once per resolution):
#   - a test-only dependency turns on a feature of a crate the binaries also
#     use (`cargo build` against `cargo test`). The fix is to turn the
#     feature on in the workspace's own dependency (Cargo.toml), or to stop
#     needing it in the tests;
#   - the hoglake-only writer (scripts/image/build-binaries.sh) resolves a
#     crate it shares with the workspace build differently. The fix is to
#     turn the feature on in writer/Cargo.toml (its unused-in-code list).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

# "name version features" of every crate, without cargo's repeat marker.
resolved() {
    cargo tree --prefix none -f '{p} {f}' "$@" | sed 's/ (\*)$//' | sort -u
}
normal=$(resolved --workspace -e no-dev)
all=$(resolved --workspace)
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

# The hoglake-only writer: every crate of its tree but millpond-writer itself
# must be one the workspace build compiles, with the same features.
hoglake=$(resolved -p millpond-writer -p millpond-ingest --no-default-features -e no-dev | grep -v '^millpond-writer ')
differ=$(comm -13 <(echo "$normal") <(echo "$hoglake"))
if [ -n "$differ" ]; then
    echo "check-features: the hoglake-only writer resolves these crates unlike the workspace build:" >&2
    while read -r line; do
        name=$(cut -d' ' -f1,2 <<<"$line")
        grep -F "$name " <<<"$normal" | sed 's/^/  workspace: /' >&2
        echo "  hoglake:   $line" >&2
    done <<<"$differ"
    millpond_die "turn the missing features on in writer/Cargo.toml (see its unused-in-code list)"
fi
echo "check-features: cargo build, cargo test and the hoglake-only writer resolve the shared crates alike"
