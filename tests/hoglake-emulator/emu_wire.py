"""Request-body shape checks (hoglake-api.md sections 1, 2 and 7.3).

The real server deserialises bodies with a Jackson mapper that fails on
unknown properties, so anything outside the declared shape is a 400
``bad_request`` before any semantic check runs: unknown keys at any depth,
a wrong JSON type, a missing required field, a ``null`` element inside a
non-nullable list. This module declares the request shapes once and checks
them strictly (no string->number coercion).

Semantic rules (identifier syntax, ranges, arity, ...) are 422s and live with
the state code, not here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from emu_errors import bad_request

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ListOf:
    """A JSON array whose elements have ``kind``; ``null_elements`` allows JSON null items."""

    kind: Any
    null_elements: bool = False


@dataclass(frozen=True)
class F:
    """One declared field: its kind, whether it must be present (and non-null)."""

    kind: Any
    required: bool = False


@dataclass
class Shape:
    """A JSON object with exactly these fields (filled in after creation for recursion)."""

    name: str
    fields: dict[str, F] = field(default_factory=dict)


def check(value: Any, kind: Any, where: str) -> None:
    """Raise 400 unless ``value`` matches ``kind``.

    Kinds: ``"str"``, ``"int"`` (int64, never bool), ``"bool"``, ``"object"``
    (any JSON object), ``"uuid"`` (a string parsing as a UUID), a
    :class:`ListOf`, or a :class:`Shape`.
    """
    if kind == "str":
        if not isinstance(value, str):
            raise bad_request(f"{where}: expected a string")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_request(f"{where}: expected an integer")
        if not INT64_MIN <= value <= INT64_MAX:
            raise bad_request(f"{where}: integer out of int64 range")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise bad_request(f"{where}: expected a boolean")
    elif kind == "object":
        if not isinstance(value, dict):
            raise bad_request(f"{where}: expected an object")
    elif kind == "uuid":
        if not isinstance(value, str):
            raise bad_request(f"{where}: expected a UUID string")
        parse_uuid(value, where)
    elif isinstance(kind, ListOf):
        if not isinstance(value, list):
            raise bad_request(f"{where}: expected an array")
        for i, item in enumerate(value):
            if item is None:
                if kind.null_elements:
                    continue
                raise bad_request(f"{where}[{i}]: null element in a non-nullable list")
            check(item, kind.kind, f"{where}[{i}]")
    elif isinstance(kind, Shape):
        check_object(value, kind, where)
    else:  # pragma: no cover - a declaration bug
        raise AssertionError(f"unknown kind {kind!r}")


def check_object(value: Any, shape: Shape, where: str | None = None) -> None:
    """Check one object against ``shape``: no unknown keys, required keys present, kinds match."""
    where = where or shape.name
    if not isinstance(value, dict):
        raise bad_request(f"{where}: expected a JSON object")
    for key in value:
        if key not in shape.fields:
            raise bad_request(f"{where}: unknown field '{key}'")
    for key, decl in shape.fields.items():
        present = key in value and value[key] is not None
        if not present:
            if decl.required:
                raise bad_request(f"{where}: missing required field '{key}'")
            continue
        check(value[key], decl.kind, f"{where}.{key}")


def parse_uuid(text: str, where: str) -> str:
    """The canonical lower-case 8-4-4-4-12 form of ``text``, or 400 when it is not a UUID.

    Only the hyphenated 36-character form is accepted (what a JVM UUID parser
    reads on the wire).
    """
    if len(text) != 36 or text.count("-") != 4:
        raise bad_request(f"{where}: '{text}' is not a UUID")
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise bad_request(f"{where}: '{text}' is not a UUID") from None


# -- declared request shapes ---------------------------------------------------

CATALOG_CREATE = Shape("CreateCatalog", {"name": F("str", True), "data_path": F("str", True)})

CATALOG_OPTIONS_PATCH = Shape(
    "CatalogOptionsPatch",
    {"snapshot_retention_seconds": F("int"), "consumer_floor": F("bool")},
)

NAMESPACE_CREATE = Shape("CreateNamespace", {"name": F("str", True)})

COLUMN_DEF = Shape("ColumnDef")
COLUMN_DEF.fields.update(
    {
        "name": F("str", True),
        "type": F("str", True),
        "nullable": F("bool"),
        "type_params": F("object"),
        "children": F(ListOf(COLUMN_DEF)),
        "comment": F("str"),
    }
)

TABLE_CREATE = Shape("CreateTable", {"name": F("str", True), "columns": F(ListOf(COLUMN_DEF), True)})

ALTER = Shape("AlterTable", {"ops": F(ListOf("object"), True)})

PARTITION_FIELD = Shape(
    "PartitionField",
    {"source_field_id": F("int", True), "transform": F("str", True), "transform_param": F("int")},
)

SORT_FIELD = Shape(
    "SortField",
    {"source_field_id": F("int", True), "direction": F("str", True), "null_order": F("str", True)},
)

#: Alter op shapes (hoglake-api.md 6.3): ``op`` plus only the op's own keys.
ALTER_OPS: dict[str, Shape] = {
    "add_column": Shape("add_column", {"op": F("str"), "column": F(COLUMN_DEF, True), "parent": F("str")}),
    "drop_column": Shape("drop_column", {"op": F("str"), "name": F("str", True)}),
    "rename_column": Shape("rename_column", {"op": F("str"), "from": F("str", True), "to": F("str", True)}),
    "promote_column": Shape("promote_column", {"op": F("str"), "name": F("str", True), "to": F("str", True)}),
    "rename_table": Shape("rename_table", {"op": F("str"), "new_name": F("str", True)}),
    "set_partition_spec": Shape(
        "set_partition_spec", {"op": F("str"), "fields": F(ListOf(PARTITION_FIELD), True)}
    ),
    "set_sort_order": Shape("set_sort_order", {"op": F("str"), "sort_fields": F(ListOf(SORT_FIELD), True)}),
    "set_table_comment": Shape("set_table_comment", {"op": F("str"), "comment": F("str")}),
    "set_column_comment": Shape(
        "set_column_comment", {"op": F("str"), "name": F("str", True), "comment": F("str")}
    ),
    "set_properties": Shape("set_properties", {"op": F("str"), "properties": F("object", True)}),
}

COLUMN_STATS = Shape(
    "ColumnStats",
    {
        "field_id": F("int", True),
        "value_count": F("int", True),
        "null_count": F("int", True),
        "nan_count": F("int"),
        "size_bytes": F("int"),
        "lower_bound": F("str"),
        "upper_bound": F("str"),
    },
)

FILE_REGISTRATION = Shape(
    "FileRegistration",
    {
        "path": F("str", True),
        "record_count": F("int", True),
        "file_size_bytes": F("int", True),
        "footer_size": F("int"),
        "column_stats": F(ListOf(COLUMN_STATS)),
        "partition_values": F(ListOf("str", null_elements=True)),
    },
)

TABLE_APPEND = Shape(
    "TableAppend",
    {
        "namespace": F("str", True),
        "table": F("str", True),
        "files": F(ListOf(FILE_REGISTRATION), True),
        "expected_table_uuid": F("uuid"),
    },
)

DELETE_FILE_REGISTRATION = Shape(
    "DeleteFileRegistration",
    {
        "data_file_id": F("int", True),
        "path": F("str", True),
        "delete_count": F("int", True),
        "file_size_bytes": F("int", True),
    },
)

TABLE_DELETES = Shape(
    "TableDeletes",
    {
        "namespace": F("str", True),
        "table": F("str", True),
        "files": F(ListOf(DELETE_FILE_REGISTRATION), True),
        "expected_table_uuid": F("uuid"),
    },
)

COMMIT_REQUEST = Shape(
    "CommitRequest",
    {
        "idempotency_key": F("uuid"),
        "read_snapshot": F("int"),
        "appends": F(ListOf(TABLE_APPEND)),
        "deletes": F(ListOf(TABLE_DELETES)),
        "author": F("str"),
        "message": F("str"),
    },
)
