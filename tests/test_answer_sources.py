"""Sources for findings: cards by cause and by text match, knowledge-base hits, one numbering."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vllm_advisor.messages import render
from vllm_advisor.answer import attach_sources
from vllm_advisor.answer.sources import card_corpus, open_knowledge_base, passage_text, rank_cards
from vllm_advisor.diagnosis.inputs import DiagnosisInputs, gather
from vllm_advisor.schema import Citation, Diagnosis, Finding
from vllm_advisor_knowledge.cards import load_cards
from real_services.net import free_port

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"


def card_causes() -> dict[str, list[str]]:
    return {c.doc_id: c.metadata["causes"] for c in load_cards()}


def test_motivating_question_picks_the_long_prompt_capacity_card():
    inputs = gather(profile=SEED, predict=False)
    finding = Finding(cause="kv_capacity", confidence=0.8)
    ranked = rank_cards(finding, inputs.question, card_corpus())
    assert ranked[0].citation.doc_id == "card:kv-capacity-long-prompts"
    assert ranked[0].primary and ranked[0].text_share == pytest.approx(1.0)
    causes = card_causes()
    assert all("kv_capacity" in causes[r.citation.doc_id] for r in ranked)
    # Every card that names the cause is a candidate, and nothing else is.
    assert {r.citation.doc_id for r in ranked} == {d for d, c in causes.items() if "kv_capacity" in c}


def test_numbering_is_shared_and_deduplicated():
    diagnosis = Diagnosis(
        findings=[
            Finding(cause="preemption", confidence=0.7),
            Finding(cause="kv_capacity", confidence=0.6),
        ]
    )
    sources = attach_sources(diagnosis, DiagnosisInputs(question="requests are preempted"), kb=False)
    assert [s.number for s in sources] == list(range(1, len(sources) + 1))
    assert len({s.doc_id for s in sources}) == len(sources)
    by_doc = {s.doc_id: s.number for s in sources}
    for f in diagnosis.findings:
        assert len(f.sources) <= 3
        for c in f.sources:
            assert by_doc[c.doc_id] == c.number
            assert f.cause in card_causes()[c.doc_id]
            assert c.snippet and c.heading and c.chunk_id.startswith(c.doc_id + "#")
    shared = {c.doc_id for c in diagnosis.findings[0].sources} & {c.doc_id for c in diagnosis.findings[1].sources}
    assert all(by_doc[d] == next(c.number for c in diagnosis.findings[1].sources if c.doc_id == d) for d in shared)  # one number for both findings


def test_max_per_finding_and_existing_sources_kept_first():
    own = Citation(doc_id="doc:configuration/optimization.md", title="Optimization and Tuning", url="https://docs.vllm.ai/en/latest/configuration/optimization/", kind="doc")
    diagnosis = Diagnosis(findings=[Finding(cause="chunked_prefill_interference", confidence=0.7, sources=[own])])
    sources = attach_sources(diagnosis, DiagnosisInputs(question="ITL spikes when a long prompt arrives"), max_per_finding=2, kb=False)
    assert [c.doc_id for c in diagnosis.findings[0].sources][0] == own.doc_id
    assert [c.number for c in diagnosis.findings[0].sources] == [1, 2]
    assert len(sources) == 2 and sources[1].kind == "card"


def test_passage_text_of_a_card_is_its_whole_section():
    diagnosis = Diagnosis(findings=[Finding(cause="kv_capacity", confidence=0.8)])
    sources = attach_sources(diagnosis, DiagnosisInputs(question="how many 63K requests fit"), kb=False)
    text = passage_text(sources[0])
    assert len(text) > len(sources[0].snippet or "") and sources[0].snippet.strip(" …")[:40] in " ".join(text.split())


def test_no_index_means_cards_only(tmp_path):
    assert open_knowledge_base(tmp_path / "kb") is None  # never built: nothing is created or embedded
    assert not (tmp_path / "kb").exists()



def test_unreachable_index_is_a_note_and_the_cards_still_answer(tmp_path):
    from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

    kb = KnowledgeBase(tmp_path / "kb", chroma_url=f"http://127.0.0.1:{free_port()}")
    diagnosis = Diagnosis(findings=[Finding(cause="queueing", confidence=0.7)])
    sources = attach_sources(diagnosis, DiagnosisInputs(question="TTFT grows with rate"), kb=kb)
    assert sources and all(s.kind == "card" for s in sources)
    note = render(diagnosis.notes[0], "en")
    assert len(diagnosis.notes) == 1 and note.startswith("knowledge base not searched (")
    assert "sources are the packaged cards" in note and "127.0.0.1" in note


@pytest.mark.slow
def test_built_index_adds_docs_hits(tmp_path, shared_dir):
    """A real index (the bundled embedding model) over two pages of the vLLM docs in shared/."""
    from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

    docs = tmp_path / "docs" / "configuration"
    docs.mkdir(parents=True)
    for page in ("optimization.md", "conserving_memory.md"):
        shutil.copy(shared_dir / "corpus" / "vllm-docs" / "configuration" / page, docs / page)
    KnowledgeBase(tmp_path / "kb").ingest_markdown_folder(tmp_path / "docs")
    kb = open_knowledge_base(tmp_path / "kb")
    assert kb is not None
    diagnosis = Diagnosis(findings=[Finding(cause="chunked_prefill_interference", confidence=0.7)])
    sources = attach_sources(diagnosis, DiagnosisInputs(question="why do decodes stall when a long prompt arrives? chunked prefill"), kb_dir=tmp_path / "kb")
    kinds = [c.kind for c in diagnosis.findings[0].sources]
    assert kinds[:2] == ["card", "card"] and kinds[2] == "doc"
    doc = diagnosis.findings[0].sources[2]
    assert doc.url.startswith("https://docs.vllm.ai/") and doc.doc_id.startswith("doc:")
    assert doc.number == 3 and sources[2].doc_id == doc.doc_id
    assert len(passage_text(doc)) >= len(doc.snippet or "")


def test_an_unreadable_index_is_not_rebuilt_by_ask(tmp_path):
    """A folder that claims docs were indexed but whose store is garbage: a note, cards, no rebuild."""
    kb_dir = tmp_path / "kb"
    (kb_dir / "chroma").mkdir(parents=True)
    (kb_dir / "chroma" / "chroma.sqlite3").write_bytes(b"this is not a sqlite file" * 100)
    (kb_dir / "sources.yaml").write_text("sources:\n  vllm-docs:\n    kind: doc\n    documents: 2\n    chunks: 65\n", encoding="utf-8")
    diagnosis = Diagnosis(findings=[Finding(cause="queueing", confidence=0.7)])
    sources = attach_sources(diagnosis, DiagnosisInputs(question="TTFT grows"), kb_dir=kb_dir)
    assert sources and all(s.kind == "card" for s in sources)
    assert len(diagnosis.notes) == 1 and "run `vllm-advisor kb build`" in render(diagnosis.notes[0], "en")
    assert (kb_dir / "chroma" / "chroma.sqlite3").read_bytes().startswith(b"this is not a sqlite file")  # untouched


@pytest.mark.parametrize("profile", ["examples/seed-qwen32b-h800-long-input.yaml", "knowledge/cases/aicr-1399-dynamo-kv-routing-worker-stall.yaml", "knowledge/cases/aisbench-375-evalscope-min-tokens-mtp-tpot.yaml"])
def test_short_answer_cites_its_sources_as_1_to_k_and_shares_the_numbering(profile):
    """The short answer cites a few of the full analysis' sources: they are numbered first, in the
    order it cites them ([1], [2]... with no gaps), and the full analysis, Answer.sources and the
    findings keep that one numbering (the chat's /sources N reads it)."""
    import re

    from vllm_advisor import Session

    result = Session(profile=Path(__file__).resolve().parents[1] / profile, kb=False).answer(short=True)
    answer = result.answer
    from vllm_advisor.messages import text

    body, listed = answer.markdown.split("\n" + text(answer.language, "answer.h_sources"), 1)
    cited = list(dict.fromkeys(int(n) for n in re.findall(r"\[(\d+)\]", body)))
    assert cited and sorted(cited) == list(range(1, len(cited) + 1)) and cited == sorted(cited)
    assert [int(n) for n in re.findall(r"^- \[(\d+)\]", listed, re.M)] == list(range(1, len(cited) + 1))
    assert [s.number for s in answer.sources] == list(range(1, len(answer.sources) + 1))
    numbers = {s.doc_id: s.number for s in answer.sources}
    assert all(numbers[c.doc_id] == c.number for f in result.diagnosis.findings for c in f.sources)
    from vllm_advisor.answer.embedded import source_line

    for n in cited:  # the full analysis lists the same source under the same number
        source = next(s for s in answer.sources if s.number == n)
        assert f"- [{n}] {source_line(source, answer.language)}" in answer.full_markdown
        assert f"- [{n}] {source_line(source, answer.language)}" in listed
