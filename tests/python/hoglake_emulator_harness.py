"""Start the hoglake emulator as a subprocess and drive its /_emulator control API.

    with EmulatorProcess() as emu:
        emu.url            # http://127.0.0.1:<port>  (pass to HoglakeClient)
        emu.add_fault({...})
        emu.requests()     # what the emulator received
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

#: The emulator script; HOGLAKE_EMULATOR overrides it (e.g. to run the checks against a modified copy).
EMULATOR = Path(
    os.environ.get("HOGLAKE_EMULATOR") or Path(__file__).resolve().parent.parent / "hoglake-emulator" / "hoglake_emulator.py"
)


class EmulatorError(RuntimeError):
    """The emulator did not start or stop as expected."""


class EmulatorProcess:
    """A running emulator bound to a free port on 127.0.0.1."""

    def __init__(self, *extra_args: str, startup_timeout: float = 15.0) -> None:
        self.extra_args = extra_args
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.exit_code: int | None = None
        self._http: httpx.Client | None = None

    @property
    def url(self) -> str:
        """The server root (pyhoglake appends /v1)."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> EmulatorProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Spawn with --port 0, wait for ``LISTENING <port>`` and cross-check --port-file."""
        port_file = os.path.join(tempfile.mkdtemp(prefix="hoglake-emu-"), "port")
        cmd = [sys.executable, str(EMULATOR), "--host", "127.0.0.1", "--port", "0", "--port-file", port_file, *self.extra_args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._read_line(self.startup_timeout)
        if not line.startswith("LISTENING "):
            raise EmulatorError(f"unexpected first line from the emulator: {line!r}")
        self.port = int(line.split()[1])
        if Path(port_file).read_text().strip() != str(self.port):
            raise EmulatorError("--port-file disagrees with the LISTENING line")
        self._http = httpx.Client(base_url=self.url, timeout=30)

    def _read_line(self, timeout: float) -> str:
        """One stdout line, or EmulatorError after ``timeout`` / on early exit."""
        assert self.proc is not None and self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.proc.kill()
            raise EmulatorError(f"emulator printed nothing within {timeout}s")
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise EmulatorError(f"emulator exited before listening: {err}")
        return line.strip()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit code (the emulator exits 0 on SIGTERM)."""
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.proc is None or self.exit_code is not None:
            return self.exit_code or 0
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            raise EmulatorError(f"emulator ignored SIGTERM for {timeout}s")
        self.exit_code = self.proc.returncode
        return self.exit_code

    # -- control API ----------------------------------------------------------------

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        assert self._http is not None, "emulator not started"
        resp = self._http.request(method, path, **kw)
        resp.raise_for_status()
        return resp.json()

    def add_fault(self, *rules: dict[str, Any]) -> list[int]:
        """Arm fault rules (see the emulator README for the rule format)."""
        return self._call("POST", "/_emulator/faults", json=list(rules))["ids"]

    def faults(self) -> list[dict[str, Any]]:
        """Armed rules with their firing counts."""
        return self._call("GET", "/_emulator/faults")

    def clear_faults(self) -> None:
        self._call("DELETE", "/_emulator/faults")

    def requests(self, since: int = 0, path: str | None = None) -> list[dict[str, Any]]:
        """The request log (entries with seq > since, optionally path-filtered)."""
        params: dict[str, Any] = {"since": since}
        if path is not None:
            params["path"] = path
        return self._call("GET", "/_emulator/requests", params=params)

    def last_seq(self) -> int:
        """The newest log sequence number (0 when empty)."""
        entries = self.requests()
        return entries[-1]["seq"] if entries else 0

    def reset(self) -> None:
        """Forget all catalogs, faults and logged requests."""
        self._call("POST", "/_emulator/reset")

    def set_floor(self, catalog: str, earliest_snapshot_id: int) -> dict[str, Any]:
        """Move a catalog's retention floor, as snapshot expiry would."""
        return self._call("POST", f"/_emulator/catalogs/{catalog}/floor", json={"earliest_snapshot_id": earliest_snapshot_id})

    def api(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """A raw /v1 call (no raise_for_status), for wire-level checks."""
        assert self._http is not None, "emulator not started"
        return self._http.request(method, "/v1" + path, **kw)
