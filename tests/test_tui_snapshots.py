"""Snapshots (pytest-textual-snapshot) of the chat's main screens.

Update after an intended change of the layout with ``pytest tests/test_tui_snapshots.py --snapshot-update``
and look at the report (``snapshot_report.html``) before committing the new SVGs.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from vllm_advisor_tui.app import ChatApp

REPO = Path(__file__).resolve().parents[1]


class SteadyChatApp(ChatApp):
    """The chat with a steady (non-blinking) cursor: a blinking one makes screenshots differ by
    the time they are taken. Textual runs this handler and then ChatApp's own on_mount."""

    def on_mount(self) -> None:
        self.prompt.cursor_blink = False


@pytest.fixture(autouse=True)
def board_order(monkeypatch) -> None:
    """The screens are drawn with the detectors' own order and confidences, not the fitted ranker's:
    the ranker is refitted whenever a report joins the case library, which would redraw these
    screens without any change of layout. The learned order is tested in test_ranker.py and
    test_diagnosis_cases.py."""
    from vllm_advisor.diagnosis import ranker

    monkeypatch.setattr(ranker, "packaged_model", lambda: None)


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "advisor-home"
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "fake-home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.chdir(REPO)
    return folder


async def _idle(pilot, timeout: float = 120) -> None:
    app = pilot.app
    deadline = time.monotonic() + timeout
    await pilot.pause()
    while any(g in app._jobs for g in ("task", "evidence", "refresh")):
        assert time.monotonic() < deadline, "the app did not finish in time"
        await pilot.pause(0.05)
    await pilot.pause()


async def _type(pilot, text: str) -> None:
    pilot.app.prompt.value = text
    await pilot.press("enter")
    await _idle(pilot)


def test_first_screen_80x24(snap_compare):
    assert snap_compare(SteadyChatApp(warm_up=False), terminal_size=(80, 24))


def test_first_screen_with_panels_120x36(snap_compare):
    assert snap_compare(SteadyChatApp(warm_up=False), terminal_size=(120, 36))


def test_help_screen(snap_compare):
    assert snap_compare(SteadyChatApp(warm_up=False), press=["f1"], terminal_size=(100, 36))


def _kv_pressure_run(fixtures: Path):
    """A real vLLM 0.32 run (CPU, tiny model) under KV pressure: its benchmark result and server log.
    No GPU model is involved, so the screen depends on the diagnosis and the cards only."""
    run = Path("..") / "shared" / "fixtures" / "vllm-cpu-real"  # typed relative: the same screen in any checkout
    assert (REPO / run).resolve() == (fixtures / "vllm-cpu-real").resolve()

    async def run_before(pilot) -> None:
        await _type(pilot, f"/attach {run / 'results/kv-pressure/bench_in6000_out64_c8_n32_seed401.json'}")
        await _type(pilot, f"/attach {run / 'logs/server_E_eager_kv96blocks_maxseqs8.log'}")
        await _type(pilot, "Why is TTFT so high at 8 clients with 6000-token prompts?")

    return run_before


def test_answer_with_sources_and_panels(snap_compare, fixtures_dir):
    """The end of an answer (its numbered sources), the deployment facts, the evidence and the
    ranked findings with their confidence."""
    assert snap_compare(SteadyChatApp(warm_up=False), run_before=_kv_pressure_run(fixtures_dir), terminal_size=(120, 40))


def test_source_screen(snap_compare, fixtures_dir):
    ask = _kv_pressure_run(fixtures_dir)

    async def run_before(pilot) -> None:
        await ask(pilot)
        pilot.app.prompt.value = "/sources 1"
        await pilot.press("enter")
        deadline = time.monotonic() + 30
        while pilot.app.screen.id != "source":
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        await pilot.pause()

    assert snap_compare(SteadyChatApp(warm_up=False), run_before=run_before, terminal_size=(100, 30))
