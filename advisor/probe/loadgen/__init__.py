"""``vllm-advisor probe bench``: a load generator that watches the server while it loads it.

``run_sweep(spec)`` sends streaming requests of exact token lengths (:mod:`.prompts`) at each
concurrency of the spec (:mod:`.runner`), timing them as ``vllm bench serve`` does (:mod:`.stream`)
and sampling ``/metrics`` alongside (:mod:`.sampler`); :mod:`.result` turns each load point into a
result line that the benchmark loaders read back as a :class:`~vllm_advisor.schema.BenchmarkRun`.
"""

from .result import append_result, load_point_record, runs_from_records
from .runner import LoadPoint, Reporter, SilentReporter, run_sweep
from .spec import BenchSpec, default_num_prompts, fresh_seed
from .stream import RequestRecord

__all__ = [
    "BenchSpec", "LoadPoint", "Reporter", "RequestRecord", "SilentReporter", "append_result",
    "default_num_prompts", "fresh_seed", "load_point_record", "run_sweep", "runs_from_records",
]
