#!/usr/bin/env python3
"""The producer, the per-row summary and the table of scripts/bench-sizing.sh.

  bench_sizing.py produce BOOTSTRAP TOPIC FILE PARTITIONS (--count N | --rate R --seconds S)
      sends FILE's lines (cycled) round-robin over the topic's partitions:
      N as fast as it can, or R per second for S seconds; prints
      {"produced": n, "seconds": s} last
  bench_sizing.py row RUN_DIR      one row's figures from what bench-sizing.sh
                                   left in RUN_DIR (ingest log and time, writer
                                   peak, spool peak, the catalog's files) ->
                                   RUN_DIR/row.json; exit 1 when the lake does
                                   not hold every record produced
  bench_sizing.py table RUN_DIR... the Markdown table of the rows
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import log_time, read_kv  # noqa: E402

MIB = 1024 * 1024


def produce(argv: list[str]) -> int:
    from confluent_kafka import Producer

    bootstrap, topic, path, partitions = argv[0], argv[1], Path(argv[2]), int(argv[3])
    opts = dict(zip(argv[4::2], argv[5::2]))
    values = [line.rstrip(b"\n") for line in path.open("rb") if line.strip()]
    failed: list[str] = []

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.kbytes": 1048576, "queue.buffering.max.messages": 1000000})
    sent = 0

    def send() -> None:
        nonlocal sent
        while True:
            try:
                p.produce(topic, value=values[sent % len(values)], partition=sent % partitions,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        sent += 1
        if sent % 1000 == 0:
            p.poll(0)

    start = time.monotonic()
    if "--count" in opts:
        for _ in range(int(opts["--count"])):
            send()
    else:
        rate, seconds = float(opts["--rate"]), float(opts["--seconds"])
        while (elapsed := time.monotonic() - start) < seconds:
            due = int(rate * elapsed)
            while sent < due:
                send()
            p.poll(0.01)
    remaining = p.flush(120)
    took = time.monotonic() - start
    if failed or remaining:
        print(f"produce: {len(failed)} failed deliveries ({failed[:3]}), {remaining} undelivered", file=sys.stderr)
        return 1
    print(json.dumps({"produced": sent, "seconds": round(took, 1)}))
    return 0


def row(run: Path) -> int:
    s = read_kv(run / "row.samples")
    produced = json.loads((run / "produce.json").read_text().strip().splitlines()[-1])["produced"]
    log = [json.loads(line) for line in (run / "ingest.log").read_text().splitlines() if line.startswith("{")]
    flushes = [line for line in log if line.get("message") == "flush acknowledged and committed"]
    first = next((log_time(line) for line in log if line.get("message", "").startswith(("running to the high",
                                                                                          "consuming"))), None)
    # Size- or time-triggered flushes: the final one (latest, shutdown) is a remainder.
    full = [f for f in flushes if f["trigger"] in ("size", "time")] or flushes
    triggers: dict[str, int] = {}
    for f in flushes:
        triggers[f["trigger"]] = triggers.get(f["trigger"], 0) + 1
    # The catalog's files of the table, one group per flush (one snapshot each), in order.
    files = [line.split("|") for line in (run / "files.txt").read_text().split()]
    by_snapshot: dict[int, list[int]] = {}
    for snap, size, _rows in files:
        by_snapshot.setdefault(int(snap), []).append(int(size))
    per_flush = [by_snapshot[k] for k in sorted(by_snapshot)]
    lake_rows = sum(int(r) for _, _, r in files)
    full_idx = [i for i, f in enumerate(flushes) if f in full]
    parquet_full = [sum(per_flush[i]) for i in full_idx if i < len(per_flush)] if len(per_flush) == len(flushes) else []
    elapsed, _user, _system, max_kb = (run / "ingest.time").read_text().split("\n")[-2].split()
    wall = (log_time(flushes[-1]) - first) if (first and flushes) else float(elapsed)
    out = {
        "rate": s["rate"], "interval_s": int(s["interval_ms"]) // 1000, "flush_size": int(s["flush_size"]),
        "variant": s.get("variant", ""), "produced": produced, "lake_rows": lake_rows,
        "records_per_s": round(produced / float(s["produce_seconds"])) if s["rate"] != "max" else round(produced / wall),
        "flushes": len(flushes), "triggers": triggers,
        "arrow_per_flush": round(statistics.median(f["bytes"] for f in full)) if full else 0,
        "rows_per_flush": round(statistics.median(f["rows"] for f in full)) if full else 0,
        "parquet_per_flush": round(statistics.median(parquet_full)) if parquet_full else None,
        "files_per_flush": round(statistics.median(len(per_flush[i]) for i in full_idx)) if parquet_full else None,
        "largest_file": max((int(size) for _, size, _ in files), default=0),
        "parquet_bytes_per_row": round(sum(int(size) for _, size, _ in files) / max(lake_rows, 1)),
        "ingest_peak_rss": int(max_kb) * 1024, "writer_peak_rss": int(s["writer_peak_rss_kb"]) * 1024,
        "spool_peak": int(s["spool_peak_bytes"]),
    }
    (run / "row.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"row {run.name}: {json.dumps(out)}")
    if lake_rows != produced:
        print(f"  FAIL the lake holds {lake_rows} rows of the {produced} records produced")
        return 1
    return 0


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / MIB:,.0f} MiB" if n >= 10 * MIB else f"{n / MIB:.1f} MiB"


def table(runs: list[Path]) -> int:
    rows = [json.loads((r / "row.json").read_text()) for r in runs if (r / "row.json").exists()]
    print("| records/s | FLUSH_INTERVAL_MS | FLUSH_SIZE | flushes (trigger) | Arrow per flush | "
          "Parquet per flush (files) | largest file | Parquet B/row | ingest peak RSS | writer peak RSS | "
          "spool peak |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rate = f"max ({r['records_per_s']:,})" if r["rate"] == "max" else f"{r['records_per_s']:,}"
        variant = f", {r['variant']}" if r["variant"] else ""
        trig = ", ".join(f"{n} {t}" for t, n in sorted(r["triggers"].items()))
        files = f" ({r['files_per_flush']})" if r["files_per_flush"] is not None else ""
        print(f"| {rate}{variant} | {r['interval_s'] * 1000} | {mib(r['flush_size'])} | {r['flushes']} ({trig}) | "
              f"{mib(r['arrow_per_flush'])} | {mib(r['parquet_per_flush'])}{files} | {mib(r['largest_file'])} | "
              f"{r['parquet_bytes_per_row']} | {mib(r['ingest_peak_rss'])} | {mib(r['writer_peak_rss'])} | "
              f"{mib(r['spool_peak'])} |")
    return 0 if len(rows) == len(runs) else 1


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "produce":
        sys.exit(produce(sys.argv[2:]))
    if len(sys.argv) == 3 and sys.argv[1] == "row":
        sys.exit(row(Path(sys.argv[2])))
    if len(sys.argv) >= 3 and sys.argv[1] == "table":
        sys.exit(table([Path(a) for a in sys.argv[2:]]))
    sys.exit(__doc__)
