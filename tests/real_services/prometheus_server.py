"""Start and stop a real Prometheus server (Debian's ``prometheus`` package) for tests.

The server scrapes the given ``host:port`` targets every second (one job, or several via
``scrape_configs``), listens on a free loopback port, keeps its TSDB under the given directory and is
stopped by PID (SIGTERM, then SIGKILL). Every wait is bounded; the log is kept for failure messages.

When the ``prometheus`` binary is missing the test is skipped with the reason, unless
``VLLM_ADVISOR_REQUIRE_REAL=1``, in which case it fails: CI that installed it must not skip silently.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from .net import free_port

REQUIRE_REAL_ENV = "VLLM_ADVISOR_REQUIRE_REAL"


def prometheus_binary() -> str | None:
    """Path of the ``prometheus`` binary (``$PROMETHEUS_BIN`` or on PATH), or None."""
    explicit = os.environ.get("PROMETHEUS_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("prometheus")


def require_prometheus() -> str:
    """The binary, or skip (fail under ``VLLM_ADVISOR_REQUIRE_REAL=1``) saying how to get it."""
    binary = prometheus_binary()
    if binary is None:
        reason = "the prometheus binary is not installed (apt-get install -y prometheus, or set PROMETHEUS_BIN)"
        if os.environ.get(REQUIRE_REAL_ENV) == "1":
            pytest.fail(f"{reason}; {REQUIRE_REAL_ENV}=1 forbids skipping")
        pytest.skip(reason)
    return binary


def prometheus_version(binary: str) -> str:
    """First line of ``prometheus --version`` (e.g. 'prometheus, version 2.42.0+ds ...')."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    return (out.stdout or out.stderr).splitlines()[0].strip()



@dataclass
class PrometheusServer:
    """A real Prometheus scraping ``targets``; use as a context manager.

    ``targets``: ``host:port`` strings scraped as job ``job`` at ``metrics_path``. ``scrape_configs``:
    further raw scrape configs (dicts in Prometheus' YAML schema), e.g. a second job.
    """

    work_dir: Path
    targets: list[str] = field(default_factory=list)
    job: str = "vllm"
    metrics_path: str = "/metrics"
    scrape_interval_s: float = 1.0
    scrape_configs: list[dict[str, Any]] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    ready_timeout_s: float = 30.0
    binary: str | None = None
    process: subprocess.Popen | None = None
    startup_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "prometheus.log"

    @property
    def config_path(self) -> Path:
        return self.work_dir / "prometheus.yml"

    def config(self) -> dict[str, Any]:
        interval = f"{self.scrape_interval_s:g}s"
        configs = list(self.scrape_configs)
        if self.targets:
            configs.insert(
                0,
                {
                    "job_name": self.job,
                    "metrics_path": self.metrics_path,
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "static_configs": [{"targets": list(self.targets)}],
                },
            )
        return {"global": {"scrape_interval": interval, "evaluation_interval": interval}, "scrape_configs": configs}

    def start(self) -> PrometheusServer:
        binary = self.binary or require_prometheus()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False), encoding="utf-8")
        cmd = [
            binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.work_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        t0 = time.monotonic()
        log = open(self.log_path, "wb")
        try:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def _wait_ready(self, t0: float) -> None:
        deadline = t0 + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with code {self.process.returncode}: {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus not ready after {self.ready_timeout_s:g} s: {self.log_tail()}")

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the server's PID, SIGKILL it if it has not exited within ``timeout_s``."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout_s)
        except ProcessLookupError:
            pass

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def api(self, path: str, **params: Any) -> Any:
        """``data`` of a successful API answer (tests use it to check what Prometheus itself holds)."""
        r = httpx.get(f"{self.url}{path}", params=params, timeout=10.0)
        doc = r.json()
        if doc.get("status") != "success":
            raise RuntimeError(f"{path}: {doc}")
        return doc["data"]

    def wait_for_targets_up(self, job: str | None = None, count: int | None = None, timeout_s: float = 20.0) -> None:
        """Wait until ``count`` targets of ``job`` (default: this server's job and targets) report up."""
        job = job or self.job
        count = len(self.targets) if count is None else count
        deadline = time.monotonic() + timeout_s
        seen: Any = None
        while time.monotonic() < deadline:
            seen = self.api("/api/v1/query", query=f'up{{job="{job}"}} == 1')["result"]
            if len(seen) >= count:
                return
            time.sleep(0.25)
        raise RuntimeError(f"only {len(seen or [])} of {count} targets of job {job} up after {timeout_s:g} s: {self.log_tail()}")

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
