"""`ask`, `memo` and `logs` from the command line (click's CliRunner), logging into a temporary home."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllm_advisor.cli.main import cli
from vllm_advisor.logs import LogStore

LLAMA70B_QPS4 = "real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
SECRET = "sk-live-9fQ2mX7rT4wZ1pK8vN3b"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """Every run logs here, never into the real home."""
    folder = tmp_path / "advisor-home"
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "fake-home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return folder


@pytest.fixture
def llama_case(tmp_path, fixtures_dir) -> Path:
    """A real benchmark (Llama-3.3-70B, TP8 on A100-40GB, 4 req/s) as a case file."""
    case = tmp_path / "llama.yaml"
    case.write_text(
        "question: TTFT and TPOT at 4 req/s on ShareGPT, are these what this hardware should give?\n"
        "deployment:\n  engine: vllm\n  vllm_version: '0.8.3'\n  model: meta-llama/Llama-3.3-70B-Instruct\n"
        "  gpu: A100-40GB\n  num_gpus: 8\n  serve_command: vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 8\n"
        f"attachments:\n  - {fixtures_dir / LLAMA70B_QPS4}\n"
    )
    return case


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ask_json_is_logged_and_shown(home, llama_case):
    result = run("ask", "--profile", str(llama_case), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= {"findings", "answer", "sources", "missing", "notes"}
    assert data["findings"] and data["answer"].strip()
    assert [s["number"] for s in data["sources"]] == list(range(1, len(data["sources"]) + 1))
    assert data["llm_used"] is False and data["log_id"] == 1

    listed = json.loads(run("logs", "--json").stdout)
    assert len(listed) == 1 and listed[0]["command"] == "ask"
    assert listed[0]["question"].startswith("TTFT and TPOT at 4 req/s")
    assert listed[0]["causes"] == [f["cause"] for f in data["findings"]]
    assert listed[0]["inputs"]["profile"] == str(llama_case)

    shown = json.loads(run("logs", "show", "1", "--json").stdout)
    assert shown["output"] == data["answer"]
    assert shown["sources"] == data["sources"]
    assert shown["duration_ms"] > 0

    text = run("logs", "show", "1")
    assert text.exit_code == 0 and "Run 1: ask" in text.stdout


def test_ask_prints_markdown(home, llama_case):
    result = run("ask", "--profile", str(llama_case), "--no-log")
    assert result.exit_code == 0, result.output
    assert "Tensor-parallel" in result.stdout or "tp_comm" in result.stdout or "TTFT" in result.stdout
    assert not (home / "advisor.db").exists()  # --no-log


def test_piped_ask_prints_the_markdown_itself(home, llama_case):
    """Not a terminal (CliRunner, a pipe, a file): the Markdown as written, nothing cut at 80 columns."""
    result = run("ask", "--profile", str(llama_case), "--no-log")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("## ")
    sources = [line for line in lines if line.startswith("- [")]
    assert sources and all(line.rstrip().endswith(">") and "<http" in line for line in sources)  # one URL per source, whole
    assert any(len(line) > 80 for line in lines)


def test_ask_redacts_a_secret_in_the_question_and_never_logs_the_key(home, shared_dir, monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", "value-of-the-key-never-logged-42")
    case = shared_dir / "cases/dev/vllm-1026-long-prompt-blocks-decode.yaml"
    question = f"my key {SECRET} and header Authorization: Bearer abcdefghijklmnop1234: why do long prompts stall decodes?"
    result = run(
        "ask", question, "--profile", str(case), "--json",
        "--llm-base-url", f"http://127.0.0.1:{closed_port()}", "--llm-model", "qwen", "--llm-key-env", "MY_LLM_KEY",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["llm_used"] is False  # endpoint refused: the embedded answer, and a note says why
    assert data["notes"]
    assert SECRET not in result.stdout  # scrubbed before the diagnosis and the answer saw the question
    entry = LogStore().get(data["log_id"])
    assert SECRET not in entry.question and "[redacted]" in entry.question
    assert "abcdefghijklmnop1234" not in entry.question
    assert entry.inputs["llm_key_env"] == "MY_LLM_KEY"
    raw = (home / "advisor.db").read_bytes()
    assert SECRET.encode() not in raw and b"value-of-the-key-never-logged-42" not in raw and b"abcdefghijklmnop1234" not in raw


def test_ask_needs_a_question(home, tmp_path):
    result = run("ask")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "QUESTION" in result.stderr
    case = tmp_path / "no-question.yaml"
    case.write_text("deployment:\n  model: Qwen/Qwen2.5-7B-Instruct\n")
    result = run("ask", "--profile", str(case))
    assert result.exit_code == 2 and "has no question" in result.stderr
    assert LogStore().get(1).error.endswith("has no question; give one as the QUESTION argument")


def test_ask_bad_attachment_is_skipped_with_a_note_and_logged(home, tmp_path):
    """Issue 15: one unreadable attachment is set aside with a note; the answer comes from the rest."""
    bad = tmp_path / "blob.bin"
    bad.write_bytes(bytes(range(256)) * 8)
    result = run("ask", "why?", "--attach", str(bad), "--json")
    assert result.exit_code == 0
    notes = json.loads(result.stdout)["notes"]
    assert any(n.startswith(f"{bad} skipped: is a binary file") for n in notes)
    entry = LogStore().get(LogStore().list(1)[0].id)
    assert entry.command == "ask" and f"{bad} skipped" in entry.output


def test_llm_model_without_base_url_is_a_usage_error(home):
    result = run("ask", "q", "--llm-model", "x")
    assert result.exit_code == 2 and "--llm-base-url" in result.stderr


def test_memo_writes_files_prints_path_and_logs(home, llama_case, tmp_path):
    out = tmp_path / "reports" / "memo.md"
    result = run("memo", "--profile", str(llama_case), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"memo written to {out} (3 plots in {out.parent / 'memo_plots'}/)"
    md = out.read_text(encoding="utf-8")
    assert md.startswith("# Tuning memo: Llama-3.3-70B-Instruct, 8 x A100-SXM4-40GB, TP 8")
    assert "--request-rate 4 --num-prompts 200" in md
    entry = LogStore().list(1, command="memo")[0]
    assert entry.output == md and entry.inputs["output"] == str(out)

    again = run("memo", "--profile", str(llama_case), "-o", str(out), "--json", "--no-log")
    data = json.loads(again.stdout)
    assert data["memo"] == str(out) and len(data["plots"]) == 3
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in data["plots"])
    assert data["findings"] and data["log_id"] is None
    assert len(LogStore().list(10)) == 1


def test_memo_needs_a_profile(home):
    result = run("memo")
    assert result.exit_code == 2 and "--profile" in result.stderr


def test_logs_empty_and_missing_run(home):
    result = run("logs")
    assert result.exit_code == 0 and "no runs logged yet" in result.stdout
    assert json.loads(run("logs", "list", "--json").stdout) == []
    missing = run("logs", "show", "7")
    assert missing.exit_code == 1 and "no run 7 in the log" in missing.stderr
    assert not (home / "advisor.db").exists()


def test_logs_list_filters_and_limits(home):
    store = LogStore()
    for i in range(5):
        store.record("ask" if i % 2 else "memo", question=f"q{i}")
    rows = json.loads(run("logs", "list", "--limit", "2", "--json").stdout)
    assert [r["question"] for r in rows] == ["q4", "q3"]
    rows = json.loads(run("logs", "--command", "ask", "--json").stdout)
    assert [r["question"] for r in rows] == ["q3", "q1"]
    table = run("logs", "list", "--limit", "3")
    assert table.exit_code == 0 and "q4" in table.stdout and "q1" not in table.stdout
