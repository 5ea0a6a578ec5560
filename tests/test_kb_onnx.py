"""Queries through the default model's ONNX copy: same vectors and recall as torch, without torch.

The copy is written while the shared index is built (kb_support.py: the docs subset by default, the
full corpus in the slow run); the damage tests use small
indexes of the packaged cards whose copy is a file copy of that verified export.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from kb_support import DOCS, QUESTIONS, index_for, shared_embedder
from vllm_advisor_knowledge.chunking import chunk_document, embedding_text
from vllm_advisor_knowledge.embeddings import DEFAULT_MODEL
from vllm_advisor_knowledge.evaluation import load_questions, recall_at_k
from vllm_advisor_knowledge.knowledge_base import KnowledgeBase
from vllm_advisor_knowledge.markdown_docs import load_markdown_folder
from vllm_advisor_knowledge.onnx_embedder import MIN_COSINE, OnnxEmbedder, OnnxManifest, cosines, manifest_path, weights_signature
from vllm_advisor_knowledge.onnx_export import torch_version

HEAVY = ("torch", "transformers", "sentence_transformers")


@pytest.fixture(scope="session", params=["subset", pytest.param("full", marks=pytest.mark.slow)])
def full(request, tmp_path_factory):
    return index_for(request.param, tmp_path_factory.mktemp("kb"))


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """The test set's questions (30 English, 24 Chinese) and real docs chunks, some over 256 word pieces."""
    questions = [q.text for q in load_questions(QUESTIONS)]
    pages = {d.metadata["path"]: d for d in load_markdown_folder(DOCS)}
    chunks = [embedding_text(c) for page in ("configuration/optimization.md", "usage/metrics.md") for c in chunk_document(pages[page])]
    return questions + chunks


def test_build_writes_a_verified_copy(full):
    kb_dir, kb, _ = full
    manifest = OnnxManifest.read(manifest_path(kb_dir / "models", DEFAULT_MODEL))
    assert (manifest.status, manifest.model, manifest.max_seq_length, manifest.dimension) == ("ok", "all-MiniLM-L6-v2", 256, 384)
    assert manifest.min_cosine >= MIN_COSINE
    assert (kb_dir / "models" / manifest.onnx_file).stat().st_size == manifest.onnx_bytes > 80_000_000
    assert manifest.weights == weights_signature(shared_embedder().location)
    assert kb.status().embedding_model == "all-MiniLM-L6-v2"  # the index records the model, not the runtime


def test_onnx_and_torch_agree_on_english_and_chinese(full, texts):
    kb_dir, _, _ = full
    onnx = OnnxEmbedder.open(kb_dir / "models", DEFAULT_MODEL, shared_embedder().location)
    model = shared_embedder().model
    torch_vectors = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    onnx_vectors = onnx.encode(texts, batch_size=16)
    assert onnx_vectors.shape == (len(texts), 384) and onnx_vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    agreement = cosines(onnx_vectors, torch_vectors)
    assert agreement.min() >= MIN_COSINE, texts[int(agreement.argmin())][:80]
    # The same word pieces as sentence-transformers, truncation at 256 included.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [model.preprocess([t])["input_ids"][0].tolist() for t in texts]
    got = [onnx.tokenize([t])["input_ids"][0].tolist() for t in texts]
    assert got == expected
    assert max(len(ids) for ids in got) == 256  # at least one chunk was cut at the model's limit


def test_recall_through_onnx_equals_torch(full):
    kb_dir, torch_kb, _ = full
    onnx_kb = KnowledgeBase(kb_dir)
    assert onnx_kb.query_embedder().backend == "onnx" and torch_kb.query_embedder().backend == "torch"
    questions = load_questions(QUESTIONS)
    onnx_report = recall_at_k(onnx_kb, questions, k=5)
    torch_report = recall_at_k(torch_kb, questions, k=5)
    assert onnx_report.per_language == torch_report.per_language
    assert onnx_report.per_language["en"] >= 0.8 and onnx_report.per_language["zh"] >= 0.8
    dense_onnx = recall_at_k(onnx_kb, questions, k=5, retrievers=("dense",))
    dense_torch = recall_at_k(torch_kb, questions, k=5, retrievers=("dense",))
    assert dense_onnx.per_language == dense_torch.per_language
    assert onnx_kb.messages == []


def test_query_through_onnx_imports_no_torch(full):
    """A new process answering `kb search` (the CLI, then the library) never imports torch."""
    kb_dir, _, _ = full
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from vllm_advisor.cli.main import cli\n"
        f"r = CliRunner().invoke(cli, ['kb', 'search', '长输入 并发 显存', '-k', '3', '--kb-dir', {str(kb_dir)!r}, '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "from vllm_advisor_knowledge.knowledge_base import KnowledgeBase\n"
        f"kb = KnowledgeBase({str(kb_dir)!r})\n"
        "hits = kb.search('How do I check the prefix cache hit rate?', k=3)\n"
        "print(json.dumps({'heavy': [m for m in %r if m in sys.modules], 'backend': kb.query_embedder().backend,\n"
        "                  'cli': [h['doc_id'] for h in json.loads(r.stdout)['results']], 'lib': [h.doc_id for h in hits],\n"
        "                  'messages': kb.messages}))\n" % (HEAVY,)
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == [] and out["backend"] == "onnx" and out["messages"] == []
    assert len(out["cli"]) == 3 and len(out["lib"]) == 3
    assert "card:prefix-cache-reuse-and-hit-rate" in out["lib"]


def _cards_index(tmp_path: Path) -> Path:
    kb = KnowledgeBase(tmp_path / "kb", embedder=shared_embedder())
    kb.ingest_cards()
    assert OnnxManifest.read(manifest_path(kb.models_dir, DEFAULT_MODEL)).status == "ok"
    return tmp_path / "kb"


def _damage(kb_dir: Path, damage: str) -> None:
    models = kb_dir / "models"
    onnx_file = models / f"{DEFAULT_MODEL}.onnx"
    st = onnx_file.stat()
    if damage == "garbage":
        # Nothing of a model left, same size and modification time (as a disk fault would leave it).
        onnx_file.write_bytes((b"not an onnx model " * (st.st_size // 18 + 1))[: st.st_size])
        os.utime(onnx_file, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif damage == "rewritten":
        with onnx_file.open("r+b") as f:  # 64 KiB of weights overwritten: still loads
            f.seek(st.st_size // 2)
            f.write(b"\x7f" * 65536)
    else:  # "probe": the manifest's torch vectors no longer fit the model (stands for damaged weights)
        path = manifest_path(models, DEFAULT_MODEL)
        manifest = OnnxManifest.read(path)
        manifest.probe_vectors = manifest.probe_vectors[1:] + manifest.probe_vectors[:1]
        path.write_text(manifest.to_json(), encoding="utf-8")
    assert onnx_file.stat().st_size == st.st_size  # a size check alone would not notice


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("garbage", "onnxruntime cannot load it"),
        ("rewritten", "the ONNX file changed since it was exported (SHA-256 differs)"),
        ("probe", "its vectors no longer match torch's"),
    ],
)
def test_damaged_copy_falls_back_to_torch_with_a_note_and_is_rewritten(tmp_path: Path, damage: str, reason: str):
    kb_dir = _cards_index(tmp_path)
    _damage(kb_dir, damage)
    messages: list[str] = []
    kb = KnowledgeBase(kb_dir, notify=messages.append)
    results = kb.search("speculative decoding acceptance rate", k=3)
    assert results and results[0].kind == "card"
    assert kb.query_embedder().backend == "torch"
    assert messages[0].startswith("queries use torch this time") and reason in messages[0] and "\n" not in messages[0]
    # The fallback rewrote the copy: the next process queries through ONNX again, silently.
    again = KnowledgeBase(kb_dir)
    assert again.search("speculative decoding acceptance rate", k=3)[0].doc_id == results[0].doc_id
    assert again.query_embedder().backend == "onnx" and again.messages == []


def test_rejected_export_is_not_retried_on_every_query(tmp_path: Path):
    kb_dir = _cards_index(tmp_path)
    models = kb_dir / "models"
    location = shared_embedder().location
    manifest = OnnxManifest(
        model=DEFAULT_MODEL, status="rejected", weights=weights_signature(location), torch_version=torch_version(),
        reason="ONNX and torch vectors differ (worst cosine 0.912345 < 0.9999)",
    )
    manifest_path(models, DEFAULT_MODEL).write_text(manifest.to_json(), encoding="utf-8")
    (models / f"{DEFAULT_MODEL}.onnx").unlink()
    kb = KnowledgeBase(kb_dir)
    assert kb.search("speculative decoding acceptance rate", k=1)
    assert kb.query_embedder().backend == "torch"
    assert kb.messages == ["queries use torch this time (about 4 s more to start): "
                           f"{models}: export rejected (ONNX and torch vectors differ (worst cosine 0.912345 < 0.9999))"]
    assert not (models / f"{DEFAULT_MODEL}.onnx").exists()  # not exported again for the same weights and torch


def test_only_a_mean_pooling_pipeline_is_exported(tmp_path: Path):
    """The ONNX side reproduces Transformer + mean Pooling (+ Normalize); the bundled model's files say so."""
    from vllm_advisor_knowledge.onnx_export import check_pipeline

    source = Path(shared_embedder().location)
    model = shared_embedder().model
    assert check_pipeline(source, model) is None
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    modules = json.loads((source / "modules.json").read_text(encoding="utf-8"))
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling | {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}), encoding="utf-8")
    assert check_pipeline(folder, model) == "pooling is pooling_mode_cls_token, not mean"
    (folder / "modules.json").write_text(json.dumps(modules[:1] + modules[2:]), encoding="utf-8")
    assert check_pipeline(folder, model) == "pipeline is Transformer + Normalize, not Transformer + Pooling (+ Normalize)"
