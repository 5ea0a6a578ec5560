"""How to check the memo's claims: `vllm bench serve` lines for each load point and PromQL queries.

WHY each flag of the benchmark line: ``--dataset-name random`` with fixed lengths reproduces the
workload's prompt and output lengths; ``--ignore-eos`` makes every request generate exactly the
output length (otherwise early stops shorten outputs and inflate speed); a *new* ``--seed`` keeps
the prompts from repeating an earlier run's, whose blocks the prefix cache may still hold (a warm
cache makes long-prompt runs look far faster than production); ``--percentile-metrics`` adds e2el
to the default ttft,tpot,itl; ``--save-result --save-detailed`` keep per-request data, so the advisor
can recompute every distribution (``vllm-advisor probe load``).
"""

from __future__ import annotations

import math
import shlex

from ..messages import text
from .loadpoints import LoadPointRow


def t(language: str, key: str, **values) -> str:
    return text(language, f"memo.{key}", **values)


def bench_serve_command(
    *,
    model: str | None,
    input_len: int | None,
    output_len: int | None,
    concurrency: int | None = None,
    request_rate: float | None = None,
    num_prompts: int,
    seed: int,
) -> str:
    """One `vllm bench serve` line for one load point; unknown lengths stay visible placeholders."""
    parts = [
        "vllm bench serve",
        f"--model {shlex.quote(model) if model else '<served-model-name>'}",
        "--dataset-name random",
        f"--random-input-len {input_len if input_len else '<input-tokens>'}",
        f"--random-output-len {output_len if output_len else '<output-tokens>'}",
        "--ignore-eos",
    ]
    if concurrency:
        parts.append(f"--max-concurrency {concurrency}")
    if request_rate is not None:
        parts.append(f"--request-rate {'inf' if math.isinf(request_rate) else f'{request_rate:g}'}")
    tag = f"c{concurrency}" if concurrency else f"rate{'inf' if request_rate is None or math.isinf(request_rate) else f'{request_rate:g}'}"
    parts += [
        f"--num-prompts {num_prompts}",
        f"--seed {seed}",
        "--percentile-metrics ttft,tpot,itl,e2el",
        "--metric-percentiles 50,90,99",
        "--save-result --save-detailed",
        f"--result-filename bench-{tag}-seed{seed}.json",
    ]
    return " ".join(parts)


def num_prompts_for(row: LoadPointRow) -> int:
    """Enough requests for a steady state (several rounds of the clients), never fewer than measured."""
    from ..perf.predict import LoadPoint, default_num_prompts

    if row.key and row.key[0] == "c":
        base = default_num_prompts(LoadPoint(concurrency=int(row.key[1])))
    else:
        base = 200
    measured = max((r.num_prompts or r.completed or 0 for r in row.measured), default=0)
    return max(base, measured)


def bench_commands(rows: list[LoadPointRow], *, model: str | None, input_len: int | None, output_len: int | None, seed: int) -> list[str]:
    out = []
    for i, row in enumerate(r for r in rows if r.key is not None):
        kind, value = row.key
        out.append(
            bench_serve_command(
                model=model,
                input_len=input_len,
                output_len=output_len,
                concurrency=int(value) if kind == "c" else None,
                request_rate=value if kind == "rate" else None,
                num_prompts=num_prompts_for(row),
                seed=seed + i,
            )
        )
    return out


def promql_queries(model: str | None) -> list[tuple[str, str]]:
    """(query, label key) pairs. Each name pair joined by ``or`` works on V0 and V1 servers alike
    (a server exports one of the two names, so the other side is empty)."""
    sel = f'{{model_name="{model}"}}' if model else ""
    return [
        (f"sum(vllm:num_requests_running{sel})", "pq_running"),
        (f"sum(vllm:num_requests_waiting{sel})", "pq_waiting"),
        (f"max(vllm:kv_cache_usage_perc{sel} or vllm:gpu_cache_usage_perc{sel})", "pq_kv"),
        (f"sum(rate(vllm:num_preemptions_total{sel}[1m]))", "pq_preempt"),
        (f"sum(rate(vllm:generation_tokens_total{sel}[1m]))", "pq_gen"),
        (f"sum(rate(vllm:prompt_tokens_total{sel}[1m]))", "pq_prompt"),
        (f"histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{sel}[5m])))", "pq_ttft"),
        (
            f"histogram_quantile(0.5, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket{sel}[5m]) or rate(vllm:time_per_output_token_seconds_bucket{sel}[5m])))",
            "pq_itl",
        ),
        (f"histogram_quantile(0.99, sum by (le) (rate(vllm:request_queue_time_seconds_bucket{sel}[5m])))", "pq_queue"),
        (
            f"sum(rate(vllm:prefix_cache_hits_total{sel}[5m]) or rate(vllm:gpu_prefix_cache_hits_total{sel}[5m])) / sum(rate(vllm:prefix_cache_queries_total{sel}[5m]) or rate(vllm:gpu_prefix_cache_queries_total{sel}[5m]))",
            "pq_prefix",
        ),
    ]


def expected_values(row: LoadPointRow | None) -> dict[str, str]:
    """What the model predicts each query shows at one load point (only what the simulation knows)."""
    from .format import num

    if row is None or row.predicted is None:
        return {}
    sv = row.predicted.server_view
    out: dict[str, str] = {}
    if sv is not None and sv.running_mean is not None:
        out["pq_running"] = f"{num(sv.running_mean)} / {num(sv.running_max)}"  # mean / max, as the sv_running column
    if sv is not None and sv.waiting_mean is not None:
        out["pq_waiting"] = num(sv.waiting_mean)
    if sv is not None and sv.kv_usage_pct_mean is not None:
        out["pq_kv"] = f"{sv.kv_usage_pct_mean / 100:.2f}"
    if row.predicted.output_throughput_tok_s is not None:
        out["pq_gen"] = f"{num(row.predicted.output_throughput_tok_s)} tok/s"
    ttft = row.predicted.ttft_ms
    if ttft is not None and ttft.pct(99) is not None:
        out["pq_ttft"] = f"{num(ttft.pct(99) / 1000)} s"
    itl = row.predicted.itl_ms or row.predicted.tpot_ms
    if itl is not None and itl.pct(50) is not None:
        out["pq_itl"] = f"{itl.pct(50) / 1000:.3f} s"
    queue = sv.queue_ms if sv is not None else None
    if queue is not None and queue.pct(99) is not None:
        out["pq_queue"] = f"{num(queue.pct(99) / 1000)} s"
    return out


def promql_rows(language: str, model: str | None, row: LoadPointRow | None) -> list[list[str]]:
    expected = expected_values(row)
    return [[f"`{q}`", t(language, key), expected.get(key, "—")] for q, key in promql_queries(model)]
