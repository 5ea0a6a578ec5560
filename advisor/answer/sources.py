"""Which sources back each finding, numbered once for the whole answer.

Two places hold sources:

* the tuning cards shipped with the package (``knowledge/cards``): each names the causes it
  explains in its front matter, so a finding's cause picks the candidate cards, and a keyword match
  of the question and the finding against the cards' sections orders them and picks the section to
  quote (BM25 over the cards' chunks, with Chinese questions read through the domain glossary);
* the knowledge-base index (vLLM docs, GitHub issue threads), when one has been built: searched
  with the question and the finding's title.

Numbers are given in order of first use and a document cited by two findings keeps one number, so
the ``[n]`` markers of an answer and its source list always agree.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Protocol

from ..messages import cause_name, cause_title, render_all
from ..schema import Citation, Diagnosis, Finding, Msg
from ..schema.message import msg

#: Weight of the text match against the weight of the cause match when ranking cards. A card whose
#: first-listed cause is the finding's is about that cause; one that lists it third only touches it.
TEXT_WEIGHT = 0.6
PRIMARY_CAUSE_BONUS = 0.4
SECONDARY_CAUSE_BONUS = 0.2
#: A second or third card is cited only when it matches the question and finding this well (as a
#: share of the best card's match): a card about the cause needs half, one that only touches it
#: three quarters. Below that it is padding.
MIN_EXTRA_SHARE_PRIMARY = 0.5
MIN_EXTRA_SHARE_OTHER = 0.75
KB_KINDS = ("doc", "issue")
SNIPPET_CHARS = 280
#: Full passage text of knowledge-base hits, by chunk id, so the LLM can be given more than the
#: snippet a citation carries. Bounded: an `ask` cites a handful.
_PASSAGES: "OrderedDict[str, str]" = OrderedDict()
_PASSAGES_MAX = 512


class Searcher(Protocol):
    def search(self, query: str, k: int = 5, **kwargs: Any) -> list[Any]: ...


@dataclass
class CardCorpus:
    """The packaged cards cut into sections, with a BM25 index over the sections."""

    cards: dict[str, Any]  # doc_id -> SourceDocument
    chunks: list[Any]  # knowledge Chunk, in index order
    retriever: Any  # bm25_saved.SavedBm25 (or bm25s.BM25): get_scores(tokens); None without chunks

    def scores(self, tokens: list[str]):
        import numpy as np

        if not tokens or not self.chunks:
            return np.zeros(len(self.chunks))
        return self.retriever.get_scores(tokens)


@lru_cache(maxsize=4)
def card_corpus(folder: str | None = None) -> CardCorpus:
    """Cards are read and indexed once per process (about 180 sections). Their chunks and the BM25
    index over them come from disk caches kept current by the knowledge package: no text-splitter
    import, no tokenizing of the sections and no bm25s (scipy) import per run."""
    from vllm_advisor_knowledge.bm25_saved import cached_index
    from vllm_advisor_knowledge.cards import load_cards
    from vllm_advisor_knowledge.chunk_cache import cached_chunks

    cards = load_cards(Path(folder) if folder else None)
    name = "cards" if folder is None else "cards-" + hashlib.sha256(folder.encode()).hexdigest()[:10]
    chunks = cached_chunks(cards, name=name)
    retriever = cached_index([f"{c.title}\n{c.heading}\n{c.text}" for c in chunks], name=name) if chunks else None
    return CardCorpus({c.doc_id: c for c in cards}, chunks, retriever)


def query_tokens(text: str) -> list[str]:
    """BM25 tokens of a question, Chinese terms also read as their English glossary words."""
    from vllm_advisor_knowledge.glossary import expand_query
    from vllm_advisor_knowledge.text_tokens import tokenize

    text = " ".join(text.split())
    return tokenize(expand_query(text).bm25_text) if text else []


def _snippet(text: str, tokens: Iterable[str]) -> str:
    from vllm_advisor_knowledge.snippets import make_snippet

    return make_snippet(text, set(tokens), SNIPPET_CHARS)


@dataclass
class RankedCard:
    score: float  # what orders the cards
    text_share: float  # the card's text match as a share of the best card's (0..1)
    primary: bool  # the finding's cause is the first one the card lists
    citation: Citation
    passage: str = ""  # the cited section's text


def _card_query(finding: Finding, question: str | None) -> list[str]:
    return query_tokens(f"{question or ''}\n{cause_name('en', finding.cause)} {cause_title('en', finding.cause)}\n{render_all(finding.reasons, 'en')}")


def rank_cards(finding: Finding, question: str | None, corpus: CardCorpus, *, snippets: bool = True) -> list[RankedCard]:
    """Every card naming the finding's cause, best first.

    The citation points at the card's section that best matches the question and the finding.
    ``snippets=False`` leaves the citations' snippets empty (``pick_cards`` cuts them only for the
    cards it cites: each costs a tokenizing pass per sentence of the section)."""
    tokens = _card_query(finding, question)
    scores = corpus.scores(tokens)
    best: dict[str, tuple[float, Any]] = {}
    for i, chunk in enumerate(corpus.chunks):
        causes = chunk.metadata.get("causes") or []
        if finding.cause not in causes:
            continue
        score = float(scores[i])
        if chunk.doc_id not in best or score > best[chunk.doc_id][0]:
            best[chunk.doc_id] = (score, chunk)
    if not best:
        return []
    top = max(score for score, _ in best.values()) or 1.0
    ranked = []
    for doc_id, (score, chunk) in best.items():
        causes = chunk.metadata.get("causes") or []
        share = score / top if top > 0 else 0.0
        primary = bool(causes) and causes[0] == finding.cause
        bonus = PRIMARY_CAUSE_BONUS if primary else SECONDARY_CAUSE_BONUS
        citation = Citation(
            doc_id=doc_id,
            chunk_id=chunk.chunk_id,
            title=chunk.title,
            url=chunk.url,
            heading=chunk.heading or None,
            kind="card",
            snippet=_snippet(chunk.text, tokens) if snippets else None,
        )
        ranked.append(RankedCard(TEXT_WEIGHT * share + bonus, share, primary, citation, chunk.text))
    ranked.sort(key=lambda r: (-r.score, r.citation.doc_id))
    return ranked


def pick_cards(finding: Finding, question: str | None, corpus: CardCorpus, limit: int) -> list[Citation]:
    picked: list[Citation] = []
    tokens: list[str] | None = None
    for card in rank_cards(finding, question, corpus, snippets=False):
        if len(picked) >= limit:
            break
        if picked and card.text_share < (MIN_EXTRA_SHARE_PRIMARY if card.primary else MIN_EXTRA_SHARE_OTHER):
            continue
        tokens = _card_query(finding, question) if tokens is None else tokens
        picked.append(card.citation.model_copy(update={"snippet": _snippet(card.passage, tokens)}))
    return picked


# -- the knowledge-base index ------------------------------------------------------------------------


def open_knowledge_base(
    kb_dir: str | Path | None = None, notes: list[Msg] | None = None, chroma_url: str | None = None
) -> Searcher | None:
    """The index when one has been built with docs or issue threads; None otherwise.

    Nothing is built or repaired here: a missing or unreadable index is `kb build`'s job, and `ask`
    must not spend minutes embedding documents the user did not ask for. An index that exists but
    cannot be opened adds one line to ``notes``.

    ``chroma_url``: the team's Chroma server instead of the local index (``kb_dir`` then only holds
    this machine's keyword cache and query model). A team that set a server expects its documents
    to be searched, so a server that cannot be reached, or holds no docs or issue threads, is always
    one line in ``notes``; the packaged cards still answer."""
    if chroma_url:
        return _open_team_knowledge_base(kb_dir, notes, chroma_url)
    pending = _PREFETCHED.pop(str(kb_dir), None)
    if pending is not None:  # opened on a background thread since the command started
        thread, box = pending
        thread.join()
        if "result" in box:
            kb, found = box["result"]
            if notes is not None:
                notes.extend(found)
            return kb
    return _open_local_knowledge_base(kb_dir, notes)


#: kb_dir -> (thread, result box) of prefetch_knowledge_base, taken by the next open_knowledge_base
_PREFETCHED: dict[str, tuple[threading.Thread, dict]] = {}


def prefetch_knowledge_base(kb_dir: str | Path | None = None) -> None:
    """Open the local index and its query model on a daemon thread now, for the open_knowledge_base
    that comes after the diagnosis: building the ONNX session runs in onnxruntime without the GIL,
    so on two cores it costs `ask` next to nothing instead of 0.15-0.2 s. The same notes and the
    same searcher result as opening it in line; a failure here is left to the in-line path."""
    key = str(kb_dir)
    if key in _PREFETCHED:
        return
    box: dict = {}

    def work() -> None:
        found: list[Msg] = []
        kb = _open_local_knowledge_base(kb_dir, found)
        if kb is not None and hasattr(kb, "warm_query_embedder"):
            try:
                kb.warm_query_embedder()
            except Exception:  # noqa: BLE001 - the first search takes the usual path and reports it
                pass
        box["result"] = (kb, found)

    thread = threading.Thread(target=work, name="advisor-kb-prefetch", daemon=True)
    _PREFETCHED[key] = (thread, box)
    thread.start()


def _open_local_knowledge_base(kb_dir: str | Path | None, notes: list[Msg] | None) -> Searcher | None:
    try:
        from vllm_advisor_knowledge.paths import CHROMA_SUBDIR, resolve_kb_dir
        from vllm_advisor_knowledge.registry import Registry
    except ImportError:
        return None
    folder = resolve_kb_dir(kb_dir)
    if not (folder / CHROMA_SUBDIR).is_dir():
        return None
    registry = Registry.load(folder)
    if not any(rec.kind in KB_KINDS and rec.chunks > 0 for rec in registry.sources.values()):
        return None
    try:
        from vllm_advisor_knowledge.knowledge_base import KnowledgeBase

        kb = KnowledgeBase(folder)
        if kb.searchable_chunks() == 0:  # from the search snapshot when current: no chromadb import
            return None
    except Exception as exc:  # ImportError, IndexUnavailableError, a store that will not open
        if notes is not None:
            notes.append(msg("note.kb_local", reason=_first_line(exc)))
        return None
    return kb


def _open_team_knowledge_base(kb_dir: str | Path | None, notes: list[Msg] | None, chroma_url: str) -> Searcher | None:
    """The collection on a Chroma server, opened without building or repairing anything.

    Every wait is bounded by the knowledge base (heartbeat first, then request timeouts), so a
    server that is down or silent costs seconds and one note, never the answer."""

    def skip(reason: str) -> None:
        if notes is not None:
            notes.append(_team_note(chroma_url, reason))
        return None

    try:
        from vllm_advisor_knowledge.knowledge_base import KnowledgeBase
    except ImportError as exc:
        return skip(f"the knowledge package cannot be imported: {exc.name or exc}")
    try:
        kb = KnowledgeBase(kb_dir, chroma_url=chroma_url)
        collection = kb.collection(repair=False)
        if collection.count() == 0:
            return skip("its collection is empty; fill it with `vllm-advisor kb build --chroma-url URL`")
        if not collection.get(where={"kind": {"$in": list(KB_KINDS)}}, limit=1, include=[])["ids"]:
            return skip("it holds only the packaged cards, no docs or issue threads")
    except Exception as exc:  # IndexUnavailableError, httpx's and chromadb's errors
        return skip(_server_reason(exc))
    return kb


def _team_note(chroma_url: str, reason: str) -> Msg:
    """One line naming the server (a password in its URL is scrubbed) and why it was not used."""
    from ..logs import redact_text

    return msg("note.kb_team", url=redact_text(chroma_url), reason=reason)


def _server_reason(exc: BaseException) -> str:
    """The error's own line, without the server address the knowledge base puts in front of it
    (the note already names the server, as the user spelled it)."""
    message = getattr(exc, "message", None)  # KnowledgeError: the line without its source
    return message[:200] if isinstance(message, str) and message else _first_line(exc)


def _remember_passage(chunk_id: str | None, text: str | None) -> None:
    if not chunk_id or not text:
        return
    _PASSAGES[chunk_id] = text
    _PASSAGES.move_to_end(chunk_id)
    while len(_PASSAGES) > _PASSAGES_MAX:
        _PASSAGES.popitem(last=False)


def citation_from_hit(hit: Any) -> Citation:
    """A knowledge-base search result (any object or dict with the citation fields) as a Citation."""
    get = (lambda k: hit.get(k)) if isinstance(hit, dict) else (lambda k: getattr(hit, k, None))
    text = get("text")
    _remember_passage(get("chunk_id"), text)
    return Citation(
        doc_id=str(get("doc_id")),
        chunk_id=get("chunk_id"),
        title=str(get("title") or get("doc_id")),
        url=str(get("url") or ""),
        heading=get("heading") or None,
        kind=str(get("kind") or "doc"),
        snippet=get("snippet") or (text[:SNIPPET_CHARS] if text else None),
    )


def search_kb(kb: Searcher, query: str, k: int) -> list[Citation]:
    try:
        hits = kb.search(query, k, kinds=KB_KINDS, per_doc=1)
    except TypeError:  # a searcher without kind filtering
        hits = [h for h in kb.search(query, k * 3) if (getattr(h, "kind", None) or h.get("kind")) in KB_KINDS][:k]
    return [citation_from_hit(h) for h in hits]


# -- numbering -------------------------------------------------------------------------------------


def attach_sources(
    diagnosis: Diagnosis,
    inputs,
    *,
    max_per_finding: int = 3,
    kb: Searcher | bool | None = None,
    kb_dir: str | Path | None = None,
    cards_folder: str | Path | None = None,
    chroma_url: str | None = None,
) -> list[Citation]:
    """Pick each finding's sources, number them 1..N across the answer, fill ``finding.sources``.

    ``kb``: None opens the built index if there is one (``kb_dir`` or the default location), False
    uses the cards only, an object with ``search(query, k, kinds=..., per_doc=...)`` is used as is.
    ``chroma_url`` (with ``kb`` None): search the team's Chroma server instead of the local index.
    A knowledge-base failure is one line in ``diagnosis.notes``; the cards still answer.
    Sources a finding already had are kept (first) and renumbered.
    """
    question = getattr(inputs, "question", None) if inputs is not None else None
    corpus = card_corpus(str(cards_folder) if cards_folder else None)
    searcher: Searcher | None
    on_server = bool(chroma_url) and (kb is None or kb is True)
    if kb is None or kb is True:
        searcher = open_knowledge_base(kb_dir, diagnosis.notes, chroma_url=chroma_url)
    elif kb is False:
        searcher = None
    else:
        searcher = kb
    numbered: "OrderedDict[str, Citation]" = OrderedDict()

    def number(citation: Citation) -> Citation:
        key = citation.doc_id
        if key not in numbered:
            numbered[key] = citation.model_copy(update={"number": len(numbered) + 1})
        return numbered[key].model_copy()

    for finding in diagnosis.findings:
        chosen: list[Citation] = list(finding.sources)
        kb_slots = 1 if (searcher is not None and max_per_finding >= 2) else 0
        card_limit = max(0, max_per_finding - kb_slots - len(chosen))
        chosen += [c for c in pick_cards(finding, question, corpus, card_limit) if c.doc_id not in {x.doc_id for x in chosen}]
        if searcher is not None and len(chosen) < max_per_finding:
            query = " ".join(x for x in (question or "", cause_title("en", finding.cause)) if x)
            try:
                hits = search_kb(searcher, query, max_per_finding + 2)
            except Exception as exc:  # KnowledgeError, or anything the store raises: cards still answer
                diagnosis.notes.append(
                    _team_note(chroma_url, _server_reason(exc))
                    if on_server
                    else msg("note.kb_local", reason=_first_line(exc))
                )
                searcher = None
                hits = []
            for hit in hits:
                if len(chosen) >= max_per_finding:
                    break
                if hit.doc_id not in {x.doc_id for x in chosen}:
                    chosen.append(hit)
        finding.sources = [number(c) for c in chosen[: max(max_per_finding, len(finding.sources))]]
    return list(numbered.values())


def passage_text(citation: Citation) -> str:
    """The fullest text known for a citation: its card section, the search hit's passage, else its snippet."""
    if citation.chunk_id:
        if citation.chunk_id in _PASSAGES:
            return _PASSAGES[citation.chunk_id]
        if citation.kind == "card":
            for chunk in card_corpus(None).chunks:
                if chunk.chunk_id == citation.chunk_id:
                    return chunk.text
    return citation.snippet or ""


def card_upstream(citation: Citation) -> list[str]:
    """The public sources a card was written from (its front matter's ``sources``)."""
    if citation.kind != "card":
        return []
    card = card_corpus(None).cards.get(citation.doc_id)
    return list(card.metadata.get("sources") or []) if card is not None else []


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
