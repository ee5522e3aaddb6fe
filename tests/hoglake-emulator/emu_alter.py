"""Alter ops (hoglake-api.md 6.3): applied in order, atomically, as one DDL snapshot.

:func:`apply_ops` works on a deep copy of the table's current definition and
on copies of its counters, so a refusal anywhere leaves the table untouched;
only :meth:`AlterPlan.commit` makes the result live.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from emu_columns import (
    CONTAINERS,
    MAX_NODES,
    PROMOTIONS,
    FieldIds,
    build_column,
    by_field_id,
    check_column_name,
    check_name,
    count_nodes,
    find_path,
    is_leaf,
    renumber,
)
from emu_errors import already_exists, bad_request, validation
from emu_state import Catalog, Table, TableDef
from emu_stats import promote_bound
from emu_wire import ALTER_OPS, check_object

TIMESTAMPS = frozenset({"timestamp_s", "timestamp_ms", "timestamp", "timestamp_ns", "timestamptz"})
BUCKET_SOURCES = frozenset(
    {"int8", "int16", "int", "long", "uint8", "uint16", "decimal", "date", "time",
     "timestamp", "timestamptz", "string", "uuid", "binary"}
)  # fmt: skip
TRANSFORM_SOURCES: dict[str, frozenset[str]] = {
    "year": TIMESTAMPS | {"date"},
    "month": TIMESTAMPS | {"date"},
    "day": TIMESTAMPS | {"date"},
    "hour": TIMESTAMPS,
    "bucket": BUCKET_SOURCES,
}
DIRECTIONS = frozenset({"asc", "desc"})
NULL_ORDERS = frozenset({"nulls_first", "nulls_last"})
PROPERTY_KEY_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,127}$")
RESERVED_PROPERTY_KEYS = frozenset({"partitioning", "sorted_by", "location", "format", "comment"})


@dataclass
class AlterPlan:
    """The outcome of a validated op list, not yet applied to the table."""

    table: Table
    version: TableDef
    field_ids: FieldIds
    next_spec_id: int
    next_sort_id: int
    promotions: list[tuple[int, str, str]] = field(default_factory=list)  # (field_id, old, new)

    def commit(self) -> None:
        """Make the new definition live and re-encode stored bounds for promotions."""
        self.table.versions.append(self.version)
        self.table.field_ids = self.field_ids
        self.table.next_spec_id = self.next_spec_id
        self.table.next_sort_id = self.next_sort_id
        for field_id, old, new in self.promotions:
            for data_file in self.table.files:
                for stat in data_file.column_stats or []:
                    if stat["field_id"] == field_id:
                        _promote_stat(stat, old, new)


def _promote_stat(stat: dict[str, Any], old: str, new: str) -> None:
    """Re-encode one stored stats entry's bounds to the promoted width."""
    for key in ("lower_bound", "upper_bound"):
        if stat.get(key) is not None:
            stat[key] = promote_bound(stat[key], old, new)
            if stat[key] is None:
                del stat[key]


def parse_ops(body_ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """400 on an empty list, an unknown ``op``, or keys outside the op's own shape."""
    if not body_ops:
        raise bad_request("ops must not be empty")
    for i, op in enumerate(body_ops):
        name = op.get("op")
        if not isinstance(name, str) or name not in ALTER_OPS:
            raise bad_request(f"ops[{i}]: unknown alter op {name!r}")
        check_object(op, ALTER_OPS[name], f"ops[{i}]")
    return body_ops


def apply_ops(catalog: Catalog, table: Table, ops: list[dict[str, Any]], since: int) -> AlterPlan:
    """Validate and apply every op to a copy; later ops see earlier ones' effect."""
    plan = AlterPlan(
        table=table,
        version=table.new_version(since),
        field_ids=copy.copy(table.field_ids),
        next_spec_id=table.next_spec_id,
        next_sort_id=table.next_sort_id,
    )
    for op in ops:
        _HANDLERS[op["op"]](catalog, plan, op)
    return plan


def _add_column(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """New id(s) = next free; ordinal = last sibling + 1; only under the top level or a struct."""
    columns = plan.version.columns
    depth = 1
    siblings = columns
    if op.get("parent"):
        parent = find_path(columns, op["parent"])
        if parent.node["type"] != "struct" or parent.under_list_or_map:
            raise validation(f"add_column parent '{op['parent']}' is not a struct outside a list/map")
        siblings = parent.node["children"]
        depth = parent.depth + 1
    name = op["column"]["name"]
    if any(s["name"] == name for s in siblings):
        raise validation(f"column '{name}' already exists")
    counter = [count_nodes(columns)]
    siblings.append(build_column(op["column"], len(siblings), plan.field_ids, depth, counter))
    if counter[0] > MAX_NODES:
        raise validation(f"table exceeds {MAX_NODES} column nodes")


def _drop_column(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Not the last column, not a list element / map key/value, not a partition or sort source."""
    ref = find_path(plan.version.columns, op["name"])
    if ref.parent is not None and ref.parent["type"] in ("list", "map"):
        raise validation(f"cannot drop '{op['name']}': it is part of a list/map")
    if len(ref.siblings) == 1:
        raise validation(f"cannot drop '{op['name']}': it is the last column of its parent")
    dropped_ids = {r.node["field_id"] for r in _subtree(ref.node)}
    for spec_field in plan.version.spec_fields():
        if spec_field["source_field_id"] in dropped_ids:
            raise validation(f"cannot drop '{op['name']}': it is a partition-spec source")
    for sort_field in (plan.version.sort_spec or {}).get("fields", []):
        if sort_field["source_field_id"] in dropped_ids:
            raise validation(f"cannot drop '{op['name']}': it is a sort-order source")
    ref.siblings.remove(ref.node)
    renumber(ref.siblings)


def _subtree(node: dict[str, Any]) -> list[Any]:
    """Every node under (and including) ``node``."""
    return list(by_field_id([node]).values())


def _rename_column(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Keeps the field id; ``to`` obeys the column-name rules; no sibling clash."""
    ref = find_path(plan.version.columns, op["from"])
    if ref.parent is not None and ref.parent["type"] in ("list", "map"):
        raise validation(f"cannot rename '{op['from']}': list/map children have fixed names")
    check_column_name(op["to"])
    if any(s["name"] == op["to"] for s in ref.siblings if s is not ref.node):
        raise validation(f"column '{op['to']}' already exists")
    ref.node["name"] = op["to"]


def _promote_column(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Widening only: int8->int16/int/long, int16->int/long, int->long, uint8->uint16/uint32, uint16->uint32, float->double."""
    ref = find_path(plan.version.columns, op["name"])
    old, new = ref.node["type"], op["to"].lower()
    if new not in PROMOTIONS.get(old, frozenset()):
        raise validation(f"cannot promote '{op['name']}' from {old} to {new}")
    ref.node["type"] = new
    plan.promotions.append((ref.node["field_id"], old, new))


def _rename_table(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """New name must be valid and free in the namespace; the uuid is unchanged."""
    check_name(op["new_name"], "table")
    other = catalog.table_at(plan.table.namespace, op["new_name"], catalog.head)
    if other is not None and other is not plan.table:
        raise already_exists(f"table '{plan.table.namespace}.{op['new_name']}' already exists")
    plan.version.name = op["new_name"]


def _leaf_source(plan: AlterPlan, field_id: int, what: str) -> dict[str, Any]:
    """The leaf column a spec/sort field points at; containers, list/map members and variants refused."""
    ref = by_field_id(plan.version.columns).get(field_id)
    if ref is None:
        raise validation(f"{what}: source_field_id {field_id} does not exist")
    if not is_leaf(ref.node) or ref.node["type"] in CONTAINERS:
        raise validation(f"{what}: source '{ref.path}' is a container")
    if ref.under_list_or_map:
        raise validation(f"{what}: source '{ref.path}' is inside a list/map")
    if ref.node["type"] == "variant":
        raise validation(f"{what}: source '{ref.path}' is a variant")
    return ref.node


def _set_partition_spec(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """identity / bucket[N>0] / year / month / day / hour on allowed leaf sources; new spec_id."""
    fields: list[dict[str, Any]] = []
    for spec_field in op["fields"]:
        source = _leaf_source(plan, spec_field["source_field_id"], "partition field")
        transform, param = spec_field["transform"], spec_field.get("transform_param")
        if transform == "identity":
            pass
        elif transform in TRANSFORM_SOURCES:
            if source["type"] not in TRANSFORM_SOURCES[transform]:
                raise validation(f"transform '{transform}' cannot apply to a {source['type']} column")
        else:
            raise validation(f"unknown partition transform '{transform}'")
        if transform == "bucket":
            if param is None or param <= 0:
                raise validation("bucket requires transform_param > 0")
        elif param is not None:
            raise validation(f"transform '{transform}' takes no transform_param")
        entry = {"source_field_id": spec_field["source_field_id"], "transform": transform}
        if param is not None:
            entry["transform_param"] = param
        fields.append(entry)
    keys = [(f["source_field_id"], f["transform"]) for f in fields]
    if len(set(keys)) != len(keys):
        raise validation("duplicate partition field")
    plan.version.partition_spec = {"spec_id": plan.next_spec_id, "fields": fields}
    plan.next_spec_id += 1


def _set_sort_order(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Leaf sources only; direction asc|desc, null_order nulls_first|nulls_last; new sort_id."""
    fields: list[dict[str, Any]] = []
    for sort_field in op["sort_fields"]:
        _leaf_source(plan, sort_field["source_field_id"], "sort field")
        if sort_field["direction"] not in DIRECTIONS:
            raise bad_request(f"unknown sort direction '{sort_field['direction']}'")
        if sort_field["null_order"] not in NULL_ORDERS:
            raise bad_request(f"unknown null_order '{sort_field['null_order']}'")
        fields.append(dict(sort_field))
    plan.version.sort_spec = {"sort_id": plan.next_sort_id, "fields": fields}
    plan.next_sort_id += 1


def _check_comment(comment: str | None) -> None:
    """<= 16 384 chars, no NUL."""
    if comment is not None and (len(comment) > 16_384 or "\x00" in comment):
        raise validation("comment must have at most 16384 characters and no NUL")


def _set_table_comment(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Set or (null) remove the table comment."""
    _check_comment(op.get("comment"))
    plan.version.comment = op.get("comment")


def _set_column_comment(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Set or (null) remove a column comment, addressed by dotted path."""
    _check_comment(op.get("comment"))
    ref = find_path(plan.version.columns, op["name"])
    if op.get("comment") is None:
        ref.node.pop("comment", None)
    else:
        ref.node["comment"] = op["comment"]


def _set_properties(catalog: Catalog, plan: AlterPlan, op: dict[str, Any]) -> None:
    """Replace the whole property map (<= 100 keys; key/value rules of section 3)."""
    props = op["properties"]
    if len(props) > 100:
        raise validation("at most 100 properties")
    for key, value in props.items():
        if not PROPERTY_KEY_RE.match(key) or key.startswith(("hoglake.", "trino.")) or key in RESERVED_PROPERTY_KEYS:
            raise validation(f"invalid or reserved property key '{key}'")
        if not isinstance(value, str) or len(value) > 4096 or "\x00" in value:
            raise validation(f"property '{key}' must be a string of at most 4096 characters, no NUL")
    plan.version.properties = dict(props)


_HANDLERS = {
    "add_column": _add_column,
    "drop_column": _drop_column,
    "rename_column": _rename_column,
    "promote_column": _promote_column,
    "rename_table": _rename_table,
    "set_partition_spec": _set_partition_spec,
    "set_sort_order": _set_sort_order,
    "set_table_comment": _set_table_comment,
    "set_column_comment": _set_column_comment,
    "set_properties": _set_properties,
}
