"""Our tuning cards (``knowledge/cards/*.md``) as source documents.

A card is Markdown with YAML front matter (id, title, causes, vllm_versions, sources). The cards
ship inside the package, so ``kb build`` can always index them, with no network and no checkout.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from .documents import SourceDocument
from .errors import SourceFileError
from .files import read_source_text

#: libyaml's safe loader when PyYAML has it (about 10x faster on these packaged files), else PyYAML's.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CARDS_DIR = Path(__file__).resolve().parent / "cards"
CARDS_SOURCE = "cards"
REQUIRED_FIELDS = ("id", "title", "causes", "sources")


def split_front_matter(text: str, source: str) -> tuple[dict, str]:
    """(front matter as a dict, body). Text without front matter gives ({}, text)."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        raise SourceFileError("front matter opened with '---' is never closed", source=source)
    try:
        meta = yaml.load(text[3:end], Loader=_YAML_LOADER) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise SourceFileError(f"front matter is not valid YAML{where}", source=source) from None
    if not isinstance(meta, dict):
        raise SourceFileError("front matter is not a mapping", source=source)
    rest = text[end + 4 :]  # what follows the closing '---' (the rest of that line, then the body)
    return meta, rest.split("\n", 1)[1] if "\n" in rest else ""


def load_card(path: Path) -> SourceDocument:
    meta, body = split_front_matter(read_source_text(path), str(path))
    for name in REQUIRED_FIELDS:
        if not meta.get(name):
            raise SourceFileError(f"card front matter lacks '{name}'", source=str(path))
    card_id = str(meta["id"])
    causes = meta["causes"] if isinstance(meta["causes"], list) else [meta["causes"]]
    sources = meta["sources"] if isinstance(meta["sources"], list) else [meta["sources"]]
    return SourceDocument(
        doc_id=f"card:{card_id}",
        kind="card",
        title=str(meta["title"]),
        # Cards have no web page of their own; the path inside the project is what a reader can open.
        url=f"knowledge/cards/{path.name}",
        text=body.strip() + "\n",
        version=None,
        metadata={
            "card_id": card_id,
            "causes": [str(c) for c in causes],
            "vllm_versions": str(meta.get("vllm_versions") or ""),
            "sources": [str(s) for s in sources],
            "path": f"cards/{path.name}",
            "source": CARDS_SOURCE,
        },
    )


def load_cards(folder: Path | None = None) -> list[SourceDocument]:
    """Every card in ``folder`` (the packaged cards by default), sorted by id."""
    folder = folder or CARDS_DIR
    if not folder.is_dir():
        raise SourceFileError("cards folder is missing", source=str(folder))
    cards = [load_card(p) for p in sorted(folder.glob("*.md"))]
    seen: dict[str, str] = {}
    for card in cards:
        if card.doc_id in seen:
            raise SourceFileError(f"card id '{card.metadata['card_id']}' is also used by {seen[card.doc_id]}", source=card.url)
        seen[card.doc_id] = card.url
    return sorted(cards, key=lambda c: c.doc_id)


@functools.cache
def card_titles_zh() -> dict[str, str]:
    """doc_id -> the card's Chinese title (front matter ``title_zh``), for the packaged cards. A
    Chinese answer names our own cards in Chinese; other documents keep their own titles."""
    out: dict[str, str] = {}
    for path in sorted(CARDS_DIR.glob("*.md")):
        try:
            meta, _ = split_front_matter(read_source_text(path), str(path))
        except SourceFileError:
            continue
        if meta.get("id") and meta.get("title_zh"):
            out[f"card:{meta['id']}"] = str(meta["title_zh"])
    return out
