"""Reading source files for the knowledge base: bounded size, text only, errors that name the file.

The same rules as the advisor's input reader (which this package may not import): a binary or huge
file is refused with a one-line :class:`SourceFileError` instead of a traceback or a blown memory.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import SourceFileError

#: Largest single source file read (bytes). The largest vLLM docs page is ~80 KB and an exported
#: issue file with thousands of threads is tens of MB; anything over 200 MiB is refused.
#: Override with VLLM_ADVISOR_MAX_INPUT_MB, the same variable the advisor's readers honour.
DEFAULT_MAX_BYTES = 200 * 1024 * 1024


def max_bytes() -> int:
    raw = os.environ.get("VLLM_ADVISOR_MAX_INPUT_MB")
    if raw:
        try:
            return int(float(raw) * 1024 * 1024)
        except ValueError:
            pass
    return DEFAULT_MAX_BYTES


def read_source_text(path: str | Path, *, limit: int | None = None) -> str:
    """The whole file as UTF-8 text (BOM stripped), or a one-line :class:`SourceFileError`."""
    p = Path(path)
    if not p.exists():
        raise SourceFileError("no such file", source=str(path))
    if p.is_dir():
        raise SourceFileError("is a directory, expected a file", source=str(path))
    size = p.stat().st_size
    cap = limit if limit is not None else max_bytes()
    if size > cap:
        raise SourceFileError(
            f"file is {size / 2**20:.0f} MiB, over the {cap / 2**20:g} MiB limit (set VLLM_ADVISOR_MAX_INPUT_MB to raise it)",
            source=str(path),
        )
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SourceFileError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    if b"\x00" in data[:1024]:
        raise SourceFileError("is a binary file, expected text", source=str(path))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceFileError(f"not UTF-8 text (byte {exc.start})", source=str(path)) from None
