#!/usr/bin/env python3
"""A protocol-faithful hoglake REST catalog emulator for tests.

Serves the /v1 API described in /work/shared/spec/hoglake-api.md from
in-memory state (see emu_api.py for the routes), plus a private control
surface under /_emulator for tests (fault injection, request log, reset).

    python hoglake_emulator.py --host 127.0.0.1 --port 0 [--port-file PATH]

prints ``LISTENING <port>`` (flushed) once it accepts connections, writes the
port to --port-file when given, and exits cleanly on SIGTERM / SIGINT.
Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from emu_api import ROUTES, Request  # noqa: E402
from emu_errors import ApiError, bad_request, not_found, queue_timeout, validation  # noqa: E402
from emu_faults import Faults, FaultRule, RequestLog  # noqa: E402
from emu_state import DEFAULT_CAPABILITIES, Config, State  # noqa: E402

Handler = Callable[[Request], tuple[int, Any]]


class Router:
    """Matches ``(method, percent-decoded path segments)`` against route templates."""

    def __init__(self, routes: list[tuple[str, str, Handler]]) -> None:
        self._routes = [(method, template.strip("/").split("/"), handler) for method, template, handler in routes]

    def match(self, method: str, segments: list[str]) -> tuple[Handler, dict[str, str]]:
        """The handler and path params; 404 for an unknown path, 405 for a known path with another method."""
        path_known = False
        for route_method, template, handler in self._routes:
            params = _bind(template, segments)
            if params is None:
                continue
            path_known = True
            if route_method == method:
                return handler, params
        if path_known:
            raise ApiError(405, "method_not_allowed", f"{method} is not allowed here")
        raise not_found("no such route")


def _bind(template: list[str], segments: list[str]) -> dict[str, str] | None:
    """Path params when ``segments`` fit ``template``, else None."""
    if len(template) != len(segments):
        return None
    params: dict[str, str] = {}
    for part, seg in zip(template, segments, strict=True):
        if part.startswith("{"):
            if not seg:
                return None
            params[part[1:-1]] = seg
        elif part != seg:
            return None
    return params


class Emulator:
    """Everything the request handler needs: state, router, faults, request log, metrics."""

    def __init__(self, config: Config) -> None:
        self.state = State(config)
        self.router = Router(ROUTES)
        self.faults = Faults()
        self.log = RequestLog()
        self.counters: dict[str, int] = {}
        self.counter_lock = threading.Lock()

    def count(self, name: str) -> None:
        """Bump a metrics counter."""
        with self.counter_lock:
            self.counters[name] = self.counters.get(name, 0) + 1

    def serve_api(self, method: str, segments: list[str], query: dict[str, str], body: Any, has_body: bool, hold: FaultRule | None) -> tuple[int, Any]:
        """Run one /v1 request under the catalog lock (503 commit_queue_timeout past the admission bound)."""
        handler, params = self.router.match(method, segments)
        timeout = self.state.config.commit_lock_timeout_ms / 1000
        if not self.state.lock.acquire(timeout=timeout):
            raise queue_timeout("request waited longer than the admission bound for the catalog lock")
        try:
            if hold is not None and hold.hold_lock and hold.delay_ms:
                time.sleep(hold.delay_ms / 1000)
            request = Request(method, params, query, body, has_body, self.state)
            return handler(request)
        finally:
            self.state.lock.release()

    # -- control surface (/_emulator) -----------------------------------------------

    def control(self, method: str, segments: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        """The private test API: faults, request log, reset, retention floor, receipt purge."""
        route = "/".join(segments[1:])
        if route == "faults" and method == "GET":
            return 200, self.faults.to_wire()
        if route == "faults" and method == "POST":
            return 200, {"ids": self.faults.add(body)}
        if route == "faults" and method == "DELETE":
            self.faults.clear()
            return 200, {}
        if route == "requests" and method == "GET":
            since = int(query.get("since", "0"))
            pattern = re.compile(query["path"]) if "path" in query else None
            return 200, self.log.list(since, pattern)
        if route == "requests" and method == "DELETE":
            self.log.clear()
            return 200, {}
        if route == "reset" and method == "POST":
            with self.state.lock:
                self.state.reset()
            self.faults.clear()
            self.log.clear()
            return 200, {}
        if route == "receipts/purge" and method == "POST":
            return 200, self._purge_receipts(body or {})
        match = re.fullmatch(r"catalogs/([^/]+)/floor", route)
        if match and method == "POST":
            return 200, self._set_floor(match.group(1), body or {})
        raise not_found("no such emulator control route")

    def _purge_receipts(self, body: dict[str, Any]) -> dict[str, Any]:
        """Drop receipts as the server's retention purge would ({catalog, key?})."""
        with self.state.lock:
            catalog = self.state.catalog(str(body.get("catalog")))
            keys = [body["key"].lower()] if body.get("key") else list(catalog.receipts)
            purged = sum(1 for key in keys if catalog.receipts.pop(key, None) is not None)
        return {"purged": purged}

    def _set_floor(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Move the retention floor (earliest_snapshot_id) as expiry would."""
        with self.state.lock:
            catalog = self.state.catalog(name)
            floor = body.get("earliest_snapshot_id")
            if isinstance(floor, bool) or not isinstance(floor, int) or not catalog.earliest_snapshot_id <= floor <= catalog.head:
                raise validation("earliest_snapshot_id must be an int between the current floor and head")
            catalog.earliest_snapshot_id = floor
            return catalog.options_wire()

    def metrics(self) -> str:
        """A small Prometheus text exposition."""
        lines = ["# TYPE hoglake_emulator_requests_total counter"]
        with self.counter_lock:
            for name, value in sorted(self.counters.items()):
                lines.append(f'hoglake_emulator_requests_total{{outcome="{name}"}} {value}')
        lines.append("# TYPE hoglake_blind_partitioned_appends_total counter")
        lines.append(f"hoglake_blind_partitioned_appends_total {self.state.blind_partitioned_appends}")
        return "\n".join(lines) + "\n"


class HoglakeHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler; JSON in, JSON out."""

    protocol_version = "HTTP/1.1"
    server_version = "hoglake-emulator"
    emulator: Emulator  # set on the subclass built by make_server
    verbose = False

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet unless --verbose."""
        if self.verbose:
            sys.stderr.write("%s - %s\n" % (self.address_string(), format % args))

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch()

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch()

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch()

    # -- plumbing ----------------------------------------------------------------------

    def _read_body(self) -> bytes:
        """The request body (Content-Length or chunked)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _parse_json(self, raw: bytes) -> tuple[Any, bool]:
        """(value, present): 400 for a non-JSON content type or malformed JSON (section 1)."""
        if not raw:
            return None, False
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise bad_request(f"unsupported Content-Type '{ctype or 'none'}': expected application/json")
        try:
            return json.loads(raw, parse_constant=_refuse_constant), True
        except (UnicodeDecodeError, ValueError) as err:
            raise bad_request(f"malformed JSON: {err}") from None

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, text: str | None = None) -> None:
        """Write a complete response (JSON unless ``text``)."""
        payload = (text if text is not None else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4" if text is not None else "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if self.headers.get("X-Request-Id"):
            self.send_header("X-Request-Id", self.headers["X-Request-Id"])
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _drop(self) -> None:
        """Close the connection without answering."""
        self.close_connection = True

    def _dispatch(self) -> None:
        """Route one request: control surface, operational routes, or the logged /v1 API."""
        emu = self.emulator
        url = urlsplit(self.path)
        segments = [unquote(s) for s in url.path.strip("/").split("/")]
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        raw = self._read_body()
        if segments and segments[0] == "_emulator":
            self._serve_control(segments, query, raw)
            return
        if url.path in ("/livez", "/healthz"):
            self._send(200, {"status": "ok"})
            return
        if url.path == "/metrics":
            self._send(200, None, text=emu.metrics())
            return
        self._serve_logged(url.path, segments, query, raw)

    def _serve_control(self, segments: list[str], query: dict[str, str], raw: bytes) -> None:
        """Answer a /_emulator request (never logged, never faulted)."""
        try:
            body = json.loads(raw) if raw else None
            status, out = self.emulator.control(self.command, segments, query, body)
            self._send(status, out)
        except ApiError as err:
            self._send(err.status, err.body(), err.headers)
        except (ValueError, re.error) as err:
            self._send(400, {"error": "bad_request", "detail": str(err)})

    def _serve_logged(self, path: str, segments: list[str], query: dict[str, str], raw: bytes) -> None:
        """Log, apply any fault rule, serve, and record the outcome."""
        emu = self.emulator
        entry = emu.log.record(
            {"method": self.command, "path": path, "query": query, "headers": dict(self.headers.items()),
             "body": _loggable(raw)}  # fmt: skip
        )
        rule = emu.faults.take(self.command, path)
        if rule is not None:
            entry["fault"] = {"id": rule.rule_id, "action": rule.action}
            reaches_api = rule.action in ("delay", "drop_response_after_commit")
            if rule.delay_ms and not (rule.hold_lock and reaches_api):
                time.sleep(rule.delay_ms / 1000)
            if rule.action == "status":
                entry.update(status=rule.status, response=rule.response_body(), response_headers=rule.headers)
                emu.count("injected")
                self._send(rule.status, rule.response_body(), rule.headers)
                return
            if rule.action == "drop_request":
                entry.update(status=None, dropped="request")
                emu.count("dropped")
                self._drop()
                return
        status, out, headers = self._run_api(segments, query, raw, rule)
        entry.update(status=status, response=out, response_headers=headers)
        if rule is not None and rule.action == "drop_response_after_commit":
            entry["dropped"] = "response"
            emu.count("dropped")
            self._drop()
            return
        emu.count(str(status))
        self._send(status, out, headers)

    def _run_api(self, segments: list[str], query: dict[str, str], raw: bytes, rule: FaultRule | None) -> tuple[int, Any, dict[str, str]]:
        """(status, body, headers) of a /v1 request; ApiError becomes the error body."""
        try:
            body, has_body = self._parse_json(raw)
            status, out = self.emulator.serve_api(self.command, segments, query, body, has_body, rule)
            return status, out, {}
        except ApiError as err:
            return err.status, err.body(), dict(err.headers)
        except Exception as err:  # noqa: BLE001 - a bug in the emulator must still answer
            return 500, {"error": "internal_error", "detail": f"emulator bug: {type(err).__name__}: {err}"}, {}


def _refuse_constant(name: str) -> Any:
    """NaN / Infinity are not JSON (the server's parser refuses them)."""
    raise ValueError(f"{name} is not valid JSON")


def _loggable(raw: bytes) -> Any:
    """The request body for the log: parsed JSON when it is JSON, else text, else None."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def make_server(host: str, port: int, config: Config, verbose: bool = False) -> tuple[ThreadingHTTPServer, Emulator]:
    """Bind (port 0 = a free port) and return the server and its emulator."""
    emulator = Emulator(config)
    handler = type("BoundHoglakeHandler", (HoglakeHandler,), {"emulator": emulator, "verbose": verbose})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server, emulator


def _write_port_file(path: str, port: int) -> None:
    """Write the port atomically (readers never see a partial file)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as out:
        out.write(f"{port}\n")
    os.replace(tmp, path)


def _capability_list(text: str) -> tuple[str, ...]:
    """``a,b,c`` -> ("a", "b", "c"); blanks dropped, so "" advertises none."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = bind a free port")
    parser.add_argument("--port-file", help="write the bound port here")
    parser.add_argument("--receipt-retention-seconds", type=float, default=7 * 24 * 3600)
    parser.add_argument("--commit-lock-timeout-ms", type=int, default=30_000)
    parser.add_argument("--refuse-blind-partitioned-appends", action="store_true")
    parser.add_argument(
        "--capabilities",
        type=_capability_list,
        default=DEFAULT_CAPABILITIES,
        help="comma-separated catalog capabilities to advertise (default: %(default)s)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)
    config = Config(
        receipt_retention_seconds=args.receipt_retention_seconds,
        refuse_blind_partitioned_appends=args.refuse_blind_partitioned_appends,
        commit_lock_timeout_ms=args.commit_lock_timeout_ms,
        capabilities=args.capabilities,
    )
    server, _ = make_server(args.host, args.port, config, args.verbose)
    port = server.server_address[1]

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.port_file:
        _write_port_file(args.port_file, port)
    print(f"LISTENING {port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
