"""Test-controlled fault injection and the request log (not part of hoglake; private to the emulator).

A fault rule matches requests by method and path regex and fires ``count``
times (0 = every time) after letting ``skip`` matches through. Actions:

* ``status``: answer ``status`` with ``body`` (default: the hoglake error body
  for that status; 503 -> ``commit_queue_timeout``) and ``retry_after`` /
  ``headers``, without touching state;
* ``drop_request``: close the connection without applying or answering;
* ``drop_response_after_commit``: apply the request, then close the
  connection without answering (a lost response);
* ``delay``: sleep ``delay_ms`` and then serve normally.

Any rule may carry ``delay_ms`` (slept before its action) and ``hold_lock``
(sleep while holding the catalog lock, so concurrent requests queue behind
it and can hit the 503 admission bound).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from emu_errors import bad_request

ACTIONS = frozenset({"status", "drop_request", "drop_response_after_commit", "delay"})
RULE_KEYS = frozenset(
    {"method", "path", "action", "count", "skip", "status", "body", "retry_after", "headers", "delay_ms", "hold_lock"}
)
DEFAULT_ERROR_CODES = {
    400: "bad_request", 404: "not_found", 409: "commit_conflict", 410: "expired",
    422: "validation", 500: "internal_error", 503: "commit_queue_timeout",
}  # fmt: skip


@dataclass
class FaultRule:
    """One armed rule."""

    rule_id: int
    path: re.Pattern[str]
    action: str
    method: re.Pattern[str] | None = None
    count: int = 1
    skip: int = 0
    status: int = 503
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_ms: int = 0
    hold_lock: bool = False
    fired: int = 0

    def exhausted(self) -> bool:
        """Whether the rule has fired its ``count`` (never, for count 0)."""
        return self.count != 0 and self.fired >= self.count

    def matches(self, method: str, path: str) -> bool:
        """Method (full match, case-insensitive) and path (regex search)."""
        if self.method is not None and not self.method.fullmatch(method):
            return False
        return self.path.search(path) is not None

    def response_body(self) -> Any:
        """The body a ``status`` action answers with."""
        if self.body is not None:
            return self.body
        code = DEFAULT_ERROR_CODES.get(self.status, "internal_error")
        return {"error": code, "detail": f"injected by emulator fault rule {self.rule_id}"}

    def to_wire(self) -> dict[str, Any]:
        """The rule as listed by ``GET /_emulator/faults``."""
        return {
            "id": self.rule_id, "method": self.method.pattern if self.method else None,
            "path": self.path.pattern, "action": self.action, "count": self.count, "skip": self.skip,
            "status": self.status, "body": self.body, "headers": self.headers,
            "delay_ms": self.delay_ms, "hold_lock": self.hold_lock, "fired": self.fired,
        }  # fmt: skip


def _int(rule: dict[str, Any], key: str, default: int, low: int) -> int:
    """An integer rule field with a lower bound, or 400."""
    value = rule.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise bad_request(f"fault rule '{key}' must be an integer >= {low}")
    return value


def parse_rule(rule: Any, rule_id: int) -> FaultRule:
    """Validate one JSON rule (400 on anything unexpected)."""
    if not isinstance(rule, dict):
        raise bad_request("a fault rule is a JSON object")
    unknown = set(rule) - RULE_KEYS
    if unknown:
        raise bad_request(f"unknown fault rule keys: {sorted(unknown)}")
    action = rule.get("action", "status")
    if action not in ACTIONS:
        raise bad_request(f"fault action must be one of {sorted(ACTIONS)}")
    if not isinstance(rule.get("path"), str):
        raise bad_request("fault rule needs a 'path' regex")
    try:
        path = re.compile(rule["path"])
        method = re.compile(rule["method"], re.IGNORECASE) if rule.get("method") else None
    except re.error as err:
        raise bad_request(f"bad regex in fault rule: {err}") from None
    headers = {str(k): str(v) for k, v in (rule.get("headers") or {}).items()}
    status = _int(rule, "status", 503, 100)
    retry_after = rule.get("retry_after", "1" if status == 503 else None)
    if retry_after is not None:
        headers.setdefault("Retry-After", str(retry_after))
    return FaultRule(
        rule_id=rule_id, path=path, action=action, method=method,
        count=_int(rule, "count", 1, 0), skip=_int(rule, "skip", 0, 0), status=status,
        body=rule.get("body"), headers=headers, delay_ms=_int(rule, "delay_ms", 0, 0),
        hold_lock=bool(rule.get("hold_lock", False)),
    )  # fmt: skip


class Faults:
    """The armed rules; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._skips: dict[int, int] = {}
        self._next_id = 1

    def add(self, rules: Any) -> list[int]:
        """Arm a rule or a list of rules; returns their ids."""
        batch = rules if isinstance(rules, list) else [rules]
        with self._lock:
            parsed = [parse_rule(rule, self._next_id + i) for i, rule in enumerate(batch)]
            self._next_id += len(parsed)
            self._rules.extend(parsed)
            for rule in parsed:
                self._skips[rule.rule_id] = rule.skip
        return [rule.rule_id for rule in parsed]

    def take(self, method: str, path: str) -> FaultRule | None:
        """The first live rule matching this request, consuming one firing."""
        with self._lock:
            for rule in self._rules:
                if rule.exhausted() or not rule.matches(method, path):
                    continue
                if self._skips[rule.rule_id] > 0:
                    self._skips[rule.rule_id] -= 1
                    continue
                rule.fired += 1
                return rule
        return None

    def clear(self) -> None:
        """Disarm everything."""
        with self._lock:
            self._rules.clear()
            self._skips.clear()

    def to_wire(self) -> list[dict[str, Any]]:
        """All rules with their firing counts."""
        with self._lock:
            return [rule.to_wire() for rule in self._rules]


class RequestLog:
    """Every request received (control routes excluded), with what was answered."""

    def __init__(self, cap: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        self._seq = 0
        self._cap = cap

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append an entry (mutable: the handler fills in the outcome); returns it."""
        with self._lock:
            self._seq += 1
            entry = {"seq": self._seq, "time": time.time(), **entry}
            self._entries.append(entry)
            if len(self._entries) > self._cap:
                del self._entries[: len(self._entries) - self._cap]
        return entry

    def list(self, since: int = 0, path: re.Pattern[str] | None = None) -> list[dict[str, Any]]:
        """Entries with seq > since, optionally filtered by a path regex."""
        with self._lock:
            return [
                dict(e) for e in self._entries if e["seq"] > since and (path is None or path.search(e["path"]))
            ]

    def clear(self) -> None:
        """Forget every entry (seq keeps counting)."""
        with self._lock:
            self._entries.clear()
