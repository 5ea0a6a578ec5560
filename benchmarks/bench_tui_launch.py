"""Benchmark: `vllm-advisor chat` from launch to the first usable screen, in a real terminal (tmux).

Starts the chat N times in a fresh tmux session and polls the screen (capture-pane, every 10 ms)
until the prompt and the footer are drawn: from then on keys reach the input. Prints one JSON line
with the median, min and max seconds. The target is under 1.5 s: the diagnosis, the performance
model and the knowledge base are imported later, in a worker.

Usage: .venv/bin/python benchmarks/bench_tui_launch.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from tmux_private import TMUX, TMUX_CMD, new_session  # noqa: E402  (run as a script: its folder is on sys.path)
READY = ("Ask about your deployment", "^q Quit")
TARGET_S = 1.5


def screen(name: str) -> str:
    return subprocess.run([*TMUX_CMD, "capture-pane", "-t", name, "-p"], capture_output=True, text=True).stdout


def launch_once(home: Path, index: int, timeout: float = 30) -> float:
    name = f"bench-tui-launch-{os.getpid()}-{index}"
    exe = Path(sys.executable).parent / "vllm-advisor"
    env = {"VLLM_ADVISOR_HOME": str(home), "LANG": "C.UTF-8", "TERM": "xterm-256color"}
    args = [*TMUX_CMD, "new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", str(REPO)]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    start = time.perf_counter()
    new_session(args + [f"{exe} chat --no-log"])
    try:
        while time.perf_counter() - start < timeout:
            if all(text in screen(name) for text in READY):
                return time.perf_counter() - start
            time.sleep(0.01)
        raise RuntimeError(f"the chat did not show its prompt within {timeout} s:\n{screen(name)}")
    finally:
        subprocess.run([*TMUX_CMD, "kill-session", "-t", name], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()
    if TMUX is None:
        print(json.dumps({"bench": "tui_launch", "skipped": "tmux is not installed (apt-get install -y tmux)"}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        times = [launch_once(Path(tmp), i) for i in range(opts.repeats)]
    print(json.dumps({
        "bench": "tui_launch",
        "what": "launch of `vllm-advisor chat` to the prompt drawn, 120x40 tmux terminal",
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "repeats": opts.repeats,
        "target_s": TARGET_S,
        "met": statistics.median(times) < TARGET_S,
    }))


if __name__ == "__main__":
    main()
