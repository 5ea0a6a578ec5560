"""The search snapshot's rows are parsed when a search returns them (schema 2), a schema-1 snapshot
is still read, and a damaged row is reported instead of served."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from vllm_advisor_knowledge.search_snapshot import CHUNKS_FILE, ROWS_FILE, Snapshot, SnapshotDamaged, load_current, save_snapshot

REPO = Path(__file__).resolve().parents[1]


def _store(chroma_dir: Path, generation: str) -> None:
    """The three tables of Chroma's SQLite file that ``store_generation`` reads."""
    chroma_dir.mkdir(parents=True)
    conn = sqlite3.connect(chroma_dir / "chroma.sqlite3")
    conn.executescript(
        "CREATE TABLE collections (id TEXT, name TEXT);"
        "CREATE TABLE collection_metadata (collection_id TEXT, key TEXT, str_value TEXT);"
        "CREATE TABLE segments (id TEXT, type TEXT, collection TEXT);"
    )
    conn.execute("INSERT INTO collections VALUES ('c1', 'vllm_advisor')")
    conn.execute("INSERT INTO collection_metadata VALUES ('c1', 'generation', ?)", (generation,))
    conn.commit()
    conn.close()


def _snapshot() -> Snapshot:
    """Real card sections: multi-line Markdown, Chinese, quotes and backslashes in the text."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((REPO / "knowledge" / "cards").glob("*.md"))[:6]]
    texts += ["为什么 KV cache 满了？\n第二行 \"引号\" 和 \\ 反斜杠", ""]
    metas = [{"doc_id": f"card:{i}", "kind": "card", "title": f"T{i}", "causes": ["kv_capacity"], "n": i} for i in range(len(texts))]
    vectors = np.random.default_rng(0).standard_normal((len(texts), 8)).astype(np.float32)
    return Snapshot("gen-7", "all-MiniLM-L6-v2", [f"c{i}" for i in range(len(texts))], ["card"] * len(texts), texts, metas, vectors)


def test_rows_are_read_back_exactly_and_only_when_asked(tmp_path):
    original = _snapshot()
    save_snapshot(tmp_path / "snapshot", original)
    _store(tmp_path / "chroma", "gen-7")
    assert json.loads((tmp_path / "snapshot" / CHUNKS_FILE).read_text())["schema"] == 2
    loaded = load_current(tmp_path / "snapshot", tmp_path / "chroma", "vllm_advisor")
    assert loaded is not None and loaded.ids == original.ids and np.array_equal(loaded.vectors, original.vectors)
    assert loaded.documents._rows._parsed == {}  # nothing parsed by opening it
    assert loaded.get(["c2", "c6", "missing"]) == {"c2": (original.documents[2], original.metadatas[2]), "c6": (original.documents[6], original.metadatas[6])}
    assert set(loaded.documents._rows._parsed) == {2, 6}
    assert list(loaded.documents) == original.documents and list(loaded.metadatas) == original.metadatas
    _store(tmp_path / "other", "gen-8")
    assert load_current(tmp_path / "snapshot", tmp_path / "other", "vllm_advisor") is None  # the store moved on


def test_a_schema_1_snapshot_is_still_read(tmp_path):
    original = _snapshot()
    folder = tmp_path / "snapshot"
    folder.mkdir()
    np.save(folder / "vectors.npy", original.vectors)
    meta = {"schema": 1, "generation": "gen-7", "model": original.model, "ids": original.ids, "kinds": original.kinds,
            "documents": original.documents, "metadatas": original.metadatas}
    (folder / CHUNKS_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    _store(tmp_path / "chroma", "gen-7")
    loaded = load_current(folder, tmp_path / "chroma", "vllm_advisor")
    assert loaded is not None and loaded.documents == original.documents and loaded.metadatas == original.metadatas


@pytest.mark.parametrize("damage", [b"[\"cut", b"{\"not\": \"a row\"}"])
def test_a_damaged_row_is_reported_not_served(tmp_path, damage):
    save_snapshot(tmp_path / "snapshot", _snapshot())
    rows = (tmp_path / "snapshot" / ROWS_FILE).read_bytes().split(b"\n")
    rows[3] = damage
    (tmp_path / "snapshot" / ROWS_FILE).write_bytes(b"\n".join(rows))
    _store(tmp_path / "chroma", "gen-7")
    loaded = load_current(tmp_path / "snapshot", tmp_path / "chroma", "vllm_advisor")
    assert loaded is not None and loaded.get(["c2"])["c2"][1]["n"] == 2
    with pytest.raises(SnapshotDamaged):
        loaded.get(["c3"])
    (tmp_path / "snapshot" / ROWS_FILE).write_bytes(b"\n".join(rows[:4]))  # cut short: fewer rows than ids
    assert load_current(tmp_path / "snapshot", tmp_path / "chroma", "vllm_advisor") is None
