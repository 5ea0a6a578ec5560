"""Measuring retrieval: recall@k over a question set with the sources that should come back.

The question file is YAML: ``questions: [{id, lang, q, expect: [card id | docs path]}]``. A card id
becomes ``card:<id>``, a path ending in ``.md`` becomes ``doc:<path>`` (the vLLM docs' ids). A
question is found when any expected document is among the top ``k`` results; recall is the share
of questions found, per language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import SourceFileError
from .files import read_source_text
from .markdown_docs import doc_id_for


@dataclass
class Question:
    id: str
    lang: str
    text: str
    expected: list[str]  # doc ids


@dataclass
class RecallReport:
    k: int
    per_language: dict[str, float]
    overall: float
    counts: dict[str, int]
    misses: list[dict[str, Any]] = field(default_factory=list)  # id, question, expected, got


def expected_doc_id(ref: str) -> str:
    return doc_id_for(ref) if ref.endswith(".md") else f"card:{ref}"


def load_questions(path: str | Path) -> list[Question]:
    try:
        data = yaml.safe_load(read_source_text(path)) or {}
    except yaml.YAMLError:
        raise SourceFileError("not valid YAML", source=str(path)) from None
    questions = []
    for i, item in enumerate(data.get("questions") or []):
        try:
            questions.append(Question(str(item["id"]), str(item["lang"]), str(item["q"]), [expected_doc_id(str(e)) for e in item["expect"]]))
        except (KeyError, TypeError):
            raise SourceFileError(f"question {i + 1} needs id, lang, q and expect", source=str(path)) from None
    return questions


def recall_at_k(kb: Any, questions: list[Question], k: int = 5, **search_options: Any) -> RecallReport:
    """Search every question in ``kb`` (a KnowledgeBase) and count the hits per language.

    ``search_options`` go to ``kb.search`` (e.g. ``retrievers=("dense",)``, ``use_glossary=False``).
    """
    found: dict[str, int] = {}
    total: dict[str, int] = {}
    misses = []
    for question in questions:
        got = [r.doc_id for r in kb.search(question.text, k, **search_options)]
        total[question.lang] = total.get(question.lang, 0) + 1
        if any(doc in got for doc in question.expected):
            found[question.lang] = found.get(question.lang, 0) + 1
        else:
            misses.append({"id": question.id, "question": question.text, "expected": question.expected, "got": got})
    per_language = {lang: found.get(lang, 0) / n for lang, n in sorted(total.items())}
    overall = sum(found.values()) / max(1, sum(total.values()))
    return RecallReport(k, per_language, overall, dict(sorted(total.items())), misses)
