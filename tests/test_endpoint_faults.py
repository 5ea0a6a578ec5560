"""Issue 19: every command that talks to a server gives up on a broken one within its deadline + 2 s,
with exit 4 and one line (``ask`` with an LLM endpoint: the embedded answer and a one-line note),
and stays under 500 MB, whatever the server does (tests/faultserver.py: 16 kinds of fault).

Times are compared with the same command against the same server answering correctly (the
command's own work: start-up, prompts, the diagnosis), so the figure checked is what the fault
adds; peak memory is the child's own (its VmHWM, polled).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from faultserver import FAULTS, FaultServer, interrupt_and_wait, popen_interruptible  # noqa: E402

CLI = [sys.executable, "-m", "vllm_advisor.cli"]
DEADLINE_S = 2.0
MEMORY_MB = 500

COMMANDS = {
    "metrics": lambda url, tmp: ["probe", "metrics", url + "/metrics", "--timeout", str(DEADLINE_S), "--retries", "0", "--json"],
    "bench": lambda url, tmp: ["probe", "bench", url, "--input-len", "32", "--output-len", "4", "--concurrency", "2", "--num-prompts", "2",
                               "--timeout", str(DEADLINE_S), "--no-metrics", "--json", "--no-log", "-o", str(tmp / f"b{time.monotonic_ns()}.jsonl")],
    "watch": lambda url, tmp: ["probe", "watch", url + "/metrics", "--duration", "1", "--interval", "0.5", "--timeout", str(DEADLINE_S),
                               "--retries", "0", "--json", "-o", str(tmp / f"w{time.monotonic_ns()}.jsonl")],
    "llm": lambda url, tmp: ["ask", "why is TTFT high?", "--llm-base-url", url + "/v1", "--llm-timeout", str(DEADLINE_S), "--json", "--no-log"],
}
#: which faults each command meets (the endpoints it calls), and the exit code expected
EXPECTED = {
    "metrics": {"huge_body": 4, "slow_drip": 4, "pings": 4, "stall": 4, "http500": 4, "html": 4, "bad_json": 4, "reset": 4,
                "redirect_loop": 4, "huge_label": 0, "header_drip": 4},
    "bench": {"endless_models": 4, "huge_body": 4, "slow_drip": 4, "pings": 4, "stall": 4, "endless_stream": 4, "bad_tokenize": 0,
              "bad_usage": 0, "http500": 4, "reset": 4, "wrong_shape": 4, "redirect_loop": 4, "html": 4, "header_drip": 4},
    "watch": {"stall": 4, "pings": 4, "huge_body": 4, "reset": 4, "header_drip": 4},
    "llm": {"endless_models": 0, "slow_drip": 0, "pings": 0, "stall": 0, "endless_stream": 0, "bad_usage": 0, "bad_json": 0, "wrong_shape": 0,
            "huge_body": 0, "header_drip": 0},
}
CASES = [(command, fault) for command, faults in EXPECTED.items() for fault in faults]


def run_measured(args: list[str], env: dict, limit: float = 60) -> tuple[int, float, float, str, str]:
    """Exit code, seconds, the child's peak RSS in MB, stdout, stderr."""
    start = time.monotonic()
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, s=s: out.__setitem__(k, s.read())) for k, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    killer = threading.Timer(limit, proc.kill)
    killer.start()
    # The child's own high-water mark (VmHWM), polled until it exits: ru_maxrss from wait4 carries
    # the pytest parent's peak over fork and exec, so it reports the parent, not the command.
    peak = [0.0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                with open(f"/proc/{proc.pid}/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            peak[0] = max(peak[0], int(line.split()[1]) / 1024)
            except (OSError, ValueError):
                pass
            done.wait(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc.wait()
    done.set()
    watcher.join()
    killer.cancel()
    for r in readers:
        r.join()
    return proc.returncode, time.monotonic() - start, peak[0], out["out"].decode("utf-8", "replace"), out["err"].decode("utf-8", "replace")


@pytest.fixture(scope="module")
def server():
    with FaultServer() as s:
        yield s


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return {**os.environ, "VLLM_ADVISOR_HOME": str(home), "OPENAI_API_KEY": "sk-test-not-a-real-key-123456"}


@pytest.fixture(scope="module")
def baseline(server, env, tmp_path_factory):
    """Seconds each command takes against a server that answers correctly."""
    tmp = tmp_path_factory.mktemp("baseline")
    out = {}
    for command, build in COMMANDS.items():
        code, seconds, _, _, err = run_measured(build(server.url("none"), tmp), env)
        assert code == 0, (command, err)
        out[command] = seconds
    return out


def test_all_sixteen_faults_are_exercised() -> None:
    assert len(FAULTS) == 16 and {f for faults in EXPECTED.values() for f in faults} == set(FAULTS)


@pytest.mark.slow
@pytest.mark.parametrize("command,fault", CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_command_gives_up_in_time(command, fault, server, env, baseline, tmp_path) -> None:
    code, seconds, peak_mb, stdout, stderr = run_measured(COMMANDS[command](server.url(fault), tmp_path), env)
    assert code == EXPECTED[command][fault], stderr
    assert seconds <= baseline[command] + DEADLINE_S + 2, f"{seconds:.1f} s (baseline {baseline[command]:.1f} s)"
    assert peak_mb < MEMORY_MB
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) <= 1, stderr
    assert "sk-test-not-a-real-key" not in stderr + stdout
    if code == 4:
        assert lines and lines[0].startswith("error: ") and server.root in lines[0]
    if (command, fault) == ("metrics", "huge_body"):  # the reader's own line, not the transport's backstop
        assert "not a /metrics page" in stderr, stderr
    if command == "watch":  # nothing sampled: no output file, no partial file left behind
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(("w", ".w"))]
    if command == "llm":
        notes = json.loads(stdout)["notes"]
        assert server.url(fault) in notes[0] and "embedded answer" in notes[0]


@pytest.mark.parametrize("command", ["bench", "llm"])
def test_ctrl_c_is_honoured_while_a_server_stalls(command, server, env, tmp_path) -> None:
    """The first Ctrl-C ends the command at once, even with a long deadline left (issue 19: it was
    ignored while /v1/models hung)."""
    args = COMMANDS[command](server.url("stall"), tmp_path)
    args = [a if a != str(DEADLINE_S) else "60" for a in args]
    child = popen_interruptible([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, "PYTHONFAULTHANDLER": "1"})
    time.sleep(4)  # started and waiting on the stalled server
    assert child.poll() is None
    sent = time.monotonic()
    out, err = interrupt_and_wait(child)
    assert time.monotonic() - sent < 3, err
    assert child.returncode == 130 and "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
