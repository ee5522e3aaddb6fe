"""Identifiers, column types and the field-id tree (hoglake-api.md sections 3 and 6.1).

A column tree is a list of plain dicts shaped like the wire Column:
``{name, type, nullable, field_id, ordinal, type_params?, comment?, children?}``.
Field ids are assigned per table, depth-first (a container before its
children), from the table's ``next_field_id`` counter; ``ordinal`` is the
0-based position among siblings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from emu_errors import validation

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$")
CATALOG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
RESERVED_COLUMN_PREFIX = "_hog"
MAX_DEPTH = 8
MAX_NODES = 10_000

CONTAINERS = frozenset({"list", "struct", "map"})
SCALARS = frozenset(
    {
        "boolean", "int8", "int16", "int", "long", "uint8", "uint16", "uint32", "uint64",
        "float", "double", "decimal", "date", "time", "timestamp_s", "timestamp_ms",
        "timestamp", "timestamp_ns", "timestamptz", "string", "json", "uuid", "binary", "variant",
    }
)  # fmt: skip
TYPE_NAMES = SCALARS | CONTAINERS  # the 27 wire names
REFUSED_TYPES = frozenset(
    {
        "int128", "uint128", "timetz", "interval", "geometry", "geography", "point",
        "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
        "geometrycollection",
    }
)  # fmt: skip

#: Allowed widenings for promote_column (6.3).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int8": frozenset({"int16", "int", "long"}),
    "int16": frozenset({"int", "long"}),
    "int": frozenset({"long"}),
    "uint8": frozenset({"uint16", "uint32"}),
    "uint16": frozenset({"uint32"}),
    "float": frozenset({"double"}),
}


def check_name(name: str, what: str) -> None:
    """422 unless ``name`` obeys the namespace/table/view/column identifier rule."""
    if not NAME_RE.match(name):
        raise validation(f"invalid {what} name '{name}': must match {NAME_RE.pattern}")


def check_column_name(name: str) -> None:
    """Identifier rule plus the reserved ``_hog`` prefix (section 3)."""
    check_name(name, "column")
    if name.startswith(RESERVED_COLUMN_PREFIX):
        raise validation(f"column name '{name}' uses the reserved prefix '{RESERVED_COLUMN_PREFIX}'")


def check_catalog_name(name: str) -> None:
    """422 unless ``name`` is a valid catalog name (lower-case, 1-63 chars, V13 rule)."""
    if not CATALOG_RE.match(name):
        raise validation(f"invalid catalog name '{name}': must match {CATALOG_RE.pattern}")


def check_data_path(data_path: str) -> str:
    """Validate a catalog ``data_path`` (section 3); return its prefix form ``bucket/prefix/``."""
    if len(data_path) > 512:
        raise validation("data_path longer than 512 characters")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in data_path):
        raise validation("data_path contains whitespace or control characters")
    if not data_path.startswith("s3://"):
        raise validation("data_path must be s3://<bucket>[/<prefix>]")
    rest = data_path[len("s3://") :]
    segments = rest.rstrip("/").split("/")
    if not segments[0]:
        raise validation("data_path has an empty bucket")
    if any(seg in ("", ".", "..") for seg in segments):
        raise validation("data_path has an empty, '.' or '..' segment")
    return "/".join(segments) + "/"


@dataclass
class FieldIds:
    """The per-table field-id counter (ids are never reused)."""

    next_id: int = 1

    def take(self) -> int:
        """Allocate the next unused id."""
        value = self.next_id
        self.next_id += 1
        return value


def build_column(defn: dict[str, Any], ordinal: int, ids: FieldIds, depth: int, counter: list[int]) -> dict[str, Any]:
    """Turn a (shape-checked) ColumnDef into a Column node with field ids.

    Enforces section 6.1: the 27 type names (case-insensitive), the named
    refusals, ``type_params`` only on decimal/variant, container shapes
    (list -> one ``element``; map -> ``key`` (non-null) then ``value``;
    struct -> >=1 uniquely named child), depth <= 8, <= 10 000 nodes.
    """
    name = defn["name"]
    check_column_name(name)
    col_type = defn["type"].lower()
    if col_type in REFUSED_TYPES:
        raise validation(f"column '{name}': type '{col_type}' is not supported by hoglake")
    if col_type not in TYPE_NAMES:
        raise validation(f"column '{name}': unknown type '{defn['type']}'")
    if depth > MAX_DEPTH:
        raise validation(f"column '{name}': nesting depth exceeds {MAX_DEPTH}")
    counter[0] += 1
    if counter[0] > MAX_NODES:
        raise validation(f"table exceeds {MAX_NODES} column nodes")
    node: dict[str, Any] = {
        "name": name,
        "type": col_type,
        "nullable": defn.get("nullable", True) if defn.get("nullable") is not None else True,
        "field_id": ids.take(),
        "ordinal": ordinal,
    }
    params = _check_type_params(name, col_type, defn.get("type_params"))
    if params is not None:
        node["type_params"] = params
    if defn.get("comment") is not None:
        node["comment"] = defn["comment"]
    children = defn.get("children")
    if col_type in CONTAINERS:
        _check_container_children(name, col_type, children or [])
        node["children"] = [
            build_column(child, i, ids, depth + 1, counter) for i, child in enumerate(children or [])
        ]
    elif children:
        raise validation(f"column '{name}': scalar type '{col_type}' cannot have children")
    return node


def _check_type_params(name: str, col_type: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
    """decimal needs {precision 1..38, scale 0..precision}; variant may carry {shredding}; others none."""
    if col_type == "decimal":
        if not params or set(params) != {"precision", "scale"}:
            raise validation(f"column '{name}': decimal requires type_params {{precision, scale}}")
        precision, scale = params["precision"], params["scale"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (precision, scale)):
            raise validation(f"column '{name}': decimal precision/scale must be integers")
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise validation(f"column '{name}': decimal({precision},{scale}) out of range")
        return {"precision": precision, "scale": scale}
    if col_type == "variant":
        if params and set(params) - {"shredding"}:
            raise validation(f"column '{name}': variant type_params may only carry 'shredding'")
        return dict(params) if params else None
    if params:
        raise validation(f"column '{name}': type '{col_type}' takes no type_params")
    return None


def _check_container_children(name: str, col_type: str, children: list[dict[str, Any]]) -> None:
    """Container shape rules of section 6.1."""
    names = [child["name"] for child in children]
    if col_type == "list":
        if names != ["element"]:
            raise validation(f"column '{name}': a list has exactly one child named 'element'")
    elif col_type == "map":
        if names != ["key", "value"]:
            raise validation(f"column '{name}': a map has exactly the children 'key' then 'value'")
        if children[0].get("nullable", True) is not False:
            raise validation(f"column '{name}': a map key must be nullable:false")
    else:
        if not children:
            raise validation(f"column '{name}': a struct needs at least one child")
        check_unique_names(names, f"struct '{name}'")


def check_unique_names(names: list[str], where: str) -> None:
    """422 on duplicate sibling names."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise validation(f"duplicate column name '{name}' in {where}")
        seen.add(name)


def build_columns(defs: list[dict[str, Any]], ids: FieldIds) -> list[dict[str, Any]]:
    """Build a whole top-level column list (table creation): >=1 column, unique names."""
    if not defs:
        raise validation("a table needs at least one column")
    check_unique_names([d["name"] for d in defs], "table")
    counter = [0]
    return [build_column(defn, i, ids, 1, counter) for i, defn in enumerate(defs)]


# -- reading the tree -----------------------------------------------------------


@dataclass(frozen=True)
class NodeRef:
    """A node with where it sits: its dotted path, siblings list and container context."""

    node: dict[str, Any]
    path: str
    siblings: list[dict[str, Any]]
    parent: dict[str, Any] | None
    under_list_or_map: bool
    depth: int


def walk(columns: list[dict[str, Any]]) -> Iterator[NodeRef]:
    """Every node, depth-first, with its context."""

    def rec(nodes: list[dict[str, Any]], prefix: str, parent: dict[str, Any] | None, under: bool, depth: int) -> Iterator[NodeRef]:
        for node in nodes:
            path = f"{prefix}{node['name']}"
            yield NodeRef(node, path, nodes, parent, under, depth)
            if node.get("children"):
                inner = under or node["type"] in ("list", "map")
                yield from rec(node["children"], path + ".", node, inner, depth + 1)

    yield from rec(columns, "", None, False, 1)


def by_field_id(columns: list[dict[str, Any]]) -> dict[int, NodeRef]:
    """field_id -> NodeRef for the whole tree."""
    return {ref.node["field_id"]: ref for ref in walk(columns)}


def find_path(columns: list[dict[str, Any]], dotted: str) -> NodeRef:
    """Resolve a dotted path (``a.b.c``) to its node, or 422 when it does not exist."""
    for ref in walk(columns):
        if ref.path == dotted:
            return ref
    raise validation(f"column '{dotted}' does not exist")


def is_leaf(node: dict[str, Any]) -> bool:
    """A node that is not a container (leaves carry statistics; variant excepted)."""
    return node["type"] not in CONTAINERS


def renumber(siblings: list[dict[str, Any]]) -> None:
    """Re-assign 0-based ordinals after a drop."""
    for i, node in enumerate(siblings):
        node["ordinal"] = i


def count_nodes(columns: list[dict[str, Any]]) -> int:
    """How many column nodes the tree has."""
    return sum(1 for _ in walk(columns))
