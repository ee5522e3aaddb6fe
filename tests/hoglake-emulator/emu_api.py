"""The /v1 routes of hoglake-api.md (sections 4-7) over :class:`emu_state.State`.

Each handler takes a :class:`Request` and returns ``(status, json_body)``;
refusals are raised as :class:`emu_errors.ApiError`. Handlers run under the
state lock (taken by the HTTP layer), so every DDL and commit is atomic.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emu_alter import apply_ops, parse_ops
from emu_columns import FieldIds, build_columns, check_catalog_name, check_data_path, check_name
from emu_commit import commit
from emu_errors import ApiError, already_exists, bad_request, commit_conflict, not_found, validation
from emu_receipts import live_receipt
from emu_state import Catalog, Namespace, State, Table, iso, new_catalog, new_table, parse_instant, parse_int_param
from emu_wire import (
    ALTER,
    CATALOG_CREATE,
    CATALOG_OPTIONS_PATCH,
    COMMIT_REQUEST,
    NAMESPACE_CREATE,
    TABLE_CREATE,
    Shape,
    check_object,
    parse_uuid,
)

Result = tuple[int, Any]


@dataclass
class Request:
    """One parsed HTTP request as the handlers see it."""

    method: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any = None
    has_body: bool = False
    state: State = field(default=None)  # type: ignore[assignment]

    def json(self, shape: Shape) -> dict[str, Any]:
        """The body checked against ``shape`` (400 when absent, null or off-shape)."""
        if not self.has_body or self.body is None:
            raise bad_request("a JSON object body is required")
        check_object(self.body, shape)
        return self.body

    def catalog(self) -> Catalog:
        """The catalog named in the path, or 404."""
        return self.state.catalog(self.params["catalog"])


# -- helpers -----------------------------------------------------------------------------


def _bool_param(query: dict[str, str], name: str, default: bool) -> bool:
    """``true``/``false`` query parameter, or 400."""
    if name not in query:
        return default
    value = query[name].lower()
    if value not in ("true", "false"):
        raise bad_request(f"query parameter '{name}' must be true or false")
    return value == "true"


def _namespace_or_404(catalog: Catalog, name: str, snapshot: int) -> None:
    """404 unless the namespace is live at ``snapshot``."""
    if catalog.namespace_at(name, snapshot) is None:
        raise not_found(f"namespace '{name}' not found in catalog '{catalog.name}'")


def _table_or_404(catalog: Catalog, namespace: str, name: str, snapshot: int) -> Table:
    """The table incarnation live at ``snapshot``, or 404."""
    _namespace_or_404(catalog, namespace, snapshot)
    table = catalog.table_at(namespace, name, snapshot)
    if table is None:
        raise not_found(f"table '{namespace}.{name}' not found in catalog '{catalog.name}'")
    return table


def table_wire(table: Table, snapshot: int, *, totals: bool, ddl_snapshot: int | None = None) -> dict[str, Any]:
    """The Table object (6.2): resolved at ``snapshot``; totals unless ``totals=false``."""
    definition = table.version_at(snapshot)
    out: dict[str, Any] = {
        "name": definition.name,
        "namespace": table.namespace,
        "table_uuid": table.table_uuid,
        "columns": copy.deepcopy(definition.columns),
        "read_snapshot_id": snapshot,
        "properties": dict(definition.properties),
    }
    if definition.comment is not None:
        out["comment"] = definition.comment
    if totals:
        files = table.files_at(snapshot)
        out["record_count"] = sum(f.record_count for f in files)
        out["file_count"] = len(files)
        out["file_size_bytes"] = sum(f.file_size_bytes for f in files)
    if definition.partition_spec and definition.partition_spec["fields"]:
        out["partition_spec"] = copy.deepcopy(definition.partition_spec)
    if definition.sort_spec and definition.sort_spec["fields"]:
        out["sort_spec"] = copy.deepcopy(definition.sort_spec)
    if ddl_snapshot is not None:
        out["snapshot_id"] = ddl_snapshot
    return out


def _commit_result(catalog: Catalog) -> dict[str, Any]:
    """``{snapshot_id, schema_version}`` of the head snapshot."""
    head = catalog.snapshots[-1]
    return {"snapshot_id": head.snapshot_id, "schema_version": head.schema_version}


# -- catalogs (section 4) -------------------------------------------------------------------


def create_catalog(req: Request) -> Result:
    """POST /v1/catalogs: 201; 409 already_exists; 422 bad name / data_path / overlapping prefix."""
    body = req.json(CATALOG_CREATE)
    check_catalog_name(body["name"])
    prefix = check_data_path(body["data_path"])
    if body["name"] in req.state.catalogs:
        raise already_exists(f"catalog '{body['name']}' already exists")
    for other in req.state.catalogs.values():
        if other.prefix.startswith(prefix) or prefix.startswith(other.prefix):
            raise validation(f"data_path overlaps catalog '{other.name}' ({other.data_path})")
    catalog = new_catalog(body["name"], body["data_path"], prefix)
    req.state.catalogs[catalog.name] = catalog
    return 201, catalog.to_wire(list(req.state.config.capabilities))


def list_catalogs(req: Request) -> Result:
    """GET /v1/catalogs: every catalog."""
    return 200, [c.to_wire(list(req.state.config.capabilities)) for c in req.state.catalogs.values()]


def get_catalog(req: Request) -> Result:
    """GET /v1/catalogs/{c}: 200 or 404."""
    return 200, req.catalog().to_wire(list(req.state.config.capabilities))


def get_options(req: Request) -> Result:
    """GET /v1/catalogs/{c}/options."""
    return 200, req.catalog().options_wire()


def patch_options(req: Request) -> Result:
    """PATCH /v1/catalogs/{c}/options: either key; explicit null retention disables expiry."""
    body = req.json(CATALOG_OPTIONS_PATCH)
    catalog = req.catalog()
    if "snapshot_retention_seconds" in body:
        seconds = body["snapshot_retention_seconds"]
        if seconds is not None and seconds <= 0:
            raise validation("snapshot_retention_seconds must be positive or null")
        catalog.retention_seconds = seconds
    if body.get("consumer_floor") is not None:
        catalog.consumer_floor = body["consumer_floor"]
    return 200, catalog.options_wire()


def list_snapshots(req: Request) -> Result:
    """GET /v1/catalogs/{c}/snapshots?after=&before=&limit= (ascending by default; limit <= 10 000)."""
    catalog = req.catalog()
    after = parse_int_param(req.query.get("after", "0"), "after")
    before = parse_int_param(req.query["before"], "before") if "before" in req.query else None
    limit = parse_int_param(req.query.get("limit", "1000"), "limit")
    if not 1 <= limit <= 10_000:
        raise validation("limit must be within 1..10000")
    if before is not None and after != 0:
        raise validation("'before' and a non-zero 'after' are mutually exclusive")
    retained = [s for s in catalog.snapshots if s.snapshot_id >= catalog.earliest_snapshot_id]
    if before is None:
        picked = [s for s in retained if s.snapshot_id > after]
    else:
        picked = [s for s in reversed(retained) if s.snapshot_id < before]
    page = picked[:limit]
    return 200, {"snapshots": [s.to_wire() for s in page], "has_more": len(picked) > limit}


def resolve_snapshot(req: Request) -> Result:
    """GET /v1/catalogs/{c}/snapshots/resolve?at_timestamp=: largest retained snapshot at or before it."""
    catalog = req.catalog()
    if "at_timestamp" not in req.query:
        raise bad_request("at_timestamp is required")
    snap = catalog.snapshot(catalog.resolve_timestamp(parse_instant(req.query["at_timestamp"])))
    return 200, {"snapshot_id": snap.snapshot_id, "snapshot_time": iso(snap.time)}


# -- namespaces (section 5) -------------------------------------------------------------------


def create_namespace(req: Request) -> Result:
    """POST …/namespaces: a DDL commit; 201 {name, namespace_id}; 409; 422; 404 catalog."""
    body = req.json(NAMESPACE_CREATE)
    catalog = req.catalog()
    check_name(body["name"], "namespace")
    if catalog.namespace_at(body["name"], catalog.head) is not None:
        raise already_exists(f"namespace '{body['name']}' already exists")
    namespace_id = catalog.next_namespace_id
    catalog.next_namespace_id += 1
    snap = catalog.commit_snapshot([{"kind": "namespace_created", "object_id": namespace_id}], ddl=True)
    catalog.namespaces.append(Namespace(body["name"], namespace_id, snap.snapshot_id))
    return 201, {"name": body["name"], "namespace_id": namespace_id}


def list_namespaces(req: Request) -> Result:
    """GET …/namespaces[?snapshot=|at_timestamp=]: [{name, namespace_id}] live at the pin."""
    catalog = req.catalog()
    snapshot = catalog.resolve_read(req.query)
    live = [ns for ns in catalog.namespaces if ns.live_at(snapshot)]
    return 200, [{"name": ns.name, "namespace_id": ns.namespace_id} for ns in live]


def get_namespace(req: Request) -> Result:
    """GET …/namespaces/{ns}: 200 or 404."""
    catalog = req.catalog()
    snapshot = catalog.resolve_read(req.query)
    ns = catalog.namespace_at(req.params["namespace"], snapshot)
    if ns is None:
        raise not_found(f"namespace '{req.params['namespace']}' not found")
    return 200, {"name": ns.name, "namespace_id": ns.namespace_id}


def drop_namespace(req: Request) -> Result:
    """DELETE …/namespaces/{ns}[?expected_namespace_id=]: 409 namespace_not_empty while tables live."""
    catalog = req.catalog()
    ns = catalog.namespace_at(req.params["namespace"], catalog.head)
    if ns is None:
        raise not_found(f"namespace '{req.params['namespace']}' not found")
    if "expected_namespace_id" in req.query:
        expected = parse_int_param(req.query["expected_namespace_id"], "expected_namespace_id")
        if expected != ns.namespace_id:
            raise commit_conflict(f"namespace '{ns.name}' has id {ns.namespace_id}, not {expected}")
    if catalog.tables_at(ns.name, catalog.head):
        raise ApiError(409, "namespace_not_empty", f"namespace '{ns.name}' still has tables")
    snap = catalog.commit_snapshot([{"kind": "namespace_dropped", "object_id": ns.namespace_id}], ddl=True)
    ns.dropped = snap.snapshot_id
    return 200, _commit_result(catalog)


# -- tables (section 6) ---------------------------------------------------------------------------


def create_table(req: Request) -> Result:
    """POST …/tables: a DDL commit; 201 Table with snapshot_id = read_snapshot_id = the DDL snapshot."""
    body = req.json(TABLE_CREATE)
    catalog = req.catalog()
    namespace = req.params["namespace"]
    _namespace_or_404(catalog, namespace, catalog.head)
    check_name(body["name"], "table")
    if catalog.table_at(namespace, body["name"], catalog.head) is not None:
        raise already_exists(f"table '{namespace}.{body['name']}' already exists")
    ids = FieldIds()
    columns = build_columns(body["columns"], ids)
    table = new_table(catalog, namespace, body["name"], columns, ids, catalog.head + 1)
    snap = catalog.commit_snapshot([{"kind": "table_created", "object_id": table.object_id}], ddl=True)
    catalog.tables.append(table)
    return 201, table_wire(table, snap.snapshot_id, totals=True, ddl_snapshot=snap.snapshot_id)


def list_tables(req: Request) -> Result:
    """GET …/tables[?snapshot=|at_timestamp=]: TableSummary rows at the pin."""
    catalog = req.catalog()
    snapshot = catalog.resolve_read(req.query)
    namespace = req.params["namespace"]
    _namespace_or_404(catalog, namespace, snapshot)
    rows = []
    for table in catalog.tables_at(namespace, snapshot):
        files = table.files_at(snapshot)
        definition = table.version_at(snapshot)
        row: dict[str, Any] = {"name": definition.name, "table_uuid": table.table_uuid}
        if definition.comment is not None:
            row["comment"] = definition.comment
        row.update(
            record_count=sum(f.record_count for f in files),
            file_count=len(files),
            file_size_bytes=sum(f.file_size_bytes for f in files),
        )
        rows.append(row)
    return 200, rows


def get_table(req: Request) -> Result:
    """GET …/tables/{t}[?snapshot=|at_timestamp=][&totals=false] (6.2)."""
    catalog = req.catalog()
    totals = _bool_param(req.query, "totals", True)
    snapshot = catalog.resolve_read(req.query)
    table = _table_or_404(catalog, req.params["namespace"], req.params["table"], snapshot)
    return 200, table_wire(table, snapshot, totals=totals)


def _check_table_guard(table: Table, query: dict[str, str]) -> None:
    """?expected_table_uuid= on DDL routes: mismatch -> 409 table_recreated."""
    if "expected_table_uuid" not in query:
        return
    expected = parse_uuid(query["expected_table_uuid"], "expected_table_uuid")
    if expected != table.table_uuid:
        qualified = f"{table.namespace}.{table.current.name}"
        raise ApiError(
            409, "table_recreated", f"the table was recreated: {qualified} is {table.table_uuid}, not {expected}",
            tables=[qualified], retry="re-prepare",
        )  # fmt: skip


def drop_table(req: Request) -> Result:
    """DELETE …/tables/{t}[?expected_table_uuid=]: 200 {snapshot_id, schema_version}; files queued for deletion."""
    catalog = req.catalog()
    table = _table_or_404(catalog, req.params["namespace"], req.params["table"], catalog.head)
    _check_table_guard(table, req.query)
    snap = catalog.commit_snapshot([{"kind": "table_dropped", "object_id": table.object_id}], ddl=True)
    table.dropped = snap.snapshot_id
    catalog.removal_queue.update(f.path for f in table.files)
    return 200, _commit_result(catalog)


def alter_table(req: Request) -> Result:
    """POST …/tables/{t}/alter[?expected_table_uuid=&read_snapshot=]: all ops as ONE DDL snapshot (6.3)."""
    body = req.json(ALTER)
    ops = parse_ops(body["ops"])
    catalog = req.catalog()
    table = _table_or_404(catalog, req.params["namespace"], req.params["table"], catalog.head)
    _check_table_guard(table, req.query)
    if "read_snapshot" in req.query:
        read_snapshot = parse_int_param(req.query["read_snapshot"], "read_snapshot")
        if catalog.changes_after(table.object_id, read_snapshot, frozenset({"table_altered"})):
            qualified = f"{table.namespace}.{table.current.name}"
            raise ApiError(
                409, "ddl_since_read_snapshot", f"{qualified} was altered after read_snapshot {read_snapshot}",
                tables=[qualified], read_snapshot=read_snapshot, retry="re-prepare",
            )  # fmt: skip
    plan = apply_ops(catalog, table, ops, catalog.head + 1)
    snap = catalog.commit_snapshot([{"kind": "table_altered", "object_id": table.object_id}], ddl=True)
    plan.commit()
    return 200, table_wire(table, snap.snapshot_id, totals=True, ddl_snapshot=snap.snapshot_id)


FILE_SORT_KEYS = frozenset({"data_file_id", "path", "record_count", "file_size_bytes", "begin_snapshot", "row_id_start"})


def list_files(req: Request) -> Result:
    """GET …/tables/{t}/files[?snapshot=|at_timestamp=][&limit=&offset=&sort=&order=&partition=k:v] (6.4)."""
    catalog = req.catalog()
    snapshot = catalog.resolve_read(req.query)
    table = _table_or_404(catalog, req.params["namespace"], req.params["table"], snapshot)
    rows = [f.to_wire() for f in table.files_at(snapshot)]
    if "partition" in req.query:
        rows = _filter_partition(rows, req.query["partition"])
    sort = req.query.get("sort", "data_file_id")
    order = req.query.get("order", "asc")
    if sort not in FILE_SORT_KEYS or order not in ("asc", "desc"):
        raise bad_request(f"sort must be one of {sorted(FILE_SORT_KEYS)} and order asc|desc")
    rows.sort(key=lambda r: (r[sort], r["data_file_id"]), reverse=order == "desc")
    offset = parse_int_param(req.query.get("offset", "0"), "offset")
    if offset < 0:
        raise validation("offset must be >= 0")
    rows = rows[offset:]
    if "limit" in req.query:
        limit = parse_int_param(req.query["limit"], "limit")
        if limit < 0:
            raise validation("limit must be >= 0")
        rows = rows[:limit]
    return 200, rows


def _filter_partition(rows: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Keep files whose partition value at key_index equals value (``k:v``)."""
    match = re.fullmatch(r"(\d+):(.*)", text)
    if match is None:
        raise bad_request("partition must be <key_index>:<value>")
    index, value = int(match.group(1)), match.group(2)
    return [
        r for r in rows if r.get("partition_values") is not None
        and index < len(r["partition_values"]) and r["partition_values"][index] == value
    ]  # fmt: skip


# -- commits (section 7) ------------------------------------------------------------------------------


def post_commit(req: Request) -> Result:
    """POST /v1/catalogs/{c}/commit: plain append; honours idempotency_key when sent."""
    body = req.json(COMMIT_REQUEST)
    return 200, commit(req.state, req.catalog(), body, prepared=False)


def post_commit_prepared(req: Request) -> Result:
    """POST /v1/catalogs/{c}/commit/prepared: replay-safe append; missing key -> 422."""
    body = req.json(COMMIT_REQUEST)
    return 200, commit(req.state, req.catalog(), body, prepared=True)


def post_commit_mutation(req: Request) -> Result:
    """POST /v1/catalogs/{c}/commit/mutations/prepared: guarded, idempotent, read-set protected (emu_commit.py)."""
    body = req.json(COMMIT_REQUEST)
    return 200, commit(req.state, req.catalog(), body, prepared=True, mutation=True)


def get_receipt(req: Request) -> Result:
    """GET /v1/catalogs/{c}/commit/receipts/{key}: {operation_id, snapshot_id, schema_version}; 400 non-UUID; 404."""
    catalog = req.catalog()
    key = parse_uuid(req.params["key"], "key")
    receipt = live_receipt(catalog, key, req.state.config)
    if receipt is None:
        raise not_found(f"no receipt for idempotency_key {key}")
    return 200, {
        "operation_id": receipt.operation_id,
        "snapshot_id": receipt.snapshot_id,
        "schema_version": receipt.schema_version,
    }


C = "/v1/catalogs/{catalog}"
T = C + "/namespaces/{namespace}/tables/{table}"

#: (method, path template, handler) for every /v1 route.
ROUTES: list[tuple[str, str, Callable[[Request], Result]]] = [
    ("GET", "/v1/catalogs", list_catalogs),
    ("POST", "/v1/catalogs", create_catalog),
    ("GET", C, get_catalog),
    ("GET", C + "/options", get_options),
    ("PATCH", C + "/options", patch_options),
    ("GET", C + "/snapshots", list_snapshots),
    ("GET", C + "/snapshots/resolve", resolve_snapshot),
    ("GET", C + "/namespaces", list_namespaces),
    ("POST", C + "/namespaces", create_namespace),
    ("GET", C + "/namespaces/{namespace}", get_namespace),
    ("DELETE", C + "/namespaces/{namespace}", drop_namespace),
    ("GET", C + "/namespaces/{namespace}/tables", list_tables),
    ("POST", C + "/namespaces/{namespace}/tables", create_table),
    ("GET", T, get_table),
    ("DELETE", T, drop_table),
    ("POST", T + "/alter", alter_table),
    ("GET", T + "/files", list_files),
    ("POST", C + "/commit", post_commit),
    ("POST", C + "/commit/prepared", post_commit_prepared),
    ("POST", C + "/commit/mutations/prepared", post_commit_mutation),
    ("GET", C + "/commit/receipts/{key}", get_receipt),
]
