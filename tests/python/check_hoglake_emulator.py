#!/usr/bin/env python3
"""Validate tests/hoglake-emulator against the official client pyhoglake 1.3.11.

Starts the emulator as a subprocess (port 0), then:

* replays the session captured in tests/hoglake-vectors/ with pyhoglake
  and compares, request by request, what the emulator received and answered
  with the capture (uuids normalised), the prepared payloads with the
  captured prepared_payload_*.json, and the parquet objects with their
  registrations;
* runs scenario checks that read real state back from the emulator: prepared
  append + exact/reordered/tampered replay, 503 + Retry-After, a response
  dropped after a successful commit then replayed (exactly once), DDL since
  read_snapshot, a recreated table refusing the old incarnation, the
  retention floor (410), alter rules, and wire-level refusals; then the
  mutation route's scenarios (hoglake_mutation_checks.py) and the advertised
  capabilities (the replay's emulator runs with the captured list).

Exit 0 when every check passes; otherwise non-zero with the failing checks.
Run with a Python that has pyhoglake==1.3.11 and pyarrow==26.0.1:

    python tests/python/check_hoglake_emulator.py
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import struct
import sys
import threading
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pyhoglake
from pyhoglake import (
    AlterOp,
    DdlSinceReadSnapshotError,
    HoglakeClient,
    HoglakeError,
    IncarnationChangedError,
    ReadSnapshotExpiredError,
    ValidationError,
    ops,
)
from pyhoglake.errors import AlreadyExistsError, CommitConflictError, ExpiredError
from pyhoglake.types import schema_to_column_defs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hoglake_check_support import CheckFailed, arrow_rows, check, expect_raises  # noqa: E402
from hoglake_emulator_harness import EmulatorProcess  # noqa: E402
from hoglake_local_store import LocalObjectStore  # noqa: E402
from hoglake_mutation_checks import MUTATION_CHECKS, check_default_capabilities  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# The pyhoglake captures, kept with the tests (a copy of the spec's vectors).
VECTORS = REPO / "tests/hoglake-vectors"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
COMPARED_HEADERS = ("User-Agent", "Content-Type")
CAPTURED_CAPABILITIES = ("atomic-table-creation-v1", "idempotent-append-v1")

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("score", pa.float64()),
        pa.field("tags", pa.list_(pa.string())),
    ]
)
ROW7 = {"id": 7, "name": "z", "ts": datetime(2026, 3, 1), "amount": None, "score": 1.0, "tags": ["q"], "extra": 1}


class UuidNames:
    """Replaces each distinct UUID by ``<uuid-N>`` in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return UUID_RE.sub(lambda m: self.names.setdefault(m.group(0), f"<uuid-{len(self.names)}>"), value)
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        return value


def diff(expected: Any, actual: Any, where: str = "") -> str | None:
    """The first difference between two JSON values, as text (None when equal)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in actual:
                return f"{where}.{key}: missing (expected {expected[key]!r})"
            if key not in expected:
                return f"{where}.{key}: unexpected {actual[key]!r}"
            found = diff(expected[key], actual[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return f"{where}: {len(actual)} items, expected {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = diff(e, a, f"{where}[{i}]")
            if found:
                return found
        return None
    if expected != actual or type(expected) is not type(actual):
        return f"{where}: {actual!r}, expected {expected!r}"
    return None


# -- part A: the captured session -------------------------------------------------------------


def run_captured_session(emu: EmulatorProcess, store: LocalObjectStore, workdir: Path) -> dict[str, Any]:
    """Drive pyhoglake through the same calls that produced hoglake-vectors/; return what it built."""
    client = HoglakeClient(emu.url, s3=store)
    out: dict[str, Any] = {}
    catalog = client.create_catalog("demo", "s3://lake/demo/")
    namespace = catalog.create_namespace("analytics")
    events = namespace.create_table("events", EVENTS_SCHEMA)
    out["events_created_columns"] = [c for c in events.columns]
    events.alter([ops.add_column("extra", pa.int32()), ops.promote_column("extra", "long")])
    rows = pq.read_table(VECTORS / "local.parquet").to_pylist()

    out["payload_tables"] = events.prepare_append_tables([(arrow_rows(events, rows), None)], idempotency_key=str(uuid.uuid4()))
    out["first"] = events.commit_prepared(out["payload_tables"])
    out["replay"] = events.commit_prepared(out["payload_tables"])
    tampered = copy.deepcopy(out["payload_tables"])
    tampered["appends"][0]["files"][0]["record_count"] = 4
    out["tampered"] = expect_raises(ValidationError, lambda: events.commit_prepared(tampered), "tampered replay")

    local = workdir / "local.parquet"
    shutil.copyfile(VECTORS / "local.parquet", local)
    out["payload_files"] = events.prepare_append_files([(str(local), None)], idempotency_key=str(uuid.uuid4()))
    events.commit_prepared(out["payload_files"])

    parts = namespace.create_table("parts", EVENTS_SCHEMA)
    sort = AlterOp("set_sort_order", {"sort_fields": [{"source_field_id": 1, "direction": "asc", "null_order": "nulls_first"}]})
    parts.alter(
        [ops.set_partition_spec([ops.partition_field(3, "month"), ops.partition_field(1, "bucket", 4)]), sort]
    )
    out["partitioned"] = parts.append(arrow_rows(parts, rows), author="me", message="partitioned batch")
    out["files_events"] = events.files(snapshot=6)
    out["files_parts"] = parts.files(snapshot=out["partitioned"].snapshot_id)

    catalog2 = client.catalog("demo")
    namespace2 = catalog2.namespace("analytics")
    events2, parts2 = namespace2.table("events"), namespace2.table("parts")
    events2.append(arrow_rows(events2, [ROW7]), deferred_stats=True)
    events2.append(arrow_rows(events2, [ROW7]), expected_table_uuid=pyhoglake.UNGUARDED)
    out["payload_partitioned"] = parts2.prepare_append_tables(
        [(arrow_rows(parts2, [ROW7]), ("674", "1"))], idempotency_key=str(uuid.uuid4())
    )
    out["last"] = parts2.commit_prepared(out["payload_partitioned"])
    client.close()
    return out


def check_captured_wire(emu: EmulatorProcess) -> None:
    """Every /v1 request the emulator got equals the captured one, and so does what it answered."""
    captured = [json.loads(line) for line in (VECTORS / "pyhoglake-requests.jsonl").read_text().splitlines() if line]
    pairs = [(captured[i], captured[i + 1]) for i in range(0, len(captured), 2)]
    ours = [e for e in emu.requests() if e["path"].startswith("/v1/")]
    check(len(ours) == len(pairs), f"emulator logged {len(ours)} /v1 requests, the capture has {len(pairs)}")
    theirs_names, ours_names = UuidNames(), UuidNames()
    for i, ((req, reply), got) in enumerate(zip(pairs, ours, strict=True)):
        label = f"request #{i} {req['method']} {req['path']}"
        want = theirs_names({k: req[k] for k in ("method", "path", "query", "body")})
        have = ours_names({k: got[k] for k in ("method", "path", "query", "body")})
        found = diff(want, have)
        check(found is None, f"{label}: request differs from the capture at {found}")
        for header in COMPARED_HEADERS:
            check(req["headers"].get(header) == got["headers"].get(header), f"{label}: header {header} differs")
        check(got["status"] == reply["response_status"], f"{label}: answered {got['status']}, capture {reply['response_status']}")
        found = diff(theirs_names(reply["response"]), ours_names(got["response"]))
        check(found is None, f"{label}: response differs from the capture at {found}")


def check_captured_payloads(out: dict[str, Any]) -> None:
    """The prepared payloads pyhoglake built against the emulator equal prepared_payload_*.json."""
    for name, key in (("tables", "payload_tables"), ("files", "payload_files"), ("partitioned", "payload_partitioned")):
        want = UuidNames()(json.loads((VECTORS / f"prepared_payload_{name}.json").read_text()))
        found = diff(want, UuidNames()(out[key]))
        check(found is None, f"prepared_payload_{name}.json differs at {found}")


def check_captured_results(out: dict[str, Any]) -> None:
    """Commit results, replay, tampered replay, field ids and file listings match report.json."""
    report = json.loads((VECTORS / "report.json").read_text())
    first, replay = out["first"], out["replay"]
    check((first.snapshot_id, first.schema_version) == tuple(report["prepared_commit"]["first"].values()), f"first commit {first}")
    check((replay.snapshot_id, replay.schema_version) == (first.snapshot_id, first.schema_version), f"replay answered {replay}")
    tampered = out["tampered"]
    check(
        (tampered.status_code, tampered.message, tampered.detail)
        == (report["tampered_replay"]["status"], report["tampered_replay"]["message"], report["tampered_replay"]["detail"]),
        f"tampered replay answered {tampered.status_code} {tampered.message} {tampered.detail}",
    )
    created = [(c.name, c.type, c.field_id, c.ordinal, c.nullable, c.type_params) for c in out["events_created_columns"]]
    want = [(c["name"], c["type"], c["field_id"], c["ordinal"], c["nullable"], c["type_params"]) for c in report["create_table"]["columns"]]
    check(created == want, f"created columns {created} != report {want}")
    check(out["events_created_columns"][5].children[0].field_id == 7, "list element field id is not 7")
    for key in ("files_events", "files_parts"):
        check(len(out[key]) == len(report[key]), f"{key}: {len(out[key])} files, report has {len(report[key])}")
        have = [_data_file_row(f, list(row)) for f, row in zip(out[key], report[key], strict=True)]
        found = diff(UuidNames()(report[key]), UuidNames()(have))
        check(found is None, f"{key} differs from report.json at {found}")
    partitioned = [(f.record_count, list(f.partition_values or ())) for f in out["partitioned"].files]
    check(partitioned == [(f["record_count"], f["partition_values"]) for f in report["partitioned_append"]["files"]], f"partition fan-out {partitioned}")


def _data_file_row(data_file: pyhoglake.DataFile, keys: list[str]) -> dict[str, Any]:
    """A DataFile as report.json records it (those keys, partition_values as a list)."""
    row = {key: getattr(data_file, key) for key in keys}
    if row.get("partition_values") is not None:
        row["partition_values"] = list(row["partition_values"])
    return row


def check_objects_match_registrations(out: dict[str, Any], store: LocalObjectStore) -> None:
    """Every registered object exists locally; size, footer_size, row count and field ids agree."""
    for key in ("payload_tables", "payload_files", "payload_partitioned"):
        for reg in out[key]["appends"][0]["files"]:
            path = Path(store.local_path(reg["path"]))
            check(path.is_file(), f"{reg['path']} was registered but never written")
            raw = path.read_bytes()
            check(len(raw) == reg["file_size_bytes"], f"{path.name}: {len(raw)} bytes, registered {reg['file_size_bytes']}")
            check(struct.unpack("<I", raw[-8:-4])[0] == reg["footer_size"], f"{path.name}: footer_size mismatch")
            meta = pq.ParquetFile(path).metadata
            check(meta.num_rows == reg["record_count"], f"{path.name}: {meta.num_rows} rows, registered {reg['record_count']}")
            leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
            check("tags.list.element" in leaves, f"{path.name}: compliant list naming missing ({leaves})")
            stats_ids = {s["field_id"] for s in reg["column_stats"]}
            check(stats_ids <= {1, 2, 3, 4, 5, 7, 8}, f"{path.name}: stats for non-leaf field ids {stats_ids}")


# -- part B: scenarios ----------------------------------------------------------------------------------

SIMPLE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


class Scenario:
    """A fresh catalog 'ops' with namespace 'analytics' on the running emulator."""

    def __init__(self, emu: EmulatorProcess, store: LocalObjectStore) -> None:
        self.emu = emu
        self.client = HoglakeClient(emu.url, s3=store)
        self.catalog = self.client.create_catalog("ops", "s3://lake/ops/")
        self.namespace = self.catalog.create_namespace("analytics")

    def table(self, name: str, schema: pa.Schema = SIMPLE_SCHEMA) -> pyhoglake.Table:
        """Create a table."""
        return self.namespace.create_table(name, schema)

    def prepare(self, table: pyhoglake.Table, first_id: int, key: str | None = None, rows: int = 2) -> dict[str, Any]:
        """A prepared unpartitioned append of ``rows`` rows (ids from ``first_id``)."""
        data = arrow_rows(table, [{"id": first_id + i, "name": f"n{first_id + i}"} for i in range(rows)])
        return table.prepare_append_tables([(data, None)], idempotency_key=key or str(uuid.uuid4()))

    def head(self) -> int:
        """The catalog head as the emulator reports it now."""
        return self.catalog.refresh().head_snapshot_id

    def receipt(self, key: str) -> httpx.Response:
        """GET /v1/catalogs/ops/commit/receipts/{key}."""
        return self.emu.api("GET", f"/catalogs/ops/commit/receipts/{key}")

    def paths(self, name: str) -> list[str]:
        """Paths of the files visible at head in ``analytics.<name>``."""
        return [f.path for f in self.namespace.table(name).files(snapshot=self.head())]


def scenario_prepared_replay(s: Scenario) -> None:
    """A prepared append publishes once; exact and reordered replays answer the receipt; a changed payload is 422."""
    table = s.table("replay")
    payload = s.prepare(table, 1, rows=3)
    first = table.commit_prepared(payload)
    check(s.head() == first.snapshot_id, "head is not the commit's snapshot")
    check(s.paths("replay") == [payload["appends"][0]["files"][0]["path"]], "files listing after commit")
    again = table.commit_prepared(payload)
    check((again.snapshot_id, again.schema_version) == (first.snapshot_id, first.schema_version), f"replay answered {again}")
    reordered = copy.deepcopy(payload)
    reordered["appends"][0]["files"][0]["column_stats"].reverse()
    raw = s.emu.api("POST", "/catalogs/ops/commit/prepared", json=reordered)
    check(raw.status_code == 200 and raw.json()["snapshot_id"] == first.snapshot_id, f"reordered stats replay: {raw.status_code} {raw.text}")
    check(s.head() == first.snapshot_id and len(s.paths("replay")) == 1, "a replay published something")
    receipt = s.receipt(payload["idempotency_key"]).json()
    check(receipt["snapshot_id"] == first.snapshot_id and UUID_RE.fullmatch(receipt["operation_id"]), f"receipt {receipt}")
    changed = copy.deepcopy(payload)
    changed["appends"][0]["files"][0]["column_stats"][0]["null_count"] += 1
    err = expect_raises(ValidationError, lambda: table.commit_prepared(changed), "changed payload under a used key")
    check("idempotency_key reused" in (err.detail or ""), f"detail {err.detail!r}")
    check(s.emu.api("GET", "/catalogs/ops/commit/receipts/not-a-uuid").status_code == 400, "non-UUID receipt key")
    check(s.receipt(str(uuid.uuid4())).status_code == 404, "unknown receipt")


def scenario_retry_after(s: Scenario) -> None:
    """An injected 503 commit_queue_timeout + Retry-After writes nothing; the identical resend publishes once."""
    table = s.table("backpressure")
    payload = s.prepare(table, 10)
    head = s.head()
    seq = s.emu.last_seq()
    s.emu.add_fault({"method": "POST", "path": r"/commit/prepared$", "action": "status", "status": 503})
    err = expect_raises(HoglakeError, lambda: table.commit_prepared(payload), "commit under an injected 503")
    check((err.status_code, err.message) == (503, "commit_queue_timeout"), f"503 surfaced as {err.status_code} {err.message}")
    entry = s.emu.requests(since=seq, path="/commit/prepared$")[-1]
    check(entry["response_headers"].get("Retry-After") == "1", f"Retry-After sent: {entry['response_headers']}")
    check(s.head() == head and s.receipt(payload["idempotency_key"]).status_code == 404, "the 503 wrote something")
    s.emu.add_fault({"path": r"/commit/prepared$", "status": 503, "retry_after": "7"})
    raw = s.emu.api("POST", "/catalogs/ops/commit/prepared", json=payload)
    check(raw.status_code == 503 and raw.headers.get("retry-after") == "7", f"raw 503 headers {dict(raw.headers)}")
    result = table.commit_prepared(payload)
    check(result.snapshot_id == head + 1 and s.head() == head + 1, f"resend landed at {result.snapshot_id}, head {s.head()}")
    check(len(s.paths("backpressure")) == 1, "resend did not publish exactly one file")


def scenario_dropped_response(s: Scenario) -> None:
    """A commit applied but its response lost: the replay answers the same receipt and the rows exist once."""
    table = s.table("lost")
    payload = s.prepare(table, 20)
    head = s.head()
    s.emu.add_fault({"method": "POST", "path": r"/commit/prepared$", "action": "drop_response_after_commit"})
    expect_raises(httpx.TransportError, lambda: table.commit_prepared(payload), "commit whose response is dropped")
    receipt = s.receipt(payload["idempotency_key"])
    check(receipt.status_code == 200 and receipt.json()["snapshot_id"] == head + 1, f"no receipt after a dropped response: {receipt.text}")
    check(s.head() == head + 1 and len(s.paths("lost")) == 1, "the dropped-response commit was not applied once")
    replay = table.commit_prepared(payload)
    check(replay.snapshot_id == head + 1, f"replay answered {replay.snapshot_id}, expected {head + 1}")
    check(s.head() == head + 1 and len(s.paths("lost")) == 1, "the replay published the rows again")
    faults = s.emu.faults()
    check(faults[-1]["fired"] == 1, f"fault fired {faults[-1]['fired']} times")


def scenario_ddl_since_read_snapshot(s: Scenario) -> None:
    """DDL after read_snapshot refuses the commit (409, re-prepare); the same key then works for the rebuilt payload."""
    table = s.table("drift")
    payload = s.prepare(table, 30)
    s.namespace.table("drift").alter([ops.add_column("late", pa.string())])
    head = s.head()
    err = expect_raises(DdlSinceReadSnapshotError, lambda: table.commit_prepared(payload), "commit across DDL")
    check(err.tables == ("analytics.drift",) and err.read_snapshot == payload["read_snapshot"], f"error fields {err.tables} {err.read_snapshot}")
    check(err.re_prepare and not err.retryable, "ddl_since_read_snapshot not flagged re-prepare")
    check(s.head() == head and s.receipt(payload["idempotency_key"]).status_code == 404, "a refused commit wrote something")
    fresh = s.namespace.table("drift")
    rebuilt = s.prepare(fresh, 30, key=payload["idempotency_key"])
    check(rebuilt["read_snapshot"] > payload["read_snapshot"], "re-prepare kept the stale read_snapshot")
    result = fresh.commit_prepared(rebuilt)
    check(result.snapshot_id == head + 1 and len(s.paths("drift")) == 1, "rebuilt payload under the same key did not publish once")


def scenario_recreated_table(s: Scenario) -> None:
    """Drop + recreate: the old incarnation's payloads never publish into the new table."""
    old = s.table("phoenix")
    committed = s.prepare(old, 40)
    old_result = old.commit_prepared(committed)
    stale = s.prepare(old, 50)  # built against the old incarnation, never committed
    s.namespace.table("phoenix").drop()
    new = s.table("phoenix")
    check(new.table_uuid != old.table_uuid, "recreate kept the table_uuid")
    head = s.head()
    replay = old.commit_prepared(committed)  # hoglake-api.md 7.4: replay check runs before table resolution
    check(replay.snapshot_id == old_result.snapshot_id, f"exact replay after recreate answered {replay.snapshot_id}")
    check(s.head() == head and s.paths("phoenix") == [], "the old receipt published into the new incarnation")
    err = expect_raises(IncarnationChangedError, lambda: old.commit_prepared(stale), "old-incarnation payload")
    check(err.table == "analytics.phoenix" and err.re_prepare, f"table_recreated fields {err.table}")
    check(s.head() == head and s.receipt(stale["idempotency_key"]).status_code == 404, "refused commit wrote something")
    rebuilt_old_key = s.prepare(new, 60, key=committed["idempotency_key"])
    err = expect_raises(ValidationError, lambda: new.commit_prepared(rebuilt_old_key), "old key, new payload")
    check("idempotency_key reused" in (err.detail or ""), f"detail {err.detail!r}")
    requeued = copy.deepcopy(committed)
    requeued["idempotency_key"] = str(uuid.uuid4())
    requeued["read_snapshot"] = head
    requeued["appends"][0]["expected_table_uuid"] = new.table_uuid
    expect_raises(CommitConflictError, lambda: new.commit_prepared(requeued), "path queued for deletion")
    rebuilt = s.prepare(new, 50, key=stale["idempotency_key"])
    result = new.commit_prepared(rebuilt)
    files = new.files(snapshot=result.snapshot_id)
    check(len(files) == 1 and files[0].row_id_start == 0, f"new incarnation files {files}")
    check(old.info(snapshot=old_result.snapshot_id, totals=True).record_count == 2, "time travel to the old incarnation")


def scenario_retention_floor(s: Scenario) -> None:
    """read_snapshot below the floor -> 410 (re-prepare); reads below it -> 410 too."""
    table = s.table("aged")
    payload = s.prepare(table, 70)
    s.namespace.create_table("aged_other", SIMPLE_SCHEMA)  # moves head past the payload's read_snapshot
    s.emu.set_floor("ops", s.head())
    expect_raises(ReadSnapshotExpiredError, lambda: table.commit_prepared(payload), "commit below the floor")
    expect_raises(ExpiredError, lambda: table.info(snapshot=payload["read_snapshot"]), "read below the floor")
    check(s.catalog.options().earliest_snapshot_id == s.head(), "options do not report the floor")


def scenario_alter_rules(s: Scenario) -> None:
    """Field ids, promotions, partition spec and sort order rules of hoglake-api.md 6.3."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int32()), pa.field("ts", pa.timestamp("us"))])
    table = s.table("shape", schema)
    # pyhoglake's ops.add_column sends a container without children, which 6.1 refuses (a list
    # has exactly one child named 'element'); the full ColumnDef comes from schema_to_column_defs.
    childless = ops.add_column("tags", pa.list_(pa.string()))
    expect_raises(ValidationError, lambda: table.alter([childless]), "list column without its element")
    tags = schema_to_column_defs(pa.schema([pa.field("tags", pa.list_(pa.string()))]))[0]
    info = table.alter([AlterOp("add_column", {"column": tags}), ops.add_column("score", pa.float32())])
    ids = {c.name: c.field_id for c in info.columns}
    check(ids == {"id": 1, "n": 2, "ts": 3, "tags": 4, "score": 6} and info.columns[3].children[0].field_id == 5, f"field ids {ids}")
    check(info.snapshot_id == info.read_snapshot_id == s.head(), "alter did not answer its own snapshot")
    table.alter([ops.promote_column("n", "long"), ops.promote_column("score", "double")])
    check([c.type for c in table.columns][:2] == ["long", "long"], "promotion not applied")
    expect_raises(ValidationError, lambda: table.alter([ops.promote_column("n", "int")]), "narrowing promotion")
    expect_raises(ValidationError, lambda: table.alter([ops.set_partition_spec([ops.partition_field(3, "bucket")])]), "bucket without N")
    expect_raises(ValidationError, lambda: table.alter([ops.set_partition_spec([ops.partition_field(4, "identity")])]), "list source")
    table.alter([ops.set_partition_spec([ops.partition_field(3, "day"), ops.partition_field(1, "bucket", 8)])])
    check(table.info(totals=False).partition_spec.fields[1].transform_param == 8, "partition spec not stored")
    expect_raises(ValidationError, lambda: table.alter([ops.drop_column("ts")]), "dropping a partition source")
    expect_raises(HoglakeError, lambda: table.alter([AlterOp("explode", {})]), "unknown op")
    expect_raises(AlreadyExistsError, lambda: s.table("shape"), "create of an existing table")
    head = s.head()
    expect_raises(ValidationError, lambda: table.alter([ops.add_column("ok", pa.string()), ops.add_column("_hog_x", pa.string())]), "reserved name")
    check(s.head() == head and "ok" not in [c.name for c in s.namespace.table("shape").columns], "a refused alter was partly applied")


def scenario_wire_refusals(s: Scenario) -> None:
    """Status codes of hoglake-api.md 1/2/7.3 for malformed or invalid commit requests; none writes."""
    table = s.table("wire")
    base = s.prepare(table, 80)
    head = s.head()

    def variant(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        body = copy.deepcopy(base)
        body["idempotency_key"] = str(uuid.uuid4())
        change(body)
        return body

    file0: Callable[[dict[str, Any]], dict[str, Any]] = lambda b: b["appends"][0]["files"][0]  # noqa: E731
    cases: list[tuple[str, int, Any]] = [
        ("unknown field split_offsets", 400, variant(lambda b: file0(b).update(split_offsets=[4]))),
        ("null element in files", 400, variant(lambda b: b["appends"][0]["files"].append(None))),
        ("non-UUID key", 400, variant(lambda b: b.update(idempotency_key="k-1"))),
        ("string record_count", 400, variant(lambda b: file0(b).update(record_count="2"))),
        ("missing key", 422, variant(lambda b: b.pop("idempotency_key"))),
        ("path outside data_path", 422, variant(lambda b: file0(b).update(path="s3://lake/other/x.parquet"))),
        ("'..' segment", 422, variant(lambda b: file0(b).update(path=file0(b)["path"].replace("/data/", "/data/../")))),
        ("footer_size > size - 8", 422, variant(lambda b: file0(b).update(footer_size=file0(b)["file_size_bytes"]))),
        ("unknown stats field id", 422, variant(lambda b: file0(b)["column_stats"].append({"field_id": 99, "value_count": 1, "null_count": 0}))),
        ("partition values on unpartitioned", 422, variant(lambda b: file0(b).update(partition_values=["x"]))),
        ("read_snapshot past head", 422, variant(lambda b: b.update(read_snapshot=head + 5))),
        ("unknown table", 422, variant(lambda b: b["appends"][0].update(table="nope"))),
        ("empty files", 422, variant(lambda b: b["appends"][0].update(files=[]))),
        ("no appends", 422, variant(lambda b: b.update(appends=[]))),
    ]
    for label, status, body in cases:
        resp = s.emu.api("POST", "/catalogs/ops/commit/prepared", json=body)
        check(resp.status_code == status, f"{label}: answered {resp.status_code} {resp.text}, expected {status}")
        check(resp.json().get("error") == {400: "bad_request", 422: "validation"}[status], f"{label}: error code {resp.text}")
    form = s.emu.api("POST", "/catalogs/ops/commit/prepared", content=b"a=1", headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(form.status_code == 400, f"form-encoded body answered {form.status_code}")
    null = s.emu.api("POST", "/catalogs/ops/commit/prepared", content=b"null", headers={"Content-Type": "application/json"})
    check(null.status_code == 400, f"JSON null body answered {null.status_code}")
    check(s.emu.api("POST", "/catalogs/nope/commit/prepared", json=base).status_code == 404, "unknown catalog")
    check(s.head() == head and s.paths("wire") == [], "a refused request wrote something")


def scenario_partitioned_arity(s: Scenario) -> None:
    """Partitioned tables need partition_values of the spec's arity; blind appends are accepted (7.6)."""
    table = s.table("bucketed")
    table.alter([ops.set_partition_spec([ops.partition_field(1, "bucket", 2)])])
    data = arrow_rows(table, [{"id": 1, "name": "a"}])
    payload = table.prepare_append_tables([(data, ("1",))], idempotency_key=str(uuid.uuid4()))
    bad = copy.deepcopy(payload)
    bad["appends"][0]["files"][0]["partition_values"] = ["1", "2"]
    check(s.emu.api("POST", "/catalogs/ops/commit/prepared", json=bad).status_code == 422, "wrong arity accepted")
    result = table.commit_prepared(payload)
    files = table.files(snapshot=result.snapshot_id)
    check([(f.spec_id, f.partition_values) for f in files] == [(1, ("1",))], f"partitioned file {files}")
    filtered = s.emu.api("GET", "/catalogs/ops/namespaces/analytics/tables/bucketed/files", params={"partition": "0:0"})
    check(filtered.json() == [], "partition filter did not filter")


def check_admission_timeout() -> None:
    """A request queued behind the catalog lock past --commit-lock-timeout-ms gets 503 + Retry-After (section 1)."""
    with EmulatorProcess("--commit-lock-timeout-ms", "200") as emu:
        emu.add_fault({"method": "GET", "path": r"^/v1/catalogs$", "action": "delay", "delay_ms": 1500, "hold_lock": True})
        holder = threading.Thread(target=lambda: emu.api("GET", "/catalogs"))
        holder.start()
        try:
            deadline = time.monotonic() + 5
            while not emu.faults()[0]["fired"] and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.1)
            queued = emu.api("POST", "/catalogs", json={"name": "late", "data_path": "s3://late/"})
        finally:
            holder.join()
        check(queued.status_code == 503 and queued.json()["error"] == "commit_queue_timeout", f"queued request got {queued.status_code} {queued.text}")
        check(queued.headers.get("retry-after") == "1", "no Retry-After on the admission 503")
        check(emu.api("GET", "/catalogs").json() == [], "the shed request created the catalog")
        retried = emu.api("POST", "/catalogs", json={"name": "late", "data_path": "s3://late/"})
        check(retried.status_code == 201, f"identical resend answered {retried.status_code}")


PART_B = [
    scenario_prepared_replay,
    scenario_retry_after,
    scenario_dropped_response,
    scenario_ddl_since_read_snapshot,
    scenario_recreated_table,
    scenario_retention_floor,
    scenario_alter_rules,
    scenario_wire_refusals,
    scenario_partitioned_arity,
]


def run_check(name: str, action: Callable[[], None], results: list[tuple[str, str | None]]) -> None:
    """Run one check, recording PASS or the failure message."""
    try:
        action()
    except CheckFailed as err:
        results.append((name, str(err)))
        print(f"FAIL {name}: {err}", flush=True)
        return
    except Exception as err:  # noqa: BLE001 - any error is a failed check, with its trace
        results.append((name, f"{type(err).__name__}: {err}"))
        print(f"FAIL {name}: {type(err).__name__}: {err}\n{traceback.format_exc()}", flush=True)
        return
    results.append((name, None))
    print(f"PASS {name}", flush=True)


def main() -> int:
    """Run every check against one emulator process; exit non-zero on any failure."""
    check(pyhoglake.__version__ == "1.3.11", f"pyhoglake {pyhoglake.__version__} is installed, 1.3.11 is required")
    check(pa.__version__ == "26.0.1", f"pyarrow {pa.__version__} is installed, 26.0.1 is required")
    results: list[tuple[str, str | None]] = []
    workdir = Path(tempfile.mkdtemp(prefix="hoglake-check-"))
    store = LocalObjectStore(str(workdir / "objects"))
    # The capture was taken from a server advertising exactly these; the default adds idempotent-mutation-v1.
    emu = EmulatorProcess("--capabilities", ",".join(CAPTURED_CAPABILITIES))
    emu.start()
    try:
        session: dict[str, Any] = {}
        run_check("captured session runs", lambda: session.update(run_captured_session(emu, store, workdir)), results)
        if session:
            run_check("captured wire: requests and replies", lambda: check_captured_wire(emu), results)
            run_check("captured prepared payloads", lambda: check_captured_payloads(session), results)
            run_check("captured results and listings", lambda: check_captured_results(session), results)
            run_check("objects match registrations", lambda: check_objects_match_registrations(session, store), results)
        emu.reset()
        scenario = Scenario(emu, store)
        for step in PART_B + MUTATION_CHECKS:
            run_check(step.__name__, lambda step=step: step(scenario), results)
        run_check("admission timeout (second emulator)", check_admission_timeout, results)
        run_check("default capabilities and --capabilities (own emulators)", check_default_capabilities, results)
    finally:
        code = emu.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    results.append(("clean exit on SIGTERM", None if code == 0 else f"exit code {code}"))
    print(("PASS" if code == 0 else "FAIL") + f" clean exit on SIGTERM (exit code {code})")
    failed = [name for name, error in results if error]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
