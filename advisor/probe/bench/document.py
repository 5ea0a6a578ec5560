"""A benchmark file read and parsed once, so that every format's detector looks at the same data.

Detection is by content, never by file name: users rename files, and GuideLLM writes the same
report as ``.json`` or ``.yaml``. The text is parsed as JSON (one value, or JSON Lines as
``vllm bench serve --append-result`` writes), else YAML, else CSV. A file that starts like JSON
but does not parse is reported as broken JSON (with line and column), not as an unknown format.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from ...errors import InputFileError
from ..files import YAMLRefused, bounded_lines, load_yaml, read_text


@dataclass
class InputDocument:
    """One input file: its text and what it parsed as.

    ``syntax`` is ``'json'`` (``data`` is the value), ``'json-lines'`` (``data`` is a list of
    objects, one per line), ``'yaml'`` (``data`` is a mapping), ``'csv'`` (``data`` is a list of
    row dicts, ``columns`` the header) or ``'text'`` (nothing recognisable; ``data`` is None).
    """

    path: Path
    syntax: str
    data: Any
    columns: list[str] | None = None

    @property
    def source(self) -> str:
        return str(self.path)

    def json_objects(self) -> list[dict[str, Any]] | None:
        """The top-level objects when the file is JSON/JSON Lines/YAML made of objects."""
        if self.syntax in ("json", "yaml") and isinstance(self.data, dict):
            return [self.data]
        if self.syntax in ("json", "json-lines") and isinstance(self.data, list) and self.data:
            if all(isinstance(item, dict) for item in self.data):
                return self.data
        return None

    def mapping(self) -> dict[str, Any] | None:
        """The document when it is a single JSON or YAML object."""
        return self.data if self.syntax in ("json", "yaml") and isinstance(self.data, dict) else None


def read_document(path: str | Path, max_bytes: int | None = None) -> InputDocument:
    """Read (bounded, text only) and parse ``path``; broken JSON raises :class:`InputFileError`."""
    p = Path(path)
    text = read_text(p, max_bytes)
    stripped = text.lstrip()
    if not stripped:
        raise InputFileError("file holds only whitespace", source=str(p))
    if stripped[0] in "{[":
        return _parse_json(p, text)
    return _parse_other(p, text)


def _loads(text: str):
    """orjson for speed (a 330 MB detailed bench file: ~3x faster than the standard library);
    the standard library for what orjson refuses (NaN and Infinity, which Python's json writes) and
    for its line/column error messages."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _parse_json(path: Path, text: str) -> InputDocument:
    try:
        return _parse_json_lines(path, text)
    except RecursionError:  # orjson stops at 1,024 levels; the standard library at Python's stack
        raise InputFileError("JSON nested too deeply to read (over a thousand levels)", source=str(path)) from None
    except ValueError as exc:  # not a syntax error: a number of more than 4,300 digits, say
        raise InputFileError(f"JSON value out of range: {str(exc).split(';')[0]}", source=str(path)) from None


def _parse_json_lines(path: Path, text: str) -> InputDocument:
    try:
        return InputDocument(path, "json", _loads(text))
    except json.JSONDecodeError as exc:
        whole_error = exc
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    first_line_is_object = False
    if len(lines) > 1:
        try:
            first_line_is_object = isinstance(json.loads(lines[0][1]), dict)
        except json.JSONDecodeError:
            pass
    if not first_line_is_object:
        raise InputFileError(_json_error_text(whole_error, text), source=str(path)) from None
    records = []
    for number, line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(
                f"JSON Lines: line {number} is not valid JSON ({exc.msg} at column {exc.colno})"
                + (" - the file looks truncated" if number == lines[-1][0] else ""),
                source=str(path),
            ) from None
        if not isinstance(value, dict):
            raise InputFileError(f"JSON Lines: line {number} is not a JSON object", source=str(path))
        records.append(value)
    return InputDocument(path, "json-lines", records)


def _json_error_text(exc: json.JSONDecodeError, text: str) -> str:
    truncated = exc.pos >= len(text.rstrip()) - 1
    hint = " - the file looks truncated" if truncated else ""
    return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{hint}"


def _parse_other(path: Path, text: str) -> InputDocument:
    try:
        value = load_yaml(text, str(path))
    except YAMLRefused as exc:
        raise InputFileError(str(exc), source=str(path)) from None
    except yaml.YAMLError:
        value = None
    if isinstance(value, dict):
        return InputDocument(path, "yaml", value)
    try:
        is_csv = _looks_like_csv(text)
    except csv.Error:  # a field past the csv module's limit, a stray quote: not a table
        is_csv = False
    if is_csv:
        bounded_lines(text, str(path), cut=False)
        reader = csv.DictReader(io.StringIO(text.lstrip()), dialect=_csv_dialect(text))
        try:
            columns = [c.strip() for c in (reader.fieldnames or [])]
            rows = [{(k or "").strip(): v for k, v in row.items()} for row in reader]
        except csv.Error as exc:
            raise InputFileError(f"CSV: line {reader.line_num}: {exc}", source=str(path)) from None
        return InputDocument(path, "csv", rows, columns)
    return InputDocument(path, "text", None)


def _csv_dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    first_line = text.lstrip().splitlines()[0]
    try:
        return csv.Sniffer().sniff(first_line, delimiters=",;\t")
    except csv.Error:
        return csv.excel


def _looks_like_csv(text: str) -> bool:
    """A header with a delimiter and a second line with as many fields (not prose or code)."""
    lines = [line for line in text.lstrip().splitlines()[:2] if line.strip()]
    if len(lines) < 2 or not any(d in lines[0] for d in ",;\t"):
        return False
    dialect = _csv_dialect(text)
    header, first_row = next(csv.reader(lines[:1], dialect)), next(csv.reader(lines[1:2], dialect))
    return len(header) >= 2 and len(first_row) == len(header)
