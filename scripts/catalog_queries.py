"""Where a flush's catalog time goes on an embedded (SQLite) lake: runs
FLUSHES transactions shaped like the writer's (the offsets re-check, a fence
row, an offsets row, the commit message, COMMIT) against a copy of a catalog, or a new one, with
DuckDB's DuckLakeMetadata log on, and prints the time per step and the
metadata queries DuckLake ran, most expensive first. Compare a new lake with
a long-lived one to see which query grows (scripts/bench-long-lake.sh leaves
its catalog in $MILLPOND_STATE/bench-long-lake-sqlite-maintain0/data/).

usage: catalog_queries.py CATALOG.sqlite|new [FLUSHES]   (the venv's python)
"""
import collections
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time

import duckdb

src = sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__)
flushes = int(sys.argv[2]) if len(sys.argv) > 2 else 100
work = tempfile.mkdtemp(prefix="catalog-queries-")
catalog = os.path.join(work, "catalog.sqlite")
if src != "new":
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as a, sqlite3.connect(catalog) as b:
        a.backup(b)
ext = os.environ.get("DUCKDB_EXTENSION_DIR", os.path.expanduser("~/.cache/millpond/duckdb-extensions"))
con = duckdb.connect(config={"extension_directory": ext, "autoinstall_known_extensions": False})
con.execute("LOAD ducklake")
con.execute("LOAD sqlite_scanner")
# A copy keeps its lake's data path: the rows it reads may be in files there.
# What this writes stays in the catalog (inlined rows).
options = f" (DATA_PATH '{work}/data/')" if src == "new" else ""
con.execute(f"ATTACH 'ducklake:sqlite:{catalog}' AS lake{options}")
con.execute("CREATE TABLE IF NOT EXISTS lake.main._millpond_offsets (target_table VARCHAR, topic VARCHAR, "
            "kafka_partition INTEGER, first_offset BIGINT, last_offset BIGINT, flush_id VARCHAR, "
            "recorded_at TIMESTAMP WITH TIME ZONE)")
con.execute("CREATE TABLE IF NOT EXISTS lake.main._probe_fence (owner VARCHAR, written_at TIMESTAMP WITH TIME ZONE)")
base = con.execute("SELECT coalesce(max(last_offset), 0) + 1000 FROM lake.main._millpond_offsets").fetchone()[0]
snapshots = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
steps = {
    "begin": "BEGIN",
    "recheck": "SELECT CASE WHEN EXISTS (SELECT 1 FROM lake.main._millpond_offsets WHERE target_table = 'events' "
               "AND topic = 'events' AND kafka_partition = 0 AND last_offset >= {o}) THEN error('recorded') END",
    "fence": "INSERT INTO lake.main._probe_fence VALUES ('probe', now())",
    "offsets": "INSERT INTO lake.main._millpond_offsets VALUES ('events', 'events', 0, {o}, {o}, 'probe', now())",
    "message": "CALL lake.set_commit_message('probe', 'millpond flush probe-{o}')",
    "commit": "COMMIT",
}
spent = dict.fromkeys(steps, 0.0)
con.execute("CALL enable_logging('DuckLakeMetadata', level = 'debug')")
for i in range(flushes):
    for step, sql in steps.items():
        t = time.perf_counter()
        con.execute(sql.format(o=base + i))
        spent[step] += time.perf_counter() - t
print(f"# {snapshots} snapshots; ms per flush by step:",
      {k: round(v / flushes * 1000, 2) for k, v in spent.items()})
queries = collections.defaultdict(lambda: [0, 0])
for (message,) in con.execute("SELECT message FROM duckdb_logs() WHERE type = 'DuckLakeMetadata'").fetchall():
    m = re.search(r"'query': '(.*)', 'elapsed_ms': (\d+)", message, re.S)
    if m:
        key = re.sub(r"\d+", "N", re.sub(r"\s+", " ", m.group(1)).strip())[:150]
        queries[key][0] += 1
        queries[key][1] += int(m.group(2))
print("# metadata queries: ms per flush, runs per flush, query")
for key, (runs, ms) in sorted(queries.items(), key=lambda kv: -kv[1][1])[:12]:
    print(f"{ms / flushes:7.2f} {runs / flushes:5.1f}  {key}")
con.close()
shutil.rmtree(work)
