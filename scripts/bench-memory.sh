#!/usr/bin/env bash
# Memory benchmark: ingest's peak RSS must stay under 2 x FLUSH_SIZE + 100 MB
# whatever the shape of the input. Two workloads through the real pipeline
# (mock broker -> ingest -> writer -> embedded DuckLake, scripts/bench-e2e.sh):
#   wide      999 small objects and one object with 80,000 distinct keys
#   disjoint  20 event types with disjoint keys (50 each), interleaved
# BENCH_FLUSH_SIZE (default 67108864), BENCH_DISJOINT_ROWS (default 200000).
# Prints each run's figures and whether ingest stayed within the bound;
# exits non-zero when it did not.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh
flush_size=${BENCH_FLUSH_SIZE:-67108864}
rows=${BENCH_DISJOINT_ROWS:-200000}
work=$MILLPOND_STATE/bench-memory
mkdir -p "$work"

python3 - "$work" "$rows" <<'PY'
import json, sys
work, rows = sys.argv[1], int(sys.argv[2])
with open(f"{work}/wide.jsonl", "w") as f:
    for i in range(999):
        f.write(json.dumps({"id": i, "event": "small", "n": i * 7}) + "\n")
    f.write(json.dumps({f"key_{k:05d}": k for k in range(80_000)}) + "\n")
with open(f"{work}/disjoint.jsonl", "w") as f:
    for i in range(rows):
        t = i % 20
        f.write(json.dumps({f"t{t}_field_{k}": i + k for k in range(50)}) + "\n")
PY

limit_mb=$(( 2 * flush_size / 1048576 + 100 ))
failed=0
for workload in wide disjoint; do
    echo "== $workload (FLUSH_SIZE $((flush_size / 1048576)) MiB, ingest bound ${limit_mb} MB)"
    out=$(BENCH_JSONL=$work/$workload.jsonl BENCH_PARTITIONS=64 BENCH_FLUSH_SIZE=$flush_size \
        bash scripts/bench-e2e.sh)
    echo "$out"
    ingest_mb=$(echo "$out" | sed -n 's/^millpond: .*peak RSS ingest \([0-9.]*\) MB.*/\1/p')
    if awk -v r="$ingest_mb" -v l="$limit_mb" 'BEGIN {exit !(r <= l)}'; then
        echo "ingest peak RSS ${ingest_mb} MB <= ${limit_mb} MB: within bound"
    else
        echo "ingest peak RSS ${ingest_mb} MB > ${limit_mb} MB: EXCEEDS bound"
        failed=1
    fi
done
exit "$failed"
