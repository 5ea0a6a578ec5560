"""A read-only copy of a local index for searching it without importing chromadb.

Importing chromadb and opening its store costs 0.7-1.5 s per process (measured with ``python -X
importtime`` on the 2-core development machine), more than the rest of an `ask` with a built index.
A search needs little of it: an exact nearest-neighbour scan over a few thousand 384-float vectors
is one matrix product (about a millisecond with numpy), and the text and metadata of the candidates.

So whenever the keyword index is rebuilt (after every ingest, and when the store's *generation*
changed), the vectors, texts and metadata of every chunk are written beside it
(``<kb_dir>/snapshot/``: ``vectors.npy`` and ``chunks.json``), tagged with that generation. A search
uses the snapshot only when it provably matches the store: the generation recorded in Chroma's own
SQLite file (read with the standard library, read-only) is the snapshot's, and the vector segment
folder still exists. A garbled, deleted or changed store fails that check and takes the normal path
through chromadb, which reports or repairs it as before. Chroma servers are always asked directly.

The texts and metadata (4 MB for vLLM's docs) are one JSON line per chunk (``rows.jsonl``, schema 2)
and a line is parsed when a search returns its chunk: parsing all of them took 40-100 ms of every
`ask`, which reads a few dozen. A snapshot of schema 1 (everything in ``chunks.json``) is still read.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

SNAPSHOT_SUBDIR = "snapshot"
VECTORS_FILE = "vectors.npy"
CHUNKS_FILE = "chunks.json"
ROWS_FILE = "rows.jsonl"
SCHEMA = 2
READABLE_SCHEMAS = (1, 2)


class SnapshotDamaged(ValueError):
    """A row of the snapshot does not parse: the store must answer instead."""


class _Rows:
    """``rows.jsonl`` split into lines, each parsed on first use into ``[text, metadata]``."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self._parsed: dict[int, list[Any]] = {}

    def __len__(self) -> int:
        return len(self._lines)

    def row(self, i: int) -> list[Any]:
        got = self._parsed.get(i)
        if got is None:
            try:
                got = json.loads(self._lines[i])
            except ValueError:
                raise SnapshotDamaged(f"row {i} of the snapshot does not parse") from None
            if not (isinstance(got, list) and len(got) == 2 and isinstance(got[0], str) and isinstance(got[1], dict)):
                raise SnapshotDamaged(f"row {i} of the snapshot is not [text, metadata]")
            self._parsed[i] = got
        return got


class _Column(Sequence):
    """One field of every row (0: text, 1: metadata), as a read-only sequence."""

    def __init__(self, rows: _Rows, field: int) -> None:
        self._rows = rows
        self._field = field

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._rows.row(i)[self._field]


@dataclass
class Snapshot:
    generation: str
    model: str
    ids: list[str]
    kinds: list[str]
    documents: Sequence[str]  # a list, or read from rows.jsonl on access
    metadatas: Sequence[dict[str, Any]]
    vectors: "np.ndarray"  # (n, dimension) float32, unit rows (as stored in the collection)

    def dense(self, query: "np.ndarray", n: int, kinds: set[str] | None = None) -> list[str]:
        """The ids of the ``n`` chunks nearest to ``query`` by cosine (exact scan), best first."""
        import numpy as np

        from .blas_threads import one_blas_thread

        if not self.ids:
            return []
        with one_blas_thread():  # 0.4 ms instead of ~16 ms with two threads on a busy machine
            scores = self.vectors @ np.asarray(query, dtype=np.float32).reshape(-1)
        if kinds:
            allowed = np.fromiter((k in kinds for k in self.kinds), dtype=bool, count=len(self.kinds))
            scores = np.where(allowed, scores, -np.inf)
        n = min(n, int(np.isfinite(scores).sum()))
        if n <= 0:
            return []
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [self.ids[i] for i in top]

    def get(self, ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        where = self._positions()
        return {cid: (self.documents[where[cid]], self.metadatas[where[cid]]) for cid in ids if cid in where}

    def _positions(self) -> dict[str, int]:
        cached = getattr(self, "_pos", None)
        if cached is None:
            cached = {cid: i for i, cid in enumerate(self.ids)}
            self._pos = cached
        return cached


def save_snapshot(folder: Path, snapshot: Snapshot) -> None:
    """Write to a temp folder and swap it in, so a reader never sees half a snapshot."""
    import numpy as np

    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.save(tmp / VECTORS_FILE, np.asarray(snapshot.vectors, dtype=np.float32))
    with (tmp / ROWS_FILE).open("w", encoding="utf-8") as rows:
        for text, metadata in zip(snapshot.documents, snapshot.metadatas):
            rows.write(json.dumps([text, metadata], ensure_ascii=False))  # JSON escapes newlines: one line each
            rows.write("\n")
    meta = {"schema": SCHEMA, "generation": snapshot.generation, "model": snapshot.model, "ids": snapshot.ids, "kinds": snapshot.kinds}
    (tmp / CHUNKS_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def store_generation(chroma_dir: Path, collection: str) -> str | None:
    """The generation Chroma's SQLite file records for ``collection``, when its vector segment folder
    exists; None when the file is missing, unreadable or not Chroma's (then chromadb must look)."""
    path = chroma_dir / "chroma.sqlite3"
    if not path.is_file():
        return None
    conn = None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
        row = conn.execute(
            "SELECT m.str_value, c.id FROM collection_metadata m JOIN collections c ON c.id = m.collection_id "
            "WHERE c.name = ? AND m.key = 'generation'",
            (collection,),
        ).fetchone()
        if row is None:
            return None
        segments = conn.execute("SELECT id, type FROM segments WHERE collection = ?", (row[1],)).fetchall()
    except sqlite3.Error:  # not a database, locked past the timeout, another schema
        return None
    finally:
        if conn is not None:
            conn.close()
    for segment_id, kind in segments:
        if "hnsw" in str(kind) and not (chroma_dir / str(segment_id)).is_dir():
            return None  # the vector segment was deleted: chromadb must notice and repair it
    return str(row[0]) if row[0] else None


def load_current(folder: Path, chroma_dir: Path, collection: str) -> Snapshot | None:
    """The snapshot in ``folder`` when it matches the store in ``chroma_dir``, else None."""
    try:
        meta = json.loads((folder / CHUNKS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("schema") not in READABLE_SCHEMAS or not meta.get("generation"):
        return None
    if store_generation(chroma_dir, collection) != meta["generation"]:
        return None
    try:
        import numpy as np

        vectors = np.load(folder / VECTORS_FILE, allow_pickle=False)
        if meta["schema"] == 1:
            documents, metadatas = list(meta["documents"]), list(meta["metadatas"])
        else:
            data = (folder / ROWS_FILE).read_bytes()
            rows = _Rows(data.split(b"\n")[:-1] if data.endswith(b"\n") else [])
            documents, metadatas = _Column(rows, 0), _Column(rows, 1)
        snapshot = Snapshot(
            str(meta["generation"]), str(meta.get("model") or ""), list(meta["ids"]), list(meta["kinds"]), documents, metadatas, vectors,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    n = len(snapshot.ids)
    if not (len(snapshot.kinds) == len(snapshot.documents) == len(snapshot.metadatas) == n and vectors.shape[0] == n):
        return None
    return snapshot
