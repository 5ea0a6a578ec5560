"""Reading a ``vllm serve`` command line (and a case file's ``flags``) into typed engine arguments.

Why not vLLM's own argparse: the advisor reads commands written for any vLLM version without
vLLM installed, and must never fail on a flag that some other version has. So the flag table
(:mod:`.engine_flags`) is data, known flags are type-checked with one-line errors naming the flag,
and unknown flags are kept raw in ``EngineArgs.extra``.

Accepted shapes (after ``shlex`` splitting, backslash-newline continuations joined):

- ``[ENV=VAL ...] vllm serve MODEL [flags]`` (also ``--model MODEL``, ``/path/to/vllm serve``)
- ``python -m vllm.entrypoints.openai.api_server --model MODEL [flags]``
- ``docker run ... [-e ENV=VAL] vllm/vllm-openai[:tag] [--model MODEL] [flags]``
- ``export ENV=VAL && vllm serve ...`` (environment collected from the earlier segments)
- bare flags: ``--tensor-parallel-size 2 --max-model-len 64k``

FlexibleArgumentParser rules are followed: ``--a_b`` equals ``--a-b``, ``--flag=value``,
``-O3`` / ``-O 3``, ``--json-flag.key value`` / ``-cc.key=value`` (nested JSON), ``--no-<flag>``
for switches, human-readable integers (``64k`` = 64,000, ``32K`` = 32,768).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import UsageError
from ..schema import Deployment, EngineArgs, ServerLogInfo
from .engine_flags import FlagSpec, lookup_field, lookup_flag, normalize_long_flag
from .foreign_flags import TABLES as FOREIGN_TABLES
from .foreign_flags import engine_key, flags_to_args, translate

_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_NEGATIVE_NUMBER = re.compile(r"^-\d+(\.\d+)?$")
_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_CONTROL = {"&&", "||", ";", "|", "&", ";;"}
_WRAPPERS = {"env", "exec", "nohup", "time", "sudo", "command"}
_REDIRECT = re.compile(r"^(?:\d*|&)(?:>>?|<)(?:[^<>&]+)?$")  # "2>", ">", ">out.log"; not "<model>"
#: A value the shell fills in ($VAR, ${VAR}, $(cmd), `cmd`): unknown to the advisor.
_SHELL_VALUE = re.compile(r"^(?:\$\{?\w+\}?|\$\(.*\)|`.*`)$")

#: EngineArgs fields that hold typed values (everything else goes to ``extra``).
_TYPED_FIELDS = frozenset(EngineArgs.model_fields) - {"extra", "env"}


@dataclass
class ServeCommand:
    """A parsed command line, before merging with a case file's ``flags``."""

    launcher: str  # "vllm serve" | "api_server" | "docker" | "flags" | "sglang" | "tgi" | "tensorrt-llm" | "lmdeploy"
    model: str | None = None
    #: which engine the command starts: "vllm", or another engine of foreign_flags.TABLES whose flags were rewritten to
    #: vLLM's (:mod:`.foreign_flags`); ``mapped`` lists the rewrites, ``extra`` keeps the rest
    engine: str = "vllm"
    mapped: list[str] = field(default_factory=list)
    approx: list[str] = field(default_factory=list)  # foreign_flags.ForeignFlag.approx of the mapped flags
    values: dict[str, Any] = field(default_factory=dict)  # underscored field -> coerced value
    env: dict[str, str] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: fields whose value is a shell expansion ($VAR): kept as text in ``extra``, never typed
    unresolved: set[str] = field(default_factory=set)


# --------------------------------------------------------------------------------------------
# value coercion


def _bad(name: str, expected: str, got: Any) -> UsageError:
    shown = got if isinstance(got, str) else repr(got)
    if isinstance(shown, str) and len(shown) > 60:
        shown = shown[:57] + "..."
    return UsageError(f"flag {name}: expected {expected}, got {shown!r}")


def human_readable_int(text: str, name: str, allow_auto: bool = False) -> int:
    """vLLM's ``human_readable_int``: ``1k`` = 1,000, ``1K`` = 1,024, ``25.6k`` = 25,600."""
    value = text.strip().replace(",", "").replace("_", "")
    if allow_auto and value.lower() == "auto":
        return -1
    match = _HUMAN_INT.match(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            try:
                return int(float(number) * _DECIMAL[suffix])
            except (ValueError, OverflowError):
                raise _bad(name, "an integer (e.g. 8192, 64k, 32K)", text) from None
        if "." in number:
            raise _bad(name, f"an integer (decimals are not allowed with {suffix}; did you mean {number}{suffix.lower()}?)", text)
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        raise _bad(name, "an integer (e.g. 8192, 64k, 32K)", text) from None


def _to_int(value: Any, name: str, human: bool, allow_auto: bool = False) -> int:
    if isinstance(value, bool):
        raise _bad(name, "an integer", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        if human:
            return human_readable_int(value, name, allow_auto)
        try:
            return int(value.strip())
        except ValueError:
            raise _bad(name, "an integer", value) from None
    raise _bad(name, "an integer", value)


def _to_float(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise _bad(name, "a number", value)
    try:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())
    except (ValueError, OverflowError):  # "abc", or an integer past 1.8e308
        raise _bad(name, "a number", value) from None
    raise _bad(name, "a number", value)


def _to_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise _bad(name, "true or false", value)


def _to_json(value: Any) -> Any:
    """A JSON object from text; other text (``-O3``, free-form notes in case files) is kept as given."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "{[":
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return value
        return value
    return value


def _to_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        text = value.strip().strip("[]")
        return [part for part in re.split(r"[,\s]+", text) if part]
    return [value]


def coerce_value(spec: FlagSpec | None, value: Any, name: str | None = None) -> Any:
    """``value`` (text from a command line, or a YAML value from a case file) as ``spec.kind``.
    Unknown flags (``spec`` None) keep their value unchanged."""
    if spec is None:
        return value
    name = name or spec.flag
    kind = spec.kind
    if kind == "int":
        return _to_int(value, name, human=False)
    if kind in ("hint", "hint_auto"):
        return _to_int(value, name, human=True, allow_auto=kind == "hint_auto")
    if kind == "float":
        return _to_float(value, name)
    if kind == "bool":
        return _to_bool(value, name)
    if kind == "json":
        return _to_json(value)
    if kind == "ints":
        items = _to_list(value)
        if not items:
            raise _bad(name, "one or more integers", value)
        return [_to_int(v, name, human=False) for v in items]
    if kind == "strs":
        items = _to_list(value) if not isinstance(value, str) else value.split()
        return [str(v) for v in items]
    if isinstance(value, (dict, list)):
        raise _bad(name, "text", value)
    return str(value)


# --------------------------------------------------------------------------------------------
# splitting the command line


def _split(cmd: str) -> list[str]:
    text = re.sub(r"\\\r?\n", " ", cmd)
    text = re.sub(r"(?<=\s)\$'", "'", text)  # bash $'...' quoting: read as '...'
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise UsageError(f"cannot split the serve command into words: {exc}") from None


def _segments(tokens: list[str]) -> list[list[str]]:
    """Split at ``&&``, ``|``, ``;``, ``&``; drop redirections (``2>&1``, ``> out.log``)."""
    out: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if _REDIRECT.match(tok):
            if i < len(tokens) and tokens[i] == "&":  # 2>&1 splits into "2>", "&", "1"
                i += 2
            elif tok.endswith((">", "<")):
                i += 1  # the target file
            continue
        if tok in _CONTROL:
            out.append([])
        else:
            out[-1].append(tok)
    return [seg for seg in out if seg]


def _launcher_index(seg: list[str]) -> tuple[str, int, int] | None:
    """What launched the server in one shell segment, where its launcher's first word is (what
    comes before it may set environment variables) and where the engine's arguments start."""
    for i, tok in enumerate(seg):
        base = tok.rsplit("/", 1)[-1]
        nxt = seg[i + 1] if i + 1 < len(seg) else ""
        if tok == "-m" and nxt.startswith("sglang.launch_server") or base == "sglang" and nxt in ("serve", "launch_server"):
            return "sglang", i, i + 2
        if base == "text-generation-launcher" or "text-generation-inference" in tok:
            return "tgi", i, i + 1
        if base == "trtllm-serve":
            return "tensorrt-llm", i, i + (2 if nxt == "serve" else 1)
        if base == "lmdeploy" and nxt == "serve" and i + 2 < len(seg) and seg[i + 2] == "api_server":
            return "lmdeploy", i, i + 3
        if base == "vllm" and i + 1 < len(seg) and seg[i + 1] == "serve":
            return "vllm serve", i, i + 2
        if tok == "-m" and i + 1 < len(seg) and seg[i + 1].startswith("vllm.entrypoints"):
            return "api_server", i, i + 2
        if base in ("api_server.py",) and "vllm" in tok:
            return "api_server", i, i + 1
        if "vllm-openai" in tok or tok.startswith("vllm/vllm"):
            return "docker", i, i + 1
    return None


def _env_from_prefix(words: list[str], env: dict[str, str]) -> None:
    """``A=1 B=2 cmd``, ``export A=1``, ``env A=1``, docker ``-e A=1`` / ``--env A=1``."""
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-e", "--env") and i + 1 < len(words):
            match = _ENV_ASSIGN.match(words[i + 1])
            if match:
                env[match.group(1)] = match.group(2)
            i += 2
            continue
        if word.startswith("--env="):
            match = _ENV_ASSIGN.match(word[len("--env="):])
            if match:
                env[match.group(1)] = match.group(2)
        else:
            match = _ENV_ASSIGN.match(word)
            if match and not word.startswith("-"):
                env[match.group(1)] = match.group(2)
        i += 1


def _is_flag(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not _NEGATIVE_NUMBER.match(tok)


def _set_nested(target: dict[str, Any], path: list[str], value: Any) -> None:
    node = target
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    last = path[-1]
    if last.endswith("+"):
        last = last[:-1]
        items = value.split(",") if isinstance(value, str) else [value]
        node.setdefault(last, [])
        if isinstance(node[last], list):
            node[last].extend(_json_scalar(v.strip()) if isinstance(v, str) else v for v in items)
        return
    node[last] = value


def _json_scalar(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def _record_notes(spec: FlagSpec, written: str, notes: list[str]) -> None:
    if spec.removed or spec.deprecated:
        state = "removed" if spec.removed else "deprecated"
        notes.append(f"{written} is a {state} vLLM flag" + (f": {spec.note}" if spec.note else ""))


def _parse_args(args: list[str], out: ServeCommand) -> None:
    """Walk the arguments after the launcher, filling ``out.values`` / ``out.positional``."""
    values = out.values
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if tok == "--":
            out.positional.extend(args[i:])
            break
        if not _is_flag(tok):
            out.positional.append(tok)
            continue

        # -O3, -O 3, -O=3, -O '{json}', -O.key=value (compilation config / optimization level)
        if tok.startswith("-O") and not tok.startswith("--") and not tok.startswith("-O."):
            if tok == "-O":
                if i >= len(args):
                    raise _bad("-O", "a level or a JSON object", "")
                raw = args[i]
                i += 1
            else:
                raw = tok[3:] if tok[2:3] == "=" else tok[2:]
            if raw.strip().startswith("{"):
                values["compilation_config"] = _to_json(raw)
            else:
                values["optimization_level"] = int(raw) if raw.isdigit() else raw
            continue

        # FlexibleArgumentParser: underscores become dashes only before the first "."
        name, has_eq, inline = tok.partition("=")
        base, _, subpath = name.partition(".")
        base = normalize_long_flag(base)
        if base == "-O":
            base = "--compilation-config"
        spec = lookup_flag(base)
        negated = False
        if spec is None and base.startswith("--no-"):
            candidate = lookup_flag("--" + base[5:])
            if candidate is not None and candidate.kind == "bool":
                spec, negated = candidate, True
        inline_value: str | None = inline if has_eq else None

        if spec is None:
            key = base.lstrip("-").replace("-", "_")
            if inline_value is not None:
                raw_value: Any = inline_value
            else:
                taken: list[str] = []
                while i < len(args) and not _is_flag(args[i]):
                    taken.append(args[i])
                    i += 1
                raw_value = True if not taken else taken[0] if len(taken) == 1 else taken
            if subpath:
                container = values.get(key) if isinstance(values.get(key), dict) else {}
                _set_nested(container, subpath.split("."), _json_scalar(raw_value) if isinstance(raw_value, str) else raw_value)
                raw_value = container
            values[key] = raw_value
            out.notes.append(f"{base}: not in the advisor's flag table; kept as given")
            continue

        _record_notes(spec, base, out.notes)
        if subpath:  # --compilation-config.cudagraph_mode=FULL, -cc.mode 0
            if inline_value is None:
                if i >= len(args):
                    raise _bad(f"{base}.{subpath}", "a value", "")
                inline_value = args[i]
                i += 1
            container = values.get(spec.field)
            if not isinstance(container, dict):
                container = {}
            _set_nested(container, subpath.split("."), _json_scalar(inline_value))
            values[spec.field] = container
            continue

        if spec.kind == "bool":
            if inline_value is not None:
                value = _to_bool(inline_value, base)
            elif i < len(args) and args[i].lower() in ("true", "false"):
                value = _to_bool(args[i], base)  # V0 style: --enable-chunked-prefill False
                i += 1
            else:
                value = True
            values[spec.field] = (not value) if negated else value
            continue

        if spec.kind in ("ints", "strs"):
            if inline_value is not None:
                items: list[str] = [inline_value]
            else:
                items = []
                while i < len(args) and not _is_flag(args[i]):
                    items.append(args[i])
                    i += 1
            if not items:
                raise _bad(base, "one or more values", "")
            values[spec.field] = coerce_value(spec, " ".join(items).replace(",", " ") if spec.kind == "ints" else items, base)
            continue

        if inline_value is None:
            if i >= len(args) or _is_flag(args[i]):
                raise _bad(base, "a value", "" if i >= len(args) else args[i])
            inline_value = args[i]
            i += 1
        if _SHELL_VALUE.match(inline_value) and spec.kind not in ("str", "strs"):
            values[spec.field] = inline_value
            out.unresolved.add(spec.field)
            out.notes.append(f"{base} {inline_value}: set by the shell, value unknown")
            continue
        values[spec.field] = coerce_value(spec, inline_value, base)


def parse_command(cmd: str) -> ServeCommand:
    """Split and parse a serve command; raises :class:`UsageError` with one line on bad input."""
    if not cmd or not cmd.strip():
        raise UsageError("the serve command is empty")
    segments = _segments(_split(cmd))
    env: dict[str, str] = {}
    for index, seg in enumerate(segments):
        found = _launcher_index(seg)
        if found is not None:
            launcher, first, start = found
            for earlier in segments[:index]:
                _env_from_prefix(earlier, env)
            _env_from_prefix(seg[:first], env)
            args = seg[start:]
            break
    else:
        # No launcher: bare flags, possibly after ENV=VAL words.
        seg = segments[-1] if segments else []
        words = [w for w in seg if w not in _WRAPPERS]
        lead = 0
        while lead < len(words) and _ENV_ASSIGN.match(words[lead]) and not words[lead].startswith("-"):
            lead += 1
        if lead < len(words) and not words[lead].startswith("-"):
            raise UsageError(
                f"not a serve command: expected 'vllm serve MODEL ...', "
                f"'python -m vllm.entrypoints.openai.api_server ...', 'python -m sglang.launch_server ...', "
                f"'text-generation-launcher ...', 'trtllm-serve MODEL ...', 'lmdeploy serve api_server MODEL ...' "
                f"or flags, got {words[lead][:60]!r} first"
            )
        for earlier in segments[:-1]:
            _env_from_prefix(earlier, env)
        _env_from_prefix(words[:lead], env)
        launcher, args = "flags", words[lead:]

    out = ServeCommand(launcher=launcher, env=env)
    if launcher in FOREIGN_TABLES:
        translated = translate(launcher, args)
        out.engine, out.mapped, out.approx, args = launcher, translated.mapped, translated.approx, translated.args
        out.values.update(translated.kept)
    _parse_args(args, out)
    model = out.values.pop("model", None)
    if model is None and out.positional:
        model = out.positional.pop(0)
    out.model = model if isinstance(model, str) else None
    return out


# --------------------------------------------------------------------------------------------
# public API


def _num_gpus(values: dict[str, Any], env: dict[str, str]) -> int | None:
    """GPUs the engine uses: tp x pp x dp (dp_local when given). Known only when a parallel size
    is given, or CUDA_VISIBLE_DEVICES shows a GPU deployment (then the defaults of 1 apply)."""
    sizes = [values.get(k) for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")]
    if values.get("data_parallel_size_local") is not None:
        sizes[2] = values["data_parallel_size_local"]
    if all(s is None for s in sizes) and "CUDA_VISIBLE_DEVICES" not in env:
        return None
    if any(s is not None and not isinstance(s, int) for s in sizes):
        return None  # a size set by the shell ($NUM_GPUS)
    total = 1
    for s in sizes:
        total *= s if isinstance(s, int) and s > 0 else 1
    return total


def parse_serve_command(cmd: str) -> Deployment:
    """A :class:`Deployment` from a serve command: engine ``vllm``, the model, the command itself,
    ``num_gpus`` when derivable and ``quantization`` when given."""
    parsed = parse_command(cmd)
    quant = parsed.values.get("quantization")
    return Deployment(
        engine=parsed.engine,
        model=parsed.model,
        quantization=quant if isinstance(quant, str) else None,
        num_gpus=_num_gpus(parsed.values, parsed.env),
        serve_command=cmd,
    )


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def engine_args_for(deployment: Deployment) -> EngineArgs:
    """Typed engine arguments of a deployment: its serve command, then ``deployment.flags`` for
    what the command leaves unset (the command is what actually ran, so it wins a conflict).

    ``flags`` keys are underscored engine-arg names (``max_num_seqs``), flag spellings
    (``--max-num-seqs``, ``tp``) or environment variables (``NCCL_P2P_DISABLE``); for a deployment
    whose engine is SGLang, TGI, TensorRT-LLM or LMDeploy, that engine's flag names too (``chunked_prefill_size``, read as
    ``max_num_batched_tokens``: :mod:`.foreign_flags`); values are
    coerced like command-line text, JSON-typed values that are not JSON are kept as written.
    Legacy speculative flags (``--speculative-model``, ``--num-speculative-tokens``, ...) are
    folded into ``speculative_config`` under the keys vLLM moved them to.
    """
    values: dict[str, Any] = {}
    env: dict[str, str] = {}
    model: str | None = None
    unresolved: set[str] = set()
    if deployment.serve_command:
        parsed = parse_command(deployment.serve_command)
        values.update(parsed.values)
        env.update(parsed.env)
        model = parsed.model
        unresolved = parsed.unresolved
        if parsed.positional:
            values.setdefault("positional_args", list(parsed.positional))

    flags = deployment.flags
    engine = engine_key(deployment.engine)
    if engine in FOREIGN_TABLES and flags:
        foreign, flags = flags_to_args(engine, flags)
        if foreign:
            translated = translate(engine, foreign)
            read = ServeCommand(launcher="flags")
            _parse_args(translated.args, read)
            for name, value in {**translated.kept, **read.values}.items():
                values.setdefault(name, value)  # the command, when given, ran: it wins

    for key, raw in flags.items():
        key = str(key)
        if _ENV_NAME.match(key):
            env.setdefault(key, _env_text(raw))
            continue
        spec = lookup_field(key)
        name = spec.field if spec else key.lstrip("-").replace("-", "_")
        if name in values:
            continue
        values[name] = coerce_value(spec, raw, spec.flag if spec else key)

    if model is None:
        flag_model = values.pop("model", None)
        model = flag_model if isinstance(flag_model, str) else deployment.model
    else:
        values.pop("model", None)

    # Legacy speculative flags -> speculative_config, as vLLM itself moved them.
    legacy = {}
    for name in list(values):
        spec = lookup_field(name)
        if spec is not None and spec.speculative_key and spec.field == name:
            legacy[spec.speculative_key] = values.pop(name)
    if legacy:
        if values.get("speculative_config") is None:
            values["speculative_config"] = legacy
        else:
            values.update({f"legacy_speculative_{k}": v for k, v in legacy.items()})

    if values.get("attention_backend") is None and "VLLM_ATTENTION_BACKEND" in env:
        values["attention_backend"] = env["VLLM_ATTENTION_BACKEND"]

    typed = {k: v for k, v in values.items() if k in _TYPED_FIELDS and k not in unresolved and k != "model"}
    extra = {k: v for k, v in values.items() if k not in typed and k != "model"}
    try:
        return EngineArgs(model=model, **typed, extra=extra, env=env)
    except ValidationError as exc:  # a value the flag table let through but the schema refuses
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first.get("loc") else "?"
        raise UsageError(f"flag --{name.replace('_', '-')}: {first['msg']}, got {first.get('input')!r}") from None


#: non-default args keys that describe how the server was started, not the engine.
_NOT_FLAGS = {"model", "model_tag", "subparser", "dispatch_function"}


def deployment_from_server_log(info: ServerLogInfo) -> Deployment:
    """What a server log says was deployed: version, model, the user's non-default args as
    ``flags``, quantization, and the GPU count (tp x pp x dp) when the log states the sizes."""
    flags = {k: v for k, v in info.non_default_args.items() if k not in _NOT_FLAGS}
    sizes = (info.tensor_parallel_size, info.pipeline_parallel_size, info.data_parallel_size)
    num_gpus = None
    if any(s is not None for s in sizes) and (info.device or "GPU").upper() != "CPU":
        num_gpus = 1
        for s in sizes:
            num_gpus *= s or 1
    return Deployment(
        engine="vllm",
        vllm_version=info.vllm_version,
        model=info.model,
        quantization=info.quantization,
        num_gpus=num_gpus,
        flags=flags,
    )
