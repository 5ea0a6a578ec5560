"""Where the knowledge base lives on disk.

The index is the user's data, not the package's: it goes to ``$XDG_DATA_HOME/vllm-advisor/kb``
(``~/.local/share/vllm-advisor/kb`` when XDG_DATA_HOME is unset). ``VLLM_ADVISOR_HOME`` moves the
whole advisor data folder (the index is then ``$VLLM_ADVISOR_HOME/kb``); ``--kb-dir`` on the command
line names the index folder itself and wins over both.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMA_SUBDIR = "chroma"
BM25_SUBDIR = "bm25"
MODELS_SUBDIR = "models"  # the default embedding model's ONNX copy, for queries without torch
SOURCES_FILE = "sources.yaml"


def default_kb_dir() -> Path:
    home = os.environ.get("VLLM_ADVISOR_HOME")
    if home:
        return Path(home).expanduser() / "kb"
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "vllm-advisor" / "kb"


def resolve_kb_dir(kb_dir: str | Path | None) -> Path:
    return Path(kb_dir).expanduser() if kb_dir else default_kb_dir()


def cache_dir() -> Path:
    """Derived data that can be rebuilt at any time (chunked cards): ``$VLLM_ADVISOR_HOME/cache``,
    else ``$XDG_CACHE_HOME/vllm-advisor`` (``~/.cache/vllm-advisor``)."""
    home = os.environ.get("VLLM_ADVISOR_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "vllm-advisor"
