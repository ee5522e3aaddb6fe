"""Assertion helpers shared by the hoglake emulator checks (check_hoglake_emulator.py and its scenario modules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyhoglake
from pyhoglake.types import columns_to_arrow_schema


class CheckFailed(AssertionError):
    """A mismatch between what was expected and what the emulator holds or sent."""


def check(condition: bool, message: str) -> None:
    """Raise CheckFailed with ``message`` unless ``condition``."""
    if not condition:
        raise CheckFailed(message)


def expect_raises(kind: type[BaseException], action: Callable[[], Any], what: str) -> BaseException:
    """Run ``action``; it must raise ``kind`` (returned), anything else fails the check."""
    try:
        action()
    except kind as err:
        return err
    except Exception as err:  # noqa: BLE001
        raise CheckFailed(f"{what}: expected {kind.__name__}, got {type(err).__name__}: {err}") from err
    raise CheckFailed(f"{what}: expected {kind.__name__}, but it succeeded")


def arrow_rows(table: pyhoglake.Table, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as an Arrow table in the destination's exact schema (field ids included)."""
    schema = columns_to_arrow_schema(table.columns)
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
