"""Name matching shared by the model and GPU catalogs.

Users write names loosely ("Qwen/Qwen2.5-32B-Instruct", "qwen2.5 32b", "H800", "NVIDIA H800"),
so both catalogs index every entry under a normalised key and fall back to close matches in the
error message instead of guessing silently.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from ...errors import AdvisorError


class UnknownCatalogEntry(AdvisorError):
    """A model or GPU name that is not in the catalog; the message lists the closest names."""

    exit_code = 2


def normalise(name: str) -> str:
    """Lower case, organisation prefix dropped, runs of spaces/underscores turned into one '-'.

    Dots and dashes are kept: "Qwen3-2B" and "Qwen-32B" must not collapse into one key.
    """
    text = name.strip().lower()
    if "/" in text:
        text = text.rsplit("/", 1)[1]
    text = re.sub(r"[\s_]+", "-", text)
    return re.sub(r"-{2,}", "-", text).strip("-")


def close_matches(query: str, index: Mapping[str, str], n: int = 5) -> list[str]:
    """Catalog entry names whose keys (names or aliases, normalised) are most like ``query``."""
    keys = difflib.get_close_matches(normalise(query), list(index), n=3 * n, cutoff=0.5)
    found: list[str] = []
    for key in keys:
        if index[key] not in found:
            found.append(index[key])
    return found[:n]


def unknown(kind: str, query: str, index: Mapping[str, str], hint: str) -> UnknownCatalogEntry:
    """The one-line error for a name that matched nothing, naming close matches when there are any."""
    matches = close_matches(query, index)
    if matches:
        listed = "close matches: " + ", ".join(matches)
    else:
        names = sorted(set(index.values()))
        listed = "known: " + ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return UnknownCatalogEntry(f"unknown {kind} '{query}'; {listed} ({hint})", field=kind)
