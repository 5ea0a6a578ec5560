"""Cutting source documents into retrievable chunks along their headings.

A chunk is a section (or a piece of a long section) with its heading path, so a citation can say
"Optimization and Tuning > Chunked Prefill" and the embedding sees the section's context. Sections
are split by langchain-text-splitters' Markdown header splitter (which knows code fences, so a
``# comment`` in a shell block is not a heading); sections longer than ``CHUNK_CHARS`` are cut again
on paragraph, line and word boundaries. ``CHUNK_CHARS`` is sized to the default embedding model:
all-MiniLM-L6-v2 reads 256 word pieces, about 1,000 characters of English prose, and ignores the rest.
"""

from __future__ import annotations

from functools import lru_cache

from .documents import Chunk, SourceDocument

CHUNK_CHARS = 1000
CHUNK_OVERLAP = 120
#: Sections shorter than this are merged into the next section of the same parent heading: a lone
#: "## Example" with one line carries too little to be found on its own.
MIN_SECTION_CHARS = 160
HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")]


@lru_cache(maxsize=1)
def _splitters():
    from langchain_text_splitters import Language, MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    headers = MarkdownHeaderTextSplitter(headers_to_split_on=HEADERS, strip_headers=True)
    pieces = RecursiveCharacterTextSplitter.from_language(
        Language.MARKDOWN, chunk_size=CHUNK_CHARS, chunk_overlap=CHUNK_OVERLAP
    )
    return headers, pieces


def heading_path(metadata: dict) -> str:
    return " > ".join(metadata[key] for _, key in HEADERS if metadata.get(key))


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading path, body) per section; short sections are carried into the next one."""
    header_splitter, _ = _splitters()
    sections = [(heading_path(d.metadata), d.page_content.strip()) for d in header_splitter.split_text(text)]
    merged: list[tuple[str, str]] = []
    pending: list[tuple[str, str]] = []  # short sections waiting, each with its heading kept inline

    def pending_text() -> str:
        return "\n\n".join(f"**{h.rsplit(' > ', 1)[-1]}**\n{b}" if h else b for h, b in pending).strip()

    for heading, body in sections:
        if len(body) < MIN_SECTION_CHARS:
            pending.append((heading, body))
            if len(pending_text()) >= MIN_SECTION_CHARS:  # enough short ones make a section of their own
                merged.append((_common_heading([h for h, _ in pending]), pending_text()))
                pending.clear()
            continue
        if pending:
            body = f"{pending_text()}\n\n{body}"
            pending.clear()
        merged.append((heading, body))
    if pending:
        if merged:
            heading, body = merged.pop()
            merged.append((heading, f"{body}\n\n{pending_text()}"))
        elif pending_text():
            merged.append((_common_heading([h for h, _ in pending]), pending_text()))
    return merged


def _common_heading(headings: list[str]) -> str:
    """The deepest heading all paths share: merged short sections sit under it."""
    split = [h.split(" > ") for h in headings if h]
    common: list[str] = []
    for level in zip(*split):
        if any(x != level[0] for x in level):
            break
        common.append(level[0])
    return " > ".join(common)


def chunk_document(doc: SourceDocument) -> list[Chunk]:
    """The document's chunks, in reading order, ids ``<doc_id>#<ordinal>``."""
    _, piece_splitter = _splitters()
    chunks: list[Chunk] = []
    for heading, body in _sections(doc.text):
        for piece in piece_splitter.split_text(body):
            piece = piece.strip()
            if sum(ch.isalnum() for ch in piece) < 8:  # a lone code fence or "$$" left by the splitter
                continue
            chunks.append(
                Chunk(
                    chunk_id=f"{doc.doc_id}#{len(chunks)}",
                    doc_id=doc.doc_id,
                    kind=doc.kind,
                    title=doc.title,
                    url=doc.url,
                    heading=heading,
                    text=piece,
                    version=doc.version,
                    metadata=dict(doc.metadata),
                )
            )
    return chunks


def embedding_text(chunk: Chunk) -> str:
    """What the embedding model reads: title and heading path first, so a section about "Chunked
    Prefill" under "Optimization and Tuning" is found by either. The heading's first element is
    dropped when it repeats the title (a page's H1 usually is its title)."""
    heading = chunk.heading
    first, _, rest = heading.partition(" > ")
    if first == chunk.title:
        heading = rest
    context = f"{chunk.title} > {heading}" if heading else chunk.title
    return f"{context}\n{chunk.text}"
