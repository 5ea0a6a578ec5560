"""Issue 19: hostile and broken inputs end in an answer or one line of ours, bounded in time and memory.

The seeded fuzzer (tests/fuzzing.py) runs a few hundred mutations of the real fixtures, dev cases
and examples through every reader in a child process (so its peak RSS is the readers' alone);
``make fuzz`` runs 10,000. A few hand-made hostile files then go through the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "vllm_advisor.cli"]


def test_fuzz_readers_in_the_default_suite(tmp_path, monkeypatch) -> None:
    """250 seeded inputs through every reader, in this process (~4 s): zero foreign exceptions, none
    over 10 s, none that grows the process's peak memory by 1 GiB (the subprocess run below, and
    `make fuzz`, measure the readers' own peak RSS)."""
    sys.path.insert(0, str(REPO / "tests"))
    import fuzzing

    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(tmp_path))
    report = fuzzing.run(250, seed=2026)
    summary = report.summary()
    assert not report.bugs, [f"#{o.index} {o.reader} {o.mutations}: {o.detail}" for o in report.bugs]
    assert summary["max_s"] < 10
    assert summary["outcomes"].get("input_error", 0) > 30 and summary["outcomes"].get("ok", 0) > 30


@pytest.mark.slow
def test_fuzz_readers_in_process(tmp_path) -> None:
    env = {**os.environ, "VLLM_ADVISOR_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "fuzzing.py"), "--count", "300", "--seed", "1919"],
                          capture_output=True, text=True, timeout=280, env=env)
    summary = json.loads(proc.stdout[: proc.stdout.index("\n}") + 2])
    assert summary["inputs"] == 300
    assert summary["outcomes"].get("bug", 0) == 0 and summary["outcomes"].get("slow", 0) == 0, proc.stdout[-3000:]
    assert summary["max_s"] < 10 and summary["peak_rss_mb"] < 1024
    assert summary["outcomes"].get("input_error", 0) > 30 and summary["outcomes"].get("ok", 0) > 30  # the mutations bite, and not always
    assert proc.returncode == 0


def _bomb() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\nquestion: *a8\n"


HOSTILE = {
    "bomb.yaml": _bomb(),
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "odd.log": "INFO 05-01 vLLM API server version 0.8.5\nAvg prompt throughput: 1e999999 tokens/s, Avg generation throughput: 99999999999999999999999999 tokens/s, Running: 1e400 reqs\n",
    "label.prom": '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="' + "x" * 10_000_000 + '"} 1\n',
    "escape.json": '{"date": "\x1b[31m", "completed": "\x1b]0;pwn\x07"}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_through_the_cli(name: str, tmp_path) -> None:
    path = tmp_path / name
    path.write_text(HOSTILE[name], encoding="utf-8")
    env = {**os.environ, "VLLM_ADVISOR_HOME": str(tmp_path)}
    for args in (["probe", "load", str(path)], ["ask", "why is it slow?", "--attach", str(path), "--json", "--no-log"]):
        start = time.monotonic()
        proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=env)
        assert time.monotonic() - start < 30
        assert proc.returncode in (0, 3), proc.stderr
        assert "Traceback" not in proc.stderr and "\x1b" not in proc.stderr and "\x07" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) <= 1, proc.stderr


def test_fifo_and_huge_sparse_file_are_refused(tmp_path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(2 * 1024**3)  # 2 GiB, sparse: costs nothing on disk
    proc = subprocess.run([*CLI, "ask", "why?", "--attach", str(fifo), "--attach", str(huge), "--json", "--no-log"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    notes = json.loads(proc.stdout)["notes"]
    assert any("pipe.json skipped: is a named pipe" in n for n in notes)
    assert any("huge.json skipped: file is 2048 MiB, over the" in n for n in notes)
    proc = subprocess.run([*CLI, "probe", "load", str(fifo)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3 and "named pipe" in proc.stderr


def test_workload_bounded_case(tmp_path) -> None:
    """A case asking for 10,000 and 1e9 clients answers at once with a note, not in minutes."""
    import yaml

    src = yaml.safe_load((REPO / "examples" / "seed-qwen32b-h800-long-input.yaml").read_text(encoding="utf-8"))
    src["workload"]["concurrency"] = 10_000
    src["observations"] = [dict(src["observations"][0], concurrency=10_000), dict(src["observations"][0], concurrency=5_000_000)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump(src, allow_unicode=True), encoding="utf-8")
    from vllm_advisor.diagnosis.inputs import gather

    start = time.monotonic()
    inputs = gather(profile=path, calibrate=True)
    assert time.monotonic() - start < 10
    bounded = [n for n in inputs.skipped if n.code == "workload_bounded"]
    assert any("c=10000" in n.detail for n in bounded) and any("c=5000000" in n.detail for n in bounded)
    src["workload"]["concurrency"] = 10**12
    path.write_text(yaml.safe_dump(src, allow_unicode=True), encoding="utf-8")
    inputs = gather(profile=path)
    assert any(n.field == "workload.concurrency" and "less than or equal" in n.detail for n in inputs.skipped)


def test_estimate_refuses_simulations_past_its_bounds() -> None:
    from click.testing import CliRunner

    from vllm_advisor.cli.main import cli

    case = str(REPO / "examples" / "seed-qwen32b-h800-long-input.yaml")
    for args, flag in ((["--concurrency", "100000"], "--concurrency 100,000"), (["--output-len", "2000000"], "--output-len 2,000,000"),
                       (["--concurrency", "1..4096"], "simulation budget")):
        start = time.monotonic()
        result = CliRunner().invoke(cli, ["estimate", "--profile", case, *args])
        assert result.exit_code == 2 and flag in result.stderr, result.output
        assert time.monotonic() - start < 5
