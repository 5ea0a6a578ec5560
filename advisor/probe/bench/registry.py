"""The registry of benchmark-result formats, and the entry points that use it.

Each format is a :class:`~.base.BenchFormat`: an id, a one-line description (the CLI lists
them), a ``detect`` function that looks at the parsed document and says whether it matches and,
if not, why (so an unknown file gets one line listing every format tried and why each said no),
and a ``load`` function that turns the document into :class:`BenchmarkRun` objects.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UnknownFormatError
from ...schema import BenchmarkRun
from . import advisor_bench, aiperf, genai_perf, guidellm, llmperf, observations, vllm_bench, vllm_bench_text
from .base import BenchFormat
from .document import InputDocument, read_document

#: Every known format, in detection order. Our own probe bench files come before vllm bench's,
#: whose keys they share. AIPerf comes before genai-perf because AIPerf's newer
#: export imitates genai-perf's layout and is told apart by its extra keys. The console-output
#: reader comes last: it claims only text holding the 'Serving Benchmark Result' banner.
FORMATS: tuple[BenchFormat, ...] = (
    advisor_bench.FORMAT,
    vllm_bench.FORMAT,
    guidellm.FORMAT,
    aiperf.FORMAT,
    genai_perf.FORMAT,
    llmperf.FORMAT,
    observations.FORMAT,
    vllm_bench_text.FORMAT,
)


def match_format(document: InputDocument) -> BenchFormat:
    """The first format whose detector accepts ``document``, else :class:`UnknownFormatError`."""
    reasons = []
    for fmt in FORMATS:
        verdict = fmt.detect(document)
        if verdict.matched:
            return fmt
        reasons.append(f"{fmt.id} ({verdict.reason})")
    raise UnknownFormatError(
        f"not a known benchmark result ({document.syntax}); tried: " + "; ".join(reasons),
        source=document.source,
    )


def detect_format(path: str | Path) -> str:
    """The id of the format of the file at ``path`` (read and parsed, bounded in size)."""
    return match_format(read_document(path)).id


def load_runs(path: str | Path) -> list[BenchmarkRun]:
    """Every load point in the benchmark-result file at ``path``, whatever tool wrote it."""
    document = read_document(path)
    return match_format(document).load(document)
