"""Issue 19: secrets never reach the log, the memo, stdout or stderr; output files are never
truncated by a command that then fails; error lines are one line without terminal escapes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_advisor.logs import LogStore, redact_text

sys.path.insert(0, os.path.dirname(__file__))
from faultserver import FaultServer, interrupt_and_wait, popen_interruptible  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "vllm_advisor.cli"]
CASE = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"
SECRETS = {"Bearer abc.def": "abc.def", "hf_XXXX": "hf_XXXX", "http://user:pass@host:8000/v1": "pass@"}


@pytest.mark.parametrize("text,secret", SECRETS.items())
def test_redaction_forms(text, secret):
    assert secret not in redact_text(f"my setup: {text} thanks")


def test_prose_is_not_redacted():
    text = "use a bearer token; set hf_transfer and HF_HUB_ENABLE_HF_TRANSFER; per token: 131072"
    assert redact_text(text) == text


def _cli(*args, env=None, timeout=120):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_secrets_in_the_question_reach_no_output(tmp_path, monkeypatch):
    env = {**os.environ, "VLLM_ADVISOR_HOME": str(tmp_path / "home")}
    question = "why slow? curl -H 'Authorization: Bearer abc.def' with hf_XXXX via http://user:pass@host:8000/v1"
    ask = _cli("ask", question, "--profile", str(CASE), "--json", env=env)
    assert ask.returncode == 0, ask.stderr
    memo_path = tmp_path / "memo.md"
    memo = _cli("memo", "--profile", str(CASE), "--question", question, "-o", str(memo_path), env=env)
    assert memo.returncode == 0, memo.stderr
    failing = _cli("probe", "metrics", "http://user:pass@127.0.0.1:9/metrics", "--timeout", "1", "--retries", "0", env=env)
    assert failing.returncode == 4
    monkeypatch.setenv("VLLM_ADVISOR_HOME", env["VLLM_ADVISOR_HOME"])
    entries = LogStore().list(20)
    assert len(entries) >= 2
    logged = json.dumps([LogStore().get(e.id).__dict__ for e in entries], default=str)
    for where, text in {"stdout": ask.stdout + memo.stdout + failing.stdout, "stderr": ask.stderr + memo.stderr + failing.stderr,
                        "memo": memo_path.read_text(encoding="utf-8"), "log": logged}.items():
        for secret in ("abc.def", "hf_XXXX", "user:pass@"):
            assert secret not in text, (where, secret)
    assert "[redacted]" in memo_path.read_text(encoding="utf-8") + logged


def test_error_lines_carry_no_terminal_escapes():
    proc = _cli("probe", "serve-cmd", "vllm serve m --max-num-seqs \x1b[31mabc\x1b]0;owned\x07")
    assert proc.returncode == 2
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_usage_errors_are_one_line():
    for args in (["ask", "--bogus"], ["probe", "metrics"], ["nosuch"]):
        proc = _cli(*args)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "--help" in lines[0], proc.stderr


def test_watch_never_truncates_an_existing_file_and_ctrl_c_keeps_samples(tmp_path):
    existing = tmp_path / "run.jsonl"
    existing.write_text("precious\n")
    with FaultServer() as server:
        url = server.url("none") + "/metrics"
        proc = _cli("probe", "watch", url, "--duration", "5", "--interval", "0.2", "-o", str(existing))
        assert proc.returncode == 2 and "exists" in proc.stderr
        assert existing.read_text() == "precious\n"
        fresh = tmp_path / "fresh.jsonl"
        partial = tmp_path / ".fresh.jsonl.partial"
        child = popen_interruptible([*CLI, "probe", "watch", url, "--duration", "60", "--interval", "0.2", "-o", str(fresh), "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (partial.exists() and len(partial.read_text().splitlines()) >= 3):
            time.sleep(0.1)
        assert not fresh.exists()  # written to the partial file until the watch ends
        out, err = interrupt_and_wait(child)
    assert child.returncode in (0, 130), err
    lines = fresh.read_text().splitlines()
    assert len(lines) >= 3 and all(json.loads(line)["families"] for line in lines)
    assert not partial.exists()
    assert existing.read_text() == "precious\n"


def test_watch_progress_shows_no_password_or_token_of_its_url(tmp_path):
    """The progress line printed the URL as given, user:password and ?token= included (a reviewer's find)."""
    with FaultServer() as server:
        url = server.url("none").replace("http://", "http://alice:PASSWD12@") + "/metrics?token=QSECRET12"
        proc = subprocess.run([*CLI, "probe", "watch", url, "--duration", "1", "--interval", "0.5", "-o", str(tmp_path / "w.jsonl")],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    assert "watching" in proc.stdout + proc.stderr and "127.0.0.1" in proc.stdout + proc.stderr
    assert "PASSWD12" not in proc.stdout + proc.stderr and "QSECRET12" not in proc.stdout + proc.stderr


def test_a_key_in_the_serve_command_reaches_neither_memo_nor_stdout(tmp_path, monkeypatch):
    import yaml
    from click.testing import CliRunner

    from vllm_advisor.cli.main import cli

    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(tmp_path / "home"))
    data = yaml.safe_load(CASE.read_text(encoding="utf-8"))
    data["deployment"]["serve_command"] = "vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --api-key sk-live-0123456789abcdef --max-model-len 65536"
    case = tmp_path / "case.yaml"
    case.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    memo = tmp_path / "memo.md"
    runner = CliRunner()
    for args in (["memo", "--profile", str(case), "-o", str(memo)], ["ask", "--profile", str(case), "--json"], ["ask", "--profile", str(case)]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "sk-live-0123456789abcdef" not in result.output
    assert "sk-live-0123456789abcdef" not in memo.read_text(encoding="utf-8")
