"""Per-request arrays of a detailed ``vllm bench serve`` result, recomputed with numpy.

Why recompute what the file already states: the arrays carry every percentile (the file only has
the ones asked for with ``--metric-percentiles``), per-request decode and output speeds the file
never states, the achieved concurrency, and a way to check that the stated figures really come
from these requests. The definitions follow ``vllm/benchmarks/serve.py`` ``calculate_metrics``:

- successful request: empty ``errors`` entry and ``output_len > 0`` (failed ones have 0 tokens and
  a 0.0 TTFT, and would drag every figure down);
- TTFT per successful request; E2E = ``latencies`` or, in files without it (before ~v0.9),
  ``ttft + sum(itls)``, which is how the client measured it (time of the last chunk);
- TPOT = ``(e2e - ttft) / (output_len - 1)`` for ``output_len > 1``;
- ITL = every gap of every successful request, pooled;
- numpy mean, median, population std and linear percentiles.

Arrays are in seconds; everything returned is in milliseconds or tokens per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...schema import ConsistencyCheck, Distribution, StreamDelivery
from ...schema.bench import HELD_GAP_MS, STANDARD_PERCENTILES
from .fields import FieldReader


@dataclass
class RequestArrays:
    """The per-request arrays present in one result object (any may be missing)."""

    count: int
    ttfts_s: np.ndarray | None = None
    latencies_s: np.ndarray | None = None
    itl_values_s: np.ndarray | None = None
    itl_counts: np.ndarray | None = None
    input_lens: np.ndarray | None = None
    output_lens: np.ndarray | None = None
    queue_times_s: np.ndarray | None = None
    errors: list[str] | None = None


@dataclass
class RequestSummary:
    """Distributions and totals recomputed from the successful requests."""

    completed: int
    failed: int
    ttft_ms: Distribution | None = None
    tpot_ms: Distribution | None = None
    itl_ms: Distribution | None = None
    e2e_ms: Distribution | None = None
    request_decode_tok_s: Distribution | None = None
    request_output_tok_s: Distribution | None = None
    client_queue_ms: Distribution | None = None
    stream_delivery: StreamDelivery | None = None
    input_len: Distribution | None = None
    output_len: Distribution | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    sum_e2e_s: float | None = None
    notes: list[str] = field(default_factory=list)


ARRAY_KEYS = ("ttfts", "latencies", "itls", "input_lens", "output_lens", "queue_times", "errors")


def read_request_arrays(reader: FieldReader) -> RequestArrays | None:
    """The arrays of one result object, checked for type and equal length; None if it has none."""
    if not (reader.has("ttfts") or reader.has("latencies")):
        return None
    arrays = RequestArrays(count=0)
    arrays.ttfts_s = reader.number_array("ttfts")
    arrays.latencies_s = reader.number_array("latencies")
    ragged = reader.ragged_number_arrays("itls")
    if ragged is not None:
        arrays.itl_values_s, arrays.itl_counts = ragged
    arrays.input_lens = reader.number_array("input_lens")
    arrays.output_lens = reader.number_array("output_lens")
    arrays.queue_times_s = reader.number_array("queue_times")
    arrays.errors = reader.string_list("errors")

    lengths = {
        "ttfts": arrays.ttfts_s,
        "latencies": arrays.latencies_s,
        "itls": arrays.itl_counts,
        "input_lens": arrays.input_lens,
        "output_lens": arrays.output_lens,
        "queue_times": arrays.queue_times_s,
        "errors": arrays.errors,
    }
    sizes = {name: len(values) for name, values in lengths.items() if values is not None}
    reference_name = "ttfts" if "ttfts" in sizes else "latencies"
    reference = sizes[reference_name]
    for name, size in sizes.items():
        if size != reference:
            raise reader.error(name, f"has {size} entries but '{reference_name}' has {reference}")
    arrays.count = reference
    return arrays


def success_mask(arrays: RequestArrays, stated_failed: int | None) -> np.ndarray | None:
    """Which requests succeeded; None when the file does not say (no errors/output_lens and failures)."""
    mask = np.ones(arrays.count, dtype=bool)
    known = False
    if arrays.errors is not None:
        mask &= np.fromiter((not e for e in arrays.errors), dtype=bool, count=arrays.count)
        known = True
    if arrays.output_lens is not None:
        mask &= arrays.output_lens > 0
        known = True
    if not known and stated_failed != 0:
        return None
    return mask


def summarize_requests(
    arrays: RequestArrays, stated_failed: int | None, extra_percentiles: dict[str, set[float]]
) -> RequestSummary | None:
    """Recompute the run's figures from its successful requests.

    ``extra_percentiles`` maps a metric (``'ttft'``, ``'tpot'``, ``'itl'``, ``'e2el'``,
    ``'client_queue_time'``) to the percentiles the file states, so they can be checked.
    """
    ok = success_mask(arrays, stated_failed)
    if ok is None:
        return None
    summary = RequestSummary(completed=int(ok.sum()), failed=int((~ok).sum()))

    def pcts(metric: str) -> list[float]:
        return sorted(set(STANDARD_PERCENTILES) | extra_percentiles.get(metric, set()))

    ttft = arrays.ttfts_s
    latency = arrays.latencies_s
    if latency is None and ttft is not None and arrays.itl_values_s is not None:
        # Files without 'latencies': the client's latency is the time of the last chunk.
        ends = np.cumsum(arrays.itl_counts)
        cumulative = np.concatenate(([0.0], np.cumsum(arrays.itl_values_s)))
        latency = ttft + (cumulative[ends] - cumulative[ends - arrays.itl_counts])
        summary.notes.append("E2E latency recomputed as TTFT + sum of inter-token gaps (the file has no 'latencies')")

    if ttft is not None:
        summary.ttft_ms = Distribution.from_samples(ttft[ok] * 1000.0, "ms", pcts("ttft"))
    if latency is not None:
        e2e = latency[ok]
        summary.e2e_ms = Distribution.from_samples(e2e * 1000.0, "ms", pcts("e2el"))
        summary.sum_e2e_s = float(e2e.sum())
    if arrays.itl_values_s is not None:
        gap_ok = np.repeat(ok, arrays.itl_counts)
        gaps_ms = arrays.itl_values_s[gap_ok] * 1000.0
        summary.itl_ms = Distribution.from_samples(gaps_ms, "ms", pcts("itl"))
        if gaps_ms.size:
            summary.stream_delivery = StreamDelivery(gaps=int(gaps_ms.size), held_gaps=int((gaps_ms < HELD_GAP_MS).sum()), held_below_ms=HELD_GAP_MS)
    if arrays.queue_times_s is not None:
        summary.client_queue_ms = Distribution.from_samples(
            arrays.queue_times_s[ok] * 1000.0, "ms", pcts("client_queue_time")
        )

    out = arrays.output_lens
    if out is not None:
        summary.output_len = Distribution.from_samples(out[ok], "tokens")
        summary.total_output_tokens = int(out[ok].sum())
        if ttft is not None and latency is not None:
            multi = ok & (out > 1)
            decode_time_s = latency[multi] - ttft[multi]
            tokens_after_first = out[multi] - 1
            summary.tpot_ms = Distribution.from_samples(decode_time_s / tokens_after_first * 1000.0, "ms", pcts("tpot"))
            positive = decode_time_s > 0
            summary.request_decode_tok_s = Distribution.from_samples(
                tokens_after_first[positive] / decode_time_s[positive], "tok/s"
            )
            if summary.request_decode_tok_s is not None and positive.any():
                # the mean over tokens (all tokens after the first over all their time), not of each request's
                # rate: a request whose tokens arrived in one chunk has a decode time of microseconds and a rate
                # of millions (a reviewer's find: 22,940 tok/s shown for a CPU run at 2.4 ms a token)
                weighted = float(tokens_after_first[positive].sum() / decode_time_s[positive].sum())
                summary.request_decode_tok_s = summary.request_decode_tok_s.model_copy(update={"mean": weighted})
        if latency is not None:
            timed = ok & (latency > 0)
            summary.request_output_tok_s = Distribution.from_samples(out[timed] / latency[timed], "tok/s")
    if arrays.input_lens is not None:
        summary.input_len = Distribution.from_samples(arrays.input_lens[ok], "tokens")
        summary.total_input_tokens = int(arrays.input_lens[ok].sum())
    if out is not None and arrays.itl_values_s is not None and (note := chunk_note(out[ok], arrays.itl_counts[ok] + 1)):
        summary.notes.append(note)
    return summary


#: Tokens per streamed chunk from which the gaps a client times stop being gaps between tokens.
MERGED_TOKENS_PER_CHUNK = 1.5


def chunk_note(output_lens: np.ndarray, chunks: np.ndarray) -> str | None:
    """A note when the stream carried several tokens per chunk.

    WHY: ``vllm bench serve`` and ``probe bench`` time chunks. vLLM streams one chunk per engine step,
    which holds several tokens under speculative decoding, and merges the steps a busy API server
    has not sent yet (``--stream-interval`` and other engines' stream intervals do it on purpose).
    ITL is then the gap between chunks, not tokens, and when a whole answer arrives at once TPOT
    reads near 0: whoever compares these figures with a step time should know."""
    multi = output_lens > 1
    tokens, sent = float(output_lens[multi].sum()), float(chunks[multi].sum())
    if not sent or tokens / sent < MERGED_TOKENS_PER_CHUNK:
        return None
    return (f"the stream carried {tokens:,.0f} tokens in {sent:,.0f} chunks ({tokens / sent:.1f} per chunk: speculative "
            "decoding, a stream interval or a busy API server): ITL is the gap between chunks, not tokens")


def compare_distribution(
    name: str, stated: dict[str, float], computed: Distribution | None, checks: list[ConsistencyCheck]
) -> None:
    """Append a check for each statistic the file states (``mean``, ``median``, ``std``, ``p99``...)."""
    if computed is None:
        return
    for statistic, value in stated.items():
        if statistic == "mean":
            mine = computed.mean
        elif statistic == "median":
            mine = computed.median
        elif statistic == "std":
            mine = computed.std
        else:
            mine = computed.percentiles.get(statistic)
        if mine is not None:
            checks.append(ConsistencyCheck.compare(f"{name}.{statistic}", value, mine))
