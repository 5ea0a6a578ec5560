"""Loading and saving case files (``shared/cases/FORMAT.md``): YAML in, :class:`CaseFile` out.

FORMAT.md is a contract, so loading is strict: an unknown key is most likely a typo
(``observation:``, ``ttft:``) and is reported with the keys allowed at that place, and a value of
the wrong type names its field path (``observations[1].ttft_ms.mean``). The serve command and the
``flags`` are checked too, so a bad ``--max-num-seqs abc`` is found when the file is read, not
deep inside a diagnosis. Every error is one line naming the file.

Saving writes the FORMAT.md key order, leaves unknown (None) values out, and goes through a
temporary file in the same directory plus ``os.replace``, so an interrupted save never leaves a
half-written case. YAML comments are not kept (pyyaml does not read them).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import AdvisorError, InputFileError
from ..schema import CaseFile, Deployment, InputNote
from .files import YAMLRefused, load_yaml, read_text
from .serve_cmd import engine_args_for

#: Friendly words for pydantic's error types.
_EXPECTED = {
    "float_parsing": "a number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "text",
    "dict_type": "a mapping (key: value lines)",
    "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "list_type": "a list (lines starting with '- ')",
}


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The schema class that holds the last key of ``loc`` (to list its allowed keys)."""
    model: Any = CaseFile
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        nested = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)),
            None,
        )
        if nested is None:
            for c in candidates:  # list[Observation]
                inner = next((a for a in getattr(c, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)), None)
                if inner is not None:
                    nested = inner
                    break
        if nested is None:
            return None
        model = nested
    return model


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _explain(error: dict[str, Any]) -> str:
    loc = tuple(error.get("loc", ()))
    kind = error.get("type", "")
    value = error.get("input")
    if kind == "extra_forbidden":
        model = _model_at(loc)
        allowed = [n for n, f in (model.model_fields.items() if model else []) if not f.exclude]
        hint = f" (allowed here: {', '.join(allowed)})" if allowed else ""
        return f"unknown key{hint}; see shared/cases/FORMAT.md"
    expected = _EXPECTED.get(kind)
    if expected is None:
        return str(error.get("msg", "invalid value"))
    message = f"expected {expected}, got {_shown(value)}"
    if kind == "string_type" and isinstance(value, (int, float, bool)):
        message += " (put it in quotes so YAML keeps it as text, e.g. \"0.10\")"
    return message


def _validation_error(exc: ValidationError, source: str) -> InputFileError:
    errors = exc.errors()
    first = errors[0]
    more = len(errors) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return InputFileError(_explain(first) + suffix, source=source, field=_field_path(tuple(first.get("loc", ()))))


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"YAML syntax error{where}: {problem}"


def _without_null_blocks(data: dict[str, Any]) -> dict[str, Any]:
    """FORMAT.md allows ``null`` for anything unknown; for whole blocks (``workload: null``,
    ``flags: null``) that means the same as leaving them out."""
    data = {k: v for k, v in data.items() if not (v is None and k in ("deployment", "workload", "observations", "attachments"))}
    deployment = data.get("deployment")
    if isinstance(deployment, dict) and deployment.get("flags", {}) is None:
        data["deployment"] = {k: v for k, v in deployment.items() if k != "flags"}
    return data


def case_from_dict(data: Any, source: str) -> CaseFile:
    """Validate already-parsed YAML as a case; errors name ``source`` and the field path."""
    if data is None:
        raise InputFileError("holds no YAML data (only comments or blank lines)", source=source)
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise InputFileError(
            f"expected a mapping of case fields (question:, deployment:, ...) at the top level, got {kind}",
            source=source,
        )
    data = _without_null_blocks(data)
    try:
        case = CaseFile.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, source) from None
    case.source = source
    if case.deployment.serve_command:
        try:
            engine_args_for(Deployment(serve_command=case.deployment.serve_command))
        except AdvisorError as exc:
            raise InputFileError(exc.message, source=source, field="deployment.serve_command") from None
    try:
        engine_args_for(case.deployment)
    except AdvisorError as exc:
        raise InputFileError(exc.message, source=source, field="deployment.flags") from None
    return case


#: A case file is written by hand or by the probe: a few kilobytes, tens with a long sweep. YAML of
#: small mappings parses at about 0.5 MB/s here, so the general input limit (400 MiB) would let one
#: file hold ``ask`` for minutes; VLLM_ADVISOR_MAX_INPUT_MB, when set, still decides.
CASE_FILE_MAX_BYTES = 1024 * 1024


def _yaml_data(path: str | Path) -> Any:
    source = str(path)
    text = read_text(path, max_bytes=None if os.environ.get("VLLM_ADVISOR_MAX_INPUT_MB") else CASE_FILE_MAX_BYTES)
    try:
        return load_yaml(text, source)
    except YAMLRefused as exc:
        raise InputFileError(str(exc), source=source) from None
    except yaml.YAMLError as exc:
        raise InputFileError(_yaml_error(exc), source=source) from None


def load_case(path: str | Path) -> CaseFile:
    """Read and validate a case file (YAML, FORMAT.md layout). ``case.source`` is set to ``path``."""
    return case_from_dict(_yaml_data(path), str(path))


#: Fields a lenient load may drop before it gives up on the file (each drop is one validation pass).
MAX_DROPPED_FIELDS = 64


def _drop(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Delete the value at ``loc`` (or, when it is missing there, its nearest existing parent);
    returns the location deleted, None when only the whole document is left."""
    for end in range(len(loc), 0, -1):
        node = data
        try:
            for part in loc[: end - 1]:
                node = node[part]
            last = loc[end - 1]
            if isinstance(node, dict) and last in node or isinstance(node, list) and isinstance(last, int) and 0 <= last < len(node):
                del node[last]
                return loc[:end]
        except (KeyError, IndexError, TypeError):
            continue
    return None


def load_case_lenient(path: str | Path) -> tuple[CaseFile, list[InputNote]]:
    """The case with every field that fails validation left out, and a note per field left out.

    ``ask``, ``memo`` and ``chat`` answer from what is usable (issue 15: one bad field must not cost
    the answer); ``load_case`` stays strict for the commands that check a file. A file that cannot
    be read or parsed as YAML at all still raises its one-line error.
    """
    source = str(path)
    data = _yaml_data(path)
    if not isinstance(data, dict):
        case_from_dict(data, source)  # raises the one-line error for a non-mapping document
    data = _without_null_blocks(data)
    notes: list[InputNote] = []
    for _ in range(MAX_DROPPED_FIELDS):
        try:
            case = CaseFile.model_validate(data)
            break
        except ValidationError as exc:
            first = exc.errors()[0]
            dropped = _drop(data, tuple(first.get("loc", ())))
            if dropped is None:
                raise _validation_error(exc, source) from None
            notes.append(InputNote(code="profile_field_dropped", source=source, field=_field_path(dropped), detail=_explain(first), reason="invalid_value"))
    else:
        raise InputFileError(f"more than {MAX_DROPPED_FIELDS} fields fail validation", source=source)
    case.source = source
    dep = case.deployment
    if dep.serve_command:
        try:
            engine_args_for(Deployment(serve_command=dep.serve_command))
        except AdvisorError as exc:
            notes.append(InputNote.from_error("serve_cmd_skipped", exc, source, field="deployment.serve_command", detail=exc.message))
            dep.serve_command = None
    for key, value in list(dep.flags.items()):
        try:
            engine_args_for(Deployment(engine=dep.engine, flags={key: value}))
        except AdvisorError as exc:
            notes.append(InputNote.from_error("flag_dropped", exc, source, field=f"deployment.flags.{key}", detail=exc.message))
            del dep.flags[key]
    try:
        engine_args_for(dep)
    except AdvisorError as exc:  # values fine one by one, refused together
        notes.append(InputNote.from_error("flag_dropped", exc, source, field="deployment.flags", detail=exc.message))
        dep.flags = {}
    return case, notes


def case_to_yaml(case: CaseFile) -> str:
    """The YAML text of a case, FORMAT.md key order, unknown values left out."""
    return yaml.safe_dump(
        case.to_yaml_dict(),
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )


def save_case(case: CaseFile, path: str | Path) -> None:
    """Write ``case`` to ``path`` atomically (temporary file in the same directory, then replace)."""
    target = Path(path)
    text = case_to_yaml(case)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InputFileError("cannot save: the directory does not exist", source=str(path))
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():
            os.chmod(tmp_name, target.stat().st_mode & 0o777)
        os.replace(tmp_name, target)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise InputFileError(f"cannot save: {exc.strerror or exc}", source=str(path)) from None


def resolve_attachments(case: CaseFile, must_exist: bool = True) -> list[Path]:
    """The case's attachments as paths, relative ones taken from the case file's directory
    (the working directory when the case was not loaded from a file)."""
    base = Path(case.source).parent if case.source else Path.cwd()
    out: list[Path] = []
    for index, entry in enumerate(case.attachments):
        path = Path(entry).expanduser()
        if not path.is_absolute():
            path = base / path
        if must_exist and not path.is_file():
            raise InputFileError(
                f"attachment {entry!r} not found (looked for {path})",
                source=case.source,
                field=f"attachments[{index}]",
            )
        out.append(path)
    return out
