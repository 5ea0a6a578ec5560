"""What a vLLM server log says: version, model, engine settings, KV-cache size, attention backend,
CUDA graphs, preemptions and the periodic throughput/queue lines.

Why line by line: server logs of long runs reach gigabytes, so the file is streamed with a cap
on line length and on the number of stats lines kept; nothing holds the whole file. Every line
is matched with cheap substring tests first and a regular expression only when one hits.

The phrasings come from vLLM's own log calls across versions (0.2 to 0.3x, V0 and V1 engines):

- ``vLLM API server version X`` / the V1 banner ``version X`` / ``Initializing a V1 LLM engine
  (vX) with config: k=v, ...`` / V0 ``Initializing an LLM engine (vX) with config: ...``
- ``non-default args: {...}`` (a Python dict repr) and, before it existed, ``args: Namespace(...)``
- ``GPU KV cache size: N tokens`` (``CPU``/``XPU``... on other platforms), ``Maximum concurrency
  for L tokens per request: X.XXx`` (own line or the same line), V0 ``# GPU blocks: N, # CPU blocks: M``
- attention backend: V0 ``Using FlashAttention-2 backend.``, V1 ``Using Flash Attention backend on
  V1 engine.``, ``Using FLASH_ATTN backend.``, ``Using AttentionBackendEnum.FLASH_ATTN backend.``,
  ``Using FLASH_ATTN attention backend out of potential backends: [...]``
- preemption: V0 ``Sequence group X is preempted by PreemptionMode.RECOMPUTE mode ...
  total_num_cumulative_preemption=N`` (older: ``total_cumulative_preemption_cnt=N``; V0 warns only
  on the 1st, 51st, 101st... preemption); V1 stats lines add ``Preemptions: N`` in recent versions
- stats: V0 ``Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s, Running: N
  reqs, Swapped: N reqs, Pending: N reqs, GPU KV cache usage: X%, CPU KV cache usage: Y%`` (+ a
  separate ``Prefix cache hit rate: GPU: X%, CPU: Y%`` line); V1 ``[Engine 000: ]Avg prompt
  throughput ..., Running: N reqs, Waiting: N reqs[, Preemptions: N], GPU KV cache usage: X%,
  Prefix cache hit rate: Y%``

Settings are taken from the engine's config line first (what actually ran), then from dedicated
lines, then from the user's non-default args. ``kv_cache_memory_gib`` is per worker, as logged.
"""

from __future__ import annotations

import codecs

import ast
import json
import re
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

from ..errors import InputFileError, UnknownFormatError
from ..schema import ServerLogInfo, ServerStatsLine
from .files import check_readable, gzip_failure, gzip_failures, inflated, is_gzip, is_utf16, looks_binary, max_input_bytes, open_bytes, read_head

#: Logs are streamed, so they may be far larger than files read into memory.
LOG_SIZE_FACTOR = 16
#: Longest line kept whole (bytes); longer lines are cut into pieces of this size.
MAX_LINE_BYTES = 1 << 20
#: Most periodic stats lines kept (the most recent ones); one line per 10 s per engine is ~2.3 days.
MAX_STATS_LINES = 20_000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PROC_TAG = re.compile(r"^\((?P<tag>[^\s)]+)(?: pid=\d+)?\)")
_TIMESTAMP = re.compile(r"\b(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\s+(\d{2}-\d{2} \d{2}:\d{2}:\d{2})")

_VERSION_API = re.compile(r"vLLM API server version (\S+)")
_VERSION_BANNER = re.compile(r"[█▄▀]\s.*\bversion\s+(\S+)\s*$")
_MODEL_BANNER = re.compile(r"[█▄▀]\s.*\bmodel\s+(\S+)\s*$")
_ENGINE_CONFIG = re.compile(r"Initializing an? (?:(V\d) )?LLM engine(?: \(v(?P<version>[^)]+)\))? with config: (?P<config>.*)$")
_KV_SIZE = re.compile(r"\b(?P<device>[A-Z]{2,4}) KV cache size: (?P<tokens>[\d,]+) tokens")
_MAX_CONC = re.compile(r"Maximum concurrency for (?P<tokens>[\d,]+) tokens per request: (?P<x>[\d.,]+)x")
_V0_BLOCKS = re.compile(r"# GPU blocks: (\d+), # CPU blocks: (\d+)", re.I)
_BLOCKS_OVERRIDE = re.compile(r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)")
_KV_MEMORY = (
    re.compile(r"Available KV cache memory: ([\d.]+) ?GiB"),
    re.compile(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache"),
    re.compile(r"KV Cache is ([\d.]+) ?GiB"),
    re.compile(r"kv_cache_size=([\d.]+) ?GiB"),
)
_GPU_TOTAL = (
    re.compile(r"Free memory on device \([\d.]+/([\d.]+) ?GiB\)"),
    re.compile(r"total_gpu_memory \(([\d.]+) ?GiB\)"),
)
_ATTENTION = re.compile(
    r"\bUsing (?:AttentionBackendEnum\.)?(?P<name>[A-Za-z][\w\-. ]*?) (?:attention )?backend"
    r"(?: on V1 engine)?(?:\.?\s*$| out of potential backends)"
)
_MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
_GRAPH_DONE = re.compile(r"Graph capturing finished in ([\d.]+) secs?(?:, took ([\d.]+) GiB)?")
_PREEMPTED = re.compile(r"is preempted by PreemptionMode\.(\w+)")
_PREEMPT_TOTAL = re.compile(r"total(?:_num)?_cumulative_preemption(?:_cnt)?=(\d+)")

#: The whole stats line in the layouts vLLM has used (V0, V1, with Swapped/Deferred/Preemptions);
#: the per-field patterns below are the fallback for any other arrangement.
_STAT_LINE = re.compile(
    r"Avg prompt throughput: (?P<p>[\d.]+) tokens/s, Avg generation throughput: (?P<g>[\d.]+) tokens/s, "
    r"Running: (?P<r>\d+) reqs, (?:Swapped: (?P<sw>\d+) reqs, )?(?:Pending|Waiting): (?P<w>\d+) reqs, "
    r"(?:Deferred: \d+ reqs, )?(?:Preemptions: (?P<pre>\d+), )?(?:[A-Z]{2,4} )?KV cache usage: (?P<kv>[\d.]+)%"
    r"(?:, (?:[A-Z]{2,4} )?KV cache usage: [\d.]+%)?(?:, Prefix cache hit rate: (?P<pc>[\d.]+)%)?"
)
_STAT_PROMPT = re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s")
_STAT_GEN = re.compile(r"Avg generation throughput: ([\d.]+) tokens/s")
_STAT_RUNNING = re.compile(r"Running: (\d+) reqs")
_STAT_SWAPPED = re.compile(r"Swapped: (\d+) reqs")
_STAT_WAITING = re.compile(r"(?:Waiting|Pending): (\d+) reqs")
_STAT_PREEMPT = re.compile(r"Preemptions: (\d+)")
_STAT_KV = re.compile(r"(?:\b[A-Z]{2,4} )?KV cache usage: ([\d.]+)%")
_STAT_PREFIX = re.compile(r"(?<![a-z] )Prefix cache hit rate: ([\d.]+)%")
_STAT_PREFIX_V0 = re.compile(r"Prefix cache hit rate: GPU: ([\d.]+)%")
_STAT_ENGINE = re.compile(r"Engine (\d+):")
#: Same order as the groups p, g, r, w, sw, kv, pc, pre of _STAT_LINE.
_STAT_FIELDS = (_STAT_PROMPT, _STAT_GEN, _STAT_RUNNING, _STAT_WAITING, _STAT_SWAPPED, _STAT_KV, _STAT_PREFIX, _STAT_PREEMPT)


def _float(text: str | None) -> float | None:
    return float(text) if text is not None else None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None

_ENUM_REPR = re.compile(r"<([A-Za-z_][\w]*)\.([A-Za-z_]\w*): [^<>]*>")
_ANGLE_REPR = re.compile(r"<[^<>]*>")
_CONFIG_KEY = re.compile(r"(?:^|(?<=[, ]))([A-Za-z_]\w*)=")

#: Words whose presence marks a vLLM server log (for the "does not look like" error).
_MARKERS = ("non-default args", "Initializing ... LLM engine", "KV cache size", "# GPU blocks",
            "Avg prompt throughput", "vLLM API server version")


# --------------------------------------------------------------------------------------------
# Python-repr parsing, forgiving


def _py_literal(text: str) -> Any:
    """``ast.literal_eval`` after turning enum reprs (``<CUDAGraphMode.NONE: 0>``) into their
    member names and other ``<...>`` reprs into None. Raises ValueError when it still fails."""
    cleaned = _ENUM_REPR.sub(lambda m: repr(m.group(2)), text)
    cleaned = _ANGLE_REPR.sub("None", cleaned)
    try:
        return ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(text) from None


def _top_level_mask(text: str) -> list[bool]:
    """For each character: is it outside quotes and brackets?"""
    mask = [False] * len(text)
    depth = 0
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth = max(0, depth - 1)
        else:
            mask[i] = depth == 0
    return mask


def _value(raw: str) -> Any:
    """One value from a config or Namespace repr: JSON, a Python literal, else the raw text."""
    text = raw.strip()
    if text[:1] in "{[":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    try:
        return _py_literal(text)
    except ValueError:
        return text


def _parse_key_values(text: str) -> dict[str, Any]:
    """``model='x', dtype=torch.bfloat16, compilation_config={...}`` -> dict. Tolerates the missing
    comma of some V0 versions (``chunked_prefill_enabled=False multi_step_stream_outputs=True``)."""
    mask = _top_level_mask(text)
    starts = [m for m in _CONFIG_KEY.finditer(text) if mask[m.start()]]
    out: dict[str, Any] = {}
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        out[match.group(1)] = _value(text[match.end():end].rstrip().rstrip(","))
    return out


def _split_top(text: str, sep: str = ",") -> list[str]:
    mask = _top_level_mask(text)
    parts, last = [], 0
    for i, ch in enumerate(text):
        if ch == sep and mask[i]:
            parts.append(text[last:i])
            last = i + 1
    parts.append(text[last:])
    return [p for p in parts if p.strip()]


def parse_args_dict(text: str) -> dict[str, Any]:
    """The ``{...}`` after ``non-default args:``. Falls back key by key when the whole repr is not
    a literal (values that are objects are then kept as their text)."""
    text = text.strip()
    try:
        value = _py_literal(text)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    except ValueError:
        pass
    body = text[1:-1] if text.startswith("{") and text.endswith("}") else text
    out: dict[str, Any] = {}
    for part in _split_top(body):
        key_text, colon, value_text = part.partition(":")
        if not colon:
            continue
        try:
            key = str(_py_literal(key_text.strip()))
        except ValueError:
            key = key_text.strip().strip("'\"")
        out[key] = _value(value_text)
    return out


# --------------------------------------------------------------------------------------------
# scanning


_SPEC_ACCEPTED = re.compile(r"Accepted:\s*([\d,]+)\s*tokens")
_SPEC_DRAFTED = re.compile(r"Drafted:\s*([\d,]+)\s*tokens")
_SPEC_POSITIONS = re.compile(r"Per-position acceptance rate:\s*([\d.]+(?:\s*,\s*[\d.]+)*)")


class _Scan:
    """Everything gathered while walking the lines; resolved into a ServerLogInfo at the end."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found: set[str] = set()
        self.config: dict[str, Any] = {}
        self.args: dict[str, Any] = {}
        self.namespace: dict[str, Any] = {}
        self.lines: dict[str, Any] = {}
        self.kv_tokens_by_engine: dict[str, int] = {}
        self.starts = 0
        self.engine_v1 = False
        self.backends: list[str] = []
        self.preemption_warnings = 0
        self.spec_lines = self.spec_accepted = self.spec_drafted = 0
        self.spec_drafts: float | None = 0.0
        self.preemption_modes: set[str] = set()
        self.v0_cumulative: int | None = None
        self.stats: deque[ServerStatsLine] = deque(maxlen=MAX_STATS_LINES)
        self.stats_seen = 0
        self.notes: list[str] = []

    # -- one line ----------------------------------------------------------------------------
    def feed(self, line: str, line_no: int) -> None:
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        line = line.rstrip("\r\n")
        if not line:
            return
        if "Avg prompt throughput" in line:
            self._stats(line, line_no)
            return
        if "SpecDecoding metrics" in line:
            self._spec_decoding(line)
            return
        if '" 200' in line or "HTTP/1.1" in line:  # uvicorn access lines: most of a busy log
            return
        if "Prefix cache hit rate: GPU:" in line:
            self._v0_prefix_rate(line)
            return
        if "non-default args:" in line:
            self.found.add("non-default args")
            self.starts += 1
            self.args = parse_args_dict(line.split("non-default args:", 1)[1])
            return
        if "args: Namespace(" in line:
            self.found.add("non-default args")
            self.starts += 1
            body = line.split("args: Namespace(", 1)[1]
            self.namespace = _parse_key_values(body[:-1] if body.endswith(")") else body)
            return
        if "LLM engine" in line and "with config:" in line:
            self._engine_config(line)
            return
        if "version" in line:
            self._version(line)
        if "KV cache size:" in line or "Maximum concurrency for" in line:
            self._kv_size(line)
            return
        if "blocks" in line:
            self._blocks(line)
        if "GiB" in line and ("KV" in line or "kv_cache" in line):
            self._first_gib(line, _KV_MEMORY, "kv_cache_memory_gib")
        if "GiB" in line and ("Free memory on device" in line or "total_gpu_memory" in line):
            self._first_gib(line, _GPU_TOTAL, "gpu_memory_total_gib")
        if "Using " in line and "backend" in line:
            match = _ATTENTION.search(line)
            if match:
                name = match.group("name").strip()
                if name not in self.backends:
                    self.backends.append(name)
            return
        if "preempted by" in line:
            self._preemption(line)
            return
        if "Using max model len" in line:
            match = _MAX_MODEL_LEN.search(line)
            if match:
                self.lines["max_model_len"] = int(match.group(1))
            return
        if "Chunked prefill is enabled with" in line:
            match = _CHUNKED.search(line)
            if match:
                self.lines["chunked_prefill"] = True
                self.lines["max_num_batched_tokens"] = int(match.group(1))
            return
        if "Enforce eager set" in line:
            self.lines["enforce_eager"] = True
            return
        if "Graph capturing finished" in line:
            match = _GRAPH_DONE.search(line)
            if match:
                took = f", {match.group(2)} GiB" if match.group(2) else ""
                self.lines["graph_capture"] = f"CUDA graph capture finished in {match.group(1)} s{took}"

    # -- handlers ----------------------------------------------------------------------------
    def _version(self, line: str) -> None:
        match = _VERSION_API.search(line)
        if match:
            self.found.add("vLLM API server version")
            self.lines["version"] = match.group(1)
            return
        if "█" in line or "▀" in line or "▄" in line:
            match = _VERSION_BANNER.search(line)
            if match:
                self.lines.setdefault("version", match.group(1))
        if "█" in line and "model" in line:
            match = _MODEL_BANNER.search(line)
            if match:
                self.lines["banner_model"] = match.group(1)

    def _engine_config(self, line: str) -> None:
        match = _ENGINE_CONFIG.search(line)
        if not match:
            return
        self.found.add("Initializing ... LLM engine")
        if match.group(1) == "V1":
            self.engine_v1 = True
        if match.group("version"):
            self.lines["engine_version"] = match.group("version")
        self.config = _parse_key_values(match.group("config"))

    def _first_gib(self, line: str, patterns: tuple[re.Pattern[str], ...], key: str) -> None:
        """The first of ``patterns`` (vLLM's wordings across releases) that reads a GiB figure in ``line``."""
        for pattern in patterns:
            match = pattern.search(line)
            if match:
                self.lines[key] = float(match.group(1))
                return

    def _kv_size(self, line: str) -> None:
        size = _KV_SIZE.search(line)
        if size:
            self.found.add("KV cache size")
            tag = _PROC_TAG.match(line)
            self.kv_tokens_by_engine[tag.group("tag") if tag else ""] = int(size.group("tokens").replace(",", ""))
            self.lines["device"] = size.group("device")
        conc = _MAX_CONC.search(line)
        if conc:
            self.lines["max_concurrency"] = float(conc.group("x").replace(",", ""))
            self.lines["max_concurrency_tokens"] = int(conc.group("tokens").replace(",", ""))

    def _blocks(self, line: str) -> None:
        match = _V0_BLOCKS.search(line)
        if match:
            self.found.add("# GPU blocks")
            self.lines["kv_cache_blocks"] = int(match.group(1))
            self.lines.setdefault("device", "GPU")
            return
        match = _BLOCKS_OVERRIDE.search(line)
        if match:
            self.lines["kv_cache_blocks"] = int(match.group(2))

    def _spec_decoding(self, line: str) -> None:
        """vLLM V1's "SpecDecoding metrics: ..., Accepted: N tokens, Drafted: M tokens, ..." (each line
        counts the interval since the one before)."""
        accepted, drafted = _SPEC_ACCEPTED.search(line), _SPEC_DRAFTED.search(line)
        if accepted is None or drafted is None:
            return
        self.spec_lines += 1
        self.spec_accepted += int(accepted.group(1).replace(",", ""))
        self.spec_drafted += int(drafted.group(1).replace(",", ""))
        positions = _SPEC_POSITIONS.search(line)  # one rate per draft position: the draft length
        k = len(positions.group(1).split(",")) if positions else 0
        self.spec_drafts = None if self.spec_drafts is None or not k else self.spec_drafts + int(drafted.group(1).replace(",", "")) / k

    def _preemption(self, line: str) -> None:
        match = _PREEMPTED.search(line)
        if not match:
            return
        self.preemption_warnings += 1
        self.preemption_modes.add(match.group(1))
        total = _PREEMPT_TOTAL.search(line)
        if total:
            value = int(total.group(1))
            self.v0_cumulative = value if self.v0_cumulative is None else max(self.v0_cumulative, value)

    def _stats(self, line: str, line_no: int) -> None:
        self.found.add("Avg prompt throughput")
        ts = _TIMESTAMP.search(line)
        engine = _STAT_ENGINE.search(line)
        if "Waiting:" in line:
            self.engine_v1 = True
        whole = _STAT_LINE.search(line)
        if whole:
            found = whole.groupdict()
            raw = tuple(found[k] for k in ("p", "g", "r", "w", "sw", "kv", "pc", "pre"))
        else:
            raw = tuple(m.group(1) if (m := pattern.search(line)) else None for pattern in _STAT_FIELDS)
        p, g, r, w, sw, kv, pc, pre = raw
        # model_construct: the values are typed right here, and validating each of thousands of
        # lines would cost about a third of the time spent on a long log.
        self.stats.append(
            ServerStatsLine.model_construct(
                line_no=line_no,
                timestamp=ts.group(1) if ts else None,
                engine=engine.group(1) if engine else None,
                prompt_tok_s=_float(p),
                generation_tok_s=_float(g),
                running=_int(r),
                waiting=_int(w),
                swapped=_int(sw),
                kv_cache_usage_pct=_float(kv),
                prefix_cache_hit_rate_pct=_float(pc),
                preemptions=_int(pre),
            )
        )
        self.stats_seen += 1

    def _v0_prefix_rate(self, line: str) -> None:
        match = _STAT_PREFIX_V0.search(line)
        if match and self.stats and self.stats[-1].prefix_cache_hit_rate_pct is None:
            self.stats[-1].prefix_cache_hit_rate_pct = float(match.group(1))

    # -- result ------------------------------------------------------------------------------
    def result(self) -> ServerLogInfo:
        if not self.found:
            raise UnknownFormatError(
                "does not look like a vLLM server log: none of " + ", ".join(repr(m) for m in _MARKERS) + " found",
                source=self.source,
            )
        cfg, nd, ns, ln = self.config, self.args, self.namespace, self.lines

        def first(*candidates: Any) -> Any:
            return next((c for c in candidates if c is not None), None)

        def opt(key: str) -> Any:
            return first(nd.get(key), ns.get(key))

        def as_int(value: Any) -> int | None:
            if isinstance(value, bool) or value is None:
                return None
            try:
                return int(value)
            except (TypeError, ValueError):
                return None

        def as_bool(value: Any) -> bool | None:
            return value if isinstance(value, bool) else None

        def as_str(value: Any) -> str | None:
            if value is None or value == "None":
                return None
            text = str(value)
            return text[len("torch."):] if text.startswith("torch.") else text

        compilation = cfg.get("compilation_config")
        capture_sizes = cudagraph_mode = None
        if isinstance(compilation, dict):
            sizes = compilation.get("cudagraph_capture_sizes", compilation.get("capture_sizes"))
            if isinstance(sizes, list) and all(isinstance(s, int) for s in sizes):
                capture_sizes = sorted(sizes)
            mode = compilation.get("cudagraph_mode")
            if mode is not None:
                cudagraph_mode = str(mode)
            elif compilation.get("use_cudagraph") is False:
                cudagraph_mode = "NONE"

        model = first(
            *(as_str(nd.get(k)) for k in ("model", "model_tag")),
            as_str(cfg.get("model")),
            ln.get("banner_model"),
            as_str(ns.get("model")),
        )
        stats = list(self.stats)
        v1_preemptions = [s.preemptions for s in stats if s.preemptions is not None]
        preemptions_total = self.v0_cumulative
        if v1_preemptions:
            preemptions_total = (preemptions_total or 0) + sum(v1_preemptions)

        notes = list(self.notes)
        if self.starts > 1:
            notes.append(f"the log holds {self.starts} server starts; settings are from the last one, stats lines from all")
        if len(self.backends) > 1:
            notes.append("attention backends named: " + ", ".join(self.backends))
        if self.stats_seen > len(stats):
            notes.append(f"kept the last {len(stats):,} of {self.stats_seen:,} stats lines")
        if self.v0_cumulative is not None:
            notes.append(
                f"V0 preemption warnings: {self.preemption_warnings} line(s), highest cumulative count "
                f"{self.v0_cumulative} (V0 warns only every 50th preemption)"
            )
        elif self.engine_v1 and preemptions_total is None:
            notes.append("V1 engine: preemptions are not logged one by one; read vllm:num_preemptions_total on /metrics")
        if "graph_capture" in ln:
            notes.append(ln["graph_capture"])
        if cudagraph_mode == "NONE":
            notes.append("CUDA graphs are off (compilation_config cudagraph_mode NONE)")

        # the engine config's device wins where it names one other than CUDA: vLLM on an Intel XPU still
        # prints "GPU KV cache size" (a reviewer's find: an XPU log was shown as a GPU and given NVIDIA advice)
        configured = (as_str(cfg.get("device_config")) or "").upper()
        device = configured if configured and configured not in ("CUDA", "AUTO", "GPU") else ln.get("device") or configured or None
        return ServerLogInfo(
            source=self.source,
            vllm_version=first(ln.get("version"), ln.get("engine_version")),
            model=model,
            device=device,
            non_default_args=dict(nd),
            tensor_parallel_size=as_int(first(cfg.get("tensor_parallel_size"), opt("tensor_parallel_size"))),
            pipeline_parallel_size=as_int(first(cfg.get("pipeline_parallel_size"), opt("pipeline_parallel_size"))),
            data_parallel_size=as_int(first(cfg.get("data_parallel_size"), opt("data_parallel_size"))),
            max_model_len=as_int(first(cfg.get("max_seq_len"), ln.get("max_model_len"), opt("max_model_len"))),
            dtype=as_str(first(cfg.get("dtype"), opt("dtype"))),
            quantization=as_str(first(cfg.get("quantization"), opt("quantization"))),
            kv_cache_dtype=as_str(first(cfg.get("kv_cache_dtype"), opt("kv_cache_dtype"))),
            block_size=as_int(first(cfg.get("block_size"), opt("block_size"))),
            kv_cache_tokens=sum(self.kv_tokens_by_engine.values()) if self.kv_tokens_by_engine else None,
            kv_cache_memory_gib=ln.get("kv_cache_memory_gib"),
            gpu_memory_total_gib=ln.get("gpu_memory_total_gib"),
            max_concurrency=ln.get("max_concurrency"),
            max_concurrency_tokens_per_request=ln.get("max_concurrency_tokens"),
            attention_backend=self.backends[0] if self.backends else None,
            enforce_eager=as_bool(first(cfg.get("enforce_eager"), ln.get("enforce_eager"), opt("enforce_eager"))),
            cudagraph_capture_sizes=capture_sizes,
            cudagraph_mode=cudagraph_mode,
            chunked_prefill=as_bool(
                first(cfg.get("enable_chunked_prefill"), cfg.get("chunked_prefill_enabled"),
                      ln.get("chunked_prefill"), opt("enable_chunked_prefill"))
            ),
            prefix_caching=as_bool(first(cfg.get("enable_prefix_caching"), opt("enable_prefix_caching"))),
            max_num_batched_tokens=as_int(first(ln.get("max_num_batched_tokens"), opt("max_num_batched_tokens"))),
            max_num_seqs=as_int(opt("max_num_seqs")),
            kv_cache_blocks=ln.get("kv_cache_blocks"),
            preemption_warnings=self.preemption_warnings,
            preemptions_total=preemptions_total,
            spec_accepted_tokens=self.spec_accepted if self.spec_lines else None,
            spec_drafted_tokens=self.spec_drafted if self.spec_lines else None,
            spec_drafts=self.spec_drafts if self.spec_lines else None,
            spec_metric_lines=self.spec_lines,
            stats_lines_seen=self.stats_seen,
            stats=stats,
            notes=notes,
        )


# --------------------------------------------------------------------------------------------
# public API


def _lines(fh: BinaryIO, utf16: bool = False) -> Iterator[str]:
    if utf16:  # a log saved by Windows PowerShell 5: UTF-16 with its byte-order mark
        reader = codecs.getreader("utf-16")(fh, errors="replace")
        while line := reader.readline(MAX_LINE_BYTES):
            yield line
        return
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        yield raw.decode("utf-8", errors="replace")


#: Exceptions a line of unexpected shape can raise in the line parsers (a number too large for a
#: float, a literal that is not one). Log lines are independent: such a line is skipped and counted.
_LINE_FAILURES = (ValueError, OverflowError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, RecursionError, SyntaxError, MemoryError)


def _scan(lines: Iterable[str], source: str) -> ServerLogInfo:
    scan = _Scan(source)
    bad: list[int] = []
    for line_no, line in enumerate(lines, start=1):
        try:
            scan.feed(line, line_no)
        except _LINE_FAILURES:
            bad.append(line_no)
    if bad:
        shown = ", ".join(str(n) for n in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        scan.notes.append(f"line{'s' if len(bad) > 1 else ''} {shown} could not be read and {'were' if len(bad) > 1 else 'was'} skipped")
    try:
        return scan.result()
    except _LINE_FAILURES as exc:
        raise InputFileError(f"the log's figures do not add up ({type(exc).__name__}: {str(exc)[:80]})", source=source) from None


def parse_server_log(path: str | Path) -> ServerLogInfo:
    """Read a vLLM server log file (streamed; up to 16x the usual input size limit)."""
    p = check_readable(path, max_bytes=max_input_bytes() * LOG_SIZE_FACTOR)
    head = read_head(p, 1024)
    if looks_binary(head):
        raise InputFileError("is a binary file, expected a vLLM server log (text)", source=str(path))
    packed = is_gzip(p)
    try:
        with open_bytes(p, packed) as fh:  # a gzipped log streams the same, what it inflates to bounded as read
            lines = _lines(fh, is_utf16(head))
            if packed:
                lines = _capped(lines, max_input_bytes() * LOG_SIZE_FACTOR, str(path))
            return _scan(lines, str(path))
    except gzip_failures() as exc:
        raise gzip_failure(exc, path) from None
    except OSError as exc:
        raise InputFileError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None


def _capped(lines: Iterator[str], limit: int, source: str) -> Iterator[str]:
    """``lines``, refused past ``limit`` characters read: a gzipped log may inflate far past its size on disk."""
    read = 0
    for line in lines:
        read += len(line)
        if read > limit:
            raise inflated(limit, source)
        yield line


def parse_server_log_text(text: str, source: str = "<server log>") -> ServerLogInfo:
    """Same as :func:`parse_server_log` for log text already in memory (pasted, fetched)."""
    if not text.strip():
        raise InputFileError("server log text is empty", source=source)
    return _scan(text.split("\n"), source)
