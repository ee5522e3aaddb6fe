"""In-memory catalog state: snapshots, namespaces, table incarnations, files, receipts.

Everything a catalog knows is versioned by snapshot id so reads can time
travel (hoglake-api.md 6.2 / 6.4): a namespace or table incarnation is live
in ``[created, dropped)``, a table definition version applies from its
``since`` snapshot on, and a data file is visible in
``[begin_snapshot, end_snapshot)``. Snapshot 0 is the catalog's creation.
"""

from __future__ import annotations

import copy
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from emu_columns import FieldIds
from emu_errors import bad_request, expired, not_found, validation


def now_utc() -> datetime:
    """The current instant, timezone-aware."""
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    """ISO-8601 with ``Z`` (how the server prints instants)."""
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Snapshot:
    """One catalog snapshot: DDL or data commit."""

    snapshot_id: int
    time: datetime
    schema_version: int
    changes: list[dict[str, Any]]
    author: str | None = None
    message: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The Snapshot object of the snapshot listing."""
        out: dict[str, Any] = {
            "snapshot_id": self.snapshot_id,
            "snapshot_time": iso(self.time),
            "schema_version": self.schema_version,
        }
        if self.author is not None:
            out["author"] = self.author
        if self.message is not None:
            out["message"] = self.message
        out["changes"] = [dict(c) for c in self.changes]
        return out


@dataclass
class TableDef:
    """One version of a table's definition, valid from snapshot ``since``."""

    since: int
    name: str
    columns: list[dict[str, Any]]
    partition_spec: dict[str, Any] | None = None  # {spec_id, fields}; fields [] = unpartitioned
    sort_spec: dict[str, Any] | None = None  # {sort_id, fields}; fields [] = unsorted
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def spec_fields(self) -> list[dict[str, Any]]:
        """The live partition fields ([] when unpartitioned)."""
        return list(self.partition_spec["fields"]) if self.partition_spec else []


@dataclass
class DataFile:
    """A registered data file of one table incarnation."""

    data_file_id: int
    path: str
    record_count: int
    file_size_bytes: int
    footer_size: int | None
    row_id_start: int
    stats_state: str
    begin_snapshot: int
    column_stats: list[dict[str, Any]] | None
    spec_id: int | None = None
    partition_values: list[str | None] | None = None
    end_snapshot: int | None = None

    def visible_at(self, snapshot: int) -> bool:
        """Whether the file is part of the table at ``snapshot``."""
        return self.begin_snapshot <= snapshot and (self.end_snapshot is None or self.end_snapshot > snapshot)

    def to_wire(self) -> dict[str, Any]:
        """The DataFile object of ``GET …/files`` (6.4)."""
        out: dict[str, Any] = {
            "data_file_id": self.data_file_id,
            "path": self.path,
            "file_format": "parquet",
            "record_count": self.record_count,
            "file_size_bytes": self.file_size_bytes,
        }
        if self.footer_size is not None:
            out["footer_size"] = self.footer_size
        out.update(
            row_id_start=self.row_id_start,
            stats_state=self.stats_state,
            begin_snapshot=self.begin_snapshot,
            explicit_row_ids=False,
        )
        if self.spec_id is not None:
            out["spec_id"] = self.spec_id
            out["partition_values"] = list(self.partition_values or [])
        return out


@dataclass
class Table:
    """One table incarnation (a drop + recreate makes a new one with a new uuid)."""

    object_id: int
    table_uuid: str
    namespace: str
    created: int
    versions: list[TableDef]
    field_ids: FieldIds
    dropped: int | None = None
    next_row_id: int = 0
    next_spec_id: int = 1
    next_sort_id: int = 1
    files: list[DataFile] = field(default_factory=list)

    @property
    def current(self) -> TableDef:
        """The newest definition."""
        return self.versions[-1]

    def live_at(self, snapshot: int) -> bool:
        """Whether this incarnation exists at ``snapshot``."""
        return self.created <= snapshot and (self.dropped is None or self.dropped > snapshot)

    def version_at(self, snapshot: int) -> TableDef:
        """The definition in force at ``snapshot`` (assumes live_at)."""
        chosen = self.versions[0]
        for version in self.versions:
            if version.since <= snapshot:
                chosen = version
        return chosen

    def files_at(self, snapshot: int) -> list[DataFile]:
        """Files visible at ``snapshot``, in registration order."""
        return [f for f in self.files if f.visible_at(snapshot)]

    def new_version(self, since: int) -> TableDef:
        """A deep copy of the current definition, to mutate for a DDL at ``since``."""
        version = copy.deepcopy(self.current)
        version.since = since
        return version


@dataclass
class Namespace:
    """One namespace incarnation."""

    name: str
    namespace_id: int
    created: int
    dropped: int | None = None

    def live_at(self, snapshot: int) -> bool:
        """Whether this namespace exists at ``snapshot``."""
        return self.created <= snapshot and (self.dropped is None or self.dropped > snapshot)


@dataclass
class Receipt:
    """A stored idempotency receipt: the fingerprint of the canonical request and its result."""

    fingerprint: str
    operation_id: str
    snapshot_id: int
    schema_version: int
    stored_at: datetime


@dataclass
class Catalog:
    """One catalog and all of its history."""

    name: str
    data_path: str
    prefix: str
    snapshots: list[Snapshot]
    namespaces: list[Namespace] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    receipts: dict[str, Receipt] = field(default_factory=dict)
    removal_queue: set[str] = field(default_factory=set)
    schema_version: int = 0
    next_namespace_id: int = 1
    next_table_object_id: int = 1
    next_data_file_id: int = 1
    retention_seconds: int | None = None
    consumer_floor: bool = False
    earliest_snapshot_id: int = 0

    @property
    def head(self) -> int:
        """The newest snapshot id."""
        return self.snapshots[-1].snapshot_id

    def to_wire(self, capabilities: list[str]) -> dict[str, Any]:
        """The Catalog object (section 4)."""
        out: dict[str, Any] = {
            "name": self.name,
            "data_path": self.data_path,
            "head_snapshot_id": self.head,
            "schema_version": self.schema_version,
            "capabilities": list(capabilities),
        }
        if self.earliest_snapshot_id > 0:
            out["earliest_snapshot_time"] = iso(self.snapshot(self.earliest_snapshot_id).time)
        return out

    def options_wire(self) -> dict[str, Any]:
        """The catalog options object (section 4); retention null = expiry disabled."""
        return {
            "snapshot_retention_seconds": self.retention_seconds,
            "consumer_floor": self.consumer_floor,
            "earliest_snapshot_id": self.earliest_snapshot_id,
        }

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """The snapshot with this id (ids are dense from 0)."""
        return self.snapshots[snapshot_id]

    def commit_snapshot(
        self, changes: list[dict[str, Any]], *, ddl: bool, author: str | None = None, message: str | None = None
    ) -> Snapshot:
        """Allocate the next snapshot; a DDL one bumps ``schema_version``."""
        if ddl:
            self.schema_version += 1
        when = max(now_utc(), self.snapshots[-1].time)
        snap = Snapshot(self.head + 1, when, self.schema_version, changes, author, message)
        self.snapshots.append(snap)
        return snap

    # -- resolution ---------------------------------------------------------------

    def resolve_read(self, query: dict[str, str]) -> int:
        """The snapshot a read resolves to from ``?snapshot=`` / ``?at_timestamp=`` (6.2).

        Both -> 422; unparseable -> 400; offset-less timestamp -> 400; below the
        retention floor -> 410; a snapshot id past head -> 404; a timestamp past
        head -> head; neither -> head.
        """
        if "snapshot" in query and "at_timestamp" in query:
            raise validation("snapshot and at_timestamp are mutually exclusive")
        if "snapshot" in query:
            snap = parse_int_param(query["snapshot"], "snapshot")
            if snap < self.earliest_snapshot_id:
                raise expired(f"snapshot {snap} is below the retention floor {self.earliest_snapshot_id}")
            if snap > self.head:
                raise not_found(f"snapshot {snap} does not exist (head is {self.head})")
            return snap
        if "at_timestamp" in query:
            return self.resolve_timestamp(parse_instant(query["at_timestamp"]))
        return self.head

    def resolve_timestamp(self, when: datetime) -> int:
        """The largest retained snapshot at or before ``when``; 410 before retained history."""
        chosen: int | None = None
        for snap in self.snapshots:
            if snap.time <= when:
                chosen = snap.snapshot_id
        if chosen is None or chosen < self.earliest_snapshot_id:
            raise expired(f"{iso(when)} is before the retained history of catalog '{self.name}'")
        return chosen

    def namespace_at(self, name: str, snapshot: int) -> Namespace | None:
        """The namespace incarnation named ``name`` live at ``snapshot``."""
        for ns in self.namespaces:
            if ns.name == name and ns.live_at(snapshot):
                return ns
        return None

    def table_at(self, namespace: str, name: str, snapshot: int) -> Table | None:
        """The table incarnation named ``namespace.name`` at ``snapshot``."""
        for table in self.tables:
            if table.namespace == namespace and table.live_at(snapshot):
                if table.version_at(snapshot).name == name:
                    return table
        return None

    def tables_at(self, namespace: str, snapshot: int) -> list[Table]:
        """All table incarnations of a namespace live at ``snapshot``."""
        return [t for t in self.tables if t.namespace == namespace and t.live_at(snapshot)]

    def changes_after(self, object_id: int, after: int, kinds: frozenset[str]) -> list[Snapshot]:
        """Snapshots newer than ``after`` carrying a change of ``kinds`` on ``object_id``."""
        return [
            s
            for s in self.snapshots[after + 1 :]
            if any(c["kind"] in kinds and c.get("object_id") == object_id for c in s.changes)
        ]


def parse_int_param(text: str, name: str) -> int:
    """An int64 query parameter, or 400."""
    try:
        value = int(text, 10)
    except ValueError:
        raise bad_request(f"query parameter '{name}' is not an integer: '{text}'") from None
    if not -(2**63) <= value < 2**63:
        raise bad_request(f"query parameter '{name}' is out of int64 range")
    return value


def parse_instant(text: str) -> datetime:
    """An ISO-8601 instant WITH an offset, or 400 (offset-less timestamps are refused)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise bad_request(f"'{text}' is not an ISO-8601 instant") from None
    if value.tzinfo is None:
        raise bad_request(f"'{text}' has no UTC offset")
    return value


def new_catalog(name: str, data_path: str, prefix: str) -> Catalog:
    """A fresh catalog: snapshot 0 (empty, schema_version 0)."""
    return Catalog(name, data_path, prefix, [Snapshot(0, now_utc(), 0, [])])


def new_table(catalog: Catalog, namespace: str, name: str, columns: list[dict[str, Any]], ids: FieldIds, snapshot: int) -> Table:
    """A new incarnation with a fresh uuid and object id."""
    table = Table(
        object_id=catalog.next_table_object_id,
        table_uuid=str(uuid.uuid4()),
        namespace=namespace,
        created=snapshot,
        versions=[TableDef(since=snapshot, name=name, columns=columns)],
        field_ids=ids,
    )
    catalog.next_table_object_id += 1
    return table


#: What the catalog advertises by default: the two capabilities the pyhoglake capture shows, plus
#: the mutation route this emulator serves (``--capabilities`` replaces the list).
DEFAULT_CAPABILITIES = ("atomic-table-creation-v1", "idempotent-append-v1", "idempotent-mutation-v1")


@dataclass
class Config:
    """Server knobs (CLI flags)."""

    receipt_retention_seconds: float = 7 * 24 * 3600
    refuse_blind_partitioned_appends: bool = False
    commit_lock_timeout_ms: int = 30_000
    capabilities: tuple[str, ...] = DEFAULT_CAPABILITIES


@dataclass
class State:
    """The whole emulator state behind one lock (the catalog commit lock, simplified to global)."""

    config: Config
    catalogs: dict[str, Catalog] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    blind_partitioned_appends: int = 0

    def catalog(self, name: str) -> Catalog:
        """The catalog, or 404."""
        found = self.catalogs.get(name)
        if found is None:
            raise not_found(f"catalog '{name}' not found")
        return found

    def reset(self) -> None:
        """Forget every catalog."""
        self.catalogs.clear()
        self.blind_partitioned_appends = 0
