"""Column statistics: sanitising and re-encoding bounds (hoglake-api.md 6.1, 6.3, 7.3).

The server refuses structurally wrong statistics (unknown / container /
variant / duplicate field ids -> 422, done in emu_commit) but *sanitises*
the values: undecodable or inverted bounds are dropped, impossible counts
clamped, signed zeros canonicalised (lower -> -0.0, upper -> +0.0).
Bounds are the Iceberg single-value encoding of the column's type, base64.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from typing import Any

# Fixed-width little-endian encodings: type -> (struct format, byte length).
_LE_FORMATS: dict[str, tuple[str, int]] = {
    "int8": ("<i", 4), "int16": ("<i", 4), "int": ("<i", 4), "uint8": ("<i", 4), "uint16": ("<i", 4),
    "date": ("<i", 4), "long": ("<q", 8), "uint32": ("<q", 8), "time": ("<q", 8),
    "timestamp_s": ("<q", 8), "timestamp_ms": ("<q", 8), "timestamp": ("<q", 8),
    "timestamp_ns": ("<q", 8), "timestamptz": ("<q", 8), "float": ("<f", 4), "double": ("<d", 8),
}  # fmt: skip
_BYTES_TYPES = frozenset({"string", "json", "binary"})


def decode_b64(text: str) -> bytes | None:
    """Standard base64 with padding -> bytes, or None when undecodable."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def decode_bound(col_type: str, raw: bytes) -> Any:
    """A comparable Python value for an encoded bound, or None when it does not fit the type."""
    if col_type in _LE_FORMATS:
        fmt, size = _LE_FORMATS[col_type]
        if len(raw) != size:
            return None
        (value,) = struct.unpack(fmt, raw)
        if isinstance(value, float) and math.isnan(value):
            return None
        return value
    if col_type in ("uint64", "decimal"):
        return int.from_bytes(raw, "big", signed=True) if raw else None
    if col_type == "boolean":
        return raw[0] if len(raw) == 1 and raw[0] in (0, 1) else None
    if col_type == "uuid":
        return raw if len(raw) == 16 else None
    if col_type in _BYTES_TYPES:
        if col_type != "binary":
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
        return raw
    return None


def sanitise(stat: dict[str, Any], col_type: str) -> dict[str, Any]:
    """The stored form of one ColumnStats entry (counts clamped, bad bounds dropped, zeros normalised)."""
    out = dict(stat)
    out["value_count"] = max(0, out["value_count"])
    out["null_count"] = min(max(0, out["null_count"]), out["value_count"])
    for key in ("nan_count", "size_bytes"):
        if out.get(key) is not None:
            out[key] = max(0, out[key])
    lower, upper = out.get("lower_bound"), out.get("upper_bound")
    if lower is None and upper is None:
        return out
    decoded = [None if b is None else decode_b64(b) for b in (lower, upper)]
    values = [None if raw is None else decode_bound(col_type, raw) for raw in decoded]
    if any(b is not None and v is None for b, v in zip((lower, upper), values, strict=True)):
        return _without_bounds(out)
    lo, hi = values
    if lo is not None and hi is not None:
        if not lo <= hi:  # plain numeric order: -0.0 == +0.0 is not inverted
            return _without_bounds(out)
    if col_type in ("float", "double"):
        fmt = _LE_FORMATS[col_type][0]
        if lo is not None and lo == 0.0:
            out["lower_bound"] = base64.b64encode(struct.pack(fmt, -0.0)).decode()
        if hi is not None and hi == 0.0:
            out["upper_bound"] = base64.b64encode(struct.pack(fmt, 0.0)).decode()
    return out


def _without_bounds(stat: dict[str, Any]) -> dict[str, Any]:
    """The entry with both bounds removed."""
    return {k: v for k, v in stat.items() if k not in ("lower_bound", "upper_bound")}


def promote_bound(text: str | None, old: str, new: str) -> str | None:
    """Re-encode a stored bound after promote_column from ``old`` to ``new`` (6.3)."""
    if text is None:
        return None
    raw = decode_b64(text)
    if raw is None:
        return None
    value = decode_bound(old, raw)
    if value is None:
        return None
    fmt = _LE_FORMATS[new][0]
    return base64.b64encode(struct.pack(fmt, value)).decode()
