"""Benchmark results, whatever tool wrote them, as typed :class:`BenchmarkRun` load points.

``load_runs(path)`` reads a file once (bounded in size, text only), recognises its format by
content (``FORMATS``: vllm bench serve JSON/JSON Lines, GuideLLM JSON/YAML, AIPerf, genai-perf,
LLMPerf, hand-measured observations) and returns one run per load point. Unknown files raise
:class:`~vllm_advisor.errors.UnknownFormatError` naming every format tried and why it said no.
"""

from .base import BenchFormat, Detection
from .observations import observations_to_runs
from .registry import FORMATS, detect_format, load_runs

__all__ = ["BenchFormat", "Detection", "FORMATS", "detect_format", "load_runs", "observations_to_runs"]
