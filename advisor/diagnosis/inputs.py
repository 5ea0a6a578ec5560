"""Everything a diagnosis reasons from, gathered once from what the user gave.

``gather`` reads the case file, attached files (benchmark results, /metrics dumps or watch files,
server logs, further case files), a metrics URL and a serve command, and builds the performance
model when the model and GPU are known. Each input is parsed by the probe module that owns its
format; nothing here re-parses a file.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import AdvisorError, EndpointError, InputFileError, UnknownFormatError
from ..schema import BenchmarkRun, CaseFile, Deployment, EngineArgs, InputNote, MetricsWindow, ServerLogInfo, StatedFacts

CJK = re.compile(r"[\u3400-\u9fff]")


LATIN_WORD = re.compile(r"[A-Za-z]+")
#: Latin script that is not prose: a command line (to the end of its clause), a flag with its value, a
#: name or figure glued to digits or code punctuation ("Qwen2.5-7B-Instruct", "tok/s", "max_num_seqs=8").
#: A Chinese question that pastes `vllm bench serve --dataset-name random ...` is still Chinese (a
#: reviewer's find: 18 Chinese characters against 41 Latin words got an English answer).
NOT_PROSE = re.compile(
    r"(?<![A-Za-z])(?:vllm|python3?|sglang|lmdeploy|trtllm-serve|text-generation-launcher|docker|curl|pip|CUDA_VISIBLE_DEVICES=\S*)\s[^\n。，；！？、]*?(?=[\n。，；！？、]|[?!.,;](?:\s|$)|$)"
    r"|--?[A-Za-z][\w-]*(?:[= ][^\s，。；]+)?"
    r"|\S*[\d_=/.:\\@`()\[\]{}][^\s，。；！？、]*",
)


#: Whole lines a program printed, pasted into the question: a log line with its level and time, a
#: "label: figure" line of a result block, a rule of "=" or "-". A Chinese question that pastes a
#: 20-line `vllm bench serve` block is still Chinese (a line with a Chinese character is never one).
_LOG_LINE = r"^[^\n\u3400-\u9fff]*\b(?:INFO|WARNING|WARN|ERROR|DEBUG)\s+\d{2}-\d{2}\s[^\n\u3400-\u9fff]*$"
PASTED_LINES = re.compile(
    _LOG_LINE
    + r"|^[^\n\u3400-\u9fff]*[:：]\s*-?[\d.,]+\s*%?[ \t]*$"
    r"|^[ \t]*[=\-]{3,}[^\n\u3400-\u9fff]*$",
    re.MULTILINE,
)


#: What a program printed, whole: a log line with its level and time, a benchmark result block from
#: its banner to its closing rule.
PRINTED = re.compile(_LOG_LINE, re.MULTILINE)
_PRINTED_MARKS = ("INFO", "WARN", "ERROR", "DEBUG", "Serving Benchmark Result", "vllm:")
_BANNER = "Serving Benchmark Result"
_CLOSING_RULE = re.compile(r"^[ \t]*={40,}")


def prose_of(text: str) -> str:
    """``text`` with what a program printed taken out (log lines, result blocks from the banner to
    the closing rule, vLLM's /metrics sample lines); log lines that lost their line breaks are put
    back on lines of their own first (probe/pasted.py). Linear in the text: a block is dropped line
    by line, not by a pattern that a text of banners with no closing rule would make quadratic."""
    if not any(mark in text for mark in _PRINTED_MARKS):
        return text
    from ..probe.metrics.parse import VLLM_SAMPLE_LINE
    from ..probe.pasted import LINE_START

    kept, in_block = [], False
    for line in PRINTED.sub("", LINE_START.sub("\n", text)).split("\n"):
        if _BANNER in line:
            in_block = True
        elif in_block and _CLOSING_RULE.match(line):
            in_block = False
        elif not in_block:
            kept.append(line)
    return VLLM_SAMPLE_LINE.sub("", "\n".join(kept))


def detect_language(text: str | None) -> str:
    """'zh' when the text holds at least half as many Chinese characters as Latin words, else 'en'.

    Why words and not letters: a Chinese engineer's question carries flags, model names and code in
    Latin script (``TurbomindEngineConfig(cache_max_entry_count=0.9)``), and one Chinese character
    says about as much as one English word while that word spends five letters; counted by letters,
    a plainly Chinese question with one config line read as English and got an English answer. Commands,
    flags and names are not counted (NOT_PROSE), nor lines a program printed (PASTED_LINES). On the 969 library and dev reports this agrees with
    every report's written language (question alone and question with notes); by letters it missed three."""
    if not text:
        return "en"
    cjk = len(CJK.findall(text))
    return "zh" if cjk and cjk >= 0.5 * len(LATIN_WORD.findall(NOT_PROSE.sub(" ", PASTED_LINES.sub(" ", text)))) else "en"


@dataclass
class DiagnosisInputs:
    question: str | None = None
    language: str = "en"
    case: CaseFile | None = None
    deployment: Deployment = field(default_factory=Deployment)
    engine_args: EngineArgs = field(default_factory=EngineArgs)
    input_len: int | None = None
    output_len: int | None = None
    shared_prefix_len: int | None = None
    measured: list[BenchmarkRun] = field(default_factory=list)
    metrics_windows: list[MetricsWindow] = field(default_factory=list)
    metrics_summaries: list[dict[str, Any]] = field(default_factory=list)
    #: single /metrics dumps read so far, joined into windows per server once all are read (_join_dumps)
    single_snapshots: list[Any] = field(default_factory=list)
    server_logs: list[ServerLogInfo] = field(default_factory=list)
    engine: Any = None  # perf.predict.EngineModel when the model and GPU are known
    #: perf.memory.MemoryParams the engine (and every what-if of it) is built with: the KV pool an
    #: attached server log measured (diagnosis.logged_memory), None to use the estimates
    memory_params: Any = None
    #: (KV tokens modelled, the user's max_model_len) when a served deployment's max_model_len came out
    #: a little above the modelled KV cache and was modelled as fitting (``_model``)
    served_near_fit: tuple[int, int] | None = None
    #: the engine arguments ``engine`` was built from (the user's, plus what the advisor derived: a
    #: tensor-parallel size the weights need, a max_model_len the served requests prove), and those names
    modelled_args: EngineArgs | None = None
    modelled_derived: tuple[str, ...] = ()
    engine_error: str | None = None
    engine_error_field: str | None = None  # "model" or "gpu": a name the catalog does not have
    engine_error_note: Msg | None = None  # the reason as a message, where the error gave one (errors.ShardingRefused)
    predicted: list[BenchmarkRun] = field(default_factory=list)  # sourced (uncalibrated) efficiencies
    ceiling: list[BenchmarkRun] = field(default_factory=list)  # every efficiency at its physical upper bound
    calibration: Any = None  # perf.calibrate.CalibrationResult, when asked for
    #: perf.service_rate.ServiceRate, simulated only when a measured run offered its requests on a
    #: clock (a finite request rate): at the sourced efficiencies (which decide the runs the calibration
    #: leaves out), then at the calibrated ones when a calibration took
    service_rate: Any = None
    notes: list[str] = field(default_factory=list)
    #: pieces of the input set aside (a file, a field, a serve command), typed; each also has its line in ``notes``
    skipped: list[InputNote] = field(default_factory=list)
    #: deployment facts read from the user's words and used (fields nothing else gave)
    stated: StatedFacts = field(default_factory=StatedFacts)

    def set_aside(self, note: InputNote) -> None:
        self.skipped.append(note)
        self.notes.append(note.text())

    @property
    def text(self) -> str:
        """The user's own words: question, dataset description and observation notes."""
        parts = [self.question or ""]
        if self.case:
            parts.append(self.case.workload.dataset or "")
            parts.extend(o.notes or "" for o in self.case.observations)
        return "\n".join(p for p in parts if p)

    @property
    def prose(self) -> str:
        """``text`` without the lines a program printed (log lines, result blocks, /metrics samples):
        those are read as figures by their readers (probe/pasted.py); as words they would name a
        cause by its vocabulary whatever their figures say (a pasted "GPU KV cache size: 598,336
        tokens" at 16% usage argued for a small KV cache)."""
        return prose_of(self.text)

    @property
    def observations(self):
        return self.case.observations if self.case else []

    @property
    def words_about_other_engine(self) -> bool:
        """The words name a model or GPU that was not used because they are about another engine
        (``facts_from_words``): the answer says so rather than "not given"."""
        from ..probe.stated_facts import read_stated_facts
        from .report_facts import words_about_another_engine

        if self.stated.model or self.stated.gpu or (self.deployment.model and self.deployment.gpu):
            return False
        named = read_stated_facts(self.text)
        return bool(named.model or named.gpu) and words_about_another_engine(self.text)

    @property
    def served(self) -> bool:
        """The deployment evidently ran: there are measured runs, a server log or metrics. Then a
        memory model that says it cannot fit has its own inputs wrong (a quantised checkpoint read
        as BF16, offloaded experts, more GPUs than given), not the user's settings."""
        said = self.stated  # a deployment the words describe, with figures measured on it
        return bool(self.measured or self.server_logs or self.metrics_windows or self.metrics_summaries or (said.reports_figures and (said.model or said.gpu)))


#: Files read from one attached folder (a run folder holds a handful; a home directory is not one).
MAX_FOLDER_FILES = 200
#: Notes listing skipped files of one folder; the rest are counted in one more note.
MAX_FOLDER_NOTES = 12


def _attach_lenient(inputs: DiagnosisInputs, path: Path, *, code: str = "attachment_skipped") -> bool:
    """Attach one file; a file that cannot be read is set aside with a note (issue 15: one bad
    input never costs the answer). A reader's bug is set aside too, unless VLLM_ADVISOR_DEBUG is set."""
    from ..probe.bench.fields import dropping_bad_fields

    try:
        with dropping_bad_fields() as dropped:  # a field of the wrong type costs that figure, not the file
            _attach(inputs, path)
        if dropped:
            fields = ", ".join(dict.fromkeys(e.field or "?" for e in dropped))
            inputs.set_aside(typed_note("partly_read", "fields_dropped", source=str(path), fields=fields))
        return True
    except AdvisorError as exc:
        inputs.set_aside(InputNote.from_error(code, exc, str(path), field=exc.field))
    except (RecursionError, MemoryError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, ArithmeticError) as exc:
        if os.environ.get("VLLM_ADVISOR_DEBUG"):
            raise
        inputs.set_aside(typed_note(code, "reader_failed", source=str(path), error=type(exc).__name__))
    return False


#: Load points of a case file read (a sweep has tens; 200,000 took 14 s and 700 MB in ``ask``).
MAX_OBSERVATIONS = 256


def typed_note(code: str, reason: str, *, source: str | None = None, field: str | None = None, **args: str | int) -> InputNote:
    """A note whose reason the advisor itself states (no reader's line): the English ``detail`` is
    the catalog's own wording of it, so the two cannot drift apart."""
    from ..messages import text

    return InputNote(code=code, source=source, field=field, detail=text("en", f"input.reason.{reason}", **args),  # type: ignore[arg-type]
                     reason=reason, reason_args=args)


def _attach_folder(inputs: DiagnosisInputs, folder: Path) -> None:
    """Every file of a run folder the advisor recognises (subfolders too, hidden ones skipped);
    what it skipped is listed, a file per note."""
    files: list[Path] = []
    try:
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            files.extend(Path(root) / n for n in sorted(names) if not n.startswith("."))
            if len(files) > MAX_FOLDER_FILES:
                break
    except OSError as exc:
        inputs.set_aside(typed_note("attachment_skipped", "cannot_list", source=str(folder), error=str(exc.strerror or exc)))
        return
    if len(files) > MAX_FOLDER_FILES:
        inputs.set_aside(typed_note("folder_skipped", "folder_too_many", source=str(folder), limit=MAX_FOLDER_FILES))
        files = files[:MAX_FOLDER_FILES]
    before = len(inputs.skipped)
    for path in files:
        _attach_lenient(inputs, path, code="folder_skipped")
    extra = inputs.skipped[before + MAX_FOLDER_NOTES :]
    if extra:
        del inputs.skipped[before + MAX_FOLDER_NOTES :]
        del inputs.notes[len(inputs.notes) - len(extra) :]
        inputs.set_aside(typed_note("folder_skipped", "folder_more", source=str(folder), count=len(extra)))
    if not files:
        inputs.set_aside(typed_note("attachment_skipped", "folder_empty", source=str(folder)))


def _attach(inputs: DiagnosisInputs, path: Path) -> None:
    """Route one attached file to the probe module that owns its format."""
    from ..probe.bench import load_runs
    from ..probe.files import check_readable, decode_head, looks_binary, read_head

    check_readable(path)  # missing, a FIFO or device, empty, too large: one line before anything opens it
    head = read_head(path, 4096)
    if looks_binary(head[:1024]):
        raise InputFileError("is a binary file, expected a benchmark result, /metrics dump, server log or case file", source=str(path), reason="binary_attachment")
    text = decode_head(head)
    from ..probe.metrics.parse import VLLM_SAMPLE_LINE

    # a /metrics body, a saved watch file, or an excerpt of vLLM's sample lines with no "# TYPE"
    # (`curl .../metrics | grep vllm:`, which --metrics reads and --attach refused: a reviewer's find)
    excerpt = len(VLLM_SAMPLE_LINE.findall(text)) >= 2 and not any(line.strip() and not line.lstrip().startswith(("vllm:", "#")) for line in text.splitlines()[:50])
    if "# TYPE vllm:" in text or "# HELP vllm:" in text or excerpt or text.lstrip().startswith('{"source"') and '"families"' in text:
        from ..probe.metrics import load_metrics_file

        snapshots = load_metrics_file(path)
        _add_metrics(inputs, snapshots)
        return
    try:
        runs = load_runs(path)
    except UnknownFormatError:
        pass
    else:
        inputs.measured.extend(runs)
        for run in runs:  # probe bench results carry the server's /metrics of each load point
            if run.server_metrics is not None:
                _add_window(inputs, run.server_metrics.model_copy(update={"source": f"{path.name} {run.load_label}"}))
        return
    from ..probe.serverlog import parse_server_log

    try:
        log = parse_server_log(path)
    except UnknownFormatError:
        raise UnknownFormatError("not a format the advisor reads (benchmark result, /metrics dump or watch file, case file, vLLM server log)", source=str(path), reason="unknown_kind") from None
    inputs.server_logs.append(log)
    if log.stats_lines_seen > len(log.stats):  # a very long log: its last stats lines are weighed, and the answer says so
        inputs.set_aside(typed_note("partly_read", "stats_kept_last", source=str(path), kept=len(log.stats), seen=log.stats_lines_seen))


def _pasted(inputs: DiagnosisInputs, words: str | None) -> None:
    """Log lines, benchmark result blocks and /metrics sample lines pasted into the question, read as
    the files they came from would be (probe/pasted.py); what cannot be read is set aside with a note."""
    from ..probe.pasted import pasted_log, pasted_metrics, pasted_runs

    try:
        log = pasted_log(words)
        runs = pasted_runs(words)
        snapshot = pasted_metrics(words)
    except InputFileError as exc:
        inputs.set_aside(InputNote.from_error("pasted_skipped", exc, None, field=None))
        return
    if log is not None:
        inputs.server_logs.append(log)
    inputs.measured.extend(runs)
    if snapshot is not None:
        _add_metrics(inputs, [snapshot])


def _add_metrics(inputs: DiagnosisInputs, snapshots) -> None:
    from ..probe.metrics import compute_window

    if not snapshots:
        return
    if len(snapshots) == 1:  # one dump: joined with the other dumps of the same server (_join_dumps)
        inputs.single_snapshots.append(snapshots[0])
        return
    _add_window(inputs, compute_window(snapshots))


def _server_of(snapshot) -> tuple:
    """The model names a dump's vLLM series carry: two dumps of one server name the same."""
    return tuple(sorted({e.get("model_name", "") for e in snapshot.engines()}))


def _same_run(a: BenchmarkRun, b: BenchmarkRun) -> bool:
    """Two results of one benchmark run: the same requests completed over the same duration at the same
    output rate (a console block and the JSON `--save-result` wrote from it round alike)."""
    if not (a.completed and a.completed == b.completed and a.duration_s and b.duration_s and a.output_throughput_tok_s and b.output_throughput_tok_s):
        return False
    return abs(a.duration_s - b.duration_s) <= 0.01 * a.duration_s and abs(a.output_throughput_tok_s - b.output_throughput_tok_s) <= 0.01 * a.output_throughput_tok_s


def _one_copy_of_each_run(inputs: DiagnosisInputs) -> None:
    """A run folder that keeps `vllm bench serve`'s console output beside the JSON it saved holds each run
    twice: the console's copy (summary figures only) is dropped where the JSON has it (a real H100 run's
    folder showed two c=32 rows, and the console's echoed settings were read as evidence)."""
    files = [r for r in inputs.measured if r.format not in ("vllm-bench-text", "observations")]
    kept = [r for r in inputs.measured if r.format != "vllm-bench-text" or not any(_same_run(r, f) for f in files)]
    inputs.measured = kept


def _join_dumps(inputs: DiagnosisInputs) -> None:
    """Single /metrics dumps of the same server, attached one by one (a dump before the benchmark and one
    after), are one window, as `probe metrics FILE FILE` reads them: a reviewer's find, each was read as
    the server's history since it started (a 40.8% prefix hit rate where the run's own was 5.5%). Dumps
    of different servers stay apart."""
    from ..probe.metrics import compute_window

    pending, inputs.single_snapshots = inputs.single_snapshots, []
    groups: dict[tuple, list] = {}
    for snap in pending:
        groups.setdefault(_server_of(snap), []).append(snap)
    for snaps in groups.values():
        if len(snaps) >= 2:  # ordered by their times, else as given (compute_window, as `probe metrics` does)
            _add_window(inputs, compute_window(snaps))
        else:
            for snap in snaps:
                _add_window(inputs, compute_window([snap]))


def _add_window(inputs: DiagnosisInputs, window: MetricsWindow) -> None:
    from ..probe.metrics import summarize_window

    inputs.metrics_windows.append(window)
    inputs.metrics_summaries.append(summarize_window(window))


def gather(
    *,
    question: str | None = None,
    profile: Path | None = None,
    attachments: list[Path] | tuple[Path, ...] = (),
    metrics: list[str] | tuple[str, ...] = (),
    serve_cmd: str | None = None,
    overrides: dict[str, Any] | None = None,
    calibrate: bool = False,
    predict: bool = True,
    scrape_kwargs: dict[str, Any] | None = None,
    prometheus: dict[str, Any] | None = None,
) -> DiagnosisInputs:
    """Read and model everything. A piece that cannot be used (an unreadable attachment, a bad
    case-file field, a serve command that cannot be read) is set aside with a note naming it
    (``inputs.skipped``); an endpoint that fails still raises its one-line error, and so does a
    case file that cannot be read when there is no question to answer without it."""
    from ..probe.casefile import load_case_lenient, resolve_attachments
    from ..probe.serve_cmd import deployment_from_server_log

    inputs = DiagnosisInputs()
    if profile:
        try:
            case, notes = load_case_lenient(profile)
        except AdvisorError as exc:
            if not question:
                raise
            inputs.set_aside(InputNote.from_error("profile_unreadable", exc, str(profile), field=exc.field, detail=exc.message))
        else:
            if len(case.observations) > MAX_OBSERVATIONS:  # a load point costs a run, a figure and a simulation
                inputs.set_aside(typed_note("profile_field_dropped", "observations_cut", source=str(profile), field="observations",
                                            limit=MAX_OBSERVATIONS, count=len(case.observations)))
                case.observations = case.observations[:MAX_OBSERVATIONS]
            inputs.case = case
            inputs.deployment = case.deployment.model_copy(deep=True)
            for note in notes:
                inputs.set_aside(note)
            attachments = [*resolve_attachments(case, must_exist=False), *attachments]
    if serve_cmd:
        _serve_command(inputs, serve_cmd)
    for key, value in (overrides or {}).items():
        if value is not None and hasattr(inputs.deployment, key):
            setattr(inputs.deployment, key, value)
    for path in attachments:
        path = Path(path)
        if path.is_dir():
            _attach_folder(inputs, path)
        else:
            _attach_lenient(inputs, path)
    _pasted(inputs, question or (inputs.case.question if inputs.case else None))
    if metrics or prometheus:
        from ..probe.metrics.load import is_url, load_metrics_source
        from ..probe.metrics.scrape import display_url
    for source in metrics:
        try:
            _add_metrics(inputs, load_metrics_source(source, **(scrape_kwargs or {})))
        except (InputFileError, EndpointError) as exc:
            # a saved dump that cannot be read, or an endpoint that refused, timed out or is not vLLM's
            # (a wrong port): the answer comes from the rest, and says which and why (the URL as
            # messages show it: no user:password, no query string)
            inputs.set_aside(InputNote.from_error("attachment_skipped", exc, display_url(source) if is_url(source) else source, field=None))
    _one_copy_of_each_run(inputs)
    _join_dumps(inputs)  # the single dumps of the attachments and of --metrics, per server
    if prometheus:  # a fleet through the Prometheus that scrapes it: the summed window, then each instance
        from ..probe.metrics.prometheus import fetch_prometheus, fleet_windows

        try:
            fleet = fetch_prometheus(**prometheus)
        except EndpointError as exc:
            inputs.set_aside(InputNote.from_error("attachment_skipped", exc, display_url(str(prometheus.get("url") or "Prometheus")), field=None))
        else:
            for window in fleet_windows(fleet):
                _add_window(inputs, window)
            inputs.notes.extend(fleet.notes)
    for log in inputs.server_logs:  # a server log fills what the case left unknown
        from_log = deployment_from_server_log(log)
        for key in ("model", "vllm_version", "quantization"):
            if getattr(inputs.deployment, key) is None and getattr(from_log, key) is not None:
                setattr(inputs.deployment, key, getattr(from_log, key))
        for key, value in from_log.flags.items():
            inputs.deployment.flags.setdefault(key, value)
    if inputs.deployment.model is None:  # `vllm bench serve` keeps the model it was sent to ("model_id")
        named = {r.model for r in inputs.measured if r.model and r.format != "observations"}
        if len(named) == 1:
            inputs.deployment.model = named.pop()
    _counters_beyond_benchmark(inputs)
    _logs_within_benchmarks(inputs)
    if inputs.case:
        inputs.measured = _observation_runs(inputs.case) + inputs.measured
    inputs.question = question or (inputs.case.question if inputs.case else None)
    inputs.language = detect_language(inputs.question)
    _fill_from_words(inputs)
    inputs.engine_args = _engine_args(inputs)
    _workload(inputs)
    if predict:
        _model(inputs, calibrate)
    return inputs


#: A /metrics window counting more finished requests than this share of the attached benchmarks' (plus
#: a few warm-up requests) covers other runs too.
COUNTER_SPAN_RATIO = 1.5
COUNTER_SPAN_SLACK = 8


def _counters_beyond_benchmark(inputs: DiagnosisInputs) -> None:
    """Mark /metrics windows whose counters cover more than the attached benchmark runs.

    Why: a /metrics dump saved once after a benchmark counts everything since the server started.
    The averages drawn from its counters (queue time against TTFT, preemptions) are then the server's
    history, not the benchmark's: a real vLLM server that first ran 64 clients of 16K-token prompts
    and then 4 clients showed 85% of TTFT queued in its counters while the 4-client benchmark queued
    nothing. Gauges (running, waiting, KV usage) are read at the dump's time and stay as they are."""
    done = sum(run.completed or 0 for run in inputs.measured if run.format != "observations")
    if not done:
        return
    for summary in inputs.metrics_summaries:
        counted = sum(eng.get("requests_finished_total") or 0 for eng in summary.get("engines", []))
        if counted > COUNTER_SPAN_RATIO * done + COUNTER_SPAN_SLACK:
            summary["counters_beyond_benchmark"] = True
            inputs.set_aside(typed_note("metrics_history", "counters_span", source=summary.get("source") or None, counted=int(counted), done=int(done)))


#: vLLM prints a stats line every 10 s about the 10 s before it: a line up to this long after a
#: benchmark ended still describes it.
STATS_INTERVAL_S = 10.0


def _seconds_in_year(t) -> float:
    """A time as whole seconds from its year's start, in a leap year (vLLM's log stamps carry no year
    nor fractions)."""
    from datetime import datetime

    return (t.replace(year=2000, microsecond=0) - datetime(2000, 1, 1, tzinfo=t.tzinfo)).total_seconds()


def _log_seconds(stamp: str | None) -> float | None:
    """A vLLM log time ("12-03 22:57:36", no year) as seconds within its year."""
    from datetime import datetime

    try:
        return _seconds_in_year(datetime.strptime(f"2000-{stamp}", "%Y-%m-%d %H:%M:%S")) if stamp else None
    except ValueError:
        return None


def _logs_within_benchmarks(inputs: DiagnosisInputs) -> None:
    """Keep only the server log's stats lines written while an attached benchmark ran.

    Why: a server log covers every run since the server started; stats lines of waiting requests from
    an earlier, heavier run are not evidence about a later, light one. ``vllm bench serve`` stamps its
    start (local time) and duration; vLLM stamps its lines in the server's local time. Where no stats
    line falls inside a benchmark's time (another clock, another day, no stamps), the log is read whole."""
    from datetime import datetime

    windows = []
    for run in inputs.measured:
        if run.format == "observations" or not run.date or not run.duration_s:
            continue
        try:
            begin = _seconds_in_year(datetime.fromisoformat(run.date))
        except ValueError:
            continue
        windows.append((begin, begin + run.duration_s + STATS_INTERVAL_S))
    if not windows:
        return
    for k, log in enumerate(inputs.server_logs):
        inside = [s for s in log.stats if (t := _log_seconds(s.timestamp)) is not None and any(a <= t <= b for a, b in windows)]
        if inside and len(inside) < len(log.stats):
            inputs.server_logs[k] = log.model_copy(update={"stats": inside})


#: A served deployment whose modelled KV cache holds at least this share of one max_model_len request
#: is modelled with the one request it must have held (the KV size is within 1% on the real servers of
#: catalog/vllm-h200.yaml; an unknown release's overheads and a hand-written GPU name differ more).
NEAR_FIT = 0.9

#: Deployment fields the user's words may fill (beside the TP flag and the workload).
WORDS_FILL = ("model", "gpu", "num_gpus", "vllm_version", "quantization")


def facts_from_words(inputs: DiagnosisInputs) -> StatedFacts:
    """The deployment facts the user's words state (probe/stated_facts.py) that would fill fields the
    flags, the case file, a serve command and the attachments left unknown (nothing is changed)."""
    from ..probe.stated_facts import read_stated_facts
    from .char_lengths import as_tokens
    from .report_facts import words_about_another_engine

    said = read_stated_facts(inputs.text)
    if said.empty():
        return StatedFacts()
    dep, used = inputs.deployment, {}
    # words about another engine (KTransformers' CPU-offloaded experts, a GGUF file under llama.cpp)
    # describe a deployment vLLM's model would misjudge: they are read for the deployment only when
    # vLLM is what runs (no other engine named, or vLLM named beside one it is compared with)
    vllm_only = dep.is_vllm and not words_about_another_engine(inputs.text)
    for name in WORDS_FILL:
        if getattr(dep, name) is None and getattr(said, name) is not None and vllm_only:
            used[name] = getattr(said, name)
    if dep.model and said.model and vllm_only and _words_model_wins(dep.model, said.model):
        # "Llama-3.1-8B on one H100" beside a log whose model is a local path the catalog lacks
        # ("/tmp/e2e/models/llama31-8b"): the words name the model (a new user's find: no model at all)
        used["model"] = said.model
    tp_given = dep.serve_command or any(k in dep.flags for k in ("tensor_parallel_size", "tensor-parallel-size", "tp"))
    if said.tensor_parallel_size and not tp_given and vllm_only:
        used["tensor_parallel_size"] = said.tensor_parallel_size
    w = inputs.case.workload if inputs.case else None
    for name, chars in (("input_len", said.input_chars), ("output_len", said.output_chars)):
        if (w and getattr(w, name)) or _mean_of(inputs.measured, name) is not None:
            continue
        if getattr(said, name):
            used[name] = getattr(said, name)
        elif chars:  # "输入约 5 万字": characters, read as tokens of the model's tokenizer family
            length = as_tokens(chars, dep.model or said.model)
            used[name], used[name.replace("_len", "_chars")], used["tokens_per_char"] = length.tokens, length.chars, length.per_char
    if said.concurrency and not inputs.measured and not (w and (w.concurrency or w.request_rate)):
        used["concurrency"] = said.concurrency
    given = " ".join([dep.serve_command or "", *map(str, dep.flags)]).replace("-", "_")
    flags = {name: value for name, value in said.flags.items() if name not in given} if vllm_only else {}
    if flags:  # "max-model-len 设成 128K": a setting the serve command and the flags left unsaid
        used["flags"] = flags
    loaded = any(c > 1 for c in said.concurrency) or bool(w and (w.concurrency or 0) > 1)
    if vllm_only and said.single_tok_s:  # "单个请求 60 token/s，并发 32 时吞吐 900": one request alone's, whatever the load
        used["single_tok_s"] = said.single_tok_s
    if vllm_only and said.throughput_tok_s and len(said.concurrency) == 1:  # the whole server's, at the one load named
        used["throughput_tok_s"], used["throughput_counts_input"] = said.throughput_tok_s, said.throughput_counts_input
    if vllm_only and said.chars_per_s and not (said.request_tok_s or said.single_tok_s) and (said.chars_single or not loaded or said.per_request):
        # "单用户输出大概每秒 30 个字": characters a second, read as tokens a second with the model's tokenizer family
        ratio = as_tokens(1000, dep.model or said.model).per_char
        used["single_tok_s" if said.chars_single else "request_tok_s"] = round(said.chars_per_s * ratio, 1)
        used["chars_per_s"], used["tokens_per_char"] = said.chars_per_s, used.get("tokens_per_char") or ratio
        used["per_request"] = said.per_request
    if said.request_tok_s and vllm_only and (not loaded or said.per_request):  # "生成速度只有 8 token/s": set beside the model's (diagnosis/agreement.py);
        # at many clients ("并发一百才 500 tok/s") a figure may be the whole server's, unless the words say each request's
        used["request_tok_s"] = said.request_tok_s
        used["per_request"] = said.per_request
    if said.shared_prefix_len and not (w and w.shared_prefix_len):  # "所有请求共用一个 7.5k 的系统提示词"
        used["shared_prefix_len"] = said.shared_prefix_len
    if vllm_only and said.ttft_ms:  # "TTFT 16 s at 48 clients": set beside the model's at that load (agreement.py)
        used["ttft_ms"], used["ttft_clients"] = said.ttft_ms, said.ttft_clients
    if used:
        used["reports_figures"] = said.reports_figures
    return StatedFacts(**used)


def _words_model_wins(named: str, words: str) -> bool:
    """The model the files or the case name (``named``) is neither a catalog entry nor a readable
    config.json, and the one the words name is a catalog entry."""
    from ..perf.catalog.models import find_model

    if find_model(named) is not None or find_model(words) is None:
        return False
    path = Path(named).expanduser()
    if path.exists() or named.endswith(".json"):
        return False
    # a size the files' name gives must be the words' ("/models/acme-chat-70b" is not the "Llama-3.1-8B"
    # the words compare it with; a reviewer's find)
    sizes = [set(_SIZE.findall(n.lower())) for n in (named, words)]
    return not sizes[0] or sizes[0] == sizes[1]


#: A model size in a name: "8b", "70b", "0.5b", "30b-a3b" (its first part)
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)b(?![a-z])")


def _fill_from_words(inputs: DiagnosisInputs) -> None:
    """Fill what ``facts_from_words`` finds; ``inputs.stated`` keeps it, so the answer says what it read."""
    said = facts_from_words(inputs)
    dep = inputs.deployment
    if said.model and dep.model and dep.model != said.model:
        inputs.set_aside(typed_note("model_from_words", "model_not_in_catalog", named=dep.model, model=said.model))
        dep.model = None
    for name in WORDS_FILL:
        if getattr(said, name) is not None:
            setattr(dep, name, getattr(said, name))
    if said.tensor_parallel_size:
        dep.flags["tensor_parallel_size"] = said.tensor_parallel_size
    for name, value in said.flags.items():
        dep.flags.setdefault(name, value)
    inputs.stated = said


def _serve_command(inputs: DiagnosisInputs, cmd: str) -> None:
    """The --serve-cmd line: its model and GPU count fill what the case left unknown; a line that
    cannot be read is set aside with its reason."""
    from ..probe.serve_cmd import engine_args_for, parse_serve_command

    try:
        parsed = parse_serve_command(cmd)
        engine_args_for(parsed)
    except AdvisorError as exc:
        inputs.set_aside(InputNote.from_error("serve_cmd_skipped", exc, "--serve-cmd", field=None, detail=exc.message))
        return
    inputs.deployment.serve_command = cmd
    inputs.deployment.model = inputs.deployment.model or parsed.model
    inputs.deployment.engine = inputs.deployment.engine or parsed.engine
    inputs.deployment.num_gpus = inputs.deployment.num_gpus or parsed.num_gpus


def _engine_note(engine: str, source: str, mapped: list[str], kept: list[str], approx: list[str]) -> InputNote:
    """Which of another engine's flags became which of vLLM's, and which have no counterpart
    (``kept``: their ``<engine>_<name>`` keys). ``detail`` is the English line of logs and JSON;
    the answer words the typed fields."""
    from ..probe.foreign_flags import ENGINE_NAMES

    name = ENGINE_NAMES.get(engine, engine)
    flags = ["--" + k.split("_", 1)[1].replace("_", "-") for k in sorted(kept)]
    detail = f"{name} flags read as vLLM's: " + ("; ".join(mapped) or "none")
    if flags:
        detail += "; no vLLM equivalent: " + ", ".join(flags)
    return InputNote(code="serve_cmd_engine", source=source, detail=detail, engine=name, mapped=list(mapped), kept=flags, approx=list(dict.fromkeys(approx)))


def _engine_args(inputs: DiagnosisInputs) -> EngineArgs:
    """Typed engine arguments; another engine's command is said once (which flags became which)."""
    from ..probe.foreign_flags import TABLES, engine_key, flags_to_args, kept_prefix, translate
    from ..probe.serve_cmd import engine_args_for, parse_command

    dep = inputs.deployment
    if dep.serve_command:
        try:
            parsed = parse_command(dep.serve_command)
        except AdvisorError as exc:
            inputs.set_aside(InputNote.from_error("serve_cmd_skipped", exc, (inputs.case.source if inputs.case else None) or "--serve-cmd", field="deployment.serve_command", detail=exc.message))
            dep.serve_command = None
        else:
            if parsed.engine != "vllm":
                dep.engine = dep.engine if dep.engine not in (None, "vllm") else parsed.engine
                kept = [k for k in parsed.values if k.startswith(kept_prefix(parsed.engine))]
                from_case = inputs.case is not None and inputs.case.deployment.serve_command == dep.serve_command
                where = (inputs.case.source or "deployment.serve_command") if from_case else "--serve-cmd"  # names, worded in no language
                inputs.set_aside(_engine_note(parsed.engine, where, parsed.mapped, kept, parsed.approx))
    engine = engine_key(dep.engine)
    if engine in TABLES and dep.flags:
        foreign, _ = flags_to_args(engine, dep.flags)
        if foreign:
            translated = translate(engine, foreign)
            inputs.set_aside(_engine_note(engine, "deployment.flags", translated.mapped, list(translated.kept), translated.approx))
    try:
        return engine_args_for(dep)
    except AdvisorError as exc:  # the command and the flags refused together: keep the command's
        inputs.set_aside(InputNote.from_error("flag_dropped", exc, inputs.case.source if inputs.case else None, field="deployment.flags", detail=exc.message))
        dep.flags = {}
        try:
            return engine_args_for(dep)
        except AdvisorError:
            dep.serve_command = None
            return engine_args_for(dep)


def _observation_runs(case: CaseFile) -> list[BenchmarkRun]:
    from ..probe.bench import observations_to_runs

    return observations_to_runs(case.observations, case.source or "case file")


def _workload(inputs: DiagnosisInputs) -> None:
    w = inputs.case.workload if inputs.case else None
    inputs.input_len = (w.input_len if w else None) or _mean_of(inputs.measured, "input_len") or inputs.stated.input_len
    inputs.output_len = (w.output_len if w else None) or _mean_of(inputs.measured, "output_len") or inputs.stated.output_len
    inputs.shared_prefix_len = (w.shared_prefix_len if w else None) or inputs.stated.shared_prefix_len
    if inputs.shared_prefix_len and inputs.input_len and inputs.shared_prefix_len >= inputs.input_len:
        inputs.shared_prefix_len = None  # a prefix as long as the prompt is no prefix: the words mix two figures


#: A run's token totals, for its mean lengths where it kept no per-request ones.
_TOTALS = {"input_len": "total_input_tokens", "output_len": "total_output_tokens"}


def _mean_of(runs: list[BenchmarkRun], attr: str) -> int | None:
    """The first run's mean length (``attr``: input_len or output_len): its per-request lengths, else
    its token total over the requests completed (what `vllm bench serve --save-result` keeps without
    --save-detailed: a reviewer's find, such a file left ask without lengths and without a model)."""
    for run in runs:
        d = getattr(run, attr)
        if d is not None and d.mean:
            return int(round(d.mean))
    for run in runs:
        total = getattr(run, _TOTALS[attr])
        if total and run.completed:
            return int(round(total / run.completed))
    return None


def _sharded_when_needed(dep: Deployment, args: EngineArgs, engine, needed: int | None) -> tuple[Any, EngineArgs]:
    """Several GPUs given and no parallelism: vLLM's default is TP 1, but weights that do not fit on
    one GPU were sharded, or nothing would have started. The smallest tensor-parallel size that
    divides the GPUs and holds the weights is assumed (provenance "derived", said in a note), not N
    replicas that each report 0 KV tokens (review of 30 English answers: a 61 GiB model on 2 x A100-40GB)."""
    from ..perf.predict import build_engine_model

    gpus = dep.num_gpus or 0
    cfg = engine.config
    if gpus < 2 or cfg.source_of("tensor_parallel_size") == "user" or args.pipeline_parallel_size or args.data_parallel_size:
        return engine, args
    if engine.memory.weights_gib < engine.memory.requested_gib:
        return engine, args
    for tp in range(2, gpus + 1):
        if gpus % tp:
            continue
        sharded_args = args.model_copy(update={"tensor_parallel_size": tp})
        try:
            sharded = build_engine_model(dep, sharded_args, needed_model_len=needed, derived=("tensor_parallel_size",))
        except AdvisorError:
            break
        if sharded.memory.weights_gib < sharded.memory.requested_gib:
            return sharded, sharded_args
    return engine, args


def _model(inputs: DiagnosisInputs, calibrate: bool) -> None:
    """Build the engine model and predict the measured load points, when the facts allow."""
    from ..perf.calibrate import calibrate as fit
    from ..perf.memory import MemoryParams
    from ..perf.predict import LoadPoint, build_engine_model, load_point_of, predict_load_point
    from .logged_memory import logged_memory_params

    dep = inputs.deployment
    if not dep.is_vllm:
        inputs.notes.append(f"engine {dep.engine}: vLLM's scheduler model applied as an approximation")
    if not dep.model or not dep.gpu:
        inputs.engine_error = "model or GPU unknown: no performance model"
        return
    needed = (inputs.input_len or 0) + (inputs.output_len or 0) or None
    try:
        engine = build_engine_model(dep, inputs.engine_args, needed_model_len=needed)
    except AdvisorError as exc:
        inputs.engine_error = exc.one_line()
        from ..perf.catalog._names import UnknownCatalogEntry

        inputs.engine_error_field = exc.field if isinstance(exc, UnknownCatalogEntry) else None
        inputs.engine_error_note = getattr(exc, "note", None)
        return
    engine, args = _sharded_when_needed(dep, inputs.engine_args, engine, needed)
    derived = tuple(k for k, v in engine.config.provenance.items() if v == "derived")
    if not engine.memory.fits and engine.memory.kv_cache_gib > 0 and engine.config.source_of("max_model_len") != "user":
        # The server ran and served these requests, so its max_model_len must have fitted the KV cache;
        # one being planned needs --max-model-len set so (vLLM refuses to start on the model's default),
        # and is modelled with it, the note saying so (an audit's DeepSeek-R1 on 8 x H20 got no figures at 16 clients).
        fitted = max(needed or 0, min(engine.config.max_model_len, engine.memory.kv_cache_tokens))
        if fitted > 0 and (inputs.measured or fitted <= engine.memory.kv_cache_tokens):  # a plan longer than the cache stays refused
            try:
                fitted_args, fitted_derived = args.model_copy(update={"max_model_len": fitted}), ("max_model_len", *derived)
                engine = build_engine_model(dep, fitted_args, needed_model_len=needed, derived=fitted_derived)
                args, derived = fitted_args, fitted_derived
            except AdvisorError:
                pass
    params = logged_memory_params(inputs, engine)
    if params is not None:
        try:
            engine = build_engine_model(dep, args, needed_model_len=needed, derived=derived, memory_params=params)
            inputs.memory_params = params
        except AdvisorError:
            pass
    mem = engine.memory
    if not mem.fits and inputs.measured and params is None and mem.kv_cache_tokens >= NEAR_FIT * engine.config.max_model_len and not mem.has_sliding_layers:
        # The server ran with the user's max_model_len, so vLLM found room for one request of it; the
        # modelled cache is short of it by less than the model's own error: the cache is taken to be
        # that one request (the deployment and every what-if of it), and a note says so (a reviewer's
        # case: an L4 at --max-model-len 36000, 35,712 tokens modelled, 32K-token prompts measured;
        # every prediction was left out)
        floor = MemoryParams(served_floor_blocks=-(-engine.config.max_model_len // mem.block_size))
        try:
            engine = build_engine_model(dep, args, needed_model_len=needed, derived=derived, memory_params=floor)
            inputs.memory_params = floor
            inputs.served_near_fit = (mem.kv_cache_tokens, engine.config.max_model_len)
        except AdvisorError:
            pass
    inputs.engine = engine
    inputs.modelled_args, inputs.modelled_derived = args, derived
    if not inputs.input_len or not inputs.output_len or not engine.memory.fits:
        return
    for name in ("input_len", "output_len"):
        if getattr(inputs, name) > MAX_SIM_LEN:
            inputs.set_aside(typed_note("workload_bounded", "sim_tokens_over", field=f"workload.{name}", tokens=getattr(inputs, name), limit=MAX_SIM_LEN))
            return
    points = []
    for run in inputs.measured:
        p = load_point_of(run)
        if p is not None and p not in points:
            points.append(p)
    if not points and inputs.case and (inputs.case.workload.concurrency or inputs.case.workload.request_rate):
        w = inputs.case.workload
        held = w.request_rate if w.concurrency and w.request_rate is not None and math.isfinite(w.request_rate) and w.request_rate > 0 else None
        points = [LoadPoint(concurrency=w.concurrency, request_rate=held) if w.concurrency else LoadPoint(request_rate=w.request_rate)]
    if not points and inputs.stated.concurrency:  # "at 40 and 100 clients" in the words
        points = [LoadPoint(concurrency=c) for c in inputs.stated.concurrency]
    points = _within_budget(inputs, points)
    sourced = engine.step.eff
    _service_rate(inputs, sourced)
    if calibrate and inputs.measured:
        usable = [r for r in inputs.measured if (r.offered_concurrency or 0) <= MAX_SIM_CONCURRENCY and not _queue_bound(inputs, r)]
        cost = CALIBRATION_SIMULATIONS * len(usable) * CALIBRATION_PROMPTS * (inputs.input_len / PREFILL_TOKENS_PER_UNIT + inputs.output_len)
        if cost > CALIBRATION_BUDGET:
            inputs.set_aside(typed_note("workload_bounded", "calibration_over", field="calibration", points=len(usable), input=inputs.input_len, output=inputs.output_len))
        else:
            try:
                inputs.calibration = fit(engine, usable, input_len=inputs.input_len, output_len=inputs.output_len)
            except AdvisorError as exc:
                inputs.notes.append(f"calibration skipped: {exc.one_line()}")
    calibrated = inputs.calibration is not None and inputs.calibration.calibrated
    if calibrated:
        _service_rate(inputs, inputs.calibration.efficiency)
    ceiling = ceiling_efficiency(sourced)
    for p in points:
        kwargs = dict(
            input_len=inputs.input_len, output_len=inputs.output_len, shared_prefix_len=inputs.shared_prefix_len or 0, num_prompts=diagnosis_prompts(p)
        )
        try:
            with engine.efficiency(inputs.calibration.efficiency if calibrated else sourced):
                run, _ = predict_load_point(engine, p, **kwargs)
            with engine.efficiency(ceiling):
                best, _ = predict_load_point(engine, p, **kwargs)
        except AdvisorError as exc:
            inputs.notes.append(f"{p.label}: {exc.one_line()}")
            continue
        run.calibrated = calibrated
        best.label = f"hardware ceiling {p.label}"
        best.ceiling = True
        inputs.predicted.append(run)
        inputs.ceiling.append(best)


def _service_rate(inputs: DiagnosisInputs, efficiency) -> None:
    """The rate the deployment completes requests at its full batch, at ``efficiency``, when a
    measured run sent its requests at a finite rate (the one question it answers: did they arrive
    faster than that?). Over the budget at two rounds of the clients, one; over it at one, a note."""
    from ..perf.service_rate import ROUNDS, replica_clients, service_rate

    timed = [r for r in inputs.measured if not r.offered_concurrency and r.offered_request_rate is not None and 0 < r.offered_request_rate < math.inf]
    if not timed:
        return
    engine = inputs.engine
    clients = replica_clients(engine, inputs.input_len, inputs.output_len)
    rounds = next((n for n in (ROUNDS, 1) if simulation_cost(n * clients, inputs.input_len, inputs.output_len) <= SERVICE_RATE_BUDGET), None)
    if rounds is None:
        if inputs.service_rate is None:  # said once (the calibrated pass asks again)
            inputs.set_aside(typed_note("workload_bounded", "service_rate_budget", field="request_rate", input=inputs.input_len, output=inputs.output_len))
        return
    try:
        with engine.efficiency(efficiency):
            inputs.service_rate = service_rate(engine, input_len=inputs.input_len, output_len=inputs.output_len, shared_prefix_len=inputs.shared_prefix_len or 0, rounds=rounds)
    except AdvisorError as exc:
        inputs.notes.append(f"service rate: {exc.one_line()}")


def _queue_bound(inputs: DiagnosisInputs, run: BenchmarkRun) -> bool:
    """A measured run sent at a rate above the modelled service rate: its latencies measure the
    queue the benchmark built, not the engine, and fitting the efficiencies to them drives every
    one to its floor (a real 40 req/s run against ~19 req/s did). Left out of the calibration, with a note."""
    from ..perf.service_rate import overloaded

    if run.offered_concurrency or not overloaded(run.offered_request_rate, inputs.service_rate):
        return False
    inputs.set_aside(typed_note("workload_bounded", "overloaded_not_calibrated", field="calibration", label=run.load_label,
                                rate=f"{run.offered_request_rate:g}", service=f"{inputs.service_rate.req_s:.3g}"))
    return True


#: Bounds on what one diagnosis asks the scheduler simulation to do, so that any input (a case file
#: with 10,000 or 1e9 clients, a 1e9-token output) answers in seconds with a note instead of running
#: for minutes. The simulation's cost grows with request-steps (requests x tokens each decodes, plus
#: prefill tokens / 64); measured on this project's 2-core machine: ~1.2 s per million at 1,024
#: closed-loop clients, and calibration ~0.17 s per million. Each predicted point is simulated twice
#: (as calibrated and at the hardware ceiling).
MAX_SIM_CONCURRENCY = 4096
MAX_SIM_LEN = 1_048_576
PREFILL_TOKENS_PER_UNIT = 64
SIM_BUDGET = 6_000_000  # request-steps over all predicted points of one answer (~7 s)
CALIBRATION_SIMULATIONS = 80  # golden-section evaluations of calibrate(), at most
CALIBRATION_PROMPTS = 60  # requests calibrate() simulates per load point, at most
CALIBRATION_BUDGET = 100_000_000
#: The service-rate simulation (perf/service_rate.py) at most: ~1 s on this machine.
SERVICE_RATE_BUDGET = 1_000_000


def simulation_cost(num_prompts: int, input_len: int, output_len: int) -> float:
    """Request-steps of one simulated load point (the unit of SIM_BUDGET)."""
    return num_prompts * (input_len / PREFILL_TOKENS_PER_UNIT + output_len)


def _within_budget(inputs: DiagnosisInputs, points: list) -> list:
    """The load points the simulation can take; each one left out gets a note saying why."""
    kept, spent = [], 0.0
    for p in points:
        if p.concurrency and p.concurrency > MAX_SIM_CONCURRENCY:
            inputs.set_aside(typed_note("workload_bounded", "concurrency_over", field="concurrency", label=p.label, limit=MAX_SIM_CONCURRENCY))
            continue
        cost = 2 * simulation_cost(diagnosis_prompts(p), inputs.input_len or 0, inputs.output_len or 0)
        if spent + cost > SIM_BUDGET:
            inputs.set_aside(typed_note("workload_bounded", "sim_budget", field="concurrency" if p.concurrency else "request_rate", label=p.label))
            continue
        spent += cost
        kept.append(p)
    return kept


#: Most requests of a measured open stream simulated (its own count up to this).
MAX_OPEN_PROMPTS = 1000


def diagnosis_prompts(point) -> int:
    """Requests simulated per load point for a diagnosis: two rounds of the clients reach the steady
    state the figures describe (the estimate command uses three); an open stream gets as many as
    its measured run sent (a burst of 64 sent at once is not one of 200), else 200."""
    if point.concurrency:
        return max(8, 2 * point.concurrency)
    return min(point.num_prompts, MAX_OPEN_PROMPTS) if point.num_prompts else 200


#: The smooth maximum's exponent for the ceiling: within 1.1% of the plain maximum of two equal rooflines.
CEILING_SHARPNESS = 64.0


def ceiling_efficiency(base):
    """Every kernel at the hardware's peak and no fixed cost per kernel or per step: the fastest this
    hardware could possibly serve the load. A measured figure beyond it is not a server figure."""
    # every kernel at the hardware's peak (bytes over the memory bandwidth, FLOPs over the tensor cores'
    # peak), no factor below 1 on top (a factor fitted to one release, times a peak, would pass the
    # hardware), and every host cost at 0: a real H100 run with --enforce-eager measured a TTFT 1.6x
    # "faster than the ceiling" while the ceiling still charged the fitted per-request intake time and
    # the eager kernel launches; and with no vLLM version given the ceiling kept 0.95 of the bandwidth
    # and no graph factor, 29% above bytes / bandwidth, so a healthy 8B TPOT read "beyond the ceiling"
    # (5.7 ms at one client against 6.3 ms; the weights it reads each step, 15.1 GB, over 3.35 TB/s take 4.5 ms)
    peak = 1.0
    return base.model_copy(
        update={"eff_gemm": peak, "eff_mem": peak, "eff_attn_prefill": peak, "eff_attn_decode": peak, "eff_comm": peak, "step_overhead_ms": 0.0, "per_seq_overhead_us": 0.0,
                "prefill_request_overhead_ms": 0.0, "intake_delay_ms": 0.0, "eager_launch_us_per_layer": 0.0, "eager_moe_launch_us_per_layer": 0.0,
                "decode_graph_factor": 1.0, "mixed_step_factor": 1.0, "moe_compute_factor": 1.0, "moe_memory_factor": 1.0,
                # no fixed time per kernel either: a bound, not an estimate (bytes over bandwidth alone)
                "gemm_latency_us": 0.0, "attn_decode_latency_us": 0.0, "attn_prefill_latency_us": 0.0, "moe_latency_us": 0.0, "allreduce_latency_us": 0.0,
                "sustained_factor": 1.0,
                # nor a fitted shortfall of the grouped MoE GEMM, of small or very large GEMMs, or of attention over
                # few streams; the rooflines meet at their maximum (an audit's find: Qwen3-30B-A3B on an H100 had a
                # "ceiling" of 356 tok/s for one request where its bytes over the bandwidth give ~485, and 400 was
                # called not one request's speed)
                "moe_eff_mem": peak, "moe_eff_gemm": peak, "moe_tile_us": 0.0, "gemm_fill_outputs": 0.0, "gemm_large_m_ratio": 1.0,
                "attn_decode_half_streams": 0.0, "attn_prefill_tail_rows": 0.0, "gemm_sharpness": CEILING_SHARPNESS, "moe_sharpness": CEILING_SHARPNESS}
    )
