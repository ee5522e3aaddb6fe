"""The footer-shipping commit path (hoglake-api.md section 7).

:func:`commit` serves ``/commit``, ``/commit/prepared`` and
``/commit/mutations/prepared`` and runs the checks in the order of 7.3
(current server, with the conflict scan before the file-level checks as
pyhoglake 1.3.11 notes):

0. route rules (422): ``/commit/prepared`` needs an idempotency_key; the
   plain routes refuse a delete group with no files; the mutation route
   (server source, api/Routes.kt) needs the key, read_snapshot, at least
   one delete group (an empty ``files`` list is allowed) and
   expected_table_uuid on every append and every delete group;
1. keyed request: look the receipt up under the lock; an exact replay (same
   canonical form, 7.4, see emu_receipts.py) answers the stored result and
   writes nothing; a different request under a used key is a 422;
2. every file path inside the catalog data_path (422);
3. a delete group WITH files (a deletion vector) -> 501 (not emulated); at
   least one append or delete group (422);
4. read_snapshot within [0, head] (422) and >= the retention floor (410);
5. resolve every table by name (unknown -> 422) and compare
   expected_table_uuid (mismatch -> 409 table_recreated, zero writes);
6. conflict scan after read_snapshot (server source, CommitService
   .checkConflicts): table_altered / table_dropped on any touched table;
   on the mutation route the delete-group tables also conflict on
   table_created / data appended / table_deleted_from. Only DDL hits ->
   409 ddl_since_read_snapshot; any row-content hit -> 409 commit_conflict;
7. structural file checks (counts, footer_size, partition arity, stats
   field ids) -> 422; statistics sanitised, not refused;
8. a path still queued for physical deletion -> 409 commit_conflict;
9. one snapshot (also for a request of only empty delete groups, as the
   server allocates one per commit), file ids, contiguous row-id ranges per
   file in request order; change rows ``data_appended`` per appended table
   and ``table_deleted_from`` per delete-group table; the receipt is stored
   with the commit.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from emu_columns import CONTAINERS, by_field_id
from emu_errors import ApiError, commit_conflict, expired, validation
from emu_receipts import fingerprint, live_receipt, receipt_result
from emu_state import Catalog, DataFile, Receipt, State, Table, now_utc
from emu_stats import sanitise
from emu_wire import parse_uuid

MAX_RECORD_COUNT = 2**48
INT64_MAX = 2**63 - 1
DDL_KINDS = frozenset({"table_altered", "table_dropped"})
#: Row-content changes that break a delete group's read set (requireUnchangedTables).
CONTENT_KINDS = frozenset({"table_created", "data_appended", "table_deleted_from"})


@dataclass
class _Target:
    """One touched table: the resolved incarnation, the files appended to it (merged), its roles."""

    qualified: str
    table: Table
    files: list[dict[str, Any]]
    expected_uuid: str | None
    appended: bool = False
    deleted: bool = False


# -- the pipeline ---------------------------------------------------------------------


def commit(
    state: State, catalog: Catalog, body: dict[str, Any], *, prepared: bool, mutation: bool = False
) -> dict[str, Any]:
    """Apply one CommitRequest (already shape-checked) to ``catalog``; return ``{snapshot_id, schema_version}``."""
    key = body.get("idempotency_key")
    if prepared and key is None:
        raise validation("prepared commits require an idempotency_key")
    deletes = body.get("deletes") or []
    if mutation:
        _check_mutation_request(body)
    else:
        for group in deletes:
            if not group["files"]:
                raise validation(f"deletes for {group['namespace']}.{group['table']} have no files")
    request_print = fingerprint(body, require_unchanged_tables=mutation)  # before anything sanitises a copy
    if key is not None:
        key = parse_uuid(key, "idempotency_key")
        receipt = live_receipt(catalog, key, state.config)
        if receipt is not None:
            if receipt.fingerprint != request_print:
                raise validation("idempotency_key reused with a different request")
            return receipt_result(receipt)
    body = copy.deepcopy(body)
    appends = body.get("appends") or []
    deletes = body.get("deletes") or []
    _check_paths(catalog, appends, deletes)
    if any(group["files"] for group in deletes):
        raise ApiError(501, "not_implemented", "the emulator does not implement deletion vectors")
    if not appends and not deletes:
        raise validation("a commit needs at least one append or delete")
    read_snapshot = body.get("read_snapshot")
    _check_read_snapshot(catalog, read_snapshot)
    targets = _resolve_targets(catalog, appends, deletes)
    _check_incarnations(targets)
    _check_blind_partitioned(state, targets, read_snapshot)
    _conflict_scan(catalog, targets, read_snapshot, require_unchanged_tables=mutation)
    for target in targets:
        if target.appended:
            _check_files(target)
    _check_removal_queue(catalog, targets)
    result = _publish(catalog, targets, body)
    if key is not None:
        catalog.receipts[key] = Receipt(
            request_print, str(uuid.uuid4()), result["snapshot_id"], result["schema_version"], now_utc()
        )
    return result


def _check_mutation_request(body: dict[str, Any]) -> None:
    """The mutation route's own 422 (server source): key, read_snapshot, >= 1 delete group, every group guarded."""
    groups = (body.get("appends") or []) + (body.get("deletes") or [])
    if (
        body.get("idempotency_key") is None
        or body.get("read_snapshot") is None
        or not body.get("deletes")
        or any(group.get("expected_table_uuid") is None for group in groups)
    ):
        raise validation("prepared mutation requires idempotency_key, read_snapshot and guarded target tables")


def _check_paths(catalog: Catalog, appends: list[dict[str, Any]], deletes: list[dict[str, Any]]) -> None:
    """Absolute s3:// URI under the catalog data_path; no whitespace/control chars; no empty/./.. segments."""
    root = "s3://" + catalog.prefix
    for group in appends + deletes:
        for reg in group["files"]:
            path = reg["path"]
            if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in path):
                raise validation(f"path '{path}' contains whitespace or control characters")
            if not path.startswith(root):
                raise validation(f"path '{path}' is outside the catalog data_path '{catalog.data_path}'")
            segments = path[len("s3://") :].split("/")
            if any(seg in ("", ".", "..") for seg in segments):
                raise validation(f"path '{path}' has an empty, '.' or '..' segment")


def _check_read_snapshot(catalog: Catalog, read_snapshot: int | None) -> None:
    """0 <= read_snapshot <= head (422), and >= the retention floor (410)."""
    if read_snapshot is None:
        return
    if read_snapshot < 0 or read_snapshot > catalog.head:
        raise validation(f"read_snapshot {read_snapshot} is outside [0, {catalog.head}]")
    if read_snapshot < catalog.earliest_snapshot_id:
        raise expired(
            f"read_snapshot {read_snapshot} is below the catalog's earliest snapshot {catalog.earliest_snapshot_id}"
        )


def _resolve_targets(catalog: Catalog, appends: list[dict[str, Any]], deletes: list[dict[str, Any]]) -> list[_Target]:
    """Resolve each (namespace, table) at head; merge entries for the same table in request order."""
    targets: dict[str, _Target] = {}
    for group, is_append in [(a, True) for a in appends] + [(d, False) for d in deletes]:
        qualified = f"{group['namespace']}.{group['table']}"
        table = catalog.table_at(group["namespace"], group["table"], catalog.head)
        if table is None:
            raise validation(f"unknown table '{qualified}' in commit")
        target = targets.setdefault(qualified, _Target(qualified, table, [], None))
        if is_append:
            target.appended = True
            target.files.extend(group["files"])
        else:
            target.deleted = True
        expected = group.get("expected_table_uuid")
        if expected is not None and target.expected_uuid is None:
            target.expected_uuid = str(uuid.UUID(expected))
        elif expected is not None and str(uuid.UUID(expected)) != target.expected_uuid:
            raise validation(f"conflicting expected_table_uuid values for '{qualified}'")
    return list(targets.values())


def _check_incarnations(targets: list[_Target]) -> None:
    """409 table_recreated when a pinned incarnation is not the live one (7.5)."""
    stale = [t.qualified for t in targets if t.expected_uuid is not None and t.expected_uuid != t.table.table_uuid]
    if stale:
        raise ApiError(
            409,
            "table_recreated",
            f"expected_table_uuid does not match the live table: the table was recreated ({', '.join(stale)})",
            tables=stale,
            retry="re-prepare",
        )


def _check_blind_partitioned(state: State, targets: list[_Target], read_snapshot: int | None) -> None:
    """Count (or, when configured, refuse with 422) partitioned appends without read_snapshot (7.6)."""
    if read_snapshot is not None:
        return
    blind = [t.qualified for t in targets if t.appended and t.table.current.spec_fields()]
    if not blind:
        return
    if state.config.refuse_blind_partitioned_appends:
        raise validation(f"partitioned append without read_snapshot refused ({', '.join(blind)})")
    state.blind_partitioned_appends += 1


def _conflict_scan(
    catalog: Catalog, targets: list[_Target], read_snapshot: int | None, *, require_unchanged_tables: bool
) -> None:
    """Changes after read_snapshot: DDL on any touched table; row content on delete targets when required.

    Every hit DDL -> 409 ddl_since_read_snapshot (re-prepare); any row-content
    hit (alone or mixed with DDL) -> 409 commit_conflict (retryable).
    """
    if read_snapshot is None:
        return
    ddl_hit: list[str] = []
    content_hit: list[str] = []
    for target in targets:
        if catalog.changes_after(target.table.object_id, read_snapshot, DDL_KINDS):
            ddl_hit.append(target.qualified)
        if (
            require_unchanged_tables
            and target.deleted
            and catalog.changes_after(target.table.object_id, read_snapshot, CONTENT_KINDS)
        ):
            content_hit.append(target.qualified)
    if content_hit:
        names = sorted(set(ddl_hit + content_hit))
        raise commit_conflict(f"concurrent table change since snapshot {read_snapshot} on table(s): {', '.join(names)}")
    if ddl_hit:
        raise ApiError(
            409,
            "ddl_since_read_snapshot",
            f"DDL on {', '.join(sorted(ddl_hit))} after read_snapshot {read_snapshot}",
            tables=sorted(ddl_hit),
            read_snapshot=read_snapshot,
            retry="re-prepare",
        )


def _check_files(target: _Target) -> None:
    """Structural file checks (7.3); sanitises column_stats in place."""
    if not target.files:
        raise validation(f"append to '{target.qualified}' has no files")
    definition = target.table.current
    arity = len(definition.spec_fields())
    nodes = by_field_id(definition.columns)
    total = 0
    for reg in target.files:
        where = f"file '{reg['path']}'"
        if not 0 <= reg["record_count"] <= MAX_RECORD_COUNT:
            raise validation(f"{where}: record_count out of range [0, 2^48]")
        if reg["file_size_bytes"] < 0:
            raise validation(f"{where}: file_size_bytes is negative")
        footer = reg.get("footer_size")
        if footer is not None and not 0 <= footer <= reg["file_size_bytes"] - 8:
            raise validation(f"{where}: footer_size must satisfy 0 <= footer_size <= file_size_bytes - 8")
        _check_partition_values(where, reg.get("partition_values"), arity)
        if reg.get("column_stats") is not None:
            reg["column_stats"] = _checked_stats(where, reg["column_stats"], nodes)
        total += reg["record_count"]
        if total > INT64_MAX:
            raise validation("record counts overflow int64")


def _check_partition_values(where: str, values: list[str | None] | None, arity: int) -> None:
    """Required with the live spec's arity on partitioned tables; forbidden otherwise."""
    if arity == 0:
        if values is not None:
            raise validation(f"{where}: partition_values on an unpartitioned table")
    elif values is None or len(values) != arity:
        got = "none" if values is None else len(values)
        raise validation(f"{where}: partition arity {got} does not match the spec's {arity} fields")


def _checked_stats(where: str, stats: list[dict[str, Any]], nodes: dict[int, Any]) -> list[dict[str, Any]]:
    """Leaf, known, non-variant, unique field ids (422); values sanitised."""
    seen: set[int] = set()
    out: list[dict[str, Any]] = []
    for stat in stats:
        field_id = stat["field_id"]
        ref = nodes.get(field_id)
        if ref is None:
            raise validation(f"{where}: column_stats names unknown field id {field_id}")
        if ref.node["type"] in CONTAINERS:
            raise validation(f"{where}: column_stats names container field id {field_id}")
        if ref.node["type"] == "variant":
            raise validation(f"{where}: column_stats names variant field id {field_id}")
        if field_id in seen:
            raise validation(f"{where}: duplicate column_stats for field id {field_id}")
        seen.add(field_id)
        out.append(sanitise(stat, ref.node["type"]))
    return out


def _check_removal_queue(catalog: Catalog, targets: list[_Target]) -> None:
    """409 commit_conflict for a path still queued for physical deletion."""
    for target in targets:
        for reg in target.files:
            if reg["path"] in catalog.removal_queue:
                raise commit_conflict(f"path '{reg['path']}' is queued for physical deletion")


def _publish(catalog: Catalog, targets: list[_Target], body: dict[str, Any]) -> dict[str, Any]:
    """One snapshot; data file ids and row-id ranges allocated per file in request order; one change row per role."""
    changes = [{"kind": "data_appended", "object_id": t.table.object_id} for t in targets if t.appended]
    changes += [{"kind": "table_deleted_from", "object_id": t.table.object_id} for t in targets if t.deleted]
    snap = catalog.commit_snapshot(changes, ddl=False, author=body.get("author"), message=body.get("message"))
    for target in targets:
        spec = target.table.current.partition_spec
        spec_id = spec["spec_id"] if spec and spec["fields"] else None
        for reg in target.files:
            target.table.files.append(
                DataFile(
                    data_file_id=catalog.next_data_file_id,
                    path=reg["path"],
                    record_count=reg["record_count"],
                    file_size_bytes=reg["file_size_bytes"],
                    footer_size=reg.get("footer_size"),
                    row_id_start=target.table.next_row_id,
                    stats_state="provided" if reg.get("column_stats") is not None else "pending",
                    begin_snapshot=snap.snapshot_id,
                    column_stats=reg.get("column_stats"),
                    spec_id=spec_id,
                    partition_values=list(reg["partition_values"]) if spec_id is not None else None,
                )
            )
            catalog.next_data_file_id += 1
            target.table.next_row_id += reg["record_count"]
    return {"snapshot_id": snap.snapshot_id, "schema_version": snap.schema_version}
