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
CARD_CHUNKS = 178  # the 33 packaged cards
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
    """The citations the answer writer takes from an index (`ask` has no --chroma-url yet, so this
    is its library path with the server's index)."""
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
