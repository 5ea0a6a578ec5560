"""Shared test fixtures. Real inputs live in ../shared (never copied into the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

#: The slow tests' per-test limit (pyproject's 300 s is for the default run). The full-corpus index
#: build and the from-scratch refit of the ranker take 2-6 minutes on a 2-core machine, more beside
#: other work: 300 s stopped them on an AMD EPYC runner (session 9) although nothing hung.
SLOW_TIMEOUT_S = 1500


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: the tests read real inputs from ../shared")
    return SHARED


@pytest.fixture(scope="session")
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures"
