"""Idempotency receipts: the canonical form of a commit request, its fingerprint, and receipt lookup (hoglake-api.md 7.4).

"Exact" replays are decided on a canonical form of the whole request:
appends, files within an append, ``column_stats`` (by ``field_id``), delete
groups and the DV registrations within a group are unordered sets; everything
else (read_snapshot, author, message, expected_table_uuid, paths, counts,
bounds as bytes, the ORDER of partition_values) must match. The route's
conflict contract is part of it, as the server's fingerprint serialises
``requireUnchangedTables`` when set: the same body sent to
``/commit/prepared`` and to ``/commit/mutations/prepared`` is not the same
request.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from typing import Any

from emu_state import Catalog, Config, Receipt, now_utc
from emu_stats import decode_b64

FINGERPRINT_VERSION = "emu-v1"


def _dump(value: Any) -> str:
    """Deterministic JSON for sorting and hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _canon_uuid(text: str | None) -> str | None:
    """A UUID in its canonical lower-case form (None stays None)."""
    return None if text is None else str(uuid.UUID(text))


def _canon_bound(text: str | None) -> str | None:
    """Bounds compare as bytes (hex) when decodable, as text otherwise."""
    if text is None:
        return None
    raw = decode_b64(text)
    return ("hex:" + raw.hex()) if raw is not None else ("raw:" + text)


def _canon_stats(stat: dict[str, Any]) -> dict[str, Any]:
    """One ColumnStats entry with absent == null and bounds as bytes."""
    return {
        "field_id": stat["field_id"],
        "value_count": stat["value_count"],
        "null_count": stat["null_count"],
        "nan_count": stat.get("nan_count"),
        "size_bytes": stat.get("size_bytes"),
        "lower_bound": _canon_bound(stat.get("lower_bound")),
        "upper_bound": _canon_bound(stat.get("upper_bound")),
    }


def _canon_file(reg: dict[str, Any]) -> dict[str, Any]:
    """A FileRegistration; column_stats an unordered set by field_id (absent != [])."""
    stats = reg.get("column_stats")
    return {
        "path": reg["path"],
        "record_count": reg["record_count"],
        "file_size_bytes": reg["file_size_bytes"],
        "footer_size": reg.get("footer_size"),
        "column_stats": None
        if stats is None
        else sorted((_canon_stats(s) for s in stats), key=lambda s: (s["field_id"], _dump(s))),
        "partition_values": reg.get("partition_values"),  # ORDER matters
    }


def _canon_append(append: dict[str, Any]) -> dict[str, Any]:
    """A TableAppend; its files an unordered set."""
    return {
        "namespace": append["namespace"],
        "table": append["table"],
        "expected_table_uuid": _canon_uuid(append.get("expected_table_uuid")),
        "files": sorted((_canon_file(f) for f in append["files"]), key=_dump),
    }


def _canon_deletes(group: dict[str, Any]) -> dict[str, Any]:
    """A TableDeletes group; its DV registrations an unordered set."""
    return {
        "namespace": group["namespace"],
        "table": group["table"],
        "expected_table_uuid": _canon_uuid(group.get("expected_table_uuid")),
        "files": sorted(
            (
                {k: reg[k] for k in ("data_file_id", "path", "delete_count", "file_size_bytes")}
                for reg in group["files"]
            ),
            key=_dump,
        ),
    }


def canonical_form(body: dict[str, Any], *, require_unchanged_tables: bool = False) -> dict[str, Any]:
    """The whole request as compared for replays: groups/files/stats unordered, all else exact."""
    form: dict[str, Any] = {
        "read_snapshot": body.get("read_snapshot"),
        "author": body.get("author"),
        "message": body.get("message"),
        "appends": sorted((_canon_append(a) for a in body.get("appends") or []), key=_dump),
        "deletes": sorted((_canon_deletes(d) for d in body.get("deletes") or []), key=_dump),
    }
    if require_unchanged_tables:  # serialised only when set, like the server's NON_DEFAULT field
        form["require_unchanged_tables"] = True
    return form


def fingerprint(body: dict[str, Any], *, require_unchanged_tables: bool = False) -> str:
    """A versioned SHA-256 of the canonical form (what current servers store)."""
    form = canonical_form(body, require_unchanged_tables=require_unchanged_tables)
    digest = hashlib.sha256(_dump(form).encode()).hexdigest()
    return f"{FINGERPRINT_VERSION}:{digest}"


def live_receipt(catalog: Catalog, key: str, config: Config) -> Receipt | None:
    """The receipt under ``key``, purging it first when past the retention."""
    receipt = catalog.receipts.get(key)
    if receipt is None:
        return None
    if now_utc() - receipt.stored_at > timedelta(seconds=config.receipt_retention_seconds):
        del catalog.receipts[key]
        return None
    return receipt


def receipt_result(receipt: Receipt) -> dict[str, Any]:
    """The commit result a receipt answers with."""
    return {"snapshot_id": receipt.snapshot_id, "schema_version": receipt.schema_version}
