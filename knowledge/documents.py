"""What the knowledge base holds: source documents and the chunks cut from them.

One type for every source kind (our tuning cards, vLLM's docs, GitHub issue threads), so the index,
retrieval and the citations in answers never care where a passage came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

SourceKind = Literal["card", "doc", "issue"]


@dataclass
class SourceDocument:
    """A whole source before chunking: one card, one docs page, one issue thread."""

    doc_id: str  # stable: "card:kv-capacity-long-prompts", "doc:configuration/optimization.md", "issue:vllm-project/vllm#1026"
    kind: SourceKind
    title: str
    url: str
    text: str  # Markdown (cards, docs) or the thread rendered as text (issues)
    version: str | None = None  # vLLM version the source describes, when known
    metadata: dict[str, Any] = field(default_factory=dict)  # causes, labels, state, dates, path, ...

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Chunk:
    """A retrievable passage with everything a citation needs."""

    chunk_id: str  # doc_id + "#" + ordinal
    doc_id: str
    kind: SourceKind
    title: str
    url: str
    heading: str  # heading path inside the document, " > "-joined; "" for none
    text: str
    version: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256((self.heading + "\n" + self.text).encode("utf-8")).hexdigest()[:16]
