"""The knowledge base: chunks in a Chroma collection, searched by meaning and by keywords at once.

* Store: a Chroma ``PersistentClient`` in the user's data folder (see :mod:`.paths`), or a Chroma
  server shared by a team (``chroma_url``). One collection; every chunk carries what a citation needs
  (title, URL, heading path, version, kind) and the hash of what was embedded.
* Incremental: re-ingesting a source embeds only chunks whose text (with title and heading) is new;
  a chunk that only moved is re-stored with its old vector; pages that disappeared from a source
  lose their chunks.
* Retrieval: the embedding model's nearest chunks and BM25's best chunks, fused by reciprocal rank
  (each list contributes 1/(60 + rank)), then at most ``per_doc`` chunks per document. Chinese
  questions go through the domain glossary first (see :mod:`.glossary`).
* Queries with the default model are embedded by its ONNX copy (onnxruntime, no torch: about 4 s
  less from process start to the first answer), written to ``models/`` next to the index when
  chunks are embedded and checked against torch before use; without a usable copy they use torch.
* Robustness: an index that cannot be opened or queried (a garbled SQLite file, a deleted segment)
  is wiped and rebuilt from the packaged cards and the sources recorded in ``sources.yaml``, with a
  one-line message; an index that vanished is rebuilt the same way. A Chroma server that is down,
  never answers (bounded heartbeat and request timeouts) or stops mid-session is one
  :class:`IndexUnavailableError` line, and the next call reconnects.

chromadb and the embedding model are imported only when a method needs them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from .bm25_index import Bm25Index, build_bm25, load_bm25, save_bm25
from .cards import CARDS_SOURCE, load_cards
from .chunking import chunk_document, embedding_text
from .documents import Chunk, SourceDocument
from .embeddings import DEFAULT_MODEL, Embedder, SentenceTransformerEmbedder, is_default_model
from .errors import EmbeddingModelError, IndexUnavailableError, KnowledgeError, OnnxModelUnavailable
from .glossary import ExpandedQuery, expand_query
from .paths import BM25_SUBDIR, CHROMA_SUBDIR, MODELS_SUBDIR, resolve_kb_dir
from .registry import Registry, SourceRecord
from .search_snapshot import SNAPSHOT_SUBDIR, Snapshot, SnapshotDamaged, load_current, save_snapshot
from .snippets import make_snippet
from .text_tokens import tokenize

COLLECTION = "vllm-advisor-kb"
SCHEMA_VERSION = 1
RRF_K = 60  # the constant of Cormack et al.'s reciprocal rank fusion; damps the weight of rank 1
CANDIDATES = 40  # chunks each retriever contributes before fusion
WRITE_BATCH = 500
EMBED_BATCH = 64  # texts per encode call (and per progress update)
ENCODE_BATCH = 32  # texts per forward pass: measured faster than 64 on 2 cores, same vectors
VALID_KINDS = ("card", "doc", "issue")
#: chromadb's HTTP client waits forever (httpx ``timeout=None``): a Chroma server that accepts the
#: connection and never answers would hang every command. These bound the heartbeat checked before
#: the client is made, and every request after it.
SERVER_CONNECT_TIMEOUT_S = 5.0
SERVER_HEARTBEAT_TIMEOUT_S = 10.0
SERVER_REQUEST_TIMEOUT_S = 60.0

#: progress(stage, done, total): stage is "chunking", "embedding", "writing" or "keyword index".
Progress = Callable[[str, int, int], None]


@dataclass
class SearchResult:
    """One retrieved passage and everything a citation needs."""

    chunk_id: str
    doc_id: str
    kind: str
    title: str
    url: str
    heading: str
    snippet: str
    text: str
    version: str | None
    source: str
    path: str | None
    score: float  # fused reciprocal-rank score (higher is better; 2/61 is the maximum)
    dense_rank: int | None  # 1-based rank in the embedding search, None when not among its candidates
    bm25_rank: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class IngestReport:
    source: str
    documents: int
    chunks: int
    embedded: int  # chunks that went through the model
    unchanged: int  # chunks already stored with the same hash and metadata: nothing done
    reused: int  # chunks whose text was stored under another id or with other metadata: vector kept
    deleted: int  # chunks removed (pages gone from the source, or pages that got shorter)
    seconds: float

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"chunks_per_second": round(self.chunks_per_second, 1)}


@dataclass
class SourceStatus:
    source: str
    kind: str
    versions: list[str]
    documents: int
    chunks: int
    path: str | None = None
    ingested_at: str | None = None


@dataclass
class KnowledgeStatus:
    location: str
    health: str  # "ok", "empty", "missing: ...", "corrupt: ..."
    embedding_model: str | None
    chunks: int
    sources: list[SourceStatus] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def _is_server_failure(exc: BaseException) -> bool:
    """A request to a Chroma server that failed on the way (refused, reset, timed out) or was refused
    by the server (chromadb's ChromaError, e.g. a collection deleted by someone else)."""
    import httpx
    from chromadb.errors import ChromaError

    return isinstance(exc, (httpx.HTTPError, ChromaError))


def _server_guard(method: Callable) -> Callable:
    """On a Chroma server, a failure mid-session (the server stopped, a request timed out) becomes a
    one-line :class:`IndexUnavailableError` instead of httpx's traceback; the next call reconnects."""

    @functools.wraps(method)
    def wrapper(self: "KnowledgeBase", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except KnowledgeError:
            raise
        except Exception as exc:
            if not self.chroma_url or not _is_server_failure(exc):
                raise
            self._collection = None
            import httpx

            what = "stopped answering" if isinstance(exc, httpx.TransportError) else "failed"
            raise IndexUnavailableError(f"the Chroma server {what} ({_first_line(exc)})", source=self.chroma_url) from None

    return wrapper


def _check_heartbeat(base_url: str) -> None:
    """A bounded heartbeat before chromadb's client (which would wait forever) is made."""
    import httpx

    timeout = httpx.Timeout(SERVER_HEARTBEAT_TIMEOUT_S, connect=SERVER_CONNECT_TIMEOUT_S)
    try:
        httpx.get(f"{base_url}/api/v2/heartbeat", timeout=timeout)
    except httpx.TimeoutException as exc:
        limit = SERVER_CONNECT_TIMEOUT_S if isinstance(exc, httpx.ConnectTimeout) else SERVER_HEARTBEAT_TIMEOUT_S
        raise IndexUnavailableError(f"the Chroma server does not answer (no heartbeat within {limit:g} s)", source=base_url) from None
    except httpx.HTTPError as exc:
        raise IndexUnavailableError(f"cannot reach the Chroma server ({_first_line(exc)})", source=base_url) from None


def _chunk_hash(model: str, chunk: Chunk) -> str:
    """Changes whenever the vector would: another model, title, heading or text."""
    return hashlib.sha256(f"{model}\n{embedding_text(chunk)}".encode("utf-8")).hexdigest()[:16]


def _chunk_metadata(chunk: Chunk, ordinal: int, source: str, model: str) -> dict[str, Any]:
    extra = {k: v for k, v in chunk.metadata.items() if k not in ("path", "source")}
    return {
        "doc_id": chunk.doc_id,
        "kind": chunk.kind,
        "title": chunk.title,
        "url": chunk.url,
        "heading": chunk.heading,
        "version": chunk.version or "",
        "source": source,
        "path": str(chunk.metadata.get("path") or ""),
        "ordinal": ordinal,
        "hash": _chunk_hash(model, chunk),
        "content_hash": chunk.content_hash,
        "extra": json.dumps(extra, ensure_ascii=False, sort_keys=True, default=str),
    }


def _bm25_text(meta: dict[str, Any], text: str) -> str:
    return f"{meta.get('title', '')}\n{meta.get('heading', '')}\n{text}"


def document_source(doc: SourceDocument) -> str:
    """The source a document belongs to: its metadata's ``source``, else one per kind."""
    return str(doc.metadata.get("source") or {"card": CARDS_SOURCE, "doc": "docs", "issue": "issues"}[doc.kind])


class KnowledgeBase:
    """One knowledge index (a folder, or a collection on a Chroma server) and how to fill and search it.

    ``embedding_model``: a sentence-transformers model name or folder; None means the model the index
    was built with (all-MiniLM-L6-v2 for a new one). ``embedder``: one to use for chunks and queries
    alike (tests pass a shared one). ``notify`` receives one-line messages (index rebuilt, first
    build, queries falling back to torch); they are also kept in ``messages``.
    """

    def __init__(
        self,
        kb_dir: str | Path | None = None,
        *,
        chroma_url: str | None = None,
        embedding_model: str | None = None,
        embedder: Embedder | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.kb_dir = resolve_kb_dir(kb_dir)
        self.chroma_url = chroma_url
        self.requested_model = embedder.name if embedder is not None else embedding_model
        self._embedder = embedder
        self._query_embedder: Embedder | None = embedder
        self._notify = notify
        self.messages: list[str] = []
        self.registry = Registry.load(self.kb_dir)
        self._collection = None
        self._bm25: Bm25Index | None = None
        self._rebuild_reason: str | None = None
        self._snapshot: Snapshot | None | bool = None  # False: looked, none current

    # -- where and what --------------------------------------------------------------------------

    @property
    def location(self) -> str:
        return self.chroma_url or str(self.kb_dir / CHROMA_SUBDIR)

    @property
    def bm25_dir(self) -> Path:
        if self.chroma_url:
            tag = hashlib.sha256(self.chroma_url.encode()).hexdigest()[:10]
            return self.kb_dir / f"{BM25_SUBDIR}-{tag}"
        return self.kb_dir / BM25_SUBDIR

    @property
    def models_dir(self) -> Path:
        return self.kb_dir / MODELS_SUBDIR

    def _say(self, message: str) -> None:
        self.messages.append(message)
        if self._notify:
            self._notify(message)

    # -- opening, health and repair --------------------------------------------------------------

    def _client(self):
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if self.chroma_url:
            parts = urlsplit(self.chroma_url if "://" in self.chroma_url else f"http://{self.chroma_url}")
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise IndexUnavailableError("expected http://HOST:PORT or https://HOST:PORT", source=self.chroma_url)
            https = parts.scheme == "https"
            port = parts.port or (443 if https else 8000)
            _check_heartbeat(f"{parts.scheme}://{parts.hostname}:{port}")
            client = _bounded(
                lambda: chromadb.HttpClient(host=parts.hostname, port=port, ssl=https, settings=settings),
                SERVER_REQUEST_TIMEOUT_S,
                f"the Chroma server answered its heartbeat but not the client's handshake within {SERVER_REQUEST_TIMEOUT_S:g} s",
                self.chroma_url,
            )
            session = getattr(getattr(client, "_server", None), "_session", None)  # chromadb's httpx.Client
            if session is not None:
                import httpx

                session.timeout = httpx.Timeout(SERVER_REQUEST_TIMEOUT_S, connect=SERVER_CONNECT_TIMEOUT_S)
            return client
        path = self.kb_dir / CHROMA_SUBDIR
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings)

    def _open_collection(self):
        client = self._client()
        return client.get_or_create_collection(COLLECTION, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)

    @staticmethod
    def _probe(collection) -> int:
        """Count the chunks and run one vector query: reading the SQLite file and the vector segment."""
        count = collection.count()
        if count:
            dim = int((collection.metadata or {}).get("dimension") or 0)
            if dim <= 0:
                raise KnowledgeError("collection has chunks but no recorded embedding dimension")
            collection.query(query_embeddings=[[1.0 / math.sqrt(dim)] * dim], n_results=1, include=["distances"])
        return count

    def _wipe_local(self) -> None:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()  # chromadb caches one system per path; it would keep the broken one
        shutil.rmtree(self.kb_dir / CHROMA_SUBDIR, ignore_errors=True)
        shutil.rmtree(self.bm25_dir, ignore_errors=True)

    def collection(self, *, repair: bool = True):
        """The Chroma collection, opened once; a store that fails to open or answer is wiped and
        marked for rebuilding (``repair``), or reported as :class:`IndexUnavailableError`."""
        if self._collection is not None:
            return self._collection
        try:
            collection = self._open_collection()
            count = self._probe(collection)
        except BaseException as exc:  # chromadb's Rust core raises pyo3 PanicException, a BaseException
            if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            if isinstance(exc, IndexUnavailableError):
                raise
            if self.chroma_url:
                raise IndexUnavailableError(f"cannot use the Chroma server: {_first_line(exc)}", source=self.chroma_url) from None
            if not repair:
                raise IndexUnavailableError(f"index is unreadable ({_first_line(exc)})", source=self.location) from None
            self._say(f"knowledge index at {self.location} is unreadable ({_first_line(exc)}); rebuilding it")
            self._rebuild_reason = "corrupt"
            self._wipe_local()
            try:
                collection = self._open_collection()
            except Exception as exc2:
                raise IndexUnavailableError(f"cannot create the index ({_first_line(exc2)})", source=self.location) from None
            count = 0
        expected = sum(rec.chunks for rec in self.registry.sources.values())
        if count == 0 and expected > 0 and self._rebuild_reason is None:
            if not repair:
                raise IndexUnavailableError(f"index is missing (sources.yaml lists {expected} chunks)", source=self.location)
            self._say(f"knowledge index at {self.location} is missing (sources.yaml lists {expected} chunks); rebuilding it")
            self._rebuild_reason = "missing"
        self._collection = collection
        return collection

    # -- the embedding model ----------------------------------------------------------------------

    def _index_model(self) -> str | None:
        meta = self.collection().metadata or {}
        return meta.get("embedding_model")

    def _same_model(self, a: str | None, b: str | None) -> bool:
        return (is_default_model(a) and is_default_model(b)) or a == b

    def embedder(self, *, allow_switch: bool = False) -> Embedder:
        """The model that reads queries and chunks: the index's own unless another is asked for.

        Asking for another model than the index was built with is an error for search and ingest
        (the vectors would not be comparable); ``kb build`` passes ``allow_switch`` and re-embeds.
        """
        if self._embedder is not None and not allow_switch:
            return self._embedder
        index_model = self._index_model()
        collection = self.collection()
        if self.requested_model and index_model and not self._same_model(self.requested_model, index_model) and collection.count():
            if not allow_switch:
                raise EmbeddingModelError(
                    f"the index at {self.location} was built with '{index_model}', not '{self.requested_model}': "
                    f"search it without --embedding-model, or re-embed it with `kb build --embedding-model {self.requested_model}`"
                )
            self._say(f"embedding model changes from '{index_model}' to '{self.requested_model}': re-embedding every chunk")
            self._reset_collection()
            self._query_embedder = None
        if self._embedder is None:
            self._embedder = SentenceTransformerEmbedder(self.requested_model or index_model or DEFAULT_MODEL)
        return self._embedder

    def query_embedder(self) -> Embedder:
        """The model that reads queries: the default model's ONNX copy when there is a usable one,
        else the torch model (which then writes the copy, once, for the next process)."""
        if self._query_embedder is not None:
            return self._query_embedder
        embedder = self.embedder()  # refuses a model other than the index's; loads nothing
        if not (is_default_model(embedder.name) and isinstance(embedder, SentenceTransformerEmbedder)):
            self._query_embedder = embedder
            return embedder
        from .onnx_embedder import OnnxEmbedder

        try:
            self._query_embedder = OnnxEmbedder.open(self.models_dir, embedder.name, embedder.location)
        except OnnxModelUnavailable as exc:
            self._query_embedder = embedder
            self._say(f"queries use torch this time (about 4 s more to start): {exc}")
            self._ensure_onnx(embedder, force=exc.exportable)
        return self._query_embedder

    def warm_query_embedder(self) -> None:
        """Open the search snapshot and its query model's ONNX copy before the first search: `ask`
        calls this on a background thread at its start, where onnxruntime builds its session without
        holding the GIL, beside the diagnosis (0.15-0.2 s of a 2-core machine's wall time). Only the
        snapshot's path (no chromadb, no torch): when it does not apply, the first search takes the
        usual path and says why."""
        snapshot = self._current_snapshot()
        if snapshot is not None:
            self._snapshot_query_embedder(snapshot)

    def _ensure_onnx(self, embedder: Embedder, *, force: bool = False) -> None:
        """Write (or confirm) the default model's ONNX copy from the loaded torch model; never fails an ingest."""
        if not (is_default_model(embedder.name) and isinstance(embedder, SentenceTransformerEmbedder)):
            return
        from .onnx_export import ensure_onnx_copy

        try:
            outcome = ensure_onnx_copy(embedder, self.models_dir, force=force)
        except (OSError, EmbeddingModelError) as exc:
            self._say(f"could not write the ONNX copy of {embedder.name} to {self.models_dir} ({_first_line(exc)}); queries will use torch")
            return
        if outcome.status == "exported":
            self._say(
                f"exported {embedder.name} to ONNX for queries without torch ({self.models_dir}, "
                f"agrees with torch to cosine {outcome.manifest.min_cosine:.7f}, {outcome.seconds:.1f} s)"
            )
        elif outcome.status == "rejected" and outcome.seconds > 0:
            self._say(f"ONNX copy of {embedder.name} not kept ({outcome.manifest.reason}); queries will use torch")

    def _reset_collection(self) -> None:
        client = self._client()
        client.delete_collection(COLLECTION)
        self._collection = client.get_or_create_collection(
            COLLECTION, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        self._bm25 = None

    # -- ingesting --------------------------------------------------------------------------------

    @_server_guard
    def ingest_documents(
        self,
        documents: Iterable[SourceDocument],
        *,
        source: str | None = None,
        prune: bool = False,
        progress: Progress | None = None,
        _repairing: bool = False,
    ) -> IngestReport:
        """Add or refresh documents; embed only what changed.

        ``source``: the source all these documents belong to (default: each document's
        ``metadata["source"]``, else "cards"/"docs"/"issues" by kind). ``prune``: also delete the
        chunks of documents of ``source`` that are not in ``documents`` (a page deleted upstream).
        Documents whose id is already indexed are replaced: their old chunks go, unchanged ones stay.
        """
        started = time.perf_counter()
        docs = list(documents)
        if prune and not source:
            raise KnowledgeError("prune needs the source whose missing documents should be deleted")
        self._validate(docs)
        if not _repairing:
            self._repair_if_needed(progress)
        embedder = self.embedder()
        model = embedder.name
        collection = self.collection()

        # 1. Chunk.
        chunks: list[tuple[Chunk, dict[str, Any]]] = []
        for i, doc in enumerate(docs):
            doc_source = source or document_source(doc)
            for ordinal, chunk in enumerate(chunk_document(doc)):
                chunks.append((chunk, _chunk_metadata(chunk, ordinal, doc_source, model)))
            if progress:
                progress("chunking", i + 1, len(docs))

        # 2. What is stored already for these documents (and, when pruning, for the whole source).
        doc_ids = [d.doc_id for d in docs]
        existing = self._get_metadata(collection, {"doc_id": {"$in": doc_ids}}) if doc_ids else {}
        stale_ids = set(existing)
        if prune and source:
            keep = set(doc_ids)
            for cid, meta in self._get_metadata(collection, {"source": source}).items():
                if meta.get("doc_id") not in keep:
                    stale_ids.add(cid)

        # 3. Sort chunks into unchanged / reusable vector / needs embedding.
        by_hash = {meta["hash"]: cid for cid, meta in existing.items()}
        unchanged, reuse, fresh = [], [], []
        for chunk, meta in chunks:
            old = existing.get(chunk.chunk_id)
            stale_ids.discard(chunk.chunk_id)
            if old is not None and old == meta:
                unchanged.append(chunk.chunk_id)
            elif meta["hash"] in by_hash:
                reuse.append((chunk, meta, by_hash[meta["hash"]]))
            else:
                fresh.append((chunk, meta))

        # 4. Vectors: old ones for moved chunks, the model for new text.
        vectors: dict[str, list[float]] = {}
        if reuse:
            old_ids = sorted({old for _, _, old in reuse})
            got = collection.get(ids=old_ids, include=["embeddings"])
            old_vectors = {cid: list(map(float, emb)) for cid, emb in zip(got["ids"], got["embeddings"])}
            for chunk, _, old in reuse:
                vectors[chunk.chunk_id] = old_vectors[old]
        # Longest first, so each batch pads its texts to similar lengths (chunks run from a line to
        # ~1,000 characters; in document order a batch pads 64 texts to its longest one).
        fresh.sort(key=lambda item: -len(embedding_text(item[0])))
        for start in range(0, len(fresh), EMBED_BATCH):
            batch = fresh[start : start + EMBED_BATCH]
            encoded = embedder.encode([embedding_text(c) for c, _ in batch], batch_size=ENCODE_BATCH)
            for (chunk, _), vec in zip(batch, encoded):
                vectors[chunk.chunk_id] = vec.tolist()
            if progress:
                progress("embedding", min(start + EMBED_BATCH, len(fresh)), len(fresh))
        if progress and not fresh:
            progress("embedding", 0, 0)

        # 5. Write: delete what is gone, upsert what is new or changed.
        stale = sorted(stale_ids)
        for start in range(0, len(stale), WRITE_BATCH):
            collection.delete(ids=stale[start : start + WRITE_BATCH])
        writes = [(c, m) for c, m, _ in reuse] + fresh
        for start in range(0, len(writes), WRITE_BATCH):
            batch = writes[start : start + WRITE_BATCH]
            collection.upsert(
                ids=[c.chunk_id for c, _ in batch],
                embeddings=[vectors[c.chunk_id] for c, _ in batch],
                documents=[c.text for c, _ in batch],
                metadatas=[m for _, m in batch],
            )
            if progress:
                progress("writing", min(start + WRITE_BATCH, len(writes)), len(writes))

        if writes or stale or not (collection.metadata or {}).get("generation"):
            self._bump_generation(collection, embedder)
        if writes or stale:
            self._refresh_bm25(progress)
        else:
            self._keyword_index()  # nothing changed: load the saved keyword index and snapshot (rebuilt only if stale)
        self._record_sources(collection, {meta["source"] for _, meta in chunks} | ({source} if source else set()), docs)
        if fresh:
            self._ensure_onnx(embedder)  # torch is loaded now: the cheapest moment to write the query copy

        return IngestReport(
            source=source or ", ".join(sorted({document_source(d) for d in docs})) or "-",
            documents=len(docs),
            chunks=len(chunks),
            embedded=len(fresh),
            unchanged=len(unchanged),
            reused=len(reuse),
            deleted=len(stale),
            seconds=time.perf_counter() - started,
        )

    @staticmethod
    def _validate(docs: list[SourceDocument]) -> None:
        seen: set[str] = set()
        for doc in docs:
            if not isinstance(doc, SourceDocument):
                raise KnowledgeError(f"expected SourceDocument objects, got {type(doc).__name__}")
            if not doc.doc_id or doc.kind not in VALID_KINDS:
                raise KnowledgeError(f"document '{doc.doc_id}' has kind '{doc.kind}'; expected one of {', '.join(VALID_KINDS)}")
            if doc.doc_id in seen:
                raise KnowledgeError(f"document id '{doc.doc_id}' appears twice in one ingest")
            seen.add(doc.doc_id)

    @staticmethod
    def _get_metadata(collection, where: dict[str, Any], page: int = 5000) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            got = collection.get(where=where, include=["metadatas"], limit=page, offset=offset)
            out.update(zip(got["ids"], got["metadatas"]))
            if len(got["ids"]) < page:
                return out
            offset += page

    def _bump_generation(self, collection, embedder: Embedder) -> None:
        meta = dict(collection.metadata or {})
        meta.update(
            embedding_model=embedder.name,
            dimension=embedder.dimension,
            generation=uuid.uuid4().hex,
            schema=SCHEMA_VERSION,
        )
        meta.pop("hnsw:space", None)
        collection.modify(metadata=meta)

    def _record_sources(self, collection, sources: set[str], docs: list[SourceDocument]) -> None:
        now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
        for name in sources:
            stored = self._get_metadata(collection, {"source": name})
            rec = self.registry.sources.get(name) or SourceRecord(name=name, kind=docs[0].kind if docs else "doc")
            rec.chunks = len(stored)
            rec.documents = len({m["doc_id"] for m in stored.values()})
            versions = sorted({m["version"] for m in stored.values() if m.get("version")})
            rec.version = ", ".join(versions) or None
            if stored:
                rec.kind = next(iter(stored.values()))["kind"]
            rec.ingested_at = now
            self.registry.sources[name] = rec
        self.registry.save()

    # -- sources ----------------------------------------------------------------------------------

    def ingest_cards(self, *, progress: Progress | None = None, _repairing: bool = False) -> IngestReport:
        """The packaged cards; always part of the index."""
        return self.ingest_documents(load_cards(), source=CARDS_SOURCE, prune=True, progress=progress, _repairing=_repairing)

    def ingest_markdown_folder(
        self,
        folder: str | Path,
        *,
        source: str | None = None,
        version: str | None = None,
        base_url: str | None = None,
        progress: Progress | None = None,
        _repairing: bool = False,
    ) -> IngestReport:
        """Every page of a Markdown folder; pages deleted since the last ingest lose their chunks."""
        from .markdown_docs import VLLM_DOCS_SOURCE, VLLM_DOCS_URL, load_markdown_folder

        source = source or VLLM_DOCS_SOURCE
        base_url = base_url or VLLM_DOCS_URL
        docs = load_markdown_folder(folder, version=version, base_url=base_url, source=source)
        report = self.ingest_documents(docs, source=source, prune=True, progress=progress, _repairing=_repairing)
        rec = self.registry.sources[source]
        rec.path, rec.base_url = str(Path(folder).expanduser().resolve()), base_url
        if version:
            rec.version = version
        self.registry.save()
        return report

    def set_docs_folder(self, source: str, folder: str | Path, *, version: str | None = None, base_url: str | None = None) -> None:
        """Make ``folder`` the one ``source`` is read from at the next :meth:`build` (which then prunes
        the pages the old folder had and this one lacks); nothing is ingested here."""
        from .markdown_docs import VLLM_DOCS_URL

        rec = self.registry.sources.get(source) or SourceRecord(name=source, kind="doc")
        rec.kind = "doc"
        rec.path = str(Path(folder).expanduser().resolve())
        rec.version = version or rec.version
        rec.base_url = base_url or rec.base_url or VLLM_DOCS_URL
        self.registry.sources[source] = rec
        self.registry.save()

    def ingest_issue_file(
        self, path: str | Path, *, source: str = "issues", progress: Progress | None = None, _repairing: bool = False
    ) -> IngestReport:
        """Issue threads from a JSONL file written by ``fetch_issues`` (one thread per line)."""
        from .github_issues import load_issue_threads

        docs = load_issue_threads(path)
        for doc in docs:
            doc.metadata.setdefault("source", source)
        report = self.ingest_documents(docs, source=source, prune=False, progress=progress, _repairing=_repairing)
        rec = self.registry.sources[source]
        rec.path = str(Path(path).expanduser().resolve())
        self.registry.save()
        return report

    @_server_guard
    def build(self, *, progress: Progress | None = None, on_report: Callable[[IngestReport], None] | None = None) -> list[IngestReport]:
        """Cards plus every configured source (sources.yaml), each refreshed incrementally."""
        self.collection()
        self.embedder(allow_switch=True)
        self._rebuild_reason = None  # build re-ingests everything anyway
        reports = self._ingest_all(progress, on_report)
        self._ensure_onnx(self.embedder())  # even when nothing was embedded (an index built before the copy existed)
        return reports

    def _ingest_all(self, progress: Progress | None, on_report: Callable[[IngestReport], None] | None) -> list[IngestReport]:
        reports = [self.ingest_cards(progress=progress, _repairing=True)]
        if on_report:
            on_report(reports[-1])
        for name, rec in sorted(self.registry.sources.items()):
            if name == CARDS_SOURCE or not rec.path:
                continue
            if not Path(rec.path).exists():
                self._say(f"source '{name}': {rec.path} no longer exists; its {rec.chunks} chunks are kept as they are")
                continue
            if rec.kind == "issue":
                report = self.ingest_issue_file(rec.path, source=name, progress=progress, _repairing=True)
            else:
                from .markdown_docs import read_folder_version

                # A version given on the command line (no SOURCE.md in the folder) is remembered in the registry.
                version = None if read_folder_version(Path(rec.path)) else rec.version
                report = self.ingest_markdown_folder(
                    rec.path, source=name, version=version, base_url=rec.base_url, progress=progress, _repairing=True
                )
            reports.append(report)
            if on_report:
                on_report(report)
        return reports

    def _repair_if_needed(self, progress: Progress | None) -> None:
        """Rebuild a corrupt or missing index, or index the cards into a new one, before using it."""
        collection = self.collection()
        if self._rebuild_reason is not None:
            self._rebuild_reason = None
            self._ingest_all(progress, None)
        elif collection.count() == 0:
            self._say(f"no knowledge index at {self.location} yet: indexing the packaged cards first")
            self.ingest_documents(load_cards(), source=CARDS_SOURCE, prune=True, progress=progress, _repairing=True)

    # -- keyword index ----------------------------------------------------------------------------

    def _generation(self) -> str:
        return str((self.collection().metadata or {}).get("generation") or "")

    def _refresh_bm25(self, progress: Progress | None = None) -> Bm25Index:
        collection = self.collection()
        generation = self._generation()
        ids: list[str] = []
        texts: list[str] = []
        kinds: list[str] = []
        documents: list[str] = []
        metadatas: list[dict[str, Any]] = []
        vectors: list[Any] = []
        local = not self.chroma_url  # a server's chunks are never copied to this machine
        include = ["documents", "metadatas", "embeddings"] if local else ["documents", "metadatas"]
        page, offset, total = 5000, 0, collection.count()
        while True:
            got = collection.get(include=include, limit=page, offset=offset)
            for cid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                ids.append(cid)
                texts.append(_bm25_text(meta, doc or ""))
                kinds.append(str(meta.get("kind", "")))
                documents.append(doc or "")
                metadatas.append(dict(meta))
            if local:
                vectors.extend(got["embeddings"])
            if progress:
                progress("keyword index", len(ids), total)
            if len(got["ids"]) < page:
                break
            offset += page
        index = build_bm25(ids, texts, kinds, generation)
        try:
            save_bm25(index, self.bm25_dir)
        except OSError as exc:  # a read-only data folder still searches, it just rebuilds next time
            self._say(f"could not save the keyword index to {self.bm25_dir}: {exc.strerror or exc}")
        if local:
            self._save_snapshot(generation, ids, kinds, documents, metadatas, vectors)
        self._bm25 = index
        return index

    # -- the search snapshot (local indexes: searching without importing chromadb) -----------------

    @property
    def snapshot_dir(self) -> Path:
        return self.kb_dir / SNAPSHOT_SUBDIR

    def _save_snapshot(self, generation: str, ids, kinds, documents, metadatas, vectors) -> None:
        import numpy as np

        model = str((self.collection().metadata or {}).get("embedding_model") or "")
        dim = int((self.collection().metadata or {}).get("dimension") or 0)
        array = np.asarray(vectors, dtype=np.float32) if len(vectors) else np.zeros((0, dim), dtype=np.float32)
        try:
            save_snapshot(self.snapshot_dir, Snapshot(generation, model, ids, kinds, documents, metadatas, array))
        except OSError as exc:  # searches then go through chromadb, as before
            self._say(f"could not save the search snapshot to {self.snapshot_dir}: {exc.strerror or exc}")
        self._snapshot = None

    def _current_snapshot(self) -> Snapshot | None:
        """The snapshot when it matches the local store (see :mod:`.search_snapshot`), else None."""
        if self.chroma_url or self._collection is not None or self._rebuild_reason is not None:
            return None  # a server, or chromadb is open already: no reason to avoid it
        if self._snapshot is None:
            self._snapshot = load_current(self.snapshot_dir, self.kb_dir / CHROMA_SUBDIR, COLLECTION) or False
            if self._snapshot and isinstance(self._snapshot.documents, list):  # schema 1: rewrite as rows read on demand
                try:
                    save_snapshot(self.snapshot_dir, self._snapshot)
                except OSError:
                    pass  # a read-only index: schema 1 still serves
        return self._snapshot or None

    def searchable_chunks(self) -> int:
        """How many chunks a search can return: from the snapshot when current, else the store's count
        (opened without repairing; an unusable store raises :class:`IndexUnavailableError`)."""
        snapshot = self._current_snapshot()
        if snapshot is not None:
            return len(snapshot.ids)
        return self.collection(repair=False).count()

    def _snapshot_query_embedder(self, snapshot: Snapshot) -> Embedder | None:
        """The query model for a snapshot search, without opening the store; None to take the normal path."""
        if self._query_embedder is not None:
            return self._query_embedder if self._same_model(self._query_embedder.name, snapshot.model) else None
        if self.requested_model and not self._same_model(self.requested_model, snapshot.model):
            return None  # the normal path says why the model does not fit
        if not is_default_model(snapshot.model):
            return None
        from .embeddings import model_location
        from .onnx_embedder import OnnxEmbedder

        try:
            self._query_embedder = OnnxEmbedder.open(self.models_dir, DEFAULT_MODEL, model_location(DEFAULT_MODEL))
        except (OnnxModelUnavailable, EmbeddingModelError):
            return None  # the normal path falls back to torch and rewrites the copy
        return self._query_embedder

    def _keyword_index(self) -> Bm25Index:
        generation = self._generation()
        if self._bm25 is not None and self._bm25.generation == generation:
            return self._bm25
        loaded = load_bm25(self.bm25_dir, generation)
        if loaded is not None and (self.chroma_url or self._snapshot_written(generation)):
            self._bm25 = loaded
            return loaded
        return self._refresh_bm25()  # also (re)writes the search snapshot of an index built before it existed

    def _snapshot_written(self, generation: str) -> bool:
        try:
            return json.loads((self.snapshot_dir / "chunks.json").read_text(encoding="utf-8")).get("generation") == generation
        except (OSError, ValueError, AttributeError):
            return False

    # -- searching --------------------------------------------------------------------------------

    def expand(self, query: str, *, use_glossary: bool = True) -> ExpandedQuery:
        snapshot = self._current_snapshot()
        model = (snapshot.model if snapshot is not None else self._index_model()) or self.requested_model
        if not use_glossary:
            return ExpandedQuery(query, query, query)
        return expand_query(query, keep_cjk_for_dense=not is_default_model(model))

    @_server_guard
    def search(
        self,
        query: str,
        k: int = 5,
        *,
        kinds: Iterable[str] | None = None,
        per_doc: int = 1,
        candidates: int = CANDIDATES,
        retrievers: tuple[str, ...] = ("dense", "bm25"),
        use_glossary: bool = True,
    ) -> list[SearchResult]:
        """The ``k`` best passages for ``query`` (English or Chinese), best first.

        ``retrievers`` and ``use_glossary`` exist to measure what each part contributes (the
        benchmark reports recall with one retriever alone and without the glossary).
        """
        query = " ".join(query.split())
        if not query:
            raise KnowledgeError("the query is empty")
        if k < 1:
            raise KnowledgeError(f"k must be at least 1, got {k}")
        kind_set = set(kinds) if kinds else None
        if kind_set and not kind_set <= set(VALID_KINDS):
            raise KnowledgeError(f"unknown kind(s) {', '.join(sorted(kind_set - set(VALID_KINDS)))}; expected {', '.join(VALID_KINDS)}")
        snapshot = self._current_snapshot()
        query_embedder = self._snapshot_query_embedder(snapshot) if snapshot is not None and "dense" in retrievers else None
        if snapshot is not None and (query_embedder is not None or "dense" not in retrievers):
            try:
                return self._search_snapshot(snapshot, query_embedder, query, k, kind_set, per_doc, candidates, retrievers, use_glossary)
            except SnapshotDamaged:
                self._snapshot = False  # the store answers from now on
                self._bm25 = None
        self._repair_if_needed(None)
        collection = self.collection()
        total = collection.count()
        if total == 0:
            return []
        expanded = self.expand(query, use_glossary=use_glossary)
        n = min(max(candidates, k * 4), total)

        dense: list[str] = []
        if "dense" in retrievers:
            vector = self.query_embedder().encode([expanded.dense_text])
            where = {"kind": {"$in": sorted(kind_set)}} if kind_set else None
            try:
                dense = collection.query(query_embeddings=vector.tolist(), n_results=n, where=where, include=["distances"])["ids"][0]
            except BaseException as exc:
                if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                    raise
                if self.chroma_url and _is_server_failure(exc):
                    raise  # the server's failure, not the index's: _server_guard says so
                raise IndexUnavailableError(
                    f"vector search failed ({_first_line(exc)}); run `vllm-advisor kb build`", source=self.location
                ) from None
        keyword: list[str] = []
        if "bm25" in retrievers:
            keyword = [cid for cid, _ in self._keyword_index().search(expanded.bm25_text, n, kinds=kind_set)]
        return self._fuse(collection, dense, keyword, expanded, k, per_doc)

    def _search_snapshot(self, snapshot: Snapshot, embedder: Embedder | None, query: str, k: int, kind_set: set[str] | None,
                         per_doc: int, candidates: int, retrievers: tuple[str, ...], use_glossary: bool) -> list[SearchResult]:
        """:meth:`search` over the snapshot: the same retrievers, fusion and results, no chromadb."""
        total = len(snapshot.ids)
        if total == 0:
            return []
        expanded = self.expand(query, use_glossary=use_glossary)
        n = min(max(candidates, k * 4), total)
        dense = snapshot.dense(embedder.encode([expanded.dense_text])[0], n, kind_set) if embedder is not None else []
        keyword: list[str] = []
        if "bm25" in retrievers:
            index = self._bm25 if self._bm25 is not None and self._bm25.generation == snapshot.generation else load_bm25(self.bm25_dir, snapshot.generation)
            if index is None:
                index = build_bm25(snapshot.ids, [_bm25_text(m, d) for d, m in zip(snapshot.documents, snapshot.metadatas)], snapshot.kinds, snapshot.generation)
            self._bm25 = index
            keyword = [cid for cid, _ in index.search(expanded.bm25_text, n, kinds=kind_set)]
        return self._fuse(None, dense, keyword, expanded, k, per_doc, stored_of=snapshot.get)

    def _fuse(self, collection, dense: list[str], keyword: list[str], expanded: ExpandedQuery, k: int, per_doc: int,
              stored_of: Callable[[list[str]], dict[str, tuple[str, dict[str, Any]]]] | None = None) -> list[SearchResult]:
        scores: dict[str, float] = {}
        for ranking in (dense, keyword):
            for rank, cid in enumerate(ranking, start=1):
                scores[cid] = scores.get(cid, 0.0) + 1.0 / (RRF_K + rank)
        ordered = sorted(scores, key=lambda cid: (-scores[cid], cid))
        dense_rank = {cid: i for i, cid in enumerate(dense, start=1)}
        bm25_rank = {cid: i for i, cid in enumerate(keyword, start=1)}
        if stored_of is not None:
            stored = stored_of(ordered)
        else:
            got = collection.get(ids=ordered, include=["documents", "metadatas"])
            stored = {cid: (doc, meta) for cid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"])}
        query_tokens = set(tokenize(expanded.bm25_text))
        results: list[SearchResult] = []
        per_doc_count: dict[str, int] = {}
        for cid in ordered:
            if cid not in stored:
                continue  # deleted since the keyword index was saved
            text, meta = stored[cid]
            doc_id = meta["doc_id"]
            if per_doc_count.get(doc_id, 0) >= per_doc:
                continue
            per_doc_count[doc_id] = per_doc_count.get(doc_id, 0) + 1
            results.append(
                SearchResult(
                    chunk_id=cid,
                    doc_id=doc_id,
                    kind=meta.get("kind", ""),
                    title=meta.get("title", ""),
                    url=meta.get("url", ""),
                    heading=meta.get("heading", ""),
                    snippet=make_snippet(text or "", query_tokens),
                    text=text or "",
                    version=meta.get("version") or None,
                    source=meta.get("source", ""),
                    path=meta.get("path") or None,
                    score=round(scores[cid], 6),
                    dense_rank=dense_rank.get(cid),
                    bm25_rank=bm25_rank.get(cid),
                )
            )
            if len(results) >= k:
                break
        return results

    # -- status -----------------------------------------------------------------------------------

    @_server_guard
    def status(self) -> KnowledgeStatus:
        """What is indexed, per source and version; never repairs (that is for build and search)."""
        try:
            collection = self.collection(repair=False)
        except IndexUnavailableError as exc:
            if self.chroma_url:
                raise  # a server that does not answer is not an index to rebuild
            health = "missing" if "missing" in exc.message else "corrupt"
            return KnowledgeStatus(self.location, f"{health}: {exc.message}; `kb build` or `kb search` rebuilds it", None, 0)
        stored = self._all_metadata(collection)
        groups: dict[str, dict[str, Any]] = {}
        for meta in stored.values():
            g = groups.setdefault(meta.get("source", "?"), {"kind": meta.get("kind", "?"), "versions": set(), "docs": set(), "chunks": 0})
            g["chunks"] += 1
            g["docs"].add(meta.get("doc_id"))
            if meta.get("version"):
                g["versions"].add(meta["version"])
        sources = []
        for name, g in sorted(groups.items()):
            rec = self.registry.sources.get(name)
            sources.append(
                SourceStatus(
                    source=name,
                    kind=g["kind"],
                    versions=sorted(g["versions"]),
                    documents=len(g["docs"]),
                    chunks=g["chunks"],
                    path=rec.path if rec else None,
                    ingested_at=rec.ingested_at if rec else None,
                )
            )
        model = (collection.metadata or {}).get("embedding_model")
        return KnowledgeStatus(self.location, "ok" if stored else "empty", model, len(stored), sources)

    def _all_metadata(self, collection, page: int = 5000) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            got = collection.get(include=["metadatas"], limit=page, offset=offset)
            out.update(zip(got["ids"], got["metadatas"]))
            if len(got["ids"]) < page:
                return out
            offset += page


def ingest_documents(
    documents: Iterable[SourceDocument],
    *,
    kb_dir: str | Path | None = None,
    chroma_url: str | None = None,
    source: str | None = None,
    prune: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Add documents of any kind (cards, docs, issue threads) to the default (or given) index."""
    return KnowledgeBase(kb_dir, chroma_url=chroma_url).ingest_documents(documents, source=source, prune=prune, progress=progress)


def search(query: str, k: int = 5, *, kb_dir: str | Path | None = None, chroma_url: str | None = None) -> list[SearchResult]:
    """The ``k`` best passages from the default (or given) index."""
    return KnowledgeBase(kb_dir, chroma_url=chroma_url).search(query, k)


def _bounded(make: Callable[[], Any], seconds: float, message: str, source: str) -> Any:
    """``make()`` run in a daemon thread, given up after ``seconds``.

    chromadb's ``HttpClient`` sends its first requests (identity, tenant) through an httpx session
    created with ``timeout=None``, before any timeout can be set on it: a server that stalls there
    would hang the command forever. The abandoned thread is a daemon and cannot block exit.
    """
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = make()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=run, name="chroma-connect", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise IndexUnavailableError(message, source=source)
    if "error" in box:
        raise box["error"]
    return box["value"]
