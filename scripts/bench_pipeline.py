#!/usr/bin/env python3
"""Summaries and checks for scripts/bench-pipeline.sh and scripts/bench-e2e.sh.

  bench_pipeline.py millpond RUN_DIR   Millpond's figures from what bench-pipeline.sh
                                       left in RUN_DIR; writes RUN_DIR/millpond.json
  bench_pipeline.py compare RUN_DIR    the baseline's figures, both lakes checked against
                                       the generator (gen.json), both lines and the ratios
  bench_pipeline.py runs RUN_DIR...    the median and range of each figure over runs that
                                       `compare` summarised (BENCH_RUNS)

Exit status 1 when a check fails.
"""
from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

MIB = 1024 * 1024


def read_kv(path: Path) -> dict[str, str]:
    return dict(line.strip().split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def metrics(path: Path) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition -> (name, labels, value)."""
    out = []
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$", line)
        if m and not line.startswith("#"):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def total(series, name: str, **want) -> int:
    return int(sum(v for n, l, v in series if n == name and all(l.get(k) == x for k, x in want.items())))


def by_label(series, name: str, label: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for n, l, v in series:
        if n == name and v:
            out[l.get(label, "")] = out.get(l.get(label, ""), 0) + int(v)
    return out


def log_time(line: dict) -> float:
    return datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp()


def report_checks(checks: dict[str, bool]) -> bool:
    for name, ok in checks.items():
        print(f"  check {'ok  ' if ok else 'FAIL'} {name}")
    return all(checks.values())


def millpond(run: Path) -> int:
    s = read_kv(run / "millpond.samples")
    records = int(s["records"])
    elapsed, user, system, max_kb = (run / "ingest.time").read_text().split("\n")[-2].split()
    ingest_cpu = float(user) + float(system)
    ingest_startup = float(s["ingest_startup_cpu_s"])
    writer_startup = float(s["writer_startup_cpu_s"])
    writer_cpu = float(s["writer_total_cpu_s"]) - writer_startup
    loop_ingest = ingest_cpu - ingest_startup
    loop_cpu = loop_ingest + writer_cpu

    log = [json.loads(l) for l in (run / "ingest.log").read_text().splitlines() if l.startswith("{")]
    start = next(log_time(l) for l in log if "running to the high watermarks" in l.get("message", ""))
    flushes = [l for l in log if l.get("message") == "flush acknowledged and committed"]
    wall = log_time(flushes[-1]) - start
    triggers: dict[str, int] = {}
    for f in flushes:
        triggers[f["trigger"]] = triggers.get(f["trigger"], 0) + 1

    ing, wri = metrics(run / "ingest.metrics"), metrics(run / "writer.metrics")
    consumed = total(ing, "millpond_records_consumed_total")
    tombstones = total(ing, "millpond_tombstones_total")
    skipped = by_label(ing, "millpond_records_skipped_total", "reason")
    filtered = sum(n for r, n in skipped.items() if r.startswith("filter_"))
    written = total(wri, "millpond_records_written_total")
    dead = total(wri, "millpond_dead_letters_total")
    rss_ingest, rss_writer = int(max_kb) / 1024, int(s["writer_peak_rss_kb"]) / 1024
    rss_writer_ready = int(s.get("writer_ready_rss_kb", 0)) / 1024
    arrow = total(wri, "millpond_flush_size_bytes_sum")

    checks = {
        "millpond consumed == records in the topic": consumed == records,
        "millpond consumed == written + dead letters + tombstones + filtered":
            consumed == written + dead + tombstones + filtered,
    }
    result = {
        "records": records, "consumed": consumed, "written": written, "dead_letters": dead,
        "dead_letters_by_reason": by_label(wri, "millpond_dead_letters_total", "reason"),
        "dead_letter_values_by_reason": by_label(wri, "millpond_dead_letter_values_total", "reason"),
        "tombstones": tombstones, "filtered": filtered, "ingest_skipped_by_reason": skipped,
        "loop_wall_s": round(wall, 3), "process_wall_s": float(elapsed),
        "rec_per_s_wall": round(records / wall, 1),
        "loop_cpu_s": round(loop_cpu, 3), "rec_per_cpu_s": round(records / loop_cpu, 1),
        "ingest_loop_cpu_s": round(loop_ingest, 3), "writer_loop_cpu_s": round(writer_cpu, 3),
        "ingest_startup_cpu_s": ingest_startup, "writer_startup_cpu_s": writer_startup,
        "peak_rss_mb": {"ingest": round(rss_ingest, 1), "writer": round(rss_writer, 1),
                        "together": round(rss_ingest + rss_writer, 1),
                        "writer_when_ready": round(rss_writer_ready, 1)},
        "flushes": len(flushes), "flush_triggers": triggers,
        "flush_ms": [f.get("ms") for f in flushes], "arrow_bytes_flushed": arrow,
        "broker_cpu_s": float(s["broker_cpu_s"]), "flush_size": int(s["flush_size"]),
        "checks": checks,
    }
    (run / "millpond.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"millpond: {records} records, {records / wall:.0f} rec/s wall, {records / loop_cpu:.0f} rec per "
          f"CPU-second, peak RSS ingest {rss_ingest:.0f} MB + writer {rss_writer:.0f} MB = "
          f"{rss_ingest + rss_writer:.0f} MB (writer {rss_writer_ready:.0f} MB when ready)")
    print(f"  loop CPU {loop_cpu:.2f} s = ingest {loop_ingest:.2f} s + writer {writer_cpu:.2f} s; startup not "
          f"counted: ingest {ingest_startup:.2f} s, writer {writer_startup:.2f} s; loop wall {wall:.2f} s "
          f"(ingest process {float(elapsed):.2f} s)")
    print(f"  flushes {len(flushes)} {triggers} in {[f.get('ms') for f in flushes]} ms, Arrow "
          f"{arrow / 1e6:.0f} MB sent; consumed {consumed} = written {written} + dead letters {dead} + "
          f"tombstones {tombstones} + filtered {filtered}; broker CPU {float(s['broker_cpu_s']):.2f} s")
    return 0 if report_checks(checks) else 1


def lake_facts(catalog: str, data: str, ext_dir: str, s3: dict | None = None) -> dict:
    import duckdb

    con = duckdb.connect(config={"extension_directory": ext_dir, "autoinstall_known_extensions": False})
    con.execute("LOAD ducklake")
    if catalog.startswith("sqlite:"):
        con.execute("LOAD sqlite_scanner")
    if catalog.startswith("postgres:"):
        con.execute("LOAD postgres_scanner")
    if s3:
        con.execute("LOAD httpfs")
        con.execute(f"CREATE SECRET (TYPE s3, KEY_ID '{s3['s3_key_id']}', SECRET '{s3['s3_secret']}', "
                    f"REGION '{s3['s3_region']}', ENDPOINT '{s3['s3_endpoint']}', USE_SSL false, URL_STYLE 'path')")
    con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data}', READ_ONLY)")
    rows, distinct_uuid, null_keys, team_id_sum = con.execute(
        "SELECT count(*), count(DISTINCT uuid), count(*) FILTER (uuid IS NULL OR event IS NULL OR team_id IS NULL), "
        "coalesce(sum(team_id), 0) FROM lake.main.events").fetchone()
    columns = [r[0] for r in con.execute("DESCRIBE lake.main.events").fetchall()]
    files, file_bytes = con.execute(
        "SELECT count(*), coalesce(sum(data_file_size_bytes), 0) FROM ducklake_list_files('lake', 'events')").fetchone()
    # The codecs the files were written with (one unless the lake's option
    # changed between flushes).
    paths = [r[0] for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', 'events')").fetchall()]
    listed = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    codecs = sorted(r[0] for r in con.execute(
        f"SELECT DISTINCT compression FROM parquet_metadata([{listed}])").fetchall()) if paths else []
    con.close()
    return {"rows": rows, "distinct_uuid": distinct_uuid, "null_keys": null_keys,
            "team_id_sum": int(team_id_sum), "columns": columns, "files": files, "codecs": codecs,
            "parquet_bytes": int(file_bytes), "parquet_bytes_per_row": round(file_bytes / max(rows, 1), 1)}


def lake_checks(who: str, lake: dict, gen: dict) -> dict[str, bool]:
    return {
        f"{who} lake rows == generated JSON objects": lake["rows"] == gen["json_objects"],
        f"{who} no duplicate uuids": lake["distinct_uuid"] == lake["rows"],
        f"{who} uuid/event/team_id never null": lake["null_keys"] == 0,
        f"{who} sum(team_id) matches the generator": lake["team_id_sum"] == gen["team_id_sum"],
        f"{who} lake columns == generated keys + _inserted_at":
            sorted(lake["columns"]) == sorted(gen["top_level_keys"] + ["_inserted_at"]),
    }


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def compare(run: Path) -> int:
    gen = json.loads((run / "gen.json").read_text())
    mp = json.loads((run / "millpond.json").read_text())
    base = json.loads((run / "baseline.json").read_text().strip().splitlines()[-1])
    timev = (run / "baseline.time").read_text()
    base_rss = int(re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", timev).group(1)) / 1024
    s = read_kv(run / "baseline.samples")
    n = gen["count"]

    lake_dir = run / "millpond-lake"
    if (run / "millpond-lake.kv").exists():  # BENCH_LAKE=postgres-s3
        kv = read_kv(run / "millpond-lake.kv")
        mp_lake = lake_facts(kv["catalog"], kv["data"], s["ext_dir"], s3=kv)
    else:
        mp_catalog = (f"sqlite:{lake_dir}/catalog.sqlite" if (lake_dir / "catalog.sqlite").exists()
                      else f"{lake_dir}/catalog.ducklake")
        mp_lake = lake_facts(mp_catalog, f"{lake_dir}/data/", s["ext_dir"])
    py_lake = lake_facts(f"{run}/py-lake/catalog.ducklake", f"{run}/py-lake/data/", s["ext_dir"])

    consumed, written, skipped = base["records_consumed"], base["records_written"], base["records_skipped"]
    checks = {  # bench-pipeline.sh already checked mp["checks"]
        "millpond written == generated JSON objects": mp["written"] == gen["json_objects"],
        "millpond tombstones == generated tombstones": mp["tombstones"] == gen["kinds"]["tombstone"],
        **lake_checks("millpond", mp_lake, gen),
        # As run_baseline.sh checks the model's run:
        "baseline consumed == produced (N)": consumed == n,
        "baseline consumed == high watermarks": consumed == base["high_watermarks"],
        "baseline lake rows == consumed - skipped": py_lake["rows"] == consumed - skipped,
        "baseline lake rows == records_written": py_lake["rows"] == written,
        "baseline skipped == generated non-objects": skipped == n - gen["json_objects"],
        **lake_checks("baseline", py_lake, gen),
    }
    summary = {"generator": {k: v for k, v in gen.items() if k != "top_level_keys"},
               "millpond": mp, "millpond_lake": mp_lake, "baseline": base, "baseline_lake": py_lake,
               "baseline_peak_rss_mb": round(base_rss, 1), "baseline_broker_cpu_s": float(s["broker_cpu_s"]),
               "checks": checks}
    (run / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    print(f"baseline: {consumed} records, {base['rec_per_s_wall']:.0f} rec/s wall, "
          f"{base['rec_per_cpu_s']:.0f} rec per CPU-second, peak RSS {base_rss:.0f} MB")
    print(f"  loop CPU {base['cpu_s']:.2f} s (startup not counted: {base['startup_cpu_s']:.2f} s); loop wall "
          f"{base['wall_s']:.2f} s; phases (wall s): {base['phase_wall_s']}; main-thread CPU s: "
          f"{base['phase_main_thread_cpu_s']}")
    print(f"  flushes {base['flushes']} {base['flush_triggers']}; consumed {consumed} = written {written} + "
          f"skipped {skipped} {base['skipped_by_reason']}; broker CPU {float(s['broker_cpu_s']):.2f} s")
    rss_mp = mp["peak_rss_mb"]["together"]
    print(f"millpond / baseline: {ratio(mp['rec_per_cpu_s'], base['rec_per_cpu_s'])} records per CPU-second, "
          f"{ratio(mp['rec_per_s_wall'], base['rec_per_s_wall'])} wall records/s, "
          f"{ratio(rss_mp, base_rss)} peak RSS (ingest + writer {rss_mp:.0f} MB vs {base_rss:.0f} MB)")
    print(f"  lakes: millpond {mp_lake['rows']} rows, {len(mp_lake['columns'])} columns, {mp_lake['files']} files, "
          f"{mp_lake['parquet_bytes_per_row']} Parquet bytes per row ({'/'.join(mp_lake['codecs'])}); "
          f"baseline {py_lake['rows']} rows, {len(py_lake['columns'])} columns, {py_lake['files']} files, "
          f"{py_lake['parquet_bytes_per_row']} Parquet bytes per row; "
          f"generated {gen['json_objects']} JSON objects of {n}, avg value {gen['avg_value_bytes']} B")
    ok = report_checks(checks)
    print(f"  details: {run / 'summary.json'}")
    return 0 if ok else 1


def runs(dirs: list[Path]) -> int:
    """One line per figure: its median over the runs, and its range. The
    machine's speed moves every figure from run to run; ratios taken within
    one run move less, so their median is the figure to quote."""
    sums = [json.loads((d / "summary.json").read_text()) for d in dirs]

    def line(label: str, values: list[float], fmt: str) -> None:
        if not values:
            print(f"  {label}: n/a")
            return
        values = sorted(values)
        mid = len(values) // 2
        median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
        print(f"  {label}: median {fmt.format(median)} ({fmt.format(values[0])}-{fmt.format(values[-1])})")

    mp = [s["millpond"] for s in sums]
    base = [s["baseline"] for s in sums]
    print(f"over {len(sums)} runs, each Millpond then the model on the same topic:")
    line("millpond records per CPU-second", [m["rec_per_cpu_s"] for m in mp], "{:.0f}")
    line("model records per CPU-second", [b["rec_per_cpu_s"] for b in base], "{:.0f}")
    line("millpond / model records per CPU-second",
         [m["rec_per_cpu_s"] / b["rec_per_cpu_s"] for m, b in zip(mp, base) if b["rec_per_cpu_s"]], "{:.2f}x")
    line("millpond / model wall records/s",
         [m["rec_per_s_wall"] / b["rec_per_s_wall"] for m, b in zip(mp, base) if b["rec_per_s_wall"]], "{:.2f}x")
    line("millpond loop CPU-s, ingest", [m["ingest_loop_cpu_s"] for m in mp], "{:.2f}")
    line("millpond loop CPU-s, writer", [m["writer_loop_cpu_s"] for m in mp], "{:.2f}")
    line("millpond writer startup CPU-s", [m["writer_startup_cpu_s"] for m in mp], "{:.2f}")
    line("millpond peak RSS MB, ingest + writer", [m["peak_rss_mb"]["together"] for m in mp], "{:.0f}")
    line("model peak RSS MB", [s["baseline_peak_rss_mb"] for s in sums], "{:.0f}")
    line("millpond files in the lake", [s["millpond_lake"]["files"] for s in sums], "{:.0f}")
    line("millpond Parquet bytes per row", [s["millpond_lake"]["parquet_bytes_per_row"] for s in sums], "{:.1f}")
    failed = [str(d) for d, s in zip(dirs, sums) if not all(s["checks"].values())]
    if failed:
        print(f"  checks failed in: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    commands = {"millpond": millpond, "compare": compare}
    if len(sys.argv) >= 3 and sys.argv[1] == "runs":
        sys.exit(runs([Path(a) for a in sys.argv[2:]]))
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    sys.exit(commands[sys.argv[1]](Path(sys.argv[2])))
