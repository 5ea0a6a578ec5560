"""Artefacts pasted into the question: vLLM's log lines, ``vllm bench serve``'s result block, /metrics lines.

WHY: real reports paste what the server and the client printed ("Running: 256 reqs, Pending: 180
reqs, GPU KV cache usage: 45.2%", a "Serving Benchmark Result" block) rather than attach the file.
Those lines are the server's and the client's own figures, as good as the file they came from, and
an answer that reads only the words around them reasons from a guess (a reviewer's find: running
pinned at vLLM's default max_num_seqs with the KV cache half empty was answered "the KV cache holds
too few requests"). So the question's text goes through the same readers a file would: the server
log reader (serverlog.py), the console-output bench reader (bench/vllm_bench_text.py) and the
Prometheus text reader (metrics/parse.py); nothing here parses a figure itself.

The text is data: it yields figures and nothing else, and is cut at ``MAX_CHARS`` first.
"""

from __future__ import annotations

import re

from ..errors import UnknownFormatError
from ..schema import BenchmarkRun, MetricsSnapshot, ServerLogInfo
from ..schema.notes import PASTED_SOURCE

#: A question with a pasted log is read this far (a whole day's log is an attachment, not a question).
MAX_CHARS = 200_000
#: What marks a line the server log reader takes (its _MARKERS, the ones people paste).
_LOG_MARKERS = ("Avg prompt throughput", "KV cache size:", "Maximum concurrency for", "# GPU blocks", "preempted by",
                "non-default args:", "LLM engine", "vLLM API server version")
#: A log line's own start, where a pasted log lost its line breaks ("INFO 10-12 10:00:01", with
#: the process tag V1 puts before it, which stays on the line). A run of blanks is tried once, from
#: its start: tried from each of its blanks, 200,000 of them took quadratic time.
LINE_START = re.compile(r"(?<![ \t)])[ \t]+(?=(?:\(\w+ pid=\d+\)\s*)?(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\s+\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
_STATS = "Avg prompt throughput"
#: The result block's closing rule, 50 "=" (the banner's own runs are 12), and text after it.
_CLOSING_RULE = re.compile(r"(={40,})[ \t]+(?=\S)")


def _log_lines(text: str) -> str:
    """The text with each log line on its own line: a stats line is read per line, and two of them
    run together would read as one."""
    text = LINE_START.sub("\n", text)
    lines = []
    for line in text.split("\n"):
        if line.count(_STATS) > 1:
            lines.extend(re.split(r"\s+(?=(?:Engine \d+:\s*)?" + _STATS + ")", line))
        else:
            lines.append(line)
    return "\n".join(lines)


def pasted_log(text: str | None) -> ServerLogInfo | None:
    """The vLLM log lines in ``text`` as the server log reader reads a file, or None where there
    are none; lines it finds but cannot use raise the reader's InputFileError."""
    text = (text or "")[:MAX_CHARS]
    if not any(marker in text for marker in _LOG_MARKERS):
        return None
    from .serverlog import parse_server_log_text

    try:
        log = parse_server_log_text(_log_lines(text), source=PASTED_SOURCE)
    except UnknownFormatError:  # a marker in prose ("the KV cache size: too small") is not a log
        return None
    return log


def pasted_runs(text: str | None) -> list[BenchmarkRun]:
    """The ``Serving Benchmark Result`` blocks in ``text`` as the bench reader reads a console log
    (empty where there are none); a block cut short raises the reader's InputFileError."""
    text = (text or "")[:MAX_CHARS]
    from .bench.vllm_bench_text import BANNER, runs_from_text

    if BANNER.search(text) is None:
        return []
    # the block's closing rule (50 "=") with the question going on after it on the same line
    return runs_from_text(_CLOSING_RULE.sub("\\1\n", text), PASTED_SOURCE)


#: Sample lines that make a pasted /metrics excerpt (one is a figure quoted in a sentence).
MIN_METRIC_LINES = 2


def pasted_metrics(text: str | None) -> MetricsSnapshot | None:
    """The vLLM ``/metrics`` sample lines in ``text`` (``curl .../metrics | grep ...``) as one
    snapshot of the server, read by the Prometheus text reader; None where there are fewer than
    MIN_METRIC_LINES."""
    text = (text or "")[:MAX_CHARS]
    if "vllm:" not in text:
        return None
    from .metrics.parse import VLLM_SAMPLE_LINE, parse_metrics_text

    lines = [m.group(0).strip() for m in VLLM_SAMPLE_LINE.finditer(text)]
    if len(lines) < MIN_METRIC_LINES:
        return None
    snapshot = parse_metrics_text("\n".join(lines), PASTED_SOURCE)
    return snapshot if snapshot.families else None
