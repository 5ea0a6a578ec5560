"""A private tmux server for the chat benchmarks (shared by bench_tui_launch.py and bench_tui_first_token.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

TMUX = shutil.which("tmux")
#: A tmux server of this run's own (-L): other tmux users of the machine cannot end it under us.
TMUX_CMD = [TMUX or "tmux", "-L", f"bench-{os.getpid()}"]


def new_session(args: list[str]) -> None:
    """tmux new-session, retried: right after the previous session was killed, the private server
    may still be exiting ("server exited unexpectedly")."""
    for attempt in range(5):
        if subprocess.run(args, capture_output=True).returncode == 0:
            return
        time.sleep(0.2 * (attempt + 1))
    subprocess.run(args, check=True)
