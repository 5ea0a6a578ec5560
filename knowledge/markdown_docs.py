"""A folder of Markdown (the ``docs/`` of a vLLM checkout, or any team's runbooks) as source documents.

Each page keeps what a citation needs: its path, a title, the public URL (derived from the path the
way mkdocs publishes it) and the vLLM version the folder describes. The version is read from the
folder's ``SOURCE.md`` when it has one (the shared corpus does), else given by the caller.
"""

from __future__ import annotations

import re
from pathlib import Path

from .cards import split_front_matter
from .documents import SourceDocument
from .errors import SourceFileError
from .files import read_source_text

VLLM_DOCS_URL = "https://docs.vllm.ai/en/latest/"
VLLM_DOCS_SOURCE = "vllm-docs"
#: Files that describe the folder rather than belong to the documentation.
SKIPPED_FILES = {"SOURCE.md"}
MAX_FILES = 20_000

_INCLUDE = re.compile(r'--8<--\s+"docs/([^":]+\.md)')
_SNIPPET_MARKER = re.compile(r"^\s*--8<--\s+\[(start|end):[^\]]*\]\s*$", re.MULTILINE)
_VERSION_LINE = re.compile(r"^\s*[-*]?\s*\**Version\**:\s*`?v?([0-9][0-9A-Za-z.+\-]*)`?", re.MULTILINE | re.IGNORECASE)
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$")


def read_folder_version(folder: Path) -> str | None:
    """The version in ``SOURCE.md`` ("- Version: v0.34.0" -> "0.34.0"), or None."""
    source = folder / "SOURCE.md"
    if not source.is_file():
        return None
    match = _VERSION_LINE.search(read_source_text(source))
    return match.group(1) if match else None


def page_url(rel_path: str, base_url: str = VLLM_DOCS_URL) -> str:
    """mkdocs' directory URLs: ``a/b.md`` -> ``<base>a/b/``; ``a/README.md`` or ``a/index.md`` -> ``<base>a/``."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    stem = rel_path[: -len(".md")] if rel_path.endswith(".md") else rel_path
    parts = stem.split("/")
    if parts[-1] in ("README", "index"):
        parts = parts[:-1]
    return base + "".join(p + "/" for p in parts)


def page_title(meta: dict, body: str, rel_path: str) -> str:
    """Front-matter title, else the first level-1 heading outside code, else the file name."""
    if isinstance(meta.get("title"), str) and meta["title"].strip():
        return meta["title"].strip()
    in_code = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
            continue
        match = None if in_code else _H1.match(line)
        if match:
            return match.group(1).strip()
    stem = Path(rel_path).name.removesuffix(".md").removesuffix(".inc")
    return stem.replace("_", " ").replace("-", " ").strip().capitalize()


def load_markdown_folder(
    folder: str | Path,
    *,
    version: str | None = None,
    base_url: str = VLLM_DOCS_URL,
    source: str = VLLM_DOCS_SOURCE,
) -> list[SourceDocument]:
    """Every ``*.md`` page under ``folder`` as a :class:`SourceDocument` (kind "doc"), sorted by path.

    ``version`` overrides the folder's SOURCE.md. Pages that are only included into others
    (mkdocs' ``--8<-- "docs/x.inc.md"``) get the including page's URL, where readers find the text.
    """
    root = Path(folder).expanduser()
    if not root.exists():
        raise SourceFileError("no such folder", source=str(folder))
    if not root.is_dir():
        raise SourceFileError("is a file, expected a folder of Markdown", source=str(folder))
    paths = sorted(p for p in root.rglob("*.md") if p.is_file() and p.name not in SKIPPED_FILES and not _hidden(p, root))
    if not paths:
        raise SourceFileError("holds no Markdown (*.md) files", source=str(folder))
    if len(paths) > MAX_FILES:
        raise SourceFileError(f"holds {len(paths)} Markdown files, over the {MAX_FILES} limit", source=str(folder))
    version = version or read_folder_version(root)

    raw = {p.relative_to(root).as_posix(): read_source_text(p) for p in paths}
    included_by: dict[str, str] = {}
    for rel, text in raw.items():
        for target in _INCLUDE.findall(text):
            included_by.setdefault(target, rel)

    docs = []
    for rel, text in raw.items():
        meta, body = split_front_matter(text, str(root / rel))
        body = _SNIPPET_MARKER.sub("", body)
        if not body.strip():
            continue
        host = included_by.get(rel, rel)
        docs.append(
            SourceDocument(
                doc_id=doc_id_for(rel, source),
                kind="doc",
                title=page_title(meta, body, rel),
                url=page_url(host, base_url),
                text=body,
                version=version,
                metadata={"path": rel, "source": source},
            )
        )
    return docs


def doc_id_for(rel_path: str, source: str = VLLM_DOCS_SOURCE) -> str:
    """``doc:<path>`` for vLLM's docs (the ids the cards and answers cite); ``doc:<source>:<path>`` for
    any other folder, so a team's ``README.md`` never replaces vLLM's."""
    return f"doc:{rel_path}" if source == VLLM_DOCS_SOURCE else f"doc:{source}:{rel_path}"


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)
