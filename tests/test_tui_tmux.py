"""The chat in a real terminal: `vllm-advisor chat` under tmux, driven with send-keys and read
with capture-pane. The user attaches the bundled case, asks the motivating question (in Chinese,
as it was asked) and the answer, its numbered sources and the ranked findings appear on screen."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_advisor.logs import LogStore

REPO = Path(__file__).resolve().parents[1]
TMUX = shutil.which("tmux")
SEED = "examples/seed-qwen32b-h800-long-input.yaml"
MOTIVATING = (
    "Qwen32B + TP2 + H800，输入63K，输出1K：单独请求平均生成速率40 token/s，并发40时22 token/s，并发100时20 token/s。"
    "为啥40并发时并发没有打满，生成速率却变得这么慢？为什么100并发和40并发的速率差不多？"
)

pytestmark = [
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux): this test drives the chat in a real terminal"),
    pytest.mark.slow,
]


class Terminal:
    """One tmux session running a command; keys in, screen text out."""

    def __init__(self, name: str, command: str, env: dict[str, str], size=(120, 40)) -> None:
        self.name = name
        args = [TMUX, "new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), "-c", str(REPO)]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        subprocess.run(args + [command], check=True, env={**os.environ, **env})

    def keys(self, *keys: str, literal: bool = False) -> None:
        subprocess.run([TMUX, "send-keys", "-t", self.name, *(["-l"] if literal else []), *keys], check=True)

    def screen(self) -> str:
        out = subprocess.run([TMUX, "capture-pane", "-t", self.name, "-p"], capture_output=True, text=True)
        return out.stdout

    def wait_for(self, *texts: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"not on screen after {timeout:.0f} s: {texts}\n--- screen ---\n{screen}")

    def alive(self) -> bool:
        return subprocess.run([TMUX, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self) -> None:
        subprocess.run([TMUX, "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def terminal(tmp_path):
    home = tmp_path / "advisor-home"
    exe = Path(sys.executable).parent / "vllm-advisor"
    env = {"VLLM_ADVISOR_HOME": str(home), "HOME": str(tmp_path / "fake-home"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color"}
    # the shell stays after the app exits, so its exit status can be read from the screen
    command = f"{shlex.quote(str(exe))} chat; echo chat-exited-$?; sleep 30"
    term = Terminal(f"vllm-advisor-test-{os.getpid()}", command, env)
    term.home = home  # type: ignore[attr-defined]
    try:
        yield term
    finally:
        term.close()


def test_motivating_question_in_a_real_terminal(terminal):
    terminal.wait_for("Ask about your deployment", "^q Quit", timeout=30)
    terminal.keys(f"/attach {SEED}", literal=True)
    terminal.keys("Enter")
    screen = terminal.wait_for("as the deployment's case file", "KV 缓存容量: 327,120", timeout=120)
    assert "seed-qwen32b-h800-long-input" in screen  # the evidence panel

    terminal.keys(MOTIVATING, literal=True)
    terminal.keys("Enter")
    store = LogStore(terminal.home / "advisor.db")
    deadline = time.monotonic() + 120
    while not (answered := [r for r in store.list(10, command="chat") if r.inputs.get("event") == "question"]):
        assert time.monotonic() < deadline, "no answer within 120 s:\n" + terminal.screen()
        time.sleep(0.2)
    entry = answered[0]
    assert entry.question == MOTIVATING and "## 参考来源" in entry.output
    shown = sorted({int(n) for n in re.findall(r"^- \[(\d+)\]", entry.output, re.M)})  # the short answer lists the sources it cites
    screen = terminal.wait_for(f"• [{shown[-1]}] ", timeout=10)
    # the end of the answer is its last numbered source; beside it the ranked findings with confidence
    assert "1. " in screen and "测量方法本身有误导" in screen and re.search(r"█+░* \d{2}%", screen)  # ranked, with the confidence the ranker gives

    def scroll_up_to(text: str) -> str:
        for _ in range(80):
            screen = terminal.screen()
            if text in screen:
                return screen
            terminal.keys("PageUp")
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not found scrolling up:\n{terminal.screen()}")

    screen = scroll_up_to("参考来源")
    assert f"• [{shown[0]}] " in screen  # the list of sources it cites, in order
    scroll_up_to("结论")  # the start of the answer, on screen
    assert "带预填充块的一步约" in entry.output.split("\n\n")[1]  # what was asked, answered first

    terminal.keys("C-q")
    terminal.wait_for("chat-exited-0", timeout=15)


def test_first_answer_fits_a_screen_at_80_columns(tmp_path):
    """The first answer to the motivating question, in an 80-column terminal, is at most 40 lines
    from its heading to its last source; the full analysis is one command away (/details)."""
    home = tmp_path / "advisor-home"
    exe = Path(sys.executable).parent / "vllm-advisor"
    env = {"VLLM_ADVISOR_HOME": str(home), "HOME": str(tmp_path / "fake-home"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color"}
    # tall enough that the whole answer is on screen at once: its length is what is measured
    term = Terminal(f"vllm-advisor-80-{os.getpid()}", f"{shlex.quote(str(exe))} chat --profile {SEED}; sleep 30", env, size=(80, 120))
    try:
        term.wait_for("Ask about your deployment", timeout=30)
        term.keys(MOTIVATING, literal=True)
        term.keys("Enter")
        store = LogStore(home / "advisor.db")
        deadline = time.monotonic() + 120
        while not [r for r in store.list(10, command="chat") if r.inputs.get("event") == "question"]:
            assert time.monotonic() < deadline, "no answer within 120 s:\n" + term.screen()
            time.sleep(0.2)
        screen = term.wait_for("/details", "参考来源", timeout=20)
        lines = screen.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip(" ▌").startswith("结论"))
        end = max(i for i, line in enumerate(lines) if "https://" in line)
        assert all(len(line) <= 80 for line in lines)
        assert end - start + 1 <= 40, "\n".join(lines[start : end + 1])
        answer = "\n".join(lines[start : end + 1])
        assert "带预填充块的一步约" in answer and "同时只能跑约" in answer  # both questions answered first
        body, _, listed = answer.partition("参考来源")
        listed_ids = {int(n) for n in re.findall(r"• \[(\d+)\] ", listed)}
        cited_ids = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
        assert listed_ids and listed_ids == cited_ids, answer  # the short answer lists exactly the sources it cites
        uncited = min(set(range(1, max(listed_ids) + 2)) - listed_ids)
        term.keys("/details", literal=True)
        term.keys("Enter")
        term.wait_for(f"• [{uncited}] ", timeout=30)  # the full analysis, with every source
        term.keys("/copy", literal=True)
        term.keys("Enter")
        listing = term.wait_for("Ask about your deployment", timeout=20)
        deadline = time.monotonic() + 20
        pattern = re.compile(r"(\d+)\.? +vllm bench serve --model")
        while not pattern.search(listing) and time.monotonic() < deadline:
            time.sleep(0.2)
            listing = term.screen()
        found = pattern.search(listing)
        assert found, listing  # the commands of the latest answer, numbered
        term.keys(f"/copy {found.group(1)}", literal=True)
        term.keys("Enter")
        term.wait_for("copied: vllm bench serve", timeout=20)
    finally:
        term.close()
