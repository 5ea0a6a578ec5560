"""A real Chroma server for tests: ``chroma run`` from the venv on a free port, in a temp folder.

Why a real server and not a fake: the knowledge base talks to a team's server through chromadb's
HTTP client, whose behaviour (request shapes, errors, what happens when the server goes away) is
exactly what the tests must exercise. The server is the one ``pip install chromadb`` ships.

Every wait is bounded: the start waits for the heartbeat at most ``startup_timeout_s`` (the log's
tail is in the error when it fails), the stop sends SIGTERM to the server's PID and SIGKILL after
``stop_timeout_s``. Ports are picked free at run time; a port taken between the pick and the
server's bind is retried on another one.

Without the ``chroma`` CLI the tests that need it are skipped with the reason, or fail when
``VLLM_ADVISOR_REQUIRE_REAL=1`` (a machine where they must run).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from .net import free_port

HEARTBEAT_PATHS = ("/api/v2/heartbeat", "/api/v1/heartbeat")  # chromadb >= 0.6 serves v2; older ones v1
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
BIND_RETRIES = 3


def require_real() -> bool:
    """True where the real-service tests must run (a missing service is then a failure, not a skip)."""
    return os.environ.get("VLLM_ADVISOR_REQUIRE_REAL") == "1"


def find_chroma_cli() -> Path | None:
    """The ``chroma`` CLI of this interpreter's venv, else one on PATH."""
    beside = Path(sys.executable).with_name("chroma")
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("chroma")
    return Path(found) if found else None


def chroma_cli_or_skip() -> Path:
    """The CLI, or skip the test (fail under VLLM_ADVISOR_REQUIRE_REAL=1) saying what is missing."""
    cli = find_chroma_cli()
    if cli is None:
        reason = f"the chroma CLI is not installed (not beside {sys.executable}, not on PATH): pip install chromadb"
        if require_real():
            pytest.fail(reason + " [VLLM_ADVISOR_REQUIRE_REAL=1]")
        pytest.skip(reason)
    return cli



class ChromaServerError(RuntimeError):
    """The server did not come up (or would not stop); the message ends with its log's tail."""


class ChromaServer:
    """One ``chroma run`` process. ``start()`` and ``stop()`` may alternate: a restart keeps the
    data folder and the port, so a client that saw the server go away can find it back."""

    def __init__(
        self,
        workdir: Path,
        *,
        cli: Path | None = None,
        port: int | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "chroma.log"
        self.cli = cli or chroma_cli_or_skip()
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.heartbeat_path: str | None = None
        self._proc: subprocess.Popen | None = None

    # -- where ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise ChromaServerError("the server has not been started, so it has no port yet")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        kept = [ANSI.sub("", line).rstrip() for line in text.splitlines()]
        kept = [line for line in kept if line.strip()]
        return "\n".join(kept[-lines:]) if kept else "(empty log)"

    # -- start and stop ---------------------------------------------------------------------------

    def start(self) -> "ChromaServer":
        if self.running():
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fixed_port = self.port is not None
        for attempt in range(1, BIND_RETRIES + 1):
            if not fixed_port:
                self.port = free_port()
            self._spawn()
            if self._wait_for_heartbeat():
                return self
            exit_code = self._proc.poll() if self._proc is not None else None
            port_taken = "address already in use" in self.log_tail(200).lower()
            self.stop()
            if not port_taken or fixed_port or attempt == BIND_RETRIES:
                break
        what = (
            f"exited with code {exit_code}" if exit_code is not None
            else f"did not answer {HEARTBEAT_PATHS[0]} within {self.startup_timeout_s:g} s"
        )
        raise ChromaServerError(f"chroma run on port {self.port} {what}; log {self.log_path}:\n{self.log_tail()}")

    def _spawn(self) -> None:
        log = open(self.log_path, "a", encoding="utf-8")
        log.write(f"\n--- {time.strftime('%H:%M:%S')} chroma run --port {self.port}\n")
        log.flush()
        try:
            self._proc = subprocess.Popen(
                [str(self.cli), "run", "--path", str(self.data_dir), "--host", "127.0.0.1", "--port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=os.environ | {"ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"},
                start_new_session=True,  # a Ctrl-C in the test run does not reach it twice; we stop it by PID
            )
        finally:
            log.close()

    def _wait_for_heartbeat(self) -> bool:
        """True once a heartbeat path answers 200; False when the process died or time ran out."""
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=httpx.Timeout(2.0)) as client:
            while time.monotonic() < deadline:
                if self._proc is None or self._proc.poll() is not None:
                    return False
                for path in HEARTBEAT_PATHS:
                    try:
                        response = client.get(self.url + path)
                    except httpx.HTTPError:
                        break  # not listening yet
                    if response.status_code == 200 and "heartbeat" in response.text:
                        self.heartbeat_path = path
                        return True
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        """SIGTERM to the server's PID, SIGKILL after ``stop_timeout_s``; waits until it has exited."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=self.stop_timeout_s)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired as exc:
                raise ChromaServerError(f"chroma run (PID {proc.pid}) survived SIGKILL for {self.stop_timeout_s:g} s") from exc

    def __enter__(self) -> "ChromaServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
