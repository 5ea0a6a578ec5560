"""The run log: where it lives, what it keeps, and the secrets it never keeps."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vllm_advisor.errors import AdvisorError, InputFileError
from vllm_advisor.logs import REDACTED, LogStore, default_db_path, redact, redact_text
from vllm_advisor.schema import Citation, Evidence, Finding, Msg

SECRET_KEY = "sk-proj-Zq8xW2nT5vY7uR3pL9kM"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZHZpc29yIn0.c2lnbmF0dXJlLXBhcnQ"


@pytest.fixture
def store(tmp_path) -> LogStore:
    return LogStore(tmp_path / "data" / "advisor.db")


def test_default_location_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_ADVISOR_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home/.local/share/vllm-advisor/advisor.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg/vllm-advisor/advisor.db"
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(tmp_path / "va"))
    assert default_db_path() == tmp_path / "va/advisor.db"
    assert LogStore().path == tmp_path / "va/advisor.db"


def test_record_list_get_round_trip(store):
    finding = Finding(cause="kv_capacity", confidence=0.8, evidence=[Evidence(kind="model", origin="model", label=Msg(id="ev.kv_capacity"), value=327120.0, unit="tokens")])
    source = Citation(number=1, doc_id="card:kv", title="KV capacity", url="https://docs.vllm.ai/x")
    first = store.record("ask", question="why slow?", inputs={"profile": Path("case.yaml"), "attachments": ["a.json"]}, output="# Answer", findings=[finding], sources=[source], duration_ms=1234.6, llm_used=True)
    second = store.record("memo", question="memo q", inputs={"output": "out/memo.md"}, output="# Memo", findings=[], duration_ms=10)
    third = store.record("ask", question="again", error="bad.json: not a benchmark file")
    assert (first, second, third) == (1, 2, 3)

    newest = store.list(10)
    assert [e.id for e in newest] == [3, 2, 1]
    assert [e.id for e in store.list(2)] == [3, 2]
    assert [e.id for e in store.list(10, command="ask")] == [3, 1]
    assert store.list(10, command="chat") == []

    entry = store.get(1)
    assert entry.command == "ask" and entry.question == "why slow?"
    assert entry.inputs == {"profile": "case.yaml", "attachments": ["a.json"]}
    assert entry.output == "# Answer" and entry.llm_used is True and entry.duration_ms == 1235
    assert entry.findings[0]["cause"] == "kv_capacity" and entry.findings[0]["evidence"][0]["value"] == 327120.0
    assert entry.causes == ["kv_capacity"]
    assert entry.sources == [source.model_dump(mode="json")]
    assert store.get(3).error == "bad.json: not a benchmark file"
    assert store.get(99) is None
    assert entry.time.endswith("+00:00")


def test_secrets_are_redacted_everywhere(store):
    question = f"my key {SECRET_KEY} works with curl -H 'Authorization: Bearer {BEARER}' but it is slow"
    run_id = store.record(
        "ask",
        question=question,
        inputs={
            "serve_cmd": "vllm serve m --api-key hunter2secret --port 8000",
            "metrics": ["http://admin:s3cretpass@gpu-box:8000/metrics", "http://gpu-box:8000/metrics?token=abcdef123456"],
            "llm_key_env": "OPENAI_API_KEY",
            "api_key": "plain-value-never-stored",
            "headers": {"Authorization": f"Bearer {BEARER}"},
            "max_num_batched_tokens": 2048,
        },
        output=f"answer quoting {SECRET_KEY}",
        error=f"endpoint said: invalid token hf_{'a' * 34}",
    )
    entry = store.get(run_id)
    assert entry.question == f"my key {REDACTED} works with curl -H 'Authorization: Bearer {REDACTED}' but it is slow"
    assert entry.inputs["serve_cmd"] == f"vllm serve m --api-key {REDACTED} --port 8000"
    assert entry.inputs["metrics"] == [f"http://admin:{REDACTED}@gpu-box:8000/metrics", f"http://gpu-box:8000/metrics?token={REDACTED}"]
    assert entry.inputs["llm_key_env"] == "OPENAI_API_KEY"  # the variable's name, not its value
    assert entry.inputs["api_key"] == REDACTED
    assert entry.inputs["headers"] == {"Authorization": REDACTED}
    assert entry.inputs["max_num_batched_tokens"] == 2048
    assert entry.output == f"answer quoting {REDACTED}"
    assert entry.error == f"endpoint said: invalid token {REDACTED}"
    raw = store.path.read_bytes()
    for secret in (SECRET_KEY, BEARER, "hunter2secret", "s3cretpass", "abcdef123456", "plain-value-never-stored"):
        assert secret.encode() not in raw


def test_redaction_leaves_figures_alone():
    text = "KV per token: 131072 bytes; max_num_batched_tokens=2048; --token-env MY_TOKEN; 63K tokens; each token: quantized weights"
    assert redact_text(text) == text
    assert redact({"token_env": "HF_TOKEN", "password_env": "not a name!"}) == {"token_env": "HF_TOKEN", "password_env": REDACTED}


def test_reading_an_empty_log_creates_nothing(store):
    assert store.list() == [] and store.get(1) is None
    assert not store.path.exists()


def test_log_file_is_private(store):
    store.record("chat", question="hi")
    assert store.path.stat().st_mode & 0o777 == 0o600
    assert store.path.parent.stat().st_mode & 0o777 == 0o700


def test_not_a_database_is_a_one_line_error(tmp_path):
    bad = tmp_path / "advisor.db"
    bad.write_bytes(b"this is not sqlite " * 400)
    with pytest.raises(InputFileError) as err:
        LogStore(bad).record("ask", question="q")
    assert str(bad) in err.value.one_line() and "\n" not in err.value.one_line()
    with pytest.raises(InputFileError):
        LogStore(bad).list()


def test_unknown_command_is_refused(store):
    with pytest.raises(AdvisorError, match="unknown log command 'probe'"):
        store.record("probe")
    with pytest.raises(AdvisorError):
        store.list(command="probe")


def test_schema_is_what_the_chat_will_share(store):
    store.record("chat", question="hello")
    with sqlite3.connect(store.path) as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
    assert cols == ["id", "time", "command", "question", "inputs", "output", "findings", "sources", "duration_ms", "llm_used", "error"]


def test_a_log_from_before_bench_runs_is_migrated_with_its_rows(tmp_path):
    """Logs written before `probe bench` was logged check command IN ('ask','memo','chat')."""
    path = tmp_path / "advisor.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, command TEXT NOT NULL "
            "CHECK (command IN ('ask', 'memo', 'chat')), question TEXT, inputs TEXT NOT NULL DEFAULT '{}', output TEXT, "
            "findings TEXT NOT NULL DEFAULT '[]', sources TEXT NOT NULL DEFAULT '[]', duration_ms INTEGER, "
            "llm_used INTEGER NOT NULL DEFAULT 0, error TEXT);"
            "INSERT INTO runs (time, command, question) VALUES ('2026-12-01T00:00:00+00:00', 'ask', 'kept?');"
        )
    store = LogStore(path)
    new_id = store.record("bench", inputs={"base_url": "http://x", "api_key": "sk-abcdefghijklmnop"}, output="results: r.jsonl")
    runs = store.list()
    assert [(r.command, r.question) for r in runs] == [("bench", None), ("ask", "kept?")]
    assert new_id == 2 and store.get(2).inputs["api_key"] == REDACTED
