"""Benchmark: the load generator's client-side cost, which must stay far below what it measures.

1. Per streamed token: ``send_request`` reading an SSE stream of ``--tokens`` chunks shaped like
   vLLM's ``/v1/completions`` chunks from an in-process httpx transport (no network, no server),
   so the time is all client work: line splitting, JSON parsing, timestamps. Reported per chunk:
   it is the floor under every ITL the tool can measure.
2. Per load point: ``load_point_record`` (summaries of every request + the JSON line) and reading
   it back with ``load_runs`` for ``--requests`` requests of ``--output-len`` tokens each.

Prints one JSON line. Run: ``.venv/bin/python benchmarks/bench_loadgen.py``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from vllm_advisor.probe.bench import load_runs
from vllm_advisor.probe.loadgen import BenchSpec, LoadPoint, RequestRecord, append_result, load_point_record
from vllm_advisor.probe.loadgen.prompts import Prompt
from vllm_advisor.probe.loadgen.stream import request_body, send_request


def sse_body(tokens: int) -> bytes:
    chunk = {"id": "cmpl-x", "object": "text_completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "text": " tok", "logprobs": None, "finish_reason": None, "stop_reason": None}]}
    lines = [b"data: " + json.dumps(chunk).encode() + b"\n\n"] * tokens
    usage = {"id": "cmpl-x", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": tokens, "total_tokens": tokens + 100}}
    lines.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    lines.append(b"data: [DONE]\n\n")
    return b"".join(lines)


async def time_stream(tokens: int, repeats: int) -> list[float]:
    body = sse_body(tokens)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    times = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        payload = request_body("completions", "m", "hello", tokens, True)
        for _ in range(repeats):
            t0 = time.perf_counter()
            record = await send_request(client, "http://bench/v1/completions", payload, "completions", 0)
            times.append(time.perf_counter() - t0)
            assert record.ok and record.output_tokens == tokens and len(record.itls_s) == tokens - 1
    return times


def synthetic_point(requests: int, output_len: int) -> LoadPoint:
    rng = random.Random(0)
    records = []
    for i in range(requests):
        itls = [rng.uniform(0.005, 0.05) for _ in range(output_len - 1)]
        ttft = rng.uniform(0.05, 2.0)
        records.append(RequestRecord(index=i, ttft_s=ttft, itls_s=itls, latency_s=ttft + sum(itls), prompt_tokens=1000,
                                     output_tokens=output_len, token_chunks=output_len))
    prompts = [Prompt("x", 1000, True)] * requests
    return LoadPoint(concurrency=64, num_prompts=requests, records=records, prompts=prompts, started_at=time.time(), duration_s=60.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    stream_times = asyncio.run(time_stream(args.tokens, args.repeats))
    spec = BenchSpec(base_url="http://bench", input_len=1000, output_len=args.output_len, concurrencies=[64], seed=1)
    point = synthetic_point(args.requests, args.output_len)
    save_times, load_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            path = Path(tmp) / f"r{i}.jsonl"
            t0 = time.perf_counter()
            append_result(path, load_point_record(spec, point, "m", []))
            save_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run = load_runs(path)[0]
            load_times.append(time.perf_counter() - t0)
            assert run.completed == args.requests and not run.failed_checks()
        size_mb = path.stat().st_size / 1e6
    stream_median = statistics.median(stream_times)
    print(json.dumps({
        "bench": "loadgen",
        "stream_tokens": args.tokens,
        "stream_median_s": round(stream_median, 4),
        "per_chunk_us": round(stream_median / args.tokens * 1e6, 1),
        "point_requests": args.requests,
        "point_output_len": args.output_len,
        "point_file_mb": round(size_mb, 1),
        "save_median_s": round(statistics.median(save_times), 3),
        "load_median_s": round(statistics.median(load_times), 3),
        "repeats": args.repeats,
    }))


if __name__ == "__main__":
    main()
