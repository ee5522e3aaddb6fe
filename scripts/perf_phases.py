#!/usr/bin/env python3
"""Where the CPU time of a profiled benchmark run goes, by phase.

  perf_phases.py ingest|writer|baseline PERF_DATA [--run RUN_DIR] [--from EPOCH_S] [--records N]

PERF_DATA comes from `BENCH_PERF=DIR scripts/bench-e2e.sh` (perf's cpu-clock
event with DWARF call graphs and wall-clock timestamps). Each sample goes to
the first phase whose pattern matches any frame of its stack ("symbol (dso)"),
or whose thread name matches `comm:`; the rest is "other". --from drops the
samples before a wall-clock time; --run takes it, and the record count, from
the benchmark's run dir ($MILLPOND_STATE/bench): ingest from its loop start
(its log), the writer from its ready time, so that both count their loop only
as the benchmark does (the model's profile keeps its ~0.3 s of startup and
shutdown). Prints CPU seconds, share and microseconds per record of each
phase, the busiest threads and the top functions by self time.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

# Ordered: the first match wins, so the specific comes before the general.
RUST_TAIL = [
    ("allocator, page faults, memcpy (unattributed)", r"\b(malloc|free|realloc|_int_malloc|_int_free|cfree|"
     r"exc_page_fault|__memmove|__memcpy)\b"),
    ("tokio runtime, other", r"tokio::"),
]
DUCKDB = [
    ("DuckLake: registering the writer's files (reading their footers)", r"DuckLakeAddDataFiles|"
     r"DuckLakeFileProcessor"),
    ("DuckDB: Parquet encode + compress (data files)", r"Parquet|ColumnWriter|snappy|PhysicalCopyToFile|"
     r"zstd|WriteRotate"),
    ("DuckDB: Arrow scan of the flush", r"ArrowTableFunction|ArrowScan|ArrowToDuckDB|ArrowArrayScanState|"
     r"duckdb_arrow_scan|Arrow.*Conversion"),
    ("DuckLake: catalog reads/commit (SQLite / DuckDB-file metadata)", r"DuckLakeMetadataManager|DuckLakeTransaction|"
     r"DuckLakeTransactionManager|sqlite3|Sqlite|DuckLakeCatalog|DuckLakeInitializer"),
    ("DuckDB: other (parse, bind, plan, execute, commit)", r"duckdb"),
]
RULES = {
    "ingest": [
        ("librdkafka threads (fetch, protocol, queues)", r"comm:^rdk:"),
        ("offset commit", r"commit_offsets"),
        ("poll: messages out of librdkafka", r"rdkafka::consumer|rd_kafka_consume|rd_kafka_poll|"
         r"rd_kafka_q_|BaseConsumer|rd_kafka_message"),
        ("flush cut: unify + sort", r"Stages::cut|stages::sort|buffer::unify|Pending::cut"),
        ("JSON scan (object read, unescape, nested values)", r"convert::scan|convert::object|serde_json"),
        ("Arrow columns (build)", r"convert::build|arrow_array::builder|arrow_buffer"),
        ("convert, other", r"millpond_ingest::convert"),
        ("Flight encode (Arrow IPC)", r"arrow_ipc::writer|FlightDataEncoder|arrow_flight::encode"),
        ("Flight send (gRPC, h2, TCP)", r"tonic::|h2::|hyper::|tower::|tcp_sendmsg|WriterClient"),
        ("stages + buffer (limits, coords, pending)", r"millpond_ingest::stages|millpond_ingest::buffer|"
         r"millpond_proto"),
        ("metrics + HTTP", r"prometheus|axum"),
        ("drop of consumed messages / flushed batches", r"drop_in_place"),
    ] + RUST_TAIL,
    "writer": [
        # Batches are written inside the DoPut handler, so the sink's own
        # phases come before the Flight rule that would match their stacks.
        ("Parquet files (the parquet crate: encode, compress, write)", r"sink::ducklake::spool|parquet::|"
         r"lz4_flex|snap::|zstd"),
        ("lease check (fence)", r"fence::Fence"),
        ("offsets: recorded ranges, table check", r"ducklake::offsets|recorded_offsets|ensure_own_tables"),
        ("table check: columns, types, DDL", r"sink::ducklake::table::"),
        ("dead letters", r"dead_letters"),
        ("prepare + exact values (Rust)", r"sink::prepare|sink::ducklake::to_live|millpond_shared::exact|"
         r"sink::ducklake::classify|sink::ducklake::streamed::plan"),
    ] + DUCKDB + [
        ("Flight receive (gRPC, h2, IPC decode)", r"arrow_flight::decode|FlightDataDecoder|flight_data_to_arrow|"
         r"arrow_ipc::reader|h2::|hyper::|tonic::|tower::"),
        ("drop of the flush", r"drop_in_place"),
    ] + RUST_TAIL,
    "baseline": [
        ("librdkafka threads (fetch, protocol, queues)", r"comm:^rdk:"),
        ("orjson (loads, nested dumps)", r"orjson"),
        ("pyarrow: from_pylist, concat, casts", r"libarrow|pyarrow|arrow::py"),
    ] + DUCKDB + [
        ("librdkafka consume on the main thread", r"librdkafka|cimpl|rd_kafka"),
        ("Python interpreter (key union, typing, flattening, loop)", r"libpython|python3|_PyEval|PyObject|"
         r"PyDict|_Py"),
        ("allocator, page faults, memcpy (unattributed)", r"\b(malloc|free|realloc|_int_malloc|_int_free|cfree|"
         r"exc_page_fault|__memmove|__memcpy)\b"),
    ],
}


def samples(data: str, start: float | None):
    cmd = ["perf", "script", "-i", data, "-F", "comm,tid,time,ip,sym,dso", "--no-inline"]
    if start is not None:
        cmd += ["--time", f"{start:.6f},"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for block in out.split("\n\n"):
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        m = re.match(r"^\s*(.+?)\s+(\d+)\s+([\d.]+):", lines[0])
        if not m:
            continue
        frames = [re.sub(r"^\s*[0-9a-f]+\s+", "", l) for l in lines[1:]]
        yield m.group(1), frames


def from_run(process: str, run: Path) -> tuple[float | None, int]:
    samples_kv = dict(l.split("=", 1) for l in (run / "millpond.samples").read_text().split() if "=" in l)
    start = None
    if process == "writer":
        start = float(samples_kv["writer_ready_epoch_s"])
    elif process == "ingest":
        for line in (run / "ingest.log").read_text().splitlines():
            if "running to the high watermarks" in line:
                ts = json.loads(line)["timestamp"].replace("Z", "+00:00")
                start = datetime.fromisoformat(ts).timestamp()
                break
    return start, int(samples_kv["records"])


def leaf(frames: list[str]) -> str:
    if not frames:
        return "?"
    sym = re.sub(r"\+0x[0-9a-f]+", "", frames[0])
    return re.sub(r"\s*\(([^)]*/)?([^/)]*)\)$", r"  [\2]", sym)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("process", choices=sorted(RULES))
    ap.add_argument("data")
    ap.add_argument("--run", type=Path, help="the benchmark's run dir: --from and --records from it")
    ap.add_argument("--from", dest="start", type=float, help="drop samples before this epoch time (s)")
    ap.add_argument("--records", type=int, default=0, help="records of the run, for microseconds per record")
    ap.add_argument("--freq", type=float, default=999.0, help="perf record -F (samples per CPU-second)")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    if args.run:
        start, records = from_run(args.process, args.run)
        args.start = args.start if args.start is not None else start
        args.records = args.records or records

    rules = [(name, pat[5:] if pat.startswith("comm:") else pat, pat.startswith("comm:"))
             for name, pat in RULES[args.process]]
    compiled = [(name, re.compile(pat), on_comm) for name, pat, on_comm in rules]
    phases, threads, leaves = Counter(), Counter(), Counter()
    total = 0
    for comm, frames in samples(args.data, args.start):
        if comm == "time":  # /usr/bin/time around ingest or the model
            continue
        total += 1
        threads[re.sub(r"\d+$", "", comm)] += 1
        leaves[leaf(frames)] += 1
        for name, rx, on_comm in compiled:
            if (rx.search(comm) if on_comm else any(rx.search(f) for f in frames)):
                phases[name] += 1
                break
        else:
            phases["other"] += 1
    if not total:
        print(f"{args.process}: no samples", file=sys.stderr)
        return 1

    def row(n: int) -> str:
        cpu = n / args.freq
        per = f"{cpu / args.records * 1e6:7.2f}" if args.records else "      -"
        return f"{cpu:7.3f} {100 * n / total:6.1f}% {per}"

    print(f"{args.process}: {total} samples = {total / args.freq:.2f} CPU-s"
          + (f" from {args.start:.3f}" if args.start else "")
          + (f", {args.records} records" if args.records else ""))
    print(f"  {'phase':<64} {'CPU-s':>7} {'share':>7} {'us/rec':>7}")
    order = [name for name, _, _ in rules] + ["other"]
    for name in order:
        if phases[name]:
            print(f"  {name:<64} {row(phases[name])}")
    print("  threads: " + ", ".join(f"{c} {100 * n / total:.0f}%" for c, n in threads.most_common(6)))
    print("  top functions by self time:")
    for sym, n in leaves.most_common(args.top):
        print(f"    {100 * n / total:5.1f}%  {sym[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
