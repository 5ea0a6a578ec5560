"""Reading the user's files safely: bounded size, text only, errors that name the file.

Loaders call these instead of ``open()`` so that a binary file, a 500 MB file or a missing file
becomes one clear :class:`~vllm_advisor.errors.InputFileError` line, and memory stays bounded.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputFileError

#: Largest input file read into memory (bytes). A detailed `vllm bench serve` file of 50,000
#: requests with 256 output tokens each is ~330 MB and must load; anything over 400 MiB is refused
#: with a message instead of exhausting memory (parsing JSON takes several times the file size).
#: Override with the environment variable VLLM_ADVISOR_MAX_INPUT_MB.
DEFAULT_MAX_INPUT_BYTES = 400 * 1024 * 1024


def max_input_bytes() -> int:
    raw = os.environ.get("VLLM_ADVISOR_MAX_INPUT_MB")
    if raw:
        try:
            return int(float(raw) * 1024 * 1024)
        except ValueError:
            pass
    return DEFAULT_MAX_INPUT_BYTES


def check_readable(path: str | Path, max_bytes: int | None = None) -> Path:
    """Exists, is a regular file, is not empty, is not over the size limit."""
    p = Path(path)
    if not p.exists():
        raise InputFileError("no such file", source=str(path))
    if p.is_dir():
        raise InputFileError("is a directory, expected a file", source=str(path))
    size = p.stat().st_size
    if size == 0:
        raise InputFileError("file is empty", source=str(path))
    limit = max_bytes if max_bytes is not None else max_input_bytes()
    if size > limit:
        raise InputFileError(
            f"file is {size / 2**20:.0f} MiB, over the {limit / 2**20:g} MiB limit "
            "(set VLLM_ADVISOR_MAX_INPUT_MB to raise it)",
            source=str(path),
        )
    return p


def looks_binary(head: bytes) -> bool:
    """NUL bytes or a large share of control bytes in the first KiB means not text."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 9 or 13 < b < 32)
    return control / len(head) > 0.10


def read_head(path: str | Path, n: int = 4096) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def read_text(path: str | Path, max_bytes: int | None = None) -> str:
    """The whole file as text (UTF-8, BOM stripped), or a one-line error."""
    p = check_readable(path, max_bytes)
    if looks_binary(read_head(p, 1024)):
        raise InputFileError("is a binary file, expected text (JSON, YAML, CSV or a log)", source=str(path))
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"not UTF-8 text (byte {exc.start})", source=str(path)) from None
