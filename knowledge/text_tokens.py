"""Words for BM25: English stems, code identifiers kept whole, Chinese as character bigrams.

bm25s' own tokenizer keeps only ``\\w\\w+`` runs, which turns a Chinese sentence into one giant
"word" that matches nothing. Here Chinese (and Japanese/Korean) text becomes overlapping character
bigrams, the usual choice for CJK retrieval without a segmenter (no dictionary to load, so a cold
query stays fast); English words are lower-cased, stop words dropped and Snowball-stemmed
("preempted" and "preemption" both give "preempt"); identifiers such as ``max_num_seqs`` or
``--max-num-seqs`` are kept whole (normalised to underscores) besides their parts, so an exact
flag name scores above a page that only says "max" and "seqs" separately.
"""

from __future__ import annotations

import re
from functools import lru_cache

CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_CJK_CHAR = re.compile(f"[{CJK_RANGES}]")
_WORD = re.compile(r"[a-z0-9]+(?:[_\-.][a-z0-9]+)*")
_PART = re.compile(r"[a-z0-9]+")

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could do does did for from has have how i if in into is it its
    me my no not of on or our so such that the their them then there these they this to was we were what
    when where which while who why will with would you your""".split()
)


@lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer  # PyStemmer: the Snowball stemmers in C
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


def has_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


def cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokenize(text: str) -> list[str]:
    """BM25 tokens of one text (query or chunk); the same function must serve both."""
    lowered = text.lower()
    tokens: list[str] = []
    for run in _CJK_RUN.findall(lowered):
        tokens.extend(cjk_bigrams(run))
    words: list[str] = []
    for match in _WORD.findall(_CJK_RUN.sub(" ", lowered)):
        parts = _PART.findall(match)
        if len(parts) > 1 and any(sep in match for sep in "_-"):
            tokens.append("_".join(parts))  # the identifier whole: max_num_seqs, gpu_memory_utilization
        words.extend(p for p in parts if p not in STOP_WORDS)
    stemmer = _stemmer()
    tokens.extend(stemmer.stemWords(words) if stemmer else words)
    return tokens
