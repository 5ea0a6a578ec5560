"""Knowledge-base sources without the index: cards, the vLLM docs folder, chunking, the glossary.

Fast (no embedding model): everything here reads real files (the packaged cards, ../shared's vLLM
0.34.0 docs) and checks values taken from them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor_knowledge.cards import load_cards
from vllm_advisor_knowledge.chunking import CHUNK_CHARS, chunk_document, embedding_text
from vllm_advisor_knowledge.errors import SourceFileError
from vllm_advisor_knowledge.glossary import expand_query, load_glossary
from vllm_advisor_knowledge.markdown_docs import load_markdown_folder, page_url, read_folder_version
from vllm_advisor_knowledge.text_tokens import tokenize


@pytest.fixture(scope="module")
def docs_dir(shared_dir: Path) -> Path:
    return shared_dir / "corpus" / "vllm-docs"


@pytest.fixture(scope="module")
def docs(docs_dir: Path):
    return {d.metadata["path"]: d for d in load_markdown_folder(docs_dir)}


def test_cards_load_with_their_front_matter():
    cards = {c.doc_id: c for c in load_cards()}
    assert len(cards) == 34
    card = cards["card:kv-capacity-long-prompts"]
    assert card.kind == "card"
    assert card.title == "How many long requests fit: KV bytes per token and the 'Maximum concurrency' line"
    assert card.metadata["causes"] == ["kv_capacity", "queueing"]
    assert "https://github.com/vllm-project/vllm/issues/8089" in card.metadata["sources"]
    assert card.url == "knowledge/cards/kv-capacity-long-prompts.md"
    assert card.text.startswith("## Mechanism")  # front matter stripped


def test_docs_folder_pages_urls_and_version(docs_dir: Path, docs):
    assert read_folder_version(docs_dir) == "0.34.0"  # "- Version: v0.34.0" in SOURCE.md
    assert len(docs) == 248  # SOURCE.md ("248 files" of docs/) is the folder's provenance, not a page
    assert "SOURCE.md" not in docs
    opt = docs["configuration/optimization.md"]
    assert opt.doc_id == "doc:configuration/optimization.md"
    assert opt.title == "Optimization and Tuning"
    assert opt.url == "https://docs.vllm.ai/en/latest/configuration/optimization/"
    assert opt.version == "0.34.0"
    assert docs["README.md"].url == "https://docs.vllm.ai/en/latest/"
    assert docs["README.md"].title == "Welcome to vLLM"  # the H1 after the front matter
    assert docs["serving/online_serving/README.md"].url == "https://docs.vllm.ai/en/latest/serving/online_serving/"
    # An include-only snippet is cited at the page that includes it.
    assert docs["getting_started/installation/cpu.x86.inc.md"].url == "https://docs.vllm.ai/en/latest/getting_started/installation/cpu/"


def test_page_url_rules():
    assert page_url("a/b.md") == "https://docs.vllm.ai/en/latest/a/b/"
    assert page_url("a/index.md", "https://runbooks.example/") == "https://runbooks.example/a/"


def test_version_option_when_the_folder_has_no_source_md(tmp_path: Path):
    (tmp_path / "guide.md").write_text("# Guide\n\nSome text about tuning.\n", encoding="utf-8")
    [doc] = load_markdown_folder(tmp_path, version="0.33.1", source="runbooks", base_url="https://rb.example/")
    assert (doc.version, doc.doc_id, doc.url) == ("0.33.1", "doc:runbooks:guide.md", "https://rb.example/guide/")


def test_chunks_follow_headings(docs):
    chunks = chunk_document(docs["configuration/optimization.md"])
    headings = [c.heading for c in chunks]
    assert "Optimization and Tuning > Chunked Prefill" in headings
    assert "Optimization and Tuning > Preemption" in headings
    assert all(len(c.text) <= CHUNK_CHARS for c in chunks)
    assert [c.chunk_id for c in chunks[:2]] == ["doc:configuration/optimization.md#0", "doc:configuration/optimization.md#1"]
    chunk = next(c for c in chunks if c.heading.endswith("Chunked Prefill"))
    assert embedding_text(chunk).startswith("Optimization and Tuning > Chunked Prefill\n")  # title not repeated


def test_a_hash_comment_in_a_code_block_is_not_a_heading(docs):
    # docs/deployment/docker.md has shell blocks whose comments start with '#'.
    for chunk in chunk_document(docs["deployment/docker.md"]):
        for part in chunk.heading.split(" > "):
            assert not part.lower().startswith(("export ", "docker ", "pip ")), chunk.heading


def test_every_corpus_chunk_is_bounded_and_nonempty(docs):
    chunks = [c for d in docs.values() for c in chunk_document(d)]
    assert 3000 < len(chunks) < 4500
    assert all(0 < len(c.text) <= CHUNK_CHARS for c in chunks)
    assert len({c.chunk_id for c in chunks}) == len(chunks)


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: p / "missing", "no such folder"),
        (lambda p: (p / "f.md").write_text("# x\n") and p / "f.md", "is a file"),
        (lambda p: p, "holds no Markdown"),
    ],
)
def test_bad_docs_folders_are_one_line_errors(tmp_path: Path, setup, message):
    target = setup(tmp_path)
    with pytest.raises(SourceFileError) as err:
        load_markdown_folder(target)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_binary_page_names_the_file(tmp_path: Path):
    (tmp_path / "ok.md").write_text("# Fine\n", encoding="utf-8")
    (tmp_path / "bad.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    with pytest.raises(SourceFileError, match=r"bad\.md: is a binary file"):
        load_markdown_folder(tmp_path)


def test_card_without_id_names_the_field(tmp_path: Path):
    (tmp_path / "x.md").write_text("---\ntitle: t\ncauses: [a]\nsources: [u]\n---\nbody\n", encoding="utf-8")
    with pytest.raises(SourceFileError, match=r"x\.md: card front matter lacks 'id'"):
        load_cards(tmp_path)


def test_glossary_maps_chinese_serving_terms():
    glossary = load_glossary()
    for term, english in {"长输入": "long input", "并发": "concurrency", "吞吐": "throughput", "显存": "GPU memory", "预填充": "prefill"}.items():
        assert english in glossary[term]
    q = expand_query("Qwen2.5-32B 分块预填充以后首字延迟变高，显存够用")
    assert q.matched_terms["分块预填充"] == "chunked prefill"
    assert "预填充" not in q.matched_terms  # the longer term took it
    assert q.dense_text.startswith("Qwen2.5-32B ")  # Latin text the user typed survives
    assert "TTFT" in q.dense_text and "GPU memory" in q.dense_text
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in q.dense_text)  # the English-only model gets English
    assert "首字延迟" in q.bm25_text  # BM25 keeps the question's own words too
    assert expand_query("how to set max_num_seqs").dense_text == "how to set max_num_seqs"


def test_tokens_cjk_bigrams_identifiers_and_stems():
    tokens = tokenize("长输入 --max-num-seqs preempted requests")
    assert tokens[:2] == ["长输", "输入"]
    assert "max_num_seqs" in tokens and "preempt" in tokens and "request" in tokens
    assert tokenize("the of and") == []


def test_card_chunks_are_cached_and_equal_to_a_fresh_cut(tmp_path):
    """The chunk cache returns exactly what the chunker cuts; a changed card gets a fresh cut."""
    from vllm_advisor_knowledge.cards import load_cards
    from vllm_advisor_knowledge.chunk_cache import cached_chunks
    from vllm_advisor_knowledge.chunking import chunk_document

    cards = load_cards()
    fresh = [c for card in cards for c in chunk_document(card)]
    first = cached_chunks(cards, folder=tmp_path)
    [written] = list(tmp_path.glob("cards-chunks-*.json"))
    assert first == fresh and cached_chunks(cards, folder=tmp_path) == fresh
    cards[0].text += "\n## Added on our cluster\n\nA section that only this test knows about, long enough to be its own chunk.\n"
    changed = cached_chunks(cards, folder=tmp_path)
    assert changed == [c for card in cards for c in chunk_document(card)] and changed != fresh
    assert list(tmp_path.glob("cards-chunks-*.json")) != [written]  # the stale file was replaced


def test_ask_with_a_warm_cache_imports_no_text_splitter(tmp_path):
    """The second `ask` of a machine reads the cards' chunks from the cache: langchain stays unloaded."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom vllm_advisor.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['ask', '--profile', 'examples/seed-qwen32b-h800-long-input.yaml', '--json', '--no-log'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in ('langchain_text_splitters', 'torch', 'chromadb') if m in sys.modules))"
    )
    env = {**__import__("os").environ, "VLLM_ADVISOR_HOME": str(tmp_path)}
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=Path(__file__).resolve().parents[1])
            for _ in range(2)]
    assert all(o.returncode == 0 for o in outs), outs[0].stderr[-2000:]
    assert outs[0].stdout.strip().splitlines()[-1] == "['langchain_text_splitters']"  # the first cut the cards
    assert outs[1].stdout.strip().splitlines()[-1] == "[]"
