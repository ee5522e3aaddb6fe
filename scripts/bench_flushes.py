"""Pushes small flushes to writers over Arrow Flight, as ingest would, and
measures what each commit costs: the driver of scripts/bench-long-lake.sh
(one writer, many flushes, measured in windows) and
scripts/bench-many-writers.sh (many writers at a fixed rate each).

Writer w owns partition w of topic `events`; its flush f carries offsets
f*rows .. f*rows+rows-1, so every flush is new and each writer's offsets
follow on. Latency is from the first byte sent to the ack. CPU is read from
/proc: the writers' pids, and every Postgres process (the postmaster's
cutime/cstime keeps what exited backends spent).

usage:
  bench_flushes.py long ADDR PID FLUSHES ROWS WINDOW CATALOG [PAUSE_MS]
      one writer, flushes back to back (or PAUSE_MS apart: wall_ms then
      counts the flush alone, the pauses left out); a JSON line per window of WINDOW
      flushes with what the catalog holds then, and a summary. CATALOG:
      sqlite:PATH, or postgres:DBNAME (psql's PG* variables reach it).
      With MAINTAIN_CMD and MAINTAIN_EVERY set in the environment, the
      sending stops after every MAINTAIN_EVERY flushes (at the end of that
      window; make it a multiple of WINDOW) while `bash -c MAINTAIN_CMD`
      runs, a gap between commits as production intervals leave one; a
      JSON line gives its seconds, and no window's figures include it.
  bench_flushes.py many ADDRS PIDS RATE SECONDS ROWS METRICS
      writers (comma-separated addresses and pids) each sent RATE flushes
      per second for SECONDS; one JSON summary. METRICS: comma-separated
      /metrics URLs, scraped at the end for the writers' error counts.

Ranges carry their last record as ingest's do; BENCH_LAST_RECORDS=0 leaves
it out.
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import pyarrow as pa
import pyarrow.flight as flight

TICK = os.sysconf("SC_CLK_TCK")
# Each range carries the record at its last offset (timestamp, checksum), as
# ingest's do, so the writer records it in the last-records table like in
# production. BENCH_LAST_RECORDS=0: ranges without it (a hand-made flush;
# docs/benchmarks.md says which of its tables ran so).
LAST_RECORDS = os.environ.get("BENCH_LAST_RECORDS", "1") != "0"


def cpu_s(pid):
    """utime + stime (+ children's, for a parent that reaps them)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICK


def alive_cpu_s(pids):
    """CPU of the pids still running, and the pids that have exited (a
    writer that spent its retries exits: its CPU since the last reading is
    lost, and the run is a failure anyway)."""
    total, gone = 0.0, []
    for p in pids:
        try:
            total += cpu_s(p)
        except OSError:
            gone.append(p)
    return total, gone


def postgres_cpu_s():
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    continue
            total += cpu_s(pid)
        except OSError:
            continue
    return total


def table(start, rows):
    return pa.table({
        "id": pa.array(range(start, start + rows), pa.int64()),
        "name": pa.array([f"row-{i}" for i in range(start, start + rows)]),
        "score": pa.array([i / 3 for i in range(rows)], pa.float64()),
    })


class Pusher:
    """One writer's client: sends flush f for partition w, waits for its ack."""

    def __init__(self, w, addr, rows):
        self.w, self.rows = w, rows
        self.client = flight.connect(f"grpc://{addr}")

    def push(self, f):
        first = f * self.rows
        last = first + self.rows - 1
        ranges = [{"topic": "events", "partition": self.w, "first": first, "last": last}]
        if LAST_RECORDS:
            # As ingest sends them: the record at the range's last offset.
            ranges[0]["last_timestamp_ms"] = int(time.time() * 1000)
            ranges[0]["last_checksum"] = (self.w << 40) ^ last
        cmd = json.dumps({"flush_id": f"w{self.w}-f{f}", "ranges": ranges, "expected_rows": self.rows})
        t = table(self.w * 10**12 + first, self.rows)
        start = time.monotonic()
        writer, reader = self.client.do_put(flight.FlightDescriptor.for_command(cmd.encode()), t.schema)
        writer.write_table(t)
        writer.done_writing()
        ack = json.loads(reader.read().to_pybytes())
        writer.close()
        if ack.get("outcome") != "written":
            raise RuntimeError(f"writer {self.w} flush {f}: {ack}")
        return time.monotonic() - start


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def maintain_between(f, flushes):
    """Runs MAINTAIN_CMD once MAINTAIN_EVERY more flushes were sent (not
    after the last): a JSON line with its seconds."""
    cmd, every = os.environ.get("MAINTAIN_CMD"), int(os.environ.get("MAINTAIN_EVERY") or 0)
    if not cmd or not every or f % every or f >= flushes:
        return
    t = time.monotonic()
    r = subprocess.run(["bash", "-c", cmd])
    if r.returncode:
        print(f"maintain after flush {f} exited {r.returncode}", file=sys.stderr, flush=True)
    print(json.dumps({"maintain_after": f, "seconds": round(time.monotonic() - t, 1)}), flush=True)


def long_run(addr, pid, flushes, rows, window, probe, pause=0.0):
    pusher = Pusher(0, addr, rows)
    windows = []
    f = 0
    while f < flushes:
        lat = []
        cpu0, pg0, t0 = cpu_s(pid), postgres_cpu_s(), time.monotonic()
        for _ in range(min(window, flushes - f)):
            lat.append(pusher.push(f))
            f += 1
            time.sleep(pause)
        wall = time.monotonic() - t0 - pause * len(lat)
        n = len(lat)
        w = {
            "flushes": f,
            "wall_ms": round(wall / n * 1000, 1),
            "p50_ms": round(pct(lat, 0.5) * 1000, 1),
            "p99_ms": round(pct(lat, 0.99) * 1000, 1),
            "writer_cpu_ms": round((cpu_s(pid) - cpu0) / n * 1000, 2),
            "postgres_cpu_ms": round((postgres_cpu_s() - pg0) / n * 1000, 2),
        }
        w.update(catalog_size(probe))
        windows.append(w)
        print(json.dumps(w), flush=True)
        # Between windows: a window's figures never include maintenance.
        maintain_between(f, flushes)
    first, last = windows[0], windows[-1]
    print(json.dumps({
        "summary": "long",
        "last_records": LAST_RECORDS,
        "flushes": flushes,
        "rows_per_flush": rows,
        "first_window": first,
        "last_window": last,
        "last_over_first_cpu": round(last["writer_cpu_ms"] / max(first["writer_cpu_ms"], 1e-9), 2),
        "last_over_first_wall": round(last["wall_ms"] / max(first["wall_ms"], 1e-9), 2),
    }))


CATALOG_COUNTS = {
    "snapshots": "SELECT count(*) FROM ducklake_snapshot",
    "live_files": "SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NULL",
    "all_files": "SELECT count(*) FROM ducklake_data_file",
    "column_stats": "SELECT count(*) FROM ducklake_file_column_stats",
    "snapshot_changes": "SELECT count(*) FROM ducklake_snapshot_changes",
}


def catalog_size(spec):
    """What the catalog holds: its rows that grow with each flush, the
    rows inlined into it, and its size on disk."""
    kind, where = spec.split(":", 1)
    if kind == "sqlite":
        import sqlite3
        con = sqlite3.connect(f"file:{where}?mode=ro", uri=True, timeout=30)
        try:
            one = lambda q: con.execute(q).fetchone()[0]  # noqa: E731
            out = {k: one(q) for k, q in CATALOG_COUNTS.items()}
            inlined = [r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'ducklake_inlined_data%'")]
            out["inlined_rows"] = sum(one(f'SELECT count(*) FROM "{t}"') for t in inlined)
        finally:
            con.close()
        out["catalog_mb"] = round(os.path.getsize(where) / 2**20, 1)
        return out

    def one(q):
        r = subprocess.run(["psql", "-X", "-At", "-d", where, "-c", q], check=True, capture_output=True, text=True)
        return int(r.stdout.strip() or 0)
    out = {k: one(q) for k, q in CATALOG_COUNTS.items()}
    inlined = subprocess.run(["psql", "-X", "-At", "-d", where, "-c",
                              "SELECT tablename FROM pg_tables WHERE tablename LIKE 'ducklake_inlined_data%'"],
                             check=True, capture_output=True, text=True).stdout.split()
    out["inlined_rows"] = sum(one(f'SELECT count(*) FROM "{t}"') for t in inlined)
    out["catalog_mb"] = round(one(f"SELECT pg_database_size('{where}')") / 2**20, 1)
    return out


def scrape(url):
    """The writer's error counts by type, from its /metrics."""
    counts = {}
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("#") or "errors_total{" not in line:
                continue
            kind = line.split('type="', 1)[1].split('"', 1)[0]
            counts[kind] = counts.get(kind, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def many_run(addrs, pids, rate, seconds, rows, metrics):
    period = 1.0 / rate
    lat, late, errors = [[] for _ in addrs], [[] for _ in addrs], []
    start = time.monotonic() + 1.0

    def run(w, addr):
        try:
            pusher = Pusher(w, addr, rows)
            f = 0
            while True:
                due = start + f * period
                if due - start >= seconds:
                    return
                now = time.monotonic()
                if now < due:
                    time.sleep(due - now)
                late[w].append(max(0.0, time.monotonic() - due))
                lat[w].append(pusher.push(f))
                f += 1
        except Exception as e:  # noqa: BLE001
            errors.append(f"writer {w}: {e}")

    cpu0, _ = alive_cpu_s(pids)
    pg0 = postgres_cpu_s()
    threads = [threading.Thread(target=run, args=(w, a)) for w, a in enumerate(addrs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    cpu1, exited = alive_cpu_s(pids)
    writers_cpu = cpu1 - cpu0
    pg_cpu = postgres_cpu_s() - pg0
    all_lat = [x for l in lat for x in l]
    all_late = [x for l in late for x in l]
    commits = len(all_lat)
    errs = {}
    for url, pid in zip(metrics, pids):
        if pid in exited:
            continue
        for k, v in scrape(url).items():
            errs[k] = errs.get(k, 0) + v
    print(json.dumps({
        "summary": "many",
        "last_records": LAST_RECORDS,
        "writers": len(addrs),
        "rate_per_writer": rate,
        "seconds": round(wall, 1),
        "commits": commits,
        "commits_per_s": round(commits / wall, 2),
        "offered_per_s": round(len(addrs) * rate, 2),
        "p50_ms": round(pct(all_lat, 0.5) * 1000),
        "p99_ms": round(pct(all_lat, 0.99) * 1000),
        "max_ms": round(max(all_lat, default=0) * 1000),
        "mean_ms": round(statistics.fmean(all_lat) * 1000) if all_lat else 0,
        "sent_late_p99_ms": round(pct(all_late, 0.99) * 1000),
        "writer_errors": errs,
        "retries_per_commit": round(sum(errs.values()) / max(commits, 1), 4),
        "writers_cpu_s": round(writers_cpu, 1),
        "writer_cpu_ms_per_commit": round(writers_cpu / max(commits, 1) * 1000, 1),
        "postgres_cpu_s": round(pg_cpu, 1),
        "postgres_cpu_ms_per_commit": round(pg_cpu / max(commits, 1) * 1000, 1),
        "exited_writers": len(exited),
        "failed_writers": errors,
    }))
    if errors:
        sys.exit("; ".join(errors))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "long":
        addr, pid, flushes, rows, window, probe = sys.argv[2:8]
        pause = float(sys.argv[8]) / 1000 if len(sys.argv) > 8 else 0.0
        long_run(addr, int(pid), int(flushes), int(rows), int(window), probe, pause)
    elif mode == "many":
        addrs, pids, rate, seconds, rows, metrics = sys.argv[2:8]
        many_run(addrs.split(","), [int(p) for p in pids.split(",")], float(rate), float(seconds),
                 int(rows), metrics.split(","))
    else:
        sys.exit(__doc__)
