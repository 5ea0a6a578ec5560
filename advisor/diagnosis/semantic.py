"""Semantic evidence: how close the user's words are to each cause and to the library's reports.

Two signals, both from one multilingual sentence embedding (Chinese and English in one space):
- the question and notes against short symptom sentences written for each cause
  (``knowledge/cause_symptoms.yaml``), the best match per cause;
- the question and notes against every case of the library (``knowledge/cases``): the nearest
  reports vote for their established causes, weighted by similarity.

The library's vectors and the symptom vectors are computed when the ranker is fitted and shipped in
one ``.npz`` (``CaseIndex``), so a query embeds only the user's text.

Every vector is centred on its language before any cosine: the mean vector of the fitting part's
English reports is taken from English texts, the Chinese mean from Chinese ones, and the result is
normalised again (``CaseIndex.project``). The raw embedding keeps a strong language direction: 76% of
a Chinese report's seven nearest reports were Chinese (20% of the reports are), and they shared a cause
with it less often than an English report's neighbours did with it. Centred, 45% are Chinese and the
neighbours share a cause more often (English 0.41 -> 0.44, Chinese 0.36 -> 0.38); the fitted ranker's
recall@3 on the fitting part +0.005 +- 0.001 (RESULTS.md, session 27).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from ..schema import CAUSE_IDS

#: Neighbours that vote; the first few similar reports carry the signal, the tail is noise.
K_NEIGHBOURS = 7
INDEX_FILE = "case_index.npz"
#: The languages whose mean vector is taken away (``CaseIndex.centers`` rows, in this order).
CENTERED_LANGUAGES = ("en", "zh")


def normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-9)


def language_centers(vectors: np.ndarray, languages: list[str]) -> np.ndarray:
    """(len(CENTERED_LANGUAGES), dim): the mean raw vector of each language's texts (zeros where a
    language has none, which leaves its vectors as they are)."""
    langs = np.array(languages)
    rows = [vectors[langs == lang].mean(axis=0) if (langs == lang).any() else np.zeros(vectors.shape[1]) for lang in CENTERED_LANGUAGES]
    return np.vstack(rows).astype(np.float32)


@functools.cache
def symptom_sentences() -> dict[str, list[str]]:
    """cause -> its symptom sentences, English and Chinese together."""
    text = resources.files("vllm_advisor_knowledge").joinpath("cause_symptoms.yaml").read_text(encoding="utf-8")
    raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - the safe loader, in C where libyaml is built (5-15x faster)
    return {cause: [*raw[cause].get("en", []), *raw[cause].get("zh", [])] for cause in CAUSE_IDS}


@dataclass(frozen=True)
class CaseIndex:
    """Vectors of the library's reports and of the cause symptoms, with the reports' labels."""

    ids: list[str]
    urls: list[str]
    causes: list[list[str]]
    fixes: list[str]
    vectors: np.ndarray  # (n_cases, dim), rows L2-normalised
    symptom_vectors: np.ndarray  # (n_sentences, dim), centred on their language like the reports
    symptom_causes: np.ndarray  # (n_sentences,) index into CAUSE_IDS
    centers: np.ndarray  # (len(CENTERED_LANGUAGES), dim): each language's mean raw vector

    def project(self, vectors: np.ndarray, language: str) -> np.ndarray:
        """Raw embeddings of a text in ``language`` -> the space the index's vectors live in."""
        row = CENTERED_LANGUAGES.index(language) if language in CENTERED_LANGUAGES else None
        return normalised(vectors - self.centers[row]) if row is not None else normalised(vectors)

    def subset(self, keep: list[int]) -> CaseIndex:
        """The index restricted to some reports (fitting without peeking at held-out cases)."""
        return CaseIndex(
            [self.ids[i] for i in keep],
            [self.urls[i] for i in keep],
            [self.causes[i] for i in keep],
            [self.fixes[i] for i in keep],
            self.vectors[keep],
            self.symptom_vectors,
            self.symptom_causes,
            self.centers,
        )

    def save(self, path: Path) -> None:
        np.savez_compressed(
            path,
            ids=np.array(self.ids),
            urls=np.array(self.urls),
            causes=np.array(["|".join(c) for c in self.causes]),
            fixes=np.array(self.fixes),
            vectors=self.vectors.astype(np.float16),
            symptom_vectors=self.symptom_vectors.astype(np.float16),
            symptom_causes=self.symptom_causes,
            centers=self.centers,
        )

    @classmethod
    def load(cls, path: Path) -> CaseIndex:
        with np.load(path, allow_pickle=False) as z:
            return cls(
                [str(x) for x in z["ids"]],
                [str(x) for x in z["urls"]],
                [str(x).split("|") for x in z["causes"]],
                [str(x) for x in z["fixes"]],
                z["vectors"].astype(np.float32),
                z["symptom_vectors"].astype(np.float32),
                z["symptom_causes"],
                z["centers"].astype(np.float32) if "centers" in z.files else np.zeros((len(CENTERED_LANGUAGES), z["vectors"].shape[1]), dtype=np.float32),
            )


def packaged_index_path() -> Path:
    return Path(str(resources.files("vllm_advisor_knowledge").joinpath(INDEX_FILE)))


@functools.cache
def packaged_index() -> CaseIndex | None:
    path = packaged_index_path()
    return CaseIndex.load(path) if path.is_file() else None


def embed(texts: list[str]) -> np.ndarray:
    from vllm_advisor_knowledge.multilingual_embedder import shared_embedder

    return shared_embedder().encode(texts)


@dataclass(frozen=True)
class Neighbour:
    id: str
    url: str
    causes: list[str]
    fix: str
    similarity: float


@dataclass(frozen=True)
class SemanticSignals:
    """Per cause (in CAUSE_IDS order): closeness to its symptoms, and the neighbours' vote."""

    symptom: np.ndarray  # (20,) best cosine per cause, over the whole text and each sentence of it
    vote: np.ndarray  # (20,) similarity-weighted share of neighbours naming the cause
    vote_first: np.ndarray  # (20,) the same, first cause only
    centroid: np.ndarray  # (20,) cosine to the mean vector of the library reports with the cause
    neighbours: list[Neighbour]


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|[。！？；\n]+")


#: Characters embedded: of the whole text, of one sentence, and of all sentences together. The
#: embedding's cost grows with its input (about 0.04 s per 1,000 characters on the 2-core EPYC): a
#: 120,000-character question took 16 s and 1.7 GB. The library's longest text has about 1,200
#: characters, so its vectors (and a pasted forum thread's opening) are unchanged by the caps.
EMBED_CHARS = 6000
SENTENCE_CHARS = 1500


def sentences(text: str, limit: int = 24) -> list[str]:
    """The text cut into sentences (a symptom is usually one sentence of a long report), the first
    ones up to EMBED_CHARS in all, each at most SENTENCE_CHARS long."""
    out, total = [], 0
    for part in _SENTENCE_END.split(text or ""):
        part = part.strip()[:SENTENCE_CHARS]
        if len(part) < 8:
            continue
        total += len(part)
        if len(out) == limit or total > EMBED_CHARS:
            break
        out.append(part)
    return out


def embed_text(text: str) -> tuple[np.ndarray, np.ndarray]:
    """The whole text's vector (its first EMBED_CHARS characters) and its sentences' vectors, in one
    batch, as the embedding gives them (``CaseIndex.project`` puts them in the index's space)."""
    parts = sentences(text)
    vectors = embed([(text or "-")[:EMBED_CHARS], *parts])
    return vectors[0], vectors[1:]


def embed_query(text: str, index: CaseIndex) -> tuple[np.ndarray, np.ndarray]:
    """``embed_text`` in the index's space: centred on the text's language."""
    from .inputs import detect_language

    vector, parts = embed_text(text)
    language = detect_language(text)
    return index.project(vector, language), (index.project(parts, language) if len(parts) else parts)


def signals(query: np.ndarray, index: CaseIndex, *, parts: np.ndarray | None = None, exclude: str | None = None) -> SemanticSignals:
    """The semantic signals of one query in the index's space (``embed_query``; ``parts``: its
    sentences' vectors; ``exclude``: the query's own report, when fitting)."""
    n_causes = len(CAUSE_IDS)
    queries = query[None, :] if parts is None or not len(parts) else np.vstack([query[None, :], parts])
    sims = (index.symptom_vectors @ queries.T).max(axis=1)
    symptom = np.full(n_causes, -1.0, dtype=np.float32)
    np.maximum.at(symptom, index.symptom_causes, sims)
    centroid = np.zeros(n_causes, dtype=np.float32)
    keep = [i for i, cid in enumerate(index.ids) if cid != exclude]
    for k, cause in enumerate(CAUSE_IDS):
        members = [i for i in keep if cause in index.causes[i]]
        if members:
            mean = index.vectors[members].mean(axis=0)
            centroid[k] = float(mean @ query / (np.linalg.norm(mean) or 1.0))
    vote = np.zeros(n_causes, dtype=np.float32)
    vote_first = np.zeros(n_causes, dtype=np.float32)
    neighbours: list[Neighbour] = []
    if len(index.ids):
        case_sims = index.vectors @ query
        order = np.argsort(-case_sims)
        picked = [i for i in order if index.ids[i] != exclude][:K_NEIGHBOURS]
        weights = np.clip(case_sims[picked], 0.0, None) ** 2
        total = float(weights.sum()) or 1.0
        position = {c: k for k, c in enumerate(CAUSE_IDS)}
        for i, w in zip(picked, weights):
            labels = [c for c in index.causes[i] if c in position]
            for rank, cause in enumerate(labels):
                vote[position[cause]] += w / total
                if rank == 0:
                    vote_first[position[cause]] += w / total
            neighbours.append(Neighbour(index.ids[i], index.urls[i], labels, index.fixes[i], float(case_sims[i])))
    return SemanticSignals(symptom, vote, vote_first, centroid, neighbours)
