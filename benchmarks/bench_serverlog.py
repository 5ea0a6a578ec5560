"""Benchmark: parse_server_log on a large synthetic vLLM server log.

Writes a log of a startup block followed by access-log lines and periodic stats lines (the mix a
busy server produces: ~20 HTTP lines per stats line) into a temp dir, parses it N times, and
prints one JSON line with the median seconds and the peak RSS of the process.

Usage: .venv/bin/python benchmarks/bench_serverlog.py [--mb 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from vllm_advisor.probe.serverlog import parse_server_log

STARTUP = """\
(APIServer pid=1) INFO 03-02 17:17:54 [api_server.py:1272] vLLM API server version 0.11.0
(APIServer pid=1) INFO 03-02 17:17:54 [utils.py:263] non-default args: {'model_tag': 'm', 'model': 'm', 'max_model_len': 16384, 'tensor_parallel_size': 4, 'max_num_batched_tokens': 8192}
(EngineCore_DP0 pid=2) INFO 03-02 17:18:22 [core.py:97] Initializing a V1 LLM engine (v0.11.0) with config: model='m', speculative_config=None, tokenizer='m', dtype=torch.bfloat16, max_seq_len=16384, tensor_parallel_size=4, pipeline_parallel_size=1, data_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, enable_prefix_caching=True, enable_chunked_prefill=True, compilation_config={'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'cudagraph_capture_sizes': [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]}
(Worker_TP0 pid=3) INFO 03-02 17:18:42 [cuda.py:416] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER']
(EngineCore_DP0 pid=2) INFO 03-02 17:19:17 [kv_cache_utils.py:1305] GPU KV cache size: 1,479,680 tokens
(EngineCore_DP0 pid=2) INFO 03-02 17:19:17 [kv_cache_utils.py:1310] Maximum concurrency for 16,384 tokens per request: 90.31x
"""
ACCESS = '(APIServer pid=1) INFO:     127.0.0.1:50430 - "POST /v1/completions HTTP/1.1" 200 OK\n'
STATS = (
    "(APIServer pid=1) \x1b[1;36mINFO\x1b[0m 03-02 17:{m:02d}:{s:02d} [loggers.py:257] Engine 000: Avg prompt "
    "throughput: {p:.1f} tokens/s, Avg generation throughput: 33.2 tokens/s, Running: 12 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 45.1%, Prefix cache hit rate: 12.0%\n"
)


def write_log(path: Path, target_bytes: int) -> int:
    lines = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write(STARTUP)
        written = len(STARTUP)
        block = ACCESS * 20
        i = 0
        while written < target_bytes:
            stat = STATS.format(m=(i // 60) % 60, s=i % 60, p=float(i % 1000))
            fh.write(block)
            fh.write(stat)
            written += len(block) + len(stat)
            lines += 21
            i += 1
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=200.0, help="size of the synthetic log in MB")
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "server.log"
        lines = write_log(path, int(opts.mb * 1e6))
        size = path.stat().st_size
        times = []
        info = None
        for _ in range(opts.repeats):
            start = time.perf_counter()
            info = parse_server_log(path)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        assert info is not None and info.kv_cache_tokens == 1_479_680
        print(
            json.dumps(
                {
                    "bench": "parse_server_log",
                    "input_mb": round(size / 1e6, 1),
                    "lines": lines,
                    "stats_lines_kept": len(info.stats),
                    "repeats": opts.repeats,
                    "median_s": round(median, 3),
                    "mb_per_s": round(size / 1e6 / median, 1),
                    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
