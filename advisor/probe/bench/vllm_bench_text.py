"""The console output of ``vllm bench serve`` / ``benchmarks/benchmark_serving.py``: the
``============ Serving Benchmark Result ============`` block people paste into issues and keep
as logs when they did not pass ``--save-result``.

Where the lines come from (vLLM sources, read through the code search):

- ``vllm/benchmarks/serve.py`` (vllm-project/vllm, commit 009e6d4a), ``benchmark()``:
  ``print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))`` then
  ``"{:<40} {:<10}"`` lines ``Successful requests:``, ``Failed requests:``,
  ``Maximum request concurrency:`` (only with a cap), ``Request rate configured (RPS):`` (only
  when finite), ``Benchmark duration (s):``, ``Total input tokens:``, ``Total generated tokens:``,
  ``Request throughput (req/s):``, ``Request goodput (req/s):`` (only with ``--goodput``),
  ``Output token throughput (tok/s):``, ``Peak output token throughput (tok/s):``,
  ``Peak concurrent requests:``, ``RTFx (Inverse Real-Time Factor):`` (ASR only),
  ``Total token throughput (tok/s):``; optional ``Probe Requests``; then per selected metric
  (``--percentile-metrics``) a ``-``-centred header and ``Mean X (ms):``, ``Median X (ms):``,
  ``P{p} X (ms):`` (``P99.9`` keeps its decimals) for X = TTFT, TPOT, ITL, E2EL, and with
  ``--max-concurrency`` ``Client Queue Time`` / ``E2EL incl. Client Queue``; optional
  ``Speculative Decoding`` and ``Diffusion Decoding`` sections; closed by ``"=" * 50``.
  Before the block: ``Traffic request rate: {rate}``, ``Burstiness factor: ...``,
  ``Maximum request concurrency: {max_concurrency}`` (also when None).
- ``benchmarks/benchmark_serving.py`` (vllm-project/vllm, commit 0049e29c, early 2025): no
  ``Failed requests``, ``Total Token throughput (tok/s):`` with a capital T, E2EL only when
  selected, and ``main()`` starts with ``print(args)``: the ``Namespace(...)`` line.
- 2024 copies of benchmark_serving.py (v0.4 era): also ``Input token throughput (tok/s):``,
  only Mean/Median/P99 of TTFT/TPOT/ITL, no E2EL.
- SGLang's ``bench_serving.py`` prints the same banner with extra lines (``Backend:``,
  ``Traffic request rate:``, ``Max request concurrency:``, ``Total throughput (tok/s):``,
  ``Concurrency:``, an ``End-to-End Latency`` section of ``E2E Latency``): read with the same
  meanings, since detection cannot tell the two apart.

No vLLM version prints ``Std``; a ``Std X (ms):`` line is read if present.

How it is read: each block becomes the dict ``--save-result`` would have written (same keys),
loaded by :func:`.vllm_bench.load_result`, so the field conventions, metadata and caveats are
exactly the JSON loader's. Figures are printed rounded to 0.01 (a note says so). The setup
(offered rate, concurrency, num_prompts, seed, random input/output lengths) comes from the
lines of the same run before its block: the ``Namespace(...)`` line and the ``Traffic request
rate`` / ``Maximum request concurrency`` lines, never from another run's lines, and what no
line states stays ``None``. A file may hold several blocks (a sweep logged to one file): one
run per block, in order. A block cut short (no closing ``=`` line, or a line that is not a
figure) is one :class:`InputFileError` naming the line.

The parsed document does not keep the text, so detection and loading read the file again
(JSON documents are never re-read: they cannot be console logs).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ...errors import InputFileError
from ...schema import BenchmarkRun
from ..files import read_text
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import as_number
from .vllm_bench import load_result

FORMAT_ID = "vllm-bench-text"

BANNER = re.compile(r"={3,}\s*Serving Benchmark Result\s*={3,}")
CLOSING = re.compile(r"^={20,}$")
SECTION = re.compile(r"^-{3,}\s*(?P<title>[^-\s].*?)\s*-{3,}$")
LABEL_VALUE = re.compile(r"^(?P<label>[^:]+?)\s*:(?:\s+(?P<value>.*?))?\s*$")
STAT_LABEL = re.compile(
    r"^(?P<stat>mean|median|std|min|max|p(?P<pct>\d+(?:\.\d+)?))\s+(?P<metric>.+?)\s+\(ms\)$", re.IGNORECASE
)
POSITION_LABEL = re.compile(r"^position (?P<pos>\d+)$")
PER_POSITION_HEADER = "per-position acceptance (%)"

ROUNDING_NOTE = "figures as printed, rounded to 0.01 (counts exact): compare them with that precision"

#: Metric names as printed -> the attribute name ``--save-result`` uses in ``{stat}_{name}_ms``.
METRIC_NAMES = {
    "ttft": "ttft",
    "tpot": "tpot",
    "itl": "itl",
    "e2el": "e2el",
    "e2e latency": "e2el",  # SGLang
    "client queue time": "client_queue_time",
    "e2el incl. client queue": "e2el_including_client_queue",
}
#: ``Median probe E2EL (ms):`` -> ``probe_median_e2el_ms``.
PROBE_METRIC = "probe e2el"


def _integer(text: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ValueError(f"expected a whole number, got {text!r}")
    return int(text)


def _number(text: str) -> float | None:
    try:
        return as_number(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None


def _rate(text: str) -> float | None:
    try:
        return as_number(text, allow_inf=True)
    except ValueError:
        raise ValueError(f"expected a rate in req/s or 'inf', got {text!r}") from None


def _cap(text: str) -> int | None:
    """A concurrency cap: a whole number, or ``None``/``not set`` for no cap."""
    return None if text.strip().lower() in ("none", "not set") else _integer(text)


def _count(text: str) -> int | float | None:
    """A count printed with ``:.2f`` (``Peak concurrent requests: 16.00``): int when whole."""
    value = _number(text)
    return int(value) if value is not None and value.is_integer() else value


def _text(text: str) -> str:
    return text


#: Printed label (lower case, single spaces) -> (result key as ``--save-result`` writes it, parser).
LABELS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "successful requests": ("completed", _integer),
    "failed requests": ("failed", _integer),
    "maximum request concurrency": ("max_concurrency", _cap),
    "max request concurrency": ("max_concurrency", _cap),  # SGLang
    "request rate configured (rps)": ("request_rate", _rate),
    "traffic request rate": ("request_rate", _rate),  # SGLang prints it inside the block
    "benchmark duration (s)": ("duration", _number),
    "total input tokens": ("total_input_tokens", _integer),
    "total generated tokens": ("total_output_tokens", _integer),
    "request throughput (req/s)": ("request_throughput", _number),
    "request goodput (req/s)": ("request_goodput", _number),
    "input token throughput (tok/s)": ("input_throughput", _number),  # v0.4 era, SGLang
    "output token throughput (tok/s)": ("output_throughput", _number),
    "peak output token throughput (tok/s)": ("max_output_tokens_per_s", _number),
    "peak concurrent requests": ("max_concurrent_requests", _count),
    "total token throughput (tok/s)": ("total_token_throughput", _number),  # also "Total Token"
    "total throughput (tok/s)": ("total_token_throughput", _number),  # SGLang
    "rtfx (inverse real-time factor)": ("rtfx", _number),
    "input throughput (inputs/s)": ("input_sequence_throughput", _number),
    "probe requests completed": ("probe_completed", _integer),
    "probe requests failed": ("probe_failed", _integer),
    "acceptance rate (%)": ("spec_decode_acceptance_rate", _number),
    "acceptance length": ("spec_decode_acceptance_length", _number),
    "drafts": ("spec_decode_num_drafts", _integer),
    "draft tokens": ("spec_decode_draft_tokens", _integer),
    "accepted tokens": ("spec_decode_accepted_tokens", _integer),
    "committed throughput (tok/s)": ("diffusion_committed_throughput", _number),
    "denoising steps per canvas": ("diffusion_steps_per_canvas", _number),
    "committed per denoising step": ("diffusion_committed_per_step", _number),
    "committed tokens": ("diffusion_committed_tokens", _integer),
    "denoising steps": ("diffusion_denoising_steps", _integer),
    "canvas positions evaluated": ("diffusion_canvas_positions", _integer),
    "backend": ("backend", _text),  # SGLang
    "concurrency": ("concurrency", _number),  # SGLang: sum of latencies / duration
}

#: Namespace arguments that are setup keys of the result JSON (argument -> key).
NAMESPACE_SETUP = {
    "model": "model_id",
    "backend": "backend",
    "label": "label",
    "num_prompts": "num_prompts",
    "request_rate": "request_rate",
    "burstiness": "burstiness",
    "max_concurrency": "max_concurrency",
    "tokenizer": "tokenizer_id",
}
#: Namespace arguments recorded in metadata under their own names (when not None).
NAMESPACE_METADATA = (
    "seed", "dataset_name", "dataset_path", "random_input_len", "random_output_len", "random_range_ratio",
    "random_prefix_len", "input_len", "output_len", "sharegpt_output_len", "endpoint", "base_url",
    "served_model_name", "ignore_eos", "percentile_metrics", "metric_percentiles", "goodput",
    "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "result_dir", "result_filename",
)

#: Lines printed before the block: (pattern, result key, parser).
PRE_BLOCK_LINES: tuple[tuple[re.Pattern[str], str, Callable[[str], Any]], ...] = (
    (re.compile(r"Traffic request rate:\s*(?P<value>\S+)"), "request_rate", _rate),
    (re.compile(r"Maximum request concurrency:\s*(?P<value>\S+)"), "max_concurrency", _cap),
    (re.compile(r"Burstiness factor:\s*(?P<value>\S+)"), "burstiness", _number),
    (re.compile(r"Traffic ramp-up strategy:\s*(?P<value>\w+)"), "ramp_up_strategy", _text),
)


@dataclass
class ResultBlock:
    """One printed result block: its figures under the result-JSON keys, and where it is."""

    banner_line: int
    closing_line: int
    figures: dict[str, Any] = field(default_factory=dict)
    unrecognised: dict[str, str] = field(default_factory=dict)


@dataclass
class RunContext:
    """What the lines of one run before its block say about the run's setup."""

    setup: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Detection


def detect(document: InputDocument) -> Detection:
    if document.syntax in ("json", "json-lines"):
        return Detection.no("JSON, not console output")
    if BANNER.search(read_text(document.path)) is None:
        return Detection.no("no '=== Serving Benchmark Result ===' banner")
    return Detection.yes()


# ---------------------------------------------------------------------------------------------
# Lines


def console_lines(text: str) -> list[str]:
    """The file's lines as a terminal shows them: split on newlines only (so line numbers match
    an editor's), and of a line that progress bars rewrote with ``\\r``, the last part."""
    lines = []
    for raw in text.split("\n"):
        parts = [part for part in raw.rstrip("\r").split("\r") if part.strip()]
        lines.append(parts[-1] if parts else "")
    return lines


def _prefix_pattern(prefix: str) -> re.Pattern[str]:
    """The text before the banner (``# ``, indentation, a timestamp) as a pattern to strip from
    the block's lines; digit runs may differ from line to line (timestamps)."""
    parts = re.split(r"(\d+)", prefix)
    return re.compile("".join(r"\d+" if part.isdigit() else re.escape(part) for part in parts))


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


# ---------------------------------------------------------------------------------------------
# One block


class _BlockParser:
    """Reads the lines after one banner up to the closing ``=`` line."""

    def __init__(self, lines: list[str], banner_index: int, source: str) -> None:
        self.lines = lines
        self.source = source
        banner_text = lines[banner_index]
        match = BANNER.search(banner_text)
        assert match is not None
        self.prefix = _prefix_pattern(banner_text[: match.start()])
        self.block = ResultBlock(banner_line=banner_index + 1, closing_line=banner_index + 1)
        self.stats: dict[str, str] = {}  # key -> label, to catch a figure printed twice
        self.positions: list[float] | None = None

    def error(self, number: int, message: str) -> InputFileError:
        return InputFileError(f"line {number}: {message}", source=self.source)

    def parse(self) -> ResultBlock:
        start = self.block.banner_line
        last_figure_line = start
        for index in range(start, len(self.lines)):
            number = index + 1
            text = self._strip(self.lines[index])
            if CLOSING.match(text):
                if not self.block.figures:
                    raise self.error(number, f"the result block that starts at line {start} holds no figures")
                self.block.closing_line = number
                self._finish_positions()
                return self.block
            if BANNER.search(text):
                raise self.error(
                    number,
                    f"a new result block starts before the block of line {start} was closed: "
                    "that block is truncated",
                )
            if not text:
                if not any(line.strip() for line in self.lines[index + 1 :]):
                    break  # only blank lines left: the file ends inside the block
                raise self.error(
                    number,
                    f"the result block that starts at line {start} stops at an empty line before its "
                    "closing '=' line: the block looks truncated",
                )
            if SECTION.match(text):
                continue
            match = LABEL_VALUE.match(text)
            if match is None:
                raise self.error(
                    number,
                    f"unexpected {_shown(text)} inside the result block that starts at line {start} "
                    "(expected 'Label: value' lines up to a closing '=' line): the block looks truncated or edited",
                )
            self._figure(number, " ".join(match.group("label").split()), (match.group("value") or "").strip())
            last_figure_line = number
        raise self.error(
            last_figure_line,
            f"the result block that starts at line {start} ends here, at the end of the file, without its "
            "closing '=' line: the file looks truncated",
        )

    def _strip(self, line: str) -> str:
        match = self.prefix.match(line)
        return (line[match.end():] if match else line).strip()

    def _figure(self, number: int, label: str, value: str) -> None:
        key_label = label.lower()
        if key_label == PER_POSITION_HEADER and not value:
            self.positions = []
            return
        if not value:
            raise self.error(number, f"{label!r} has no value: the block looks truncated")
        position = POSITION_LABEL.match(key_label)
        if position is not None and self.positions is not None:
            rate = self._convert(number, label, value, _number)
            self.positions.append(None if rate is None else rate / 100)  # printed in %, saved as a fraction
            return
        key, parser = self._key_for(key_label)
        if key is None:
            self.block.unrecognised[label] = value
            return
        if key in self.stats:
            raise self.error(
                number, f"{label!r} is printed twice in the block that starts at line {self.block.banner_line}"
            )
        self.stats[key] = label
        self.block.figures[key] = self._convert(number, label, value, parser)

    def _key_for(self, key_label: str) -> tuple[str | None, Callable[[str], Any]]:
        if key_label in LABELS:
            return LABELS[key_label]
        stat = STAT_LABEL.match(key_label)
        if stat is None:
            return None, _text
        statistic = stat.group("stat").lower()
        metric = " ".join(stat.group("metric").split()).lower()
        if metric == PROBE_METRIC:
            return f"probe_{statistic}_e2el_ms", _number
        if metric in METRIC_NAMES and statistic not in ("min", "max"):
            return f"{statistic}_{METRIC_NAMES[metric]}_ms", _number
        return None, _text

    def _convert(self, number: int, label: str, value: str, parser: Callable[[str], Any]) -> Any:
        try:
            return parser(value)
        except ValueError as exc:
            raise self.error(number, f"{label!r}: {exc}") from None

    def _finish_positions(self) -> None:
        if self.positions:
            self.block.figures["spec_decode_per_position_acceptance_rates"] = self.positions


def find_blocks(lines: list[str], source: str) -> list[ResultBlock]:
    """Every result block, in order."""
    blocks = []
    index = 0
    while index < len(lines):
        if BANNER.search(lines[index]):
            block = _BlockParser(lines, index, source).parse()
            blocks.append(block)
            index = block.closing_line
        else:
            index += 1
    return blocks


# ---------------------------------------------------------------------------------------------
# The lines of a run before its block


def split_namespace(line: str) -> dict[str, str] | None:
    """The top-level ``key=value`` texts of the ``Namespace(...)`` on ``line`` (``print(args)``),
    or ``None`` when it is not closed (a cut line). Values keep their Python spelling."""
    start = line.find("Namespace(")
    if start < 0:
        return None
    items: dict[str, str] = {}
    depth, quote, escaped = 0, "", False
    current: list[str] = []
    for char in line[start + len("Namespace("):]:
        if quote:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                _add_item(items, "".join(current))
                return items
            depth -= 1
        elif char == "," and depth == 0:
            _add_item(items, "".join(current))
            current = []
            continue
        current.append(char)
    return None


def _add_item(items: dict[str, str], text: str) -> None:
    key, sep, value = text.partition("=")
    if sep and key.strip().isidentifier():
        items[key.strip()] = value.strip()


def namespace_value(text: str) -> Any:
    """A Namespace value: a Python literal (``'random'``, ``8``, ``None``, ``['a=b']``), ``inf``/
    ``nan`` as floats, anything else (``<function ...>``) as its text."""
    if text in ("inf", "-inf", "nan"):
        return float(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def read_context(lines: list[str], first: int, last: int, source: str) -> RunContext:
    """The setup stated by lines ``first..last-1`` (0-based): the last ``Namespace(...)``, then
    the later ``Traffic request rate``/``Maximum request concurrency`` lines, which win."""
    context = RunContext()
    namespace: dict[str, str] | None = None
    namespace_line = 0
    printed: dict[str, Any] = {}
    for index in range(first, last):
        line = lines[index]
        if "Namespace(" in line:
            items = split_namespace(line)
            if items is None:
                context.notes.append(f"the Namespace(...) line {index + 1} is cut off: its arguments were not read")
            else:
                namespace, namespace_line = items, index + 1
        for pattern, key, parser in PRE_BLOCK_LINES:
            match = pattern.search(line)
            if match is not None:
                try:
                    printed[key] = parser(match.group("value"))
                except ValueError as exc:
                    raise InputFileError(f"line {index + 1}: {match.group(0)!r}: {exc}", source=source) from None
        ramp = re.search(r"Will increase RPS from (\S+) to (\S+) RPS", line)
        if ramp is not None:
            printed["ramp_up_start_rps"], printed["ramp_up_end_rps"] = ramp.group(1), ramp.group(2)
    if namespace is not None:
        context.setup.update(_namespace_setup(namespace))
        context.setup["namespace_line"] = namespace_line
    context.setup.update(printed)
    return context


def _namespace_setup(items: dict[str, str]) -> dict[str, Any]:
    setup: dict[str, Any] = {}
    values = {key: namespace_value(text) for key, text in items.items()}
    metadata_pairs = values.get("metadata")
    if isinstance(metadata_pairs, list):  # --metadata KEY=VALUE: top-level keys of the result JSON
        for pair in metadata_pairs:
            if isinstance(pair, str) and "=" in pair:
                key, _, value = pair.partition("=")
                setup[key.strip()] = value.strip()
    for argument, key in NAMESPACE_SETUP.items():
        if values.get(argument) is not None:
            setup[key] = values[argument]
    for argument in NAMESPACE_METADATA:
        if values.get(argument) is not None:
            setup[argument] = values[argument]
    return setup


# ---------------------------------------------------------------------------------------------
# Runs


def load(document: InputDocument) -> list[BenchmarkRun]:
    return runs_from_text(read_text(document.path), document.source)


def runs_from_text(text: str, source: str) -> list[BenchmarkRun]:
    """One run per result block of ``text`` (a file's, or a block pasted into a question)."""
    lines = console_lines(text)
    blocks = find_blocks(lines, source)
    if not blocks:  # a banner was seen (detect(), pasted.pasted_runs) but no block around it could be found
        raise InputFileError("no '=== Serving Benchmark Result ===' block", source=source)
    runs = []
    segment_start = 0
    for index, block in enumerate(blocks):
        context = read_context(lines, segment_start, block.banner_line - 1, source)
        runs.append(_block_to_run(block, context, source, index, len(blocks)))
        segment_start = block.closing_line
    _note_repeated_seeds(runs)
    return runs


def _block_to_run(block: ResultBlock, context: RunContext, source: str, index: int, count: int) -> BenchmarkRun:
    result: dict[str, Any] = dict(context.setup)
    result.pop("namespace_line", None)
    notes = list(context.notes)
    for key in ("max_concurrency", "request_rate"):
        before, printed = result.get(key), block.figures.get(key)
        if key in block.figures and key in result and not _same(before, printed):
            notes.append(
                f"the block prints {key} {printed} but the lines before it say {before}: the block's figure is used"
            )
    result.update(block.figures)
    achieved = result.pop("concurrency", None)
    where = f"{source} (block {index + 1} of {count}, line {block.banner_line})" if count > 1 else source
    run = load_result(result, source=source, index=index, where=where)
    run.format = FORMAT_ID
    if achieved is not None:
        run.achieved_concurrency = achieved
    if isinstance(result.get("endpoint"), str):
        run.endpoint = result["endpoint"]
    run.metadata["block_lines"] = [block.banner_line, block.closing_line]
    if block.unrecognised:
        run.metadata["unrecognised_lines"] = dict(block.unrecognised)
        notes.append(
            f"{len(block.unrecognised)} line(s) of the block are not known to this loader and were kept as "
            "printed in metadata['unrecognised_lines']: " + ", ".join(block.unrecognised)
        )
    if run.offered_request_rate is None:
        notes.append(
            "offered request rate unknown: the block prints it only when finite, and no "
            "'Traffic request rate' line or Namespace(...) line of this run states it"
        )
    run.notes = [ROUNDING_NOTE, *notes, *run.notes]
    return run


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isinf(a) and math.isinf(b))
    return a == b


def _note_repeated_seeds(runs: list[BenchmarkRun]) -> None:
    """Runs of one log with the same ``--seed`` and dataset sent the same prompts: later ones may
    be inflated by prefix-cache hits (the JSON loader spots this from per-request lengths)."""
    first_with: dict[tuple, int] = {}
    for run in runs:
        seed = run.metadata.get("seed")
        if seed is None:
            continue
        key = (
            seed,
            run.metadata.get("dataset_name"),
            run.metadata.get("dataset_path"),
            run.metadata.get("random_input_len"),
            run.num_prompts,
        )
        if key in first_with:
            run.notes.append(
                f"same --seed {seed} and dataset as run {first_with[key] + 1} of this log: probably the same "
                "prompts; prefix-cache hits can make this run look faster"
            )
        else:
            first_with[key] = run.index


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="vllm bench serve / benchmark_serving.py console output ('Serving Benchmark Result' blocks)",
    detect=detect,
    load=load,
)
