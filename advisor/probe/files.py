"""Reading the user's files safely: bounded size, text only, errors that name the file.

Loaders call these instead of ``open()`` so that a binary file, a 500 MB file or a missing file
becomes one clear :class:`~vllm_advisor.errors.InputFileError` line, and memory stays bounded.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

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


def _env_int(name: str, default: int, scale: int = 1) -> int:
    raw = os.environ.get(name)
    if raw:
        try:
            value = int(float(raw) * scale)
            if value > 0:
                return value
        except (ValueError, OverflowError):
            pass
    return default


#: Longest line a line-oriented reader (server logs, /metrics text, CSV) takes, in characters.
#: Real lines are under a few KiB; a 10 MB label or a log line of megabytes is refused (metrics) or
#: cut (logs) instead of costing gigabytes. Override with VLLM_ADVISOR_MAX_LINE_KB.
DEFAULT_MAX_LINE_CHARS = 256 * 1024
#: YAML: aliases (``*name``) a document may use, and how deeply it may nest. Case files and reports
#: use none; a handful of aliases that each repeat a list of aliases is how a 400-byte file expands
#: into gigabytes (an "alias bomb"), so the budget is small. VLLM_ADVISOR_MAX_YAML_ALIASES overrides.
DEFAULT_MAX_YAML_ALIASES = 16
MAX_YAML_DEPTH = 64


def max_line_chars() -> int:
    return _env_int("VLLM_ADVISOR_MAX_LINE_KB", DEFAULT_MAX_LINE_CHARS, 1024)


def _kind_of(mode: int) -> str | None:
    """What a non-regular file is: reading a FIFO or a terminal would wait forever, a device has no end."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def check_readable(path: str | Path, max_bytes: int | None = None) -> Path:
    """Exists, is a regular file, is not empty, is not over the size limit."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputFileError("no such file", source=str(path), reason="missing") from None
    except OSError as exc:
        raise InputFileError(f"cannot read: {exc.strerror or exc}", source=str(path), reason="unreadable", reason_args={"error": str(exc.strerror or exc)}) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputFileError("is a directory, expected a file", source=str(path), reason="directory")
    kind = _kind_of(st.st_mode)
    if kind:
        raise InputFileError(f"is {kind}, expected a regular file", source=str(path), reason="not_regular")
    size = st.st_size
    if size == 0:
        raise InputFileError("file is empty", source=str(path), reason="empty")
    limit = max_bytes if max_bytes is not None else max_input_bytes()
    if size > limit:
        raise InputFileError(
            f"file is {size / 2**20:.0f} MiB, over the {limit / 2**20:g} MiB limit "
            "(set VLLM_ADVISOR_MAX_INPUT_MB to raise it)",
            source=str(path), reason="too_large", reason_args={"size": f"{size / 2**20:.0f}", "limit": f"{limit / 2**20:g}"},
        )
    return p


#: The byte-order marks of UTF-16 text: Windows PowerShell 5 writes a redirected command's output so.
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def is_utf16(head: bytes) -> bool:
    return head.startswith(UTF16_BOMS)


def decode_head(head: bytes) -> str:
    """The first bytes of a file as text, for telling its kind (UTF-16 with its mark, else UTF-8)."""
    return head.decode("utf-16" if is_utf16(head) else "utf-8", "replace")


def looks_binary(head: bytes) -> bool:
    """NUL bytes or a large share of control bytes in the first KiB means not text (UTF-16 text,
    whose NULs are half its bytes, is known by its byte-order mark)."""
    if not head or is_utf16(head):
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 9 or 13 < b < 32)
    return control / len(head) > 0.10


#: The first bytes of a gzip file: the project's own run folders keep their logs and results gzipped.
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_bytes(path: str | Path, packed: bool | None = None):
    """The file's bytes, decompressed when it is gzip (``server.log.gz``, ``results.json.gz``): a reader
    sees the text either way; the size limits apply to what it reads, after decompression. ``packed``:
    whether it is gzip, where the caller already looked (``is_gzip``)."""
    import gzip

    return gzip.open(path, "rb") if (is_gzip(path) if packed is None else packed) else open(path, "rb")


def gzip_failures() -> tuple[type[BaseException], ...]:
    """What reading a damaged gzip file raises (imported when asked: most inputs are not gzip)."""
    import gzip
    import zlib

    return (gzip.BadGzipFile, EOFError, zlib.error)


def gzip_failure(exc: BaseException, path: str | Path) -> InputFileError:
    return InputFileError(f"not a readable gzip file ({type(exc).__name__})", source=str(path), reason="bad_gzip")


def inflated(limit: int, source: str | Path) -> InputFileError:
    """A gzip file that decompresses past ``limit`` bytes: refused as a plain file of that size would be."""
    return InputFileError(f"decompresses past the {limit / 2**20:g} MiB limit", source=str(source), reason="inflates", reason_args={"limit": f"{limit / 2**20:g}"})


def read_head(path: str | Path, n: int = 4096) -> bytes:
    """The first ``n`` bytes of a regular file, decompressed when it is gzip (anything else is refused before it is opened)."""
    check_readable(path, max_bytes=2**62)
    try:
        with open_bytes(path) as fh:
            return fh.read(n)
    except gzip_failures() as exc:
        raise gzip_failure(exc, path) from None
    except OSError as exc:
        raise InputFileError(f"cannot read: {exc.strerror or exc}", source=str(path), reason="unreadable", reason_args={"error": str(exc.strerror or exc)}) from None


def read_text(path: str | Path, max_bytes: int | None = None) -> str:
    """The whole file as text (UTF-8, BOM stripped; UTF-16 with its byte-order mark), or a one-line error."""
    p = check_readable(path, max_bytes)
    if looks_binary(read_head(p, 1024)):
        raise InputFileError("is a binary file, expected text (JSON, YAML, CSV or a log)", source=str(path), reason="binary_text")
    limit = max_bytes if max_bytes is not None else max_input_bytes()
    packed = is_gzip(p)
    try:
        with open_bytes(p, packed) as fh:
            data = fh.read(limit + 1)  # a file that grew since stat() (or inflates past it) is still cut at the limit
    except gzip_failures() as exc:
        raise gzip_failure(exc, path) from None
    except OSError as exc:
        raise InputFileError(f"cannot read: {exc.strerror or exc}", source=str(path), reason="unreadable", reason_args={"error": str(exc.strerror or exc)}) from None
    if len(data) > limit and packed:
        raise inflated(limit, path)
    if len(data) > limit:
        raise InputFileError(f"file grew past the {limit / 2**20:g} MiB limit while it was read", source=str(path), reason="grew", reason_args={"limit": f"{limit / 2**20:g}"})
    try:
        return data.decode("utf-16") if is_utf16(data) else data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if is_utf16(data):
            raise InputFileError(f"not UTF-16 text (byte {exc.start})", source=str(path), reason="not_utf16", reason_args={"byte": str(exc.start)}) from None
        raise InputFileError(f"not UTF-8 text (byte {exc.start})", source=str(path), reason="not_utf8", reason_args={"byte": str(exc.start)}) from None


def bounded_lines(text: str, source: str, *, cut: bool) -> list[str]:
    """The text's lines, none longer than :func:`max_line_chars`: a longer line is cut (``cut``,
    for logs, where the start of a line says what it is) or refused with its line number."""
    limit = max_line_chars()
    lines = text.splitlines()
    if len(text) <= limit:
        return lines
    for number, line in enumerate(lines, 1):
        if len(line) > limit:
            if not cut:
                raise InputFileError(
                    f"line {number} is {len(line):,} characters long, over the {limit:,} limit (set VLLM_ADVISOR_MAX_LINE_KB to raise it)",
                    source=source, reason="line_too_long", reason_args={"line": str(number), "length": len(line), "limit": limit},
                )
            lines[number - 1] = line[:limit]
    return lines


# --------------------------------------------------------------------------- YAML


class _BoundedLoader(yaml.SafeLoader):
    """pyyaml's safe loader with a budget of aliases and a nesting limit (both checked while the
    document is composed, before any object is built)."""

    max_aliases = DEFAULT_MAX_YAML_ALIASES

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > self.max_aliases:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {self.max_aliases} aliases (*name): refused, a file that repeats itself this way can expand without bound", self.peek_event().start_mark
                )
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", self.peek_event().start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class YAMLRefused(yaml.YAMLError):
    """A document refused for what it holds, not for its syntax: too many aliases, too deep, or a
    value Python will not build (an integer of more than 4,300 digits)."""


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_ANCHOR = re.compile(r"(?:^|[\s:,\[{-])&[^\s,\[\]{}]")


def load_yaml(text: str, source: str | None = None) -> Any:
    """YAML with bounded aliases and depth; raises ``yaml.YAMLError`` (callers word it).

    A document without anchors cannot use aliases, so it takes libyaml's fast loader (whose own
    nesting limit is 1,000); one with anchors takes the bounded pure-Python loader."""
    try:
        if _ANCHOR.search(text):
            loader = type("_Loader", (_BoundedLoader,), {"max_aliases": _env_int("VLLM_ADVISOR_MAX_YAML_ALIASES", DEFAULT_MAX_YAML_ALIASES)})
            return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
        return yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - the safe loader
    except yaml.composer.ComposerError as exc:
        if "aliases" in str(exc) or "nested deeper" in str(exc):
            raise YAMLRefused(f"YAML refused: {exc.problem}") from None
        raise
    except (ValueError, OverflowError, RecursionError) as exc:  # the constructors' own limits
        raise YAMLRefused(f"YAML value out of range: {str(exc).split(';')[0]}") from None
