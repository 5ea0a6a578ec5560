"""Benchmark: from Enter to the first streamed token of an answer, in `vllm-advisor chat` under tmux.

The chat runs on the bundled motivating case (``--profile``); once the evidence has been read and
modelled (the side panel shows the KV cache size), a question is typed and Enter pressed, and the
screen is polled (every 10 ms) until the first text of the answer is drawn below the advisor's
label. Two writers:

* ``embedded``: the advisor's own writer (the diagnosis, the sources, then the whole answer at once);
* ``llm``: an OpenAI-compatible endpoint that streams its reply as soon as it is asked: a local
  stand-in server started here, so the figure is the advisor's own latency (diagnosis, sources,
  prompt, HTTP, rendering), not a model's.

Each question is asked N times in the same chat (the evidence stays read; the diagnosis runs each
time). Prints one JSON line per writer with median/min/max seconds.

Usage: .venv/bin/python benchmarks/bench_tui_first_token.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from tmux_private import TMUX, TMUX_CMD, new_session  # noqa: E402  (run as a script: its folder is on sys.path)
SEED = "examples/seed-qwen32b-h800-long-input.yaml"
QUESTIONS = [
    "Why is each request so much slower at 40 clients than alone?",
    "Why do 100 clients look like 40?",
    "What should I change first?",
    "Would an fp8 KV cache help at 40 clients?",
    "How many 64K requests fit at once?",
]
PROSE = "Only about 5 requests of 64,000 tokens fit in the KV cache [1]; the rest wait [2]."


class Terminal:
    def __init__(self, name: str, command: str, env: dict[str, str]) -> None:
        self.name = name
        args = [*TMUX_CMD, "new-session", "-d", "-s", name, "-x", "100", "-y", "50", "-c", str(REPO)]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        new_session(args + [command])

    def screen(self) -> str:
        return subprocess.run([*TMUX_CMD, "capture-pane", "-t", self.name, "-p"], capture_output=True, text=True).stdout

    def keys(self, *keys: str, literal: bool = False) -> None:
        subprocess.run([*TMUX_CMD, "send-keys", "-t", self.name, *(["-l"] if literal else []), *keys], check=True)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{text!r} not on screen after {timeout} s:\n{self.screen()}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([*TMUX_CMD, "kill-session", "-t", self.name], capture_output=True)


def last_message_line(screen: str) -> str:
    """The last line of the last message in the chat column (message lines carry its left border)."""
    found = ""
    for line in screen.splitlines():
        chat = line.split("▏")[0]  # the chat column, without the side panel
        if chat.startswith("▊"):  # the input box: the messages end above it
            break
        if chat.lstrip().startswith("▌") and chat.strip(" ▌"):
            found = chat.strip(" ▌")
    return found


def answers_logged(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM runs WHERE command = 'chat' AND inputs LIKE '%\"event\": \"question\"%'").fetchone()[0]
    except sqlite3.OperationalError:  # the log is being created (no table yet) or is locked by the chat
        return 0


def run_writer(writer: str, repeats: int, llm_url: str | None) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        exe = Path(sys.executable).parent / "vllm-advisor"
        command = f"{exe} chat --profile {SEED}"
        if llm_url:
            command += f" --llm-base-url {llm_url} --llm-model stand-in"
        term = Terminal(f"bench-tui-token-{os.getpid()}-{writer}", command, {"VLLM_ADVISOR_HOME": str(home), "LANG": "C.UTF-8", "TERM": "xterm-256color"})
        try:
            term.wait_for("KV cache", timeout=180)  # the evidence has been read and modelled
            term.wait_for("^q Quit", timeout=5)
            times = []
            for i in range(repeats):
                question = QUESTIONS[i % len(QUESTIONS)]
                term.keys(question, literal=True)
                time.sleep(0.2)
                start = time.perf_counter()
                term.keys("Enter")
                pending = False  # the advisor's label is drawn, its text not yet
                while True:
                    last = last_message_line(term.screen())
                    if last == "Advisor":
                        pending = True
                    elif pending:
                        break  # the first text of the answer is on screen
                    if time.perf_counter() - start > 120:
                        raise RuntimeError("no answer within 120 s:\n" + term.screen())
                    time.sleep(0.01)
                times.append(time.perf_counter() - start)
                deadline = time.monotonic() + 120
                while answers_logged(home / "advisor.db") < i + 1:  # the answer is complete
                    if time.monotonic() > deadline:
                        raise RuntimeError("the answer did not complete")
                    time.sleep(0.1)
            return times
        finally:
            term.close()


class StandIn(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that streams a fixed reply at once."""

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(0, len(PROSE), 8):
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stand-in",
                     "choices": [{"index": 0, "delta": {"content": PROSE[i:i + 8]}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(0.02)
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    if TMUX is None:
        print(json.dumps({"bench": "tui_first_token", "skipped": "tmux is not installed (apt-get install -y tmux)"}))
        return
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    for writer, llm_url in (("embedded", None), ("llm", url)):
        times = run_writer(writer, opts.repeats, llm_url)
        print(json.dumps({
            "bench": f"tui_first_token_{writer}",
            "what": "Enter to the first text of the answer on screen, motivating case, evidence already read",
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
            "repeats": opts.repeats,
        }), flush=True)
    httpd.shutdown()


if __name__ == "__main__":
    main()
