#!/usr/bin/env python3
"""The performance anchor: a model of the original Python Millpond's hot path.

Every "N times the original" figure is Millpond against this program, run
by scripts/bench-e2e.sh on the same topic right after Millpond. It does what
the original (github.com/PostHog/millpond: millpond/main.py and the
modules it calls) does for each record, in one thread, with the same
libraries and settings:

  consume    confluent-kafka Consumer, every partition assigned explicitly,
             group.id for offset storage only, no auto commit or offset
             store, auto.offset.reset=earliest, fetch.min.bytes 1 MiB,
             fetch.wait.max.ms 500, queued.max.messages.kbytes 16384,
             librdkafka statistics every 5 s parsed by a callback;
             consume(num_messages, timeout) with the original's adaptive
             size max(10, int(CONSUME_BATCH_SIZE * (1 - pending/FLUSH_SIZE)))
             and timeout min(max(time left to the flush, 0.1 s), 60 s)
  per call   tombstones counted as consumed, neither converted nor
             offset-tracked; every other value converted, its offset kept
  convert    orjson.loads per value (invalid JSON and non-objects skipped,
             with a warning logged each, as the original logs them); nested
             dicts and lists back to JSON text with orjson.dumps; the union
             of keys in first-seen order, each typed by
             pa.array([first non-null value]).type (string when always
             null); keys whose values disagree with that type stringified
             with str() and the schema inferred again;
             pa.Table.from_pylist(rows, schema); integer columns cast to
             int64 and floating ones to float64; null-typed columns dropped
  accumulate the tables of each call and the sum of their nbytes
  flush      when rows are pending and their nbytes reach FLUSH_SIZE or
             FLUSH_INTERVAL_MS has passed: pa.concat_tables(promote_options=
             "default"); on the first flush CREATE TABLE IF NOT EXISTS ... AS
             SELECT *, NOW() AS _inserted_at FROM <empty slice> WHERE false;
             every flush compares each column with the table's columns
             (information_schema, read once and cached) and issues ADD
             COLUMN IF NOT EXISTS (or ALTER COLUMN SET DATA TYPE for a
             different type); then INSERT INTO lake.main.events BY NAME
             (SELECT *, NOW() AS _inserted_at FROM <registered table>) in an
             embedded DuckLake through the duckdb package, with
             preserve_insertion_order=false and ducklake_max_retry_count=100
  commit     the highest offset + 1 of each partition, synchronously, up to
             three tries (0.5 s, 1 s apart)

Left out, all off the measured path or costs that would only make the model
slower (so Millpond's ratios against it are if anything understated): the
Prometheus counters the original bumps per message (labels(partition).inc()
per record: a few microseconds against the 30-50 the model spends on a
record) and per flush, its HTTP server and health bookkeeping, structured
(JSON) logging, config parsing, write retries, the optional coercion,
filter, sort and partitioning stages, and the hoglake destination.

Changed, so that a benchmark run finishes and its figures can be checked:
  * a key whose first value is an integer outside int64 (the workload's
    `big_id`): the original fails in pa.array on it and crash-loops (a known
    issue); here that key is stringified like a key of mixed types, for its
    consume call only (a later such value under an int64 key still fails);
  * a key typed differently in two calls of one flush (the original fails
    in concat_tables) becomes text across the flush; the workload has none;
  * every column name is quoted, so `$`-prefixed keys become columns (the
    original skips names outside [A-Za-z_][A-Za-z0-9_]* when it evolves the
    table); Millpond runs with DUCKLAKE_QUOTED_COLUMNS=true to match;
  * tombstones are reported as skipped (reason "tombstone") so that
    consumed == written + skipped;
  * it runs to the end: it reads the high watermarks at start, stops once
    every partition has been read up to them, flushes what is pending and
    commits. Near the end it asks consume() only for the messages left
    (consume waits for num_messages or the timeout, so the last call would
    otherwise idle until the flush deadline).

Prints one JSON line: records consumed, written and skipped, loop wall and
CPU seconds (from the first consume to the last commit; startup separately),
records per second and per CPU-second, the phases' wall and main-thread CPU
seconds, flushes and their triggers, and the high watermarks. Exit status 3
when consumed != written + skipped.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time

import duckdb
import orjson
import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, TopicPartition

log = logging.getLogger("py_baseline")
TABLE = "lake.main.events"
# information_schema's name of each Arrow type this model produces; any other
# type is VARCHAR, nested ones JSON, as in the original's type map.
DUCKDB_TYPES = {"bool": "BOOLEAN", "int64": "BIGINT", "double": "DOUBLE", "string": "VARCHAR",
                "large_string": "VARCHAR", "timestamp[us, tz=UTC]": "TIMESTAMP WITH TIME ZONE"}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------- convert
def infer(rows: list[dict]) -> tuple[pa.Schema, set[str]]:
    """The schema of the rows and the keys whose first value does not fit
    int64 (where the original fails)."""
    order: dict[str, None] = {}
    first: dict[str, object] = {}
    for row in rows:
        for key, value in row.items():
            if key not in order:
                order[key] = None
            if value is not None:
                seen = first.get(key)
                if seen is None:
                    first[key] = value
                elif isinstance(value, dict) and isinstance(seen, dict) and None in seen.values():
                    # (the original prefers a dict sample without nulls; nested
                    # values are JSON text by now, so this never holds)
                    if None not in value.values():
                        first[key] = value
    fields, too_big = [], set()
    for key in order:
        value = first.get(key)
        if value is None:
            fields.append(pa.field(key, pa.string()))
            continue
        try:
            fields.append(pa.field(key, pa.array([value]).type))
        except OverflowError:
            too_big.add(key)
            fields.append(pa.field(key, pa.string()))
    return pa.schema(fields), too_big


def python_type(arrow_type: pa.DataType):
    if pa.types.is_boolean(arrow_type):
        return bool
    if pa.types.is_integer(arrow_type):
        return int
    if pa.types.is_floating(arrow_type):
        return (int, float)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return str
    return None


def misfits(rows: list[dict], schema: pa.Schema) -> set[str]:
    """Keys holding a value the inferred type does not take."""
    expected = {f.name: t for f in schema if (t := python_type(f.type)) is not None}
    found = set()
    for row in rows:
        for key, value in row.items():
            if value is not None and key in expected and not isinstance(value, expected[key]):
                found.add(key)
    return found


def stringify(rows: list[dict], keys: set[str]) -> list[dict]:
    out = []
    for row in rows:
        row = dict(row)
        for key in keys:
            if row.get(key) is not None:
                row[key] = str(row[key])
        out.append(row)
    return out


def convert(values: list[bytes]) -> pa.Table | None:
    rows = []
    for raw in values:
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            log.warning("skipping invalid JSON: %s", raw[:200])
            continue
        if not isinstance(parsed, dict):
            log.warning("skipping a JSON %s", type(parsed).__name__)
            continue
        rows.append(parsed)
    if not rows:
        return None
    flat = []
    for row in rows:
        out = {}
        for key, value in row.items():
            if isinstance(value, (dict, list)):
                out[key] = orjson.dumps(value).decode()
            else:
                out[key] = value
        flat.append(out)
    rows = flat
    schema, too_big = infer(rows)
    bad = misfits(rows, schema) | too_big
    if bad:
        rows = stringify(rows, bad)
        schema, _ = infer(rows)
    table = pa.Table.from_pylist(rows, schema=schema)
    columns, fields, cast = [], [], False
    for field, column in zip(table.schema, table.columns):
        wide = (pa.int64() if pa.types.is_integer(field.type)
                else pa.float64() if pa.types.is_floating(field.type) else field.type)
        if wide != field.type:
            column, field, cast = column.cast(wide), pa.field(field.name, wide), True
        columns.append(column)
        fields.append(field)
    if cast:
        table = pa.table(dict(zip([f.name for f in fields], columns)), schema=pa.schema(fields))
    nulls = [f.name for f in table.schema if pa.types.is_null(f.type)]
    return table.drop_columns(nulls) if nulls else table


def combine(tables: list[pa.Table]) -> pa.Table:
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        types: dict[str, set] = {}
        for t in tables:
            for f in t.schema:
                types.setdefault(f.name, set()).add(f.type)
        split = {name for name, seen in types.items() if len(seen) > 1}
        fixed = []
        for t in tables:
            for name in split & set(t.column_names):
                i = t.column_names.index(name)
                text = [None if v is None else str(v) for v in t.column(i).to_pylist()]
                t = t.set_column(i, name, pa.array(text, pa.string()))
            fixed.append(t)
        return pa.concat_tables(fixed, promote_options="default")


# ------------------------------------------------------------------- lake
def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duckdb_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_struct(arrow_type) or pa.types.is_list(arrow_type) or pa.types.is_map(arrow_type):
        return "JSON"
    return DUCKDB_TYPES.get(str(arrow_type), "VARCHAR")


class Lake:
    def __init__(self, catalog: str, data_path: str, ext_dir: str, threads: int | None):
        self.db = duckdb.connect()
        for sql in (f"SET extension_directory = '{ext_dir}'", "SET autoinstall_known_extensions = false",
                    "LOAD parquet", "LOAD ducklake", "SET preserve_insertion_order = false"):
            self.db.execute(sql)
        if threads:
            self.db.execute(f"SET threads = {int(threads)}")
        os.makedirs(data_path, exist_ok=True)
        self.db.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data_path}')")
        self.db.execute("SET ducklake_max_retry_count = 100")
        self.created = False
        self.columns: dict[str, str] | None = None
        self.columns_added = 0

    def write(self, table: pa.Table) -> None:
        if not self.created:
            self.db.register("schema_batch", table.slice(0, 0))
            try:
                self.db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} AS "
                                "SELECT *, NOW() AS _inserted_at FROM schema_batch WHERE false")
            finally:
                self.db.unregister("schema_batch")
            self.created = True
        self.evolve(table.schema)
        self.db.register("arrow_batch", table)
        try:
            self.db.execute(f"INSERT INTO {TABLE} BY NAME (SELECT *, NOW() AS _inserted_at FROM arrow_batch)")
        finally:
            self.db.unregister("arrow_batch")

    def evolve(self, schema: pa.Schema) -> None:
        if self.columns is None:
            self.columns = dict(self.db.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = 'lake' "
                "AND table_schema = 'main' AND table_name = 'events'").fetchall())
        for field in schema:
            want = duckdb_type(field.type)
            have = self.columns.get(field.name)
            if have is None:
                self.db.execute(f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {quoted(field.name)} {want}")
                self.columns[field.name] = want
                self.columns_added += 1
            elif have != want:
                try:
                    self.db.execute(f"ALTER TABLE {TABLE} ALTER COLUMN {quoted(field.name)} SET DATA TYPE {want}")
                    self.columns[field.name] = want
                except duckdb.Error as err:
                    log.warning("cannot change %s from %s to %s: %s", field.name, have, want, err)


# ------------------------------------------------------------------- loop
def consumer_for(args, group_id: str) -> Consumer:
    gauges: dict[str, float] = {}

    def on_stats(text: str) -> None:  # the original sets Prometheus gauges from these
        try:
            stats = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        for name in ("replyq", "msg_cnt", "msg_size"):
            gauges[name] = stats.get(name, 0)

    env = os.environ.get
    overrides = {k[len("KAFKA_CONSUMER_"):].lower().replace("_", "."): v
                 for k, v in os.environ.items() if k.startswith("KAFKA_CONSUMER_")}
    return Consumer({
        "bootstrap.servers": args.bootstrap, "client.id": f"py-baseline-{args.topic}",
        "group.id": group_id, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "fetch.min.bytes": int(env("FETCH_MIN_BYTES", "1048576")),
        "fetch.wait.max.ms": int(env("FETCH_MAX_WAIT_MS", "500")),
        "max.poll.interval.ms": 600_000, "queued.max.messages.kbytes": 16384,
        "statistics.interval.ms": int(env("STATS_INTERVAL_MS", "5000")), "stats_cb": on_stats,
        **overrides,
    })


def commit(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    for attempt in range(3):
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException:
            if attempt == 2:
                raise
            log.warning("offset commit failed, attempt %d of 3", attempt + 1)
            time.sleep(0.5 * 2**attempt)


def main() -> int:
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default=env("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    ap.add_argument("--topic", default=env("KAFKA_TOPIC", "events"))
    ap.add_argument("--group-id", default=env("GROUP_ID"))
    ap.add_argument("--catalog", required=True, help="DuckLake catalog file (ATTACH 'ducklake:<this>')")
    ap.add_argument("--data-path", required=True, help="DuckLake DATA_PATH")
    ap.add_argument("--ext-dir", required=True, help="DuckDB extension_directory holding ducklake and parquet")
    ap.add_argument("--flush-size", type=int, default=int(env("FLUSH_SIZE", "104857600")))
    ap.add_argument("--flush-interval-ms", type=int, default=int(env("FLUSH_INTERVAL_MS", "60000")))
    ap.add_argument("--batch-size", type=int, default=int(env("CONSUME_BATCH_SIZE", "1000")))
    ap.add_argument("--duckdb-threads", type=int, default=int(env("DUCKDB_THREADS", "0")) or None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")

    started, cpu_started = time.perf_counter(), cpu_seconds()
    lake = Lake(args.catalog, args.data_path, args.ext_dir, args.duckdb_threads)
    consumer = consumer_for(args, args.group_id or f"millpond-{args.topic}-events")
    topic = consumer.list_topics(args.topic, timeout=30).topics.get(args.topic)
    if topic is None or topic.error is not None or not topic.partitions:
        print(f"py_baseline: topic {args.topic!r} not found", file=sys.stderr)
        return 2
    partitions = sorted(topic.partitions)
    high = {p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30, cached=False)[1]
            for p in partitions}
    committed = consumer.committed([TopicPartition(args.topic, p) for p in partitions], timeout=30)
    low = {p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30, cached=False)[0]
           for p in partitions}
    read_to = {tp.partition: tp.offset if tp.offset >= 0 else low[tp.partition] for tp in committed}
    consumer.assign([TopicPartition(args.topic, p) for p in partitions])

    loop_started, cpu_loop = time.perf_counter(), cpu_seconds()
    counts = {"consumed": 0, "written": 0, "flushes": 0, "kafka_errors": 0, "consume_calls": 0}
    skipped = {"json_parse": 0, "tombstone": 0}
    triggers = {"size": 0, "time": 0, "end": 0}
    wall = {"consume": 0.0, "convert": 0.0, "lake_write": 0.0, "commit": 0.0}
    thread_cpu = {"consume": 0.0, "convert": 0.0, "lake_write": 0.0}
    pending: list[pa.Table] = []
    pending_bytes = pending_rows = 0
    offsets: dict[int, int] = {}
    interval = args.flush_interval_ms / 1000
    last_flush = time.monotonic()

    def flush(trigger: str) -> None:
        nonlocal pending, pending_bytes, pending_rows, last_flush
        t0, c0 = time.perf_counter(), time.thread_time()
        table = combine(pending)
        lake.write(table)
        wall["lake_write"] += time.perf_counter() - t0
        thread_cpu["lake_write"] += time.thread_time() - c0
        t0 = time.perf_counter()
        commit(consumer, [TopicPartition(args.topic, p, o + 1) for p, o in sorted(offsets.items())])
        wall["commit"] += time.perf_counter() - t0
        counts["written"] += table.num_rows
        counts["flushes"] += 1
        triggers[trigger] += 1
        pending, pending_bytes, pending_rows = [], 0, 0
        offsets.clear()
        last_flush = time.monotonic()

    while any(read_to[p] < high[p] for p in partitions):
        timeout = min(max(interval - (time.monotonic() - last_flush), 0.1), 60.0)
        size = max(10, int(args.batch_size * (1.0 - pending_bytes / args.flush_size)))
        left = sum(high[p] - read_to[p] for p in partitions)
        if left < size:  # run to the end: ask for what is left only
            size, timeout = left, min(timeout, 0.5)
        t0, c0 = time.perf_counter(), time.thread_time()
        messages = consumer.consume(num_messages=size, timeout=timeout)
        t1, c1 = time.perf_counter(), time.thread_time()
        wall["consume"] += t1 - t0
        thread_cpu["consume"] += c1 - c0
        counts["consume_calls"] += 1
        values = []
        for m in messages:
            if m.error() is not None:
                counts["kafka_errors"] += 1
                log.warning("kafka error: %s", m.error())
                continue
            counts["consumed"] += 1
            partition, offset = m.partition(), m.offset()
            read_to[partition] = offset + 1
            value = m.value()
            if value is None:
                skipped["tombstone"] += 1
                continue
            values.append(value)
            offsets[partition] = max(offsets.get(partition, -1), offset)
        if values:
            table = convert(values)
            rows = 0 if table is None else table.num_rows
            skipped["json_parse"] += len(values) - rows
            if table is not None:
                pending.append(table)
                pending_bytes += table.nbytes
                pending_rows += rows
        wall["convert"] += time.perf_counter() - t1
        thread_cpu["convert"] += time.thread_time() - c1
        if pending_rows and pending_bytes >= args.flush_size:
            flush("size")
        elif pending_rows and time.monotonic() - last_flush >= interval:
            flush("time")
    if pending_rows:
        flush("end")
    loop_wall, loop_cpu = time.perf_counter() - loop_started, cpu_seconds() - cpu_loop
    consumer.close()
    lake.db.close()

    consumed, skipped_total = counts["consumed"], sum(skipped.values())
    result = {
        "records_consumed": consumed,
        "records_written": counts["written"],
        "records_skipped": skipped_total,
        "skipped_by_reason": skipped,
        "wall_s": round(loop_wall, 3),
        "cpu_s": round(loop_cpu, 3),
        "rec_per_s_wall": round(consumed / loop_wall, 1) if loop_wall > 0 else None,
        "rec_per_cpu_s": round(consumed / loop_cpu, 1) if loop_cpu > 0 else None,
        "startup_cpu_s": round(cpu_loop - cpu_started, 3),
        "process_wall_s": round(time.perf_counter() - started, 3),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "phase_wall_s": {k: round(v, 3) for k, v in wall.items()},
        "phase_main_thread_cpu_s": {k: round(v, 3) for k, v in thread_cpu.items()},
        "consume_calls": counts["consume_calls"],
        "flushes": counts["flushes"],
        "flush_triggers": triggers,
        "columns_added": lake.columns_added,
        "kafka_errors": counts["kafka_errors"],
        "high_watermarks": sum(high.values()),
        "partitions": len(partitions),
        "flush_size": args.flush_size,
    }
    print(json.dumps(result), flush=True)
    return 0 if consumed == counts["written"] + skipped_total else 3


if __name__ == "__main__":
    sys.exit(main())
