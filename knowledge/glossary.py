"""Chinese questions against an English index: the domain glossary.

``glossary_zh.yaml`` maps Chinese serving terms to English ones. A question with CJK characters is
scanned for glossary terms (longest first, so 分块预填充 wins over 预填充), and their English words
form the query the English-only embedding model reads; BM25 gets those words plus the question's own
tokens (CJK bigrams match Chinese text that was indexed, e.g. Chinese issue threads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .text_tokens import has_cjk

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")  # CJK text and full-width punctuation alike
GLOSSARY_FILE = Path(__file__).resolve().parent / "glossary_zh.yaml"


@lru_cache(maxsize=1)
def load_glossary(path: Path = GLOSSARY_FILE) -> dict[str, str]:
    import yaml

    # libyaml's safe loader when PyYAML has it (about 10x faster), else PyYAML's.
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    terms = data.get("terms") or {}
    return {str(k).lower(): str(v) for k, v in terms.items()}


@dataclass
class ExpandedQuery:
    """The question as each retriever reads it."""

    original: str
    dense_text: str  # what the embedding model encodes
    bm25_text: str  # what BM25 tokenises
    matched_terms: dict[str, str] = field(default_factory=dict)  # Chinese term -> English

    @property
    def translated(self) -> bool:
        return bool(self.matched_terms)


def _latin_part(text: str) -> str:
    """The question without its CJK runs: model names, flags and numbers the user typed in Latin script."""
    return " ".join(_NON_ASCII.sub(" ", text).split())


def expand_query(query: str, *, keep_cjk_for_dense: bool = False) -> ExpandedQuery:
    """English query words for a Chinese question (or the question unchanged when it has no CJK).

    ``keep_cjk_for_dense``: the embedding model reads Chinese (a multilingual model was configured),
    so the dense query keeps the original question and adds the English terms.
    """
    if not has_cjk(query):
        return ExpandedQuery(query, query, query)
    glossary = load_glossary()
    lowered = query.lower()
    matched: dict[str, str] = {}
    # Longest terms first; a matched span is blanked so a shorter term inside it is not counted twice.
    for term in sorted(glossary, key=len, reverse=True):
        if term in lowered:
            matched[term] = glossary[term]
            lowered = lowered.replace(term, " " * len(term))
    english = " ".join(dict.fromkeys(" ".join(matched.values()).split()))  # de-duplicated, in order
    latin = _latin_part(query)
    dense = " ".join(x for x in (latin, english) if x)
    if keep_cjk_for_dense or not dense:
        dense = f"{query} {english}".strip()
    bm25 = f"{query} {english}".strip()
    return ExpandedQuery(query, dense, bm25, matched)


