#!/usr/bin/env bash
# Instructions ingest's converter spends per event on the benchmark's own
# events, counted by callgrind: the same figure on every run of the same
# binary, however loaded or fast the machine is, so a change to the
# converter can be measured on a noisy machine where timings are not.
#
#   scripts/bench-convert-instructions.sh            # 5,000 bench/gen_events.py events
#   BENCH_EVENTS=20000 BENCH_SEED=7 scripts/bench-convert-instructions.sh
#
# Prints the instructions per event inside `convert` (JSON → one Arrow
# batch), split into the scan (pass 1: the object read, unescaping) and the
# column build (pass 2). BENCH_INPUTS as for scripts/bench-e2e.sh.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

events=${BENCH_EVENTS:-5000}
[ -f "$bench_inputs/gen_events.py" ] || millpond_die "$bench_inputs/gen_events.py missing (BENCH_INPUTS)"
command -v valgrind >/dev/null || millpond_die "valgrind missing (Debian package valgrind)"

dir=$MILLPOND_STATE/bench-convert
mkdir -p "$dir"
python3 "$bench_inputs/gen_events.py" --count "$events" --seed "${BENCH_SEED:-42}" \
    --poison-rate "${BENCH_POISON_RATE:-0.01}" --out "$dir/events.jsonl" >"$dir/gen.json"
cargo build --release -p millpond-ingest --example convert_file >&2
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    --toggle-collect='millpond_ingest::convert::convert_limited*' \
    "$CARGO_TARGET_DIR/release/examples/convert_file" "$dir/events.jsonl" >"$dir/convert.out" 2>"$dir/valgrind.log" \
    || { cat "$dir/valgrind.log" >&2; millpond_die "callgrind failed"; }
callgrind_annotate --inclusive=yes "$dir/callgrind.out" >"$dir/annotate.txt" 2>/dev/null
python3 - "$dir" "$events" <<'PY'
import re, sys
d, events = sys.argv[1], int(sys.argv[2])
out = open(f"{d}/convert.out").read().strip()
text = open(f"{d}/annotate.txt").read()
def ir(pattern):
    m = re.search(r"^\s*([\d,]+) .*" + pattern, text, re.M)
    if not m:
        sys.exit(f"no callgrind line for {pattern} in {d}/annotate.txt")
    return int(m.group(1).replace(",", ""))
total = ir(r"PROGRAM TOTALS")
scan, build = ir(r"convert::scan::scan\b"), ir(r"convert::build::build\b")
print(f"convert: {out}")
print(f"instructions per event: {total / events:,.0f} in convert "
      f"(scan {scan / events:,.0f}, build {build / events:,.0f}); {total:,} for {events} events")
PY
