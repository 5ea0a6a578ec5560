"""`vllm-advisor kb ...`: lazy imports, one-line errors with the right exit codes, fetch-issues.

The commands that need the full index are tested in test_kb_index.py (which builds it once).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from kb_support import small_docs
from vllm_advisor.cli.main import cli

HEAVY = ("torch", "chromadb", "sentence_transformers", "transformers", "bm25s", "langchain_text_splitters")


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_start_imports_no_heavy_module():
    code = "import sys, vllm_advisor.cli.main; print([m for m in %r if m in sys.modules])" % (HEAVY,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_kb_help_does_not_import_the_knowledge_stack():
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom vllm_advisor.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['kb', 'search', '--help'])\nassert r.exit_code == 0\n"
        "print([m for m in %r if m in sys.modules])" % (HEAVY,)
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_missing_docs_folder_exits_3_with_one_line(tmp_path: Path):
    result = run("kb", "ingest-docs", str(tmp_path / "nope"), "--kb-dir", str(tmp_path / "kb"))
    assert result.exit_code == 3
    assert result.output.strip().count("\n") == 0 and "nope: no such folder" in result.output


def test_binary_page_exits_3_naming_it(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "logo.md").write_bytes(b"\x00\x01\x02binary")
    result = run("kb", "ingest-docs", str(docs), "--kb-dir", str(tmp_path / "kb"))
    assert result.exit_code == 3 and "logo.md: is a binary file" in result.output


def test_bad_issue_file_exits_3_naming_the_line(tmp_path: Path):
    path = tmp_path / "issues.jsonl"
    path.write_text('{"number": 1, "title": "t"}\nnot json\n', encoding="utf-8")
    result = run("kb", "ingest-issues", str(path), "--kb-dir", str(tmp_path / "kb"))
    assert result.exit_code == 3
    assert "issues.jsonl" in result.output and "line 1" in result.output
    assert result.output.strip().count("\n") == 0


def test_status_of_an_empty_and_of_a_corrupt_index(tmp_path: Path):
    result = run("kb", "status", "--kb-dir", str(tmp_path / "kb"), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["health"] == "empty"
    broken = tmp_path / "broken"
    (broken / "chroma").mkdir(parents=True)
    (broken / "chroma" / "chroma.sqlite3").write_bytes(b"garbage" * 1000)
    result = run("kb", "status", "--kb-dir", str(broken), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["health"].startswith("corrupt")


def test_unreachable_chroma_server_exits_4(tmp_path: Path):
    result = run("kb", "status", "--chroma-url", "http://127.0.0.1:9", "--kb-dir", str(tmp_path))
    assert result.exit_code == 4
    assert "http://127.0.0.1:9" in result.output and result.output.strip().count("\n") == 0


class _FakeGitHub(BaseHTTPRequestHandler):
    """Two issues and one comment, as GitHub's REST API answers them."""

    issues = [
        {"number": 7, "title": "TTFT grows with the request rate", "body": "p99 TTFT 40 s at 8 req/s",
         "html_url": "https://github.com/acme/serve/issues/7", "state": "open", "labels": [{"name": "performance"}],
         "created_at": "2025-01-02T00:00:00Z", "updated_at": "2025-01-03T00:00:00Z", "closed_at": None,
         "user": {"login": "carol"}, "comments": 1},
        {"number": 8, "title": "Docs typo", "body": "fix", "html_url": "https://github.com/acme/serve/issues/8",
         "state": "closed", "labels": [], "created_at": "2025-01-04T00:00:00Z", "updated_at": "2025-01-05T00:00:00Z",
         "closed_at": "2025-01-05T00:00:00Z", "user": {"login": "dan"}, "comments": 0},
    ]
    comments = [{"user": {"login": "maint"}, "body": "Requests queue; add replicas.", "created_at": "2025-01-03T00:00:00Z"}]

    def do_GET(self):  # noqa: N802
        path = self.path.split("?")[0]
        body = {"/repos/acme/serve/issues": self.issues, "/repos/acme/serve/issues/7/comments": self.comments}.get(path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body if body is not None else {"message": "Not Found"}).encode())

    def log_message(self, *args):
        pass


@pytest.fixture()
def fake_github():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_fetch_issues_writes_the_jsonl_that_ingest_issues_reads(tmp_path: Path, fake_github: str, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    kb_dir = tmp_path / "kb"
    result = run("kb", "fetch-issues", "acme/serve", "--api-url", fake_github, "--no-ingest", "--kb-dir", str(kb_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    out = kb_dir / "issues" / "acme__serve.jsonl"
    assert data["fetch"]["issues_written"] == 2 and data["ingest"] is None and Path(data["fetch"]["out_path"]) == out
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [t["number"] for t in lines] == [7, 8]
    assert lines[0]["comments"][0]["body"] == "Requests queue; add replicas."

    result = run("kb", "ingest-issues", str(out), "--kb-dir", str(kb_dir), "--json")
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    assert (report["source"], report["documents"]) == ("issues", 2)
    result = run("kb", "search", "TTFT request rate queue", "--kind", "issue", "-k", "1", "--kb-dir", str(kb_dir), "--json")
    top = json.loads(result.stdout)["results"][0]
    assert (top["doc_id"], top["url"]) == ("issue:acme/serve#7", "https://github.com/acme/serve/issues/7")


def test_build_remembers_docs_folders(tmp_path: Path):
    folder = small_docs(tmp_path / "docs", pages=("features/sleep_mode.md",))
    kb_dir = tmp_path / "kb"
    result = run("kb", "build", "--docs", str(folder), "--docs-version", "0.34.0", "--kb-dir", str(kb_dir), "--json")
    assert result.exit_code == 0, result.output
    assert [r["source"] for r in json.loads(result.stdout)] == ["cards", "vllm-docs"]
    again = json.loads(run("kb", "build", "--kb-dir", str(kb_dir), "--json").stdout)
    assert [(r["source"], r["embedded"]) for r in again] == [("cards", 0), ("vllm-docs", 0)]  # remembered, nothing new


def test_a_command_imports_only_its_own_module():
    """Sub-commands are imported when they run: `ask` does not pay for `estimate`, `probe`, `kb`..."""
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom vllm_advisor.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['ask', '--help'])\nassert r.exit_code == 0 and 'Usage:' in r.output\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('vllm_advisor.cli.') and m.count('.') == 2))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['ask', 'main', 'output']", out
    listing = run("--help").output
    assert all(name in listing for name in ("ask", "chat", "estimate", "catalog", "kb", "logs", "memo", "probe", "validate"))
