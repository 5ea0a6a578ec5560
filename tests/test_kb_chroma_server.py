"""The team knowledge base on a real Chroma server (issue 7): ``--chroma-url`` against ``chroma run``.

The same small index (the packaged cards + four real vLLM 0.34.0 docs pages from ../shared) is built
twice: embedded through the library, and into a real Chroma server through ``vllm-advisor kb build
--chroma-url`` (what a team runs). Both must hold the same chunks and vectors and answer the same
queries with the same chunks in the same order. A server that is unreachable, stops mid-session or
accepts connections and never answers must give one line (IndexUnavailableError; exit code 4 on the
command line), never a traceback or a hang; a server that comes back is used again.

The server: tests/real_services/chroma_server.py (skipped without the chroma CLI unless
VLLM_ADVISOR_REQUIRE_REAL=1).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kb_support import shared_embedder, small_docs
from real_services.chroma_server import ChromaServer, chroma_cli_or_skip, free_port
from vllm_advisor.cli.main import cli
from vllm_advisor_knowledge import knowledge_base as kb_module
from vllm_advisor_knowledge.errors import IndexUnavailableError
from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

pytestmark = pytest.mark.slow

PAGES = (
    "configuration/optimization.md",
    "features/automatic_prefix_caching.md",
    "serving/parallelism_scaling.md",
    "configuration/conserving_memory.md",
)
DOCS_VERSION = "0.34.0"
CARD_CHUNKS = 183  # the 34 packaged cards
DOC_CHUNKS = 94  # the four pages above, heading by heading
#: Real questions and a document each must find among its first three results (in both stores).
QUERIES = {
    "chunked prefill max_num_batched_tokens": "doc:configuration/optimization.md",
    "KV cache preemption": "card:preemption-recompute-v1",
    "prefix caching": "doc:features/automatic_prefix_caching.md",
    "tensor parallel all-reduce": "card:tp-comm-pcie-allreduce",
    "显存不够 抢占": "card:preemption-recompute-v1",
}
K = 8
VLLM_ADVISOR = Path(sys.executable).with_name("vllm-advisor")


def run_cli(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_line(text: str) -> bool:
    return len([line for line in text.strip().splitlines() if line.strip()]) == 1


def ranking(results) -> list[tuple[str, int | None, int | None, float]]:
    return [(r.chunk_id, r.dense_rank, r.bm25_rank, r.score) for r in results]


# -- fixtures: one server, the index built twice ---------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("kb-chroma-server")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def docs_dir(workdir: Path) -> Path:
    return small_docs(workdir / "docs", PAGES)


@pytest.fixture(scope="module")
def server(workdir: Path):
    with ChromaServer(workdir / "chroma-server") as srv:
        yield srv


@pytest.fixture(scope="module")
def embedded(workdir: Path, docs_dir: Path) -> KnowledgeBase:
    kb = KnowledgeBase(workdir / "embedded-kb", embedder=shared_embedder())
    kb.build()
    kb.ingest_markdown_folder(docs_dir, version=DOCS_VERSION)
    return kb


@pytest.fixture(scope="module")
def cli_build(server: ChromaServer, workdir: Path, docs_dir: Path) -> list[dict]:
    """`vllm-advisor kb build --docs ... --chroma-url URL`: the team's command, its JSON reports."""
    result = run_cli(
        "kb", "build", "--docs", str(docs_dir), "--docs-version", DOCS_VERSION,
        "--chroma-url", server.url, "--kb-dir", str(workdir / "server-kb"), "--json",
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def on_server(cli_build, server: ChromaServer, workdir: Path) -> KnowledgeBase:
    """The server's index through the library, with the embedded index's query model."""
    return KnowledgeBase(workdir / "server-kb", chroma_url=server.url, embedder=shared_embedder())


# -- building ------------------------------------------------------------------------------------


def test_cli_build_fills_the_server(cli_build, embedded: KnowledgeBase, server: ChromaServer, workdir: Path):
    by_source = {r["source"]: r for r in cli_build}
    assert set(by_source) == {"cards", "vllm-docs"}
    assert by_source["cards"]["chunks"] == by_source["cards"]["embedded"] == CARD_CHUNKS
    assert by_source["vllm-docs"]["documents"] == len(PAGES)
    assert by_source["vllm-docs"]["chunks"] == by_source["vllm-docs"]["embedded"] == DOC_CHUNKS

    result = run_cli("kb", "status", "--chroma-url", server.url, "--kb-dir", str(workdir / "server-kb"), "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["location"] == server.url and status["health"] == "ok"
    assert status["chunks"] == embedded.status().chunks == CARD_CHUNKS + DOC_CHUNKS
    docs = next(s for s in status["sources"] if s["source"] == "vllm-docs")
    assert docs["versions"] == [DOCS_VERSION] and docs["documents"] == len(PAGES)
    # The server's data really is in the server's folder, not in --kb-dir.
    assert not (workdir / "server-kb" / "chroma").exists()
    assert (server.data_dir / "chroma.sqlite3").is_file()


def test_server_holds_the_same_chunks_and_vectors(embedded: KnowledgeBase, on_server: KnowledgeBase):
    local = embedded.collection().get(include=["documents", "metadatas", "embeddings"])
    remote = on_server.collection().get(include=["documents", "metadatas", "embeddings"])
    assert len(remote["ids"]) == CARD_CHUNKS + DOC_CHUNKS
    order_l, order_r = np.argsort(local["ids"]), np.argsort(remote["ids"])
    assert [local["ids"][i] for i in order_l] == [remote["ids"][i] for i in order_r]
    assert [local["documents"][i] for i in order_l] == [remote["documents"][i] for i in order_r]
    meta_l = [local["metadatas"][i] for i in order_l]
    meta_r = [remote["metadatas"][i] for i in order_r]
    assert [m["hash"] for m in meta_l] == [m["hash"] for m in meta_r]
    assert {m["version"] for m in meta_r if m["kind"] == "doc"} == {DOCS_VERSION}
    # Same model, other process and batches: the vectors agree to float32 noise.
    vec_l = np.asarray(local["embeddings"])[order_l]
    vec_r = np.asarray(remote["embeddings"])[order_r]
    assert vec_r.shape == (CARD_CHUNKS + DOC_CHUNKS, 384)
    assert float(np.max(np.abs(vec_l - vec_r))) < 1e-4


# -- searching -----------------------------------------------------------------------------------


@pytest.mark.parametrize("query", list(QUERIES))
def test_same_results_from_server_and_embedded(query: str, embedded: KnowledgeBase, on_server: KnowledgeBase):
    local = embedded.search(query, K)
    remote = on_server.search(query, K)
    assert len(local) == K
    assert [r[:3] for r in ranking(remote)] == [r[:3] for r in ranking(local)]
    assert [r.score for r in remote] == pytest.approx([r.score for r in local], abs=1e-6)
    assert [(r.url, r.heading, r.version) for r in remote] == [(r.url, r.heading, r.version) for r in local]
    assert QUERIES[query] in [r.doc_id for r in remote[:3]]


def test_cli_search_on_the_server_matches_the_embedded_index(embedded: KnowledgeBase, server: ChromaServer, workdir: Path):
    """What a team member types, against each store (both through the CLI's own query model)."""
    query = "KV cache preemption"
    remote = run_cli("kb", "search", query, "--chroma-url", server.url, "--kb-dir", str(workdir / "server-kb"), "--json")
    local = run_cli("kb", "search", query, "--kb-dir", str(embedded.kb_dir), "--json")
    assert remote.exit_code == 0 and local.exit_code == 0, remote.output + local.output
    remote_ids = [r["chunk_id"] for r in json.loads(remote.stdout)["results"]]
    assert remote_ids == [r["chunk_id"] for r in json.loads(local.stdout)["results"]]
    assert remote_ids[0] == "card:preemption-recompute-v1#3"


def test_answers_cite_the_same_sources_from_the_server(embedded: KnowledgeBase, on_server: KnowledgeBase):
    """The citations the answer writer takes from an index, through the library (`ask --chroma-url`
    end to end is below)."""
    from vllm_advisor.answer.sources import search_kb

    question = "显存不够 抢占 TTFT 很高"
    local = [(c.doc_id, c.chunk_id, c.url) for c in search_kb(embedded, question, 5)]
    remote = [(c.doc_id, c.chunk_id, c.url) for c in search_kb(on_server, question, 5)]
    assert remote == local
    assert len(local) == len(PAGES)  # answers cite docs and issues (not cards), one passage per page
    assert all(c[2].startswith("https://") for c in remote)


def test_a_second_team_member_uses_the_shared_index(on_server: KnowledgeBase, server: ChromaServer, workdir: Path, docs_dir: Path):
    """Another machine (own --kb-dir, no sources.yaml, no keyword cache) searches the same index and
    re-ingesting the same pages embeds nothing: the hashes live in the server."""
    other = KnowledgeBase(workdir / "second-member", chroma_url=server.url, embedder=shared_embedder())
    for query in QUERIES:
        assert [r.chunk_id for r in other.search(query, K)] == [r.chunk_id for r in on_server.search(query, K)]
    assert other.messages == []  # no "indexing the packaged cards first", no rebuild
    report = other.ingest_markdown_folder(docs_dir, version=DOCS_VERSION)
    assert (report.chunks, report.embedded, report.unchanged, report.deleted) == (DOC_CHUNKS, 0, DOC_CHUNKS, 0)
    assert other.status().chunks == CARD_CHUNKS + DOC_CHUNKS


# -- a server that is not there, goes away or hangs ---------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path):
    """tmp_path, emptied afterwards (a stopped server's data folder included)."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_unreachable_or_malformed_url_is_one_line(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(IndexUnavailableError) as err:
        KnowledgeBase(tmp_path, chroma_url=url).search("prefix caching")
    assert err.value.source == url and "cannot reach the Chroma server" in err.value.message
    assert one_line(str(err.value))

    result = run_cli("kb", "status", "--chroma-url", url, "--kb-dir", str(tmp_path))
    assert result.exit_code == 4 and one_line(result.output) and "cannot reach the Chroma server" in result.output

    result = run_cli("kb", "search", "x", "--chroma-url", "ftp://127.0.0.1:1", "--kb-dir", str(tmp_path))
    assert result.exit_code == 4 and one_line(result.output)
    assert "expected http://HOST:PORT or https://HOST:PORT" in result.output


def test_a_server_that_never_answers_is_given_up_on(tmp_path: Path, monkeypatch):
    """chromadb's client waits forever; the heartbeat before it is bounded."""
    import chromadb  # noqa: F401  (imported before the clock starts: only the wait is timed)

    monkeypatch.setattr(kb_module, "SERVER_HEARTBEAT_TIMEOUT_S", 1.5)
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(IndexUnavailableError) as err:
            KnowledgeBase(tmp_path, chroma_url=url).status()
        elapsed = time.monotonic() - started
    assert elapsed < 6.0
    assert err.value.message == "the Chroma server does not answer (no heartbeat within 1.5 s)"


def test_a_server_that_stalls_after_its_heartbeat_is_given_up_on(tmp_path: Path, monkeypatch):
    """Heartbeat answered, then chromadb's handshake requests (sent with no timeout) never are."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import chromadb  # noqa: F401

    release = threading.Event()

    class Stalling(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path.endswith("/heartbeat"):
                body = b'{"nanosecond heartbeat": 1}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            release.wait(30)  # the identity / tenant request: no answer

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stalling)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setattr(kb_module, "SERVER_REQUEST_TIMEOUT_S", 1.5)
    try:
        started = time.monotonic()
        with pytest.raises(IndexUnavailableError) as err:
            KnowledgeBase(tmp_path, chroma_url=f"http://127.0.0.1:{httpd.server_address[1]}").status()
        assert time.monotonic() - started < 6.0
        assert "not the client's handshake within 1.5 s" in err.value.message
    finally:
        release.set()
        httpd.shutdown()


def test_server_gone_mid_session_then_back(scratch: Path):
    """Stop the server under a live KnowledgeBase: one line from the library and from the CLI (a
    real process: exit code 4, no traceback); start it again: the same object searches again."""
    chroma_cli_or_skip()
    with ChromaServer(scratch / "server") as srv:
        kb = KnowledgeBase(scratch / "kb", chroma_url=srv.url, embedder=shared_embedder())
        assert kb.ingest_cards().chunks == CARD_CHUNKS
        before = [r.chunk_id for r in kb.search("KV cache preemption", 5)]
        assert before[0] == "card:preemption-recompute-v1#3"

        srv.stop()
        with pytest.raises(IndexUnavailableError) as err:  # the open collection's next request fails
            kb.search("KV cache preemption", 5)
        assert err.value.source == srv.url and one_line(str(err.value))
        assert err.value.message.startswith("the Chroma server stopped answering (")
        for call in (kb.status, kb.ingest_cards):  # then each call tries to reconnect, and says it cannot
            with pytest.raises(IndexUnavailableError) as err:
                call()
            assert err.value.source == srv.url and one_line(str(err.value))
            assert err.value.message.startswith("cannot reach the Chroma server (")

        proc = subprocess.run(
            [str(VLLM_ADVISOR), "kb", "search", "KV cache preemption", "--chroma-url", srv.url, "--kb-dir", str(scratch / "kb")],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 4, proc.stderr
        assert proc.stdout == "" and one_line(proc.stderr) and "Traceback" not in proc.stderr
        assert f"{srv.url}: cannot reach the Chroma server" in proc.stderr

        srv.start()  # same port, same data folder
        assert [r.chunk_id for r in kb.search("KV cache preemption", 5)] == before


# -- ask, memo and chat with the team's server --------------------------------------------------------

QUESTION = "Why is TTFT so high at 8 clients with 6000-token prompts? KV cache preemption or chunked prefill?"
KV_PRESSURE_BENCH = "vllm-cpu-real/results/kv-pressure/bench_in6000_out64_c8_n32_seed401.json"
SERVER_DOCS = {f"doc:{page}" for page in PAGES}


def advisor_home(workdir: Path, name: str, kb_dir: Path) -> Path:
    """A VLLM_ADVISOR_HOME whose kb/ is ``kb_dir`` (ask, memo and chat take the index from there)."""
    home = workdir / name
    if not home.exists():
        home.mkdir()
        (home / "kb").symlink_to(kb_dir, target_is_directory=True)
    return home


@pytest.fixture
def server_home(on_server: KnowledgeBase, workdir: Path, monkeypatch) -> Path:
    """The team member who ran `kb build --chroma-url` (its kb/ holds the ONNX query model and the
    server's keyword cache), with no ambient VLLM_ADVISOR_CHROMA_URL."""
    home = advisor_home(workdir, "home-server", on_server.kb_dir)
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(home))
    monkeypatch.delenv("VLLM_ADVISOR_CHROMA_URL", raising=False)
    return home


def source_keys(sources: list[dict]) -> list[tuple]:
    return [(s["number"], s["doc_id"], s["chunk_id"], s["kind"], s["url"]) for s in sources]


def logged_inputs(run_id: int) -> dict:
    """What the run log (in VLLM_ADVISOR_HOME) recorded as the run's inputs."""
    from vllm_advisor.logs import LogStore

    entry = LogStore().get(run_id)
    assert entry is not None
    return entry.inputs


def test_ask_cites_the_servers_docs_like_the_embedded_index(
    server_home: Path, server: ChromaServer, embedded: KnowledgeBase, workdir: Path, fixtures_dir: Path, monkeypatch
):
    bench = str(fixtures_dir / KV_PRESSURE_BENCH)
    remote = run_cli("ask", "--chroma-url", server.url, "--json", "--no-log", QUESTION, "--attach", bench)
    assert remote.exit_code == 0, remote.output
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(advisor_home(workdir, "home-embedded", embedded.kb_dir)))
    local = run_cli("ask", "--json", "--no-log", QUESTION, "--attach", bench)
    assert local.exit_code == 0, local.output
    remote, local = json.loads(remote.stdout), json.loads(local.stdout)

    docs = [s for s in remote["sources"] if s["kind"] == "doc"]
    assert docs and {s["doc_id"] for s in docs} <= SERVER_DOCS
    assert all(s["url"].startswith("https://docs.vllm.ai/") for s in docs)
    assert {s["kind"] for s in remote["sources"]} == {"card", "doc"}
    # The same documents and passages, numbered alike, for the same findings: only the store differs.
    assert source_keys(remote["sources"]) == source_keys(local["sources"])
    assert [f["cause"] for f in remote["findings"]] == [f["cause"] for f in local["findings"]]
    assert [[s["doc_id"] for s in f["sources"]] for f in remote["findings"]] == [[s["doc_id"] for s in f["sources"]] for f in local["findings"]]
    assert remote["answer"] == local["answer"]
    assert not [n for n in remote["notes"] + local["notes"] if "knowledge base" in n]


def test_ask_with_an_unreachable_server_answers_from_the_cards(tmp_path: Path, fixtures_dir: Path, monkeypatch):
    """A closed port: exit 0, the answer the cards alone give, one note naming the server (its
    password scrubbed there and in the log), from the flag and from the environment variable."""
    home = tmp_path / "home"
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(home))
    monkeypatch.delenv("VLLM_ADVISOR_CHROMA_URL", raising=False)
    port = free_port()
    url = f"http://team:hunter2-pass@127.0.0.1:{port}"
    shown = f"http://team:[redacted]@127.0.0.1:{port}"
    args = ["ask", "--json", QUESTION, "--attach", str(fixtures_dir / KV_PRESSURE_BENCH)]

    cards_only = run_cli(*args, "--no-log")  # no index in this home: the packaged cards answer
    by_flag = run_cli(*args, "--chroma-url", url)
    by_env = CliRunner().invoke(cli, [*args, "--no-log"], env={"VLLM_ADVISOR_CHROMA_URL": url}, catch_exceptions=False)
    for result in (cards_only, by_flag, by_env):
        assert result.exit_code == 0, result.output
    cards_only, by_flag, by_env = (json.loads(r.stdout) for r in (cards_only, by_flag, by_env))

    assert cards_only["sources"] and {s["kind"] for s in cards_only["sources"]} == {"card"}
    for answer in (by_flag, by_env):
        assert source_keys(answer["sources"]) == source_keys(cards_only["sources"])
        team = [n for n in answer["notes"] if "knowledge base" in n]
        assert len(team) == 1 and one_line(team[0]) and "hunter2" not in team[0]
        assert team[0].startswith(f"team knowledge base at {shown} not searched (cannot reach the Chroma server (")
        assert team[0].endswith("); sources are the packaged cards")
        assert [n for n in answer["notes"] if n not in team] == cards_only["notes"]
        # The answer is the cards-only one, with the note among its caveats.
        assert answer["answer"].count(f"- {team[0]}\n") == 1
        assert answer["answer"].replace(f"- {team[0]}\n", "") == cards_only["answer"]
        assert "hunter2" not in answer["answer"]

    assert logged_inputs(by_flag["log_id"])["chroma_url"] == shown
    assert b"hunter2" not in (home / "advisor.db").read_bytes()


def test_memo_cites_the_servers_docs(server_home: Path, server: ChromaServer, fixtures_dir: Path, tmp_path: Path):
    out = tmp_path / "memo.md"
    result = run_cli("memo", "--attach", str(fixtures_dir / KV_PRESSURE_BENCH), "--chroma-url", server.url, "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    docs = [s for s in data["sources"] if s["kind"] == "doc"]
    assert docs and {s["doc_id"] for s in docs} <= SERVER_DOCS
    memo = out.read_text(encoding="utf-8")
    assert all(s["url"] in memo for s in docs)  # the memo's source list carries them

    assert logged_inputs(data["log_id"])["chroma_url"] == server.url


def test_chat_cites_the_servers_docs(server_home: Path, server: ChromaServer, fixtures_dir: Path):
    """The chat's conversation (what the TUI calls) with the URL `chat --chroma-url` hands it."""
    from vllm_advisor_tui.app import ChatApp
    from vllm_advisor_tui.evidence import detect_file

    help_text = run_cli("chat", "--help").output
    assert "--chroma-url" in help_text and "VLLM_ADVISOR_CHROMA_URL" in help_text
    conv = ChatApp(chroma_url=server.url, warm_up=False).conversation
    assert conv.chroma_url == server.url and conv.log is not None
    bench = fixtures_dir / KV_PRESSURE_BENCH
    conv.apply_file(bench, detect_file(bench))
    turn = conv.answer(QUESTION)
    docs = [s for s in turn.sources if s.kind == "doc"]
    assert docs and {s.doc_id for s in docs} <= SERVER_DOCS
    assert not [n for n in turn.diagnosis.notes if "knowledge base" in n]
    run_id = conv.commit(turn)
    assert logged_inputs(run_id)["chroma_url"] == server.url


def test_an_empty_or_cards_only_server_is_one_note(scratch: Path):
    """A team server nobody has filled, then one with only the cards: the answer cites cards and
    says once why the server's documents are not among them; no chunk is written to the server."""
    from vllm_advisor.answer.sources import attach_sources
    from vllm_advisor.diagnosis.inputs import DiagnosisInputs
    from vllm_advisor.schema import Diagnosis, Finding

    def answer_sources(url: str) -> tuple[list, list[str]]:
        diagnosis = Diagnosis(findings=[Finding(cause="preemption", confidence=0.8)])
        from vllm_advisor.messages import render

        sources = attach_sources(diagnosis, DiagnosisInputs(question="KV cache preemption"), kb_dir=scratch / "kb", chroma_url=url)
        return sources, [render(note, "en") for note in diagnosis.notes]  # notes are message ids + values

    with ChromaServer(scratch / "server") as srv:
        sources, notes = answer_sources(srv.url)
        assert sources and {s.kind for s in sources} == {"card"}
        assert notes == [f"team knowledge base at {srv.url} not searched (its collection is empty; fill it with "
                         "`vllm-advisor kb build --chroma-url URL`); sources are the packaged cards"]
        kb = KnowledgeBase(scratch / "kb", chroma_url=srv.url, embedder=shared_embedder())
        assert kb.status().chunks == 0  # opening it for an answer built nothing
        assert kb.ingest_cards().chunks == CARD_CHUNKS
        sources, notes = answer_sources(srv.url)
        assert sources and {s.kind for s in sources} == {"card"}
        assert notes == [f"team knowledge base at {srv.url} not searched (it holds only the packaged cards, "
                         "no docs or issue threads); sources are the packaged cards"]
