"""What was ingested from where: ``sources.yaml`` in the index folder.

The vector store knows its chunks but not the folder or file they came from. This small file does,
so ``kb build`` can refresh every configured source and a corrupt index can be rebuilt without the
user re-typing their paths.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from .paths import SOURCES_FILE


@dataclass
class SourceRecord:
    name: str  # "cards", "vllm-docs", "issues", ...
    kind: str  # card | doc | issue
    path: str | None = None  # folder or file it is re-read from; None for the packaged cards
    version: str | None = None
    base_url: str | None = None
    documents: int = 0
    chunks: int = 0
    ingested_at: str | None = None  # ISO 8601, UTC


@dataclass
class Registry:
    path: Path
    sources: dict[str, SourceRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, kb_dir: Path) -> "Registry":
        path = kb_dir / SOURCES_FILE
        registry = cls(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            return registry  # absent or garbled: the store's own metadata still says what is indexed
        known = set(SourceRecord.__dataclass_fields__)
        for name, rec in (data.get("sources") or {}).items():
            if isinstance(rec, dict):
                registry.sources[str(name)] = SourceRecord(**{k: v for k, v in rec.items() if k in known} | {"name": str(name)})
        return registry

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"sources": {name: {k: v for k, v in asdict(rec).items() if k != "name"} for name, rec in sorted(self.sources.items())}}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
        tmp.replace(self.path)
