"""parse_server_log on real vLLM server logs (XPU TP4 source build, vLLM 0.32.0 on CPU) and on the
phrasings of older versions (V0 format strings, the docs' preemption warning)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_advisor.errors import InputFileError
from vllm_advisor.probe import serverlog
from vllm_advisor.probe.serve_cmd import deployment_from_server_log, engine_args_for
from vllm_advisor.probe.serverlog import parse_server_log, parse_server_log_text

GPT_OSS = "real-logs/guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"
QWEN3 = "real-logs/guidellm-bench_qwen3-30b-a3b_tp4_fp8_vllm-server.log"
CPU_LOGS = "vllm-cpu-real/logs"


def _cpu(fixtures: Path, server: str) -> Path:
    (path,) = sorted((fixtures / CPU_LOGS).glob(f"server_{server}_*.log"))
    return path


# --- real logs ------------------------------------------------------------------------------


def test_gpt_oss_xpu_log(fixtures_dir: Path) -> None:
    path = fixtures_dir / GPT_OSS
    assert b"\x1b[" in path.read_bytes()[:20000], "fixture should carry ANSI colour codes"
    info = parse_server_log(path)
    assert info.vllm_version == "0.1.dev12986+gfa99ccebd"
    assert info.model == "openai/gpt-oss-20b"
    assert info.device == "XPU"  # device_config=xpu, though vLLM prints "GPU KV cache size" (a reviewer's find)
    assert info.kv_cache_tokens == 1_479_680
    assert info.max_concurrency == pytest.approx(90.31)
    assert info.max_concurrency_tokens_per_request == 16_384
    assert (info.tensor_parallel_size, info.pipeline_parallel_size, info.data_parallel_size) == (4, 1, 1)
    assert info.max_model_len == 16_384
    assert info.dtype == "bfloat16"
    assert info.quantization == "mxfp4"  # from the engine config line; the user did not pass it
    assert info.kv_cache_dtype == "auto"
    assert info.block_size == 64
    assert info.enforce_eager is True
    assert info.cudagraph_mode == "NONE"
    assert info.chunked_prefill is True
    assert info.prefix_caching is False
    assert info.max_num_batched_tokens == 8192
    assert info.max_num_seqs is None  # never stated in this log
    assert info.attention_backend == "Flash Attention"  # not the "ipex marlin backend on XPU" MoE line
    assert info.non_default_args == {
        "model_tag": "openai/gpt-oss-20b",
        "model": "openai/gpt-oss-20b",
        "trust_remote_code": True,
        "dtype": "bfloat16",
        "max_model_len": 16384,
        "enforce_eager": True,
        "disable_sliding_window": True,
        "tensor_parallel_size": 4,
        "block_size": 64,
        "enable_prefix_caching": False,
        "max_num_batched_tokens": 8192,
    }
    assert len(info.stats) == 93
    first = info.stats[0]
    assert first.timestamp == "03-02 17:19:55"
    assert first.engine == "000"
    assert (first.prompt_tok_s, first.generation_tok_s) == (13.0, 0.1)
    assert (first.running, first.waiting, first.swapped) == (1, 0, None)
    assert (first.kv_cache_usage_pct, first.prefix_cache_hit_rate_pct) == (0.0, 0.0)
    assert max(s.generation_tok_s for s in info.stats) == pytest.approx(33.8)
    assert max(s.prompt_tok_s for s in info.stats) == pytest.approx(37.3)
    assert info.preemption_warnings == 0 and info.preemptions_total is None


def test_qwen3_fp8_xpu_log(fixtures_dir: Path) -> None:
    info = parse_server_log(fixtures_dir / QWEN3)
    assert info.model == "Qwen/Qwen3-30B-A3B"
    assert info.kv_cache_tokens == 573_760
    assert info.max_concurrency == pytest.approx(35.02)
    assert info.max_concurrency_tokens_per_request == 16_384
    assert info.quantization == "fp8"
    assert info.non_default_args["quantization"] == "fp8"
    assert info.tensor_parallel_size == 4
    # "Using Triton backend for FP8 MoE" is a MoE kernel, not the attention backend
    assert info.attention_backend == "Flash Attention"
    assert len(info.stats) == 91
    assert info.stats[0].prompt_tok_s == pytest.approx(13.3)
    assert info.stats[0].generation_tok_s == pytest.approx(20.6)
    assert info.stats[0].kv_cache_usage_pct == pytest.approx(0.1)


def test_cpu_server_a(fixtures_dir: Path) -> None:
    info = parse_server_log(_cpu(fixtures_dir, "A"))
    assert info.vllm_version == "0.32.0"
    assert info.model == "./tiny-qwen2"
    assert info.device == "CPU"
    assert info.kv_cache_tokens == 1_048_576
    assert info.max_concurrency == pytest.approx(128.00)
    assert info.max_concurrency_tokens_per_request == 8192
    assert info.kv_cache_memory_gib == pytest.approx(2.0)
    assert info.max_model_len == 8192
    assert info.enforce_eager is False
    assert info.prefix_caching is True and info.chunked_prefill is True
    assert info.non_default_args["served_model_name"] == ["tiny-qwen2"]
    assert info.non_default_args["port"] == 8011
    assert len(info.stats) == 21
    busiest = max(info.stats, key=lambda s: s.running or 0)
    assert (busiest.running, busiest.kv_cache_usage_pct, busiest.line_no) == (8, 4.7, 269)
    assert max(s.prefix_cache_hit_rate_pct for s in info.stats) == pytest.approx(58.6)
    assert any("V1 engine" in n and "num_preemptions_total" in n for n in info.notes)


def test_cpu_server_e_kv_pressure(fixtures_dir: Path) -> None:
    info = parse_server_log(_cpu(fixtures_dir, "E"))
    assert info.kv_cache_tokens == 12_288
    assert info.max_concurrency == pytest.approx(1.50)
    assert info.kv_cache_blocks == 96
    assert info.max_num_seqs == 8
    assert info.enforce_eager is True
    assert info.non_default_args["num_gpu_blocks_override"] == 96
    assert len(info.stats) == 2
    pressure = info.stats[0]
    assert (pressure.running, pressure.waiting) == (1, 7)
    assert pressure.kv_cache_usage_pct == pytest.approx(50.5)
    assert pressure.prompt_tok_s == pytest.approx(10799.9)
    # The server preempted 31 times (per /metrics) but vLLM 0.32's V1 log has no preemption lines:
    # the parser must not invent a count, and says where to look instead.
    assert info.preemption_warnings == 0
    assert info.preemptions_total is None
    assert any("num_preemptions_total" in n for n in info.notes)


@pytest.mark.parametrize("server,stats,eager", [("B", 0, False), ("C", 0, False), ("D", 5, True), ("F", 0, True)])
def test_other_cpu_servers(fixtures_dir: Path, server: str, stats: int, eager: bool) -> None:
    info = parse_server_log(_cpu(fixtures_dir, server))
    assert info.vllm_version == "0.32.0"
    assert info.kv_cache_tokens == 1_048_576
    assert len(info.stats) == stats
    assert info.enforce_eager is eager


def test_text_and_file_agree(fixtures_dir: Path) -> None:
    path = _cpu(fixtures_dir, "E")
    from_file = parse_server_log(path)
    from_text = parse_server_log_text(path.read_text(encoding="utf-8"), source=str(path))
    assert from_text == from_file


def test_deployment_from_server_log(fixtures_dir: Path) -> None:
    gpu = deployment_from_server_log(parse_server_log(fixtures_dir / GPT_OSS))
    assert gpu.engine == "vllm"
    assert gpu.vllm_version == "0.1.dev12986+gfa99ccebd"
    assert gpu.model == "openai/gpt-oss-20b"
    assert gpu.num_gpus == 4
    assert gpu.quantization == "mxfp4"
    assert "model_tag" not in gpu.flags and "model" not in gpu.flags
    assert gpu.flags["max_num_batched_tokens"] == 8192
    assert gpu.flags["tensor_parallel_size"] == 4
    cpu = deployment_from_server_log(parse_server_log(_cpu(fixtures_dir, "E")))
    assert cpu.num_gpus is None  # a CPU server uses no GPU
    assert cpu.flags["max_num_seqs"] == 8
    args = engine_args_for(cpu)  # the log's flags read back as typed engine arguments
    assert (args.max_num_seqs, args.num_gpu_blocks_override, args.enforce_eager) == (8, 96, True)
    assert args.served_model_name == ["tiny-qwen2"] and args.extra == {"load_format": "dummy"}


# --- phrasings of other versions -------------------------------------------------------------


def test_v0_preemption_warning_from_docs(shared_dir: Path) -> None:
    doc = (shared_dir / "corpus/vllm-docs/configuration/optimization.md").read_text(encoding="utf-8")
    (warning,) = [line for line in doc.splitlines() if "is preempted by" in line]
    info = parse_server_log_text(
        "INFO 05-09 00:49:00 api_server.py:149] vLLM API server version 0.4.2\n" + warning + "\n", "docs"
    )
    assert info.preemption_warnings == 1
    assert info.preemptions_total == 1  # total_cumulative_preemption_cnt=1 (older spelling)


V0_LOG = """\
INFO 11-07 17:49:14 api_server.py:530] vLLM API server version 0.6.3.post1
INFO 11-07 17:49:14 api_server.py:531] args: Namespace(host='0.0.0.0', port=8000, model='Qwen/Qwen2-7B', tokenizer=None, dtype='auto', kv_cache_dtype='fp8', config_format=<ConfigFormat.AUTO: 'auto'>, max_model_len=None, tensor_parallel_size=2, pipeline_parallel_size=1, block_size=16, enable_prefix_caching=True, enable_chunked_prefill=None, max_num_batched_tokens=None, max_num_seqs=256, enforce_eager=False, quantization=None, speculative_model=None)
INFO 11-07 17:49:20 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: model='Qwen/Qwen2-7B', speculative_config=None, tokenizer='Qwen/Qwen2-7B', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=32768, download_dir=None, load_format=LoadFormat.AUTO, tensor_parallel_size=2, pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=fp8, device_config=cuda, seed=0, served_model_name=Qwen/Qwen2-7B, use_v2_block_manager=True, num_scheduler_steps=1, chunked_prefill_enabled=False multi_step_stream_outputs=True, enable_prefix_caching=True, use_async_output_proc=True, mm_processor_kwargs=None)
INFO 11-07 17:49:25 selector.py:135] Using Flash Attention backend.
INFO 11-07 17:49:40 distributed_gpu_executor.py:57] # GPU blocks: 27933, # CPU blocks: 4681
INFO 11-07 17:49:40 distributed_gpu_executor.py:61] Maximum concurrency for 32768 tokens per request: 13.64x
INFO 11-07 17:49:45 model_runner.py:1402] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.
INFO 11-07 17:50:02 model_runner.py:1530] Graph capturing finished in 17 secs.
INFO 11-07 17:51:00 metrics.py:349] Avg prompt throughput: 3921.4 tokens/s, Avg generation throughput: 210.2 tokens/s, Running: 37 reqs, Swapped: 2 reqs, Pending: 11 reqs, GPU KV cache usage: 98.7%, CPU KV cache usage: 3.1%.
INFO 11-07 17:51:00 metrics.py:365] Prefix cache hit rate: GPU: 41.25%, CPU: 0.00%
WARNING 11-07 17:51:03 scheduler.py:1481] Sequence group cmpl-1 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1
WARNING 11-07 17:51:40 scheduler.py:1481] Sequence group cmpl-9 is preempted by PreemptionMode.SWAP mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=51
INFO 11-07 17:51:10 metrics.py:349] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 480.5 tokens/s, Running: 12 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 40.0%, CPU KV cache usage: 0.0%.
"""


def test_v0_era_log() -> None:
    info = parse_server_log_text(V0_LOG, "v0.log")
    assert info.vllm_version == "0.6.3.post1"
    assert info.model == "Qwen/Qwen2-7B"
    assert info.tensor_parallel_size == 2
    assert info.max_model_len == 32768  # config max_seq_len wins over the Namespace's None
    assert info.kv_cache_dtype == "fp8"
    assert info.block_size == 16 and info.max_num_seqs == 256  # only in the Namespace line
    assert info.chunked_prefill is False  # "chunked_prefill_enabled=False multi_step..." (no comma)
    assert info.prefix_caching is True
    assert info.enforce_eager is False
    assert info.device == "GPU"
    assert info.kv_cache_blocks == 27933
    assert info.kv_cache_tokens is None  # V0 states blocks, not tokens: no guessing
    assert info.max_concurrency == pytest.approx(13.64)
    assert info.attention_backend == "Flash Attention"
    assert info.non_default_args == {}  # a Namespace lists every arg, not the user's choices
    assert info.preemption_warnings == 2
    assert info.preemptions_total == 51
    assert any("every 50th" in n for n in info.notes)
    assert any("17 s" in n for n in info.notes)
    assert len(info.stats) == 2
    busy = info.stats[0]
    assert (busy.running, busy.swapped, busy.waiting) == (37, 2, 11)
    assert busy.kv_cache_usage_pct == pytest.approx(98.7)  # the GPU figure, not the CPU swap one
    assert busy.prefix_cache_hit_rate_pct == pytest.approx(41.25)  # from the separate V0 line
    assert info.stats[1].prefix_cache_hit_rate_pct is None


def test_v1_stats_with_preemptions_and_dp_engines() -> None:
    text = "\n".join(
        [
            "(APIServer pid=1) INFO 06-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0",
            "(APIServer pid=1) INFO 06-01 10:00:00 [utils.py:1] non-default args: {'model': 'm', "
            "'data_parallel_size': 2, 'compilation_config': {'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>}}",
            "(EngineCore_DP0 pid=2) INFO 06-01 10:00:05 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens",
            "(EngineCore_DP1 pid=3) INFO 06-01 10:00:05 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens",
            "(EngineCore_DP0 pid=2) INFO 06-01 10:00:06 [cuda.py:416] Using FLASH_ATTN attention backend out of "
            "potential backends: ['FLASH_ATTN', 'FLASHINFER']",
            "(APIServer pid=1) INFO 06-01 10:01:00 [loggers.py:1] Engine 000: Avg prompt throughput: 5.0 tokens/s, "
            "Avg generation throughput: 900.0 tokens/s, Running: 64 reqs, Waiting: 30 reqs, Preemptions: 7, "
            "GPU KV cache usage: 99.9%, Prefix cache hit rate: 12.5%, External prefix cache hit rate: 80.0%",
            "(APIServer pid=1) INFO 06-01 10:01:00 [loggers.py:1] Engine 001: Avg prompt throughput: 5.0 tokens/s, "
            "Avg generation throughput: 900.0 tokens/s, Running: 64 reqs, Waiting: 2 reqs, Preemptions: 3, "
            "GPU KV cache usage: 99.0%, Prefix cache hit rate: 10.0%",
        ]
    )
    info = parse_server_log_text(text, "dp.log")
    assert info.kv_cache_tokens == 200_000  # summed over the two DP engines
    assert info.data_parallel_size == 2
    assert info.attention_backend == "FLASH_ATTN"
    assert info.non_default_args["compilation_config"] == {"cudagraph_mode": "FULL_AND_PIECEWISE"}
    assert [s.engine for s in info.stats] == ["000", "001"]
    assert info.stats[0].prefix_cache_hit_rate_pct == pytest.approx(12.5)  # not the external 80%
    assert [s.preemptions for s in info.stats] == [7, 3]
    assert info.preemptions_total == 10


@pytest.mark.parametrize(
    "line,backend",
    [
        ("INFO 06-12 selector.py:51] Using FlashAttention-2 backend.", "FlashAttention-2"),
        ("INFO 06-12 selector.py:51] Using XFormers backend.", "XFormers"),
        ("INFO 05-01 [cuda.py:221] Using Flash Attention backend on V1 engine.", "Flash Attention"),
        ("INFO 05-01 [cuda.py:221] Using FlashInfer backend on V1 engine.", "FlashInfer"),
        ("INFO 09-01 [cuda.py:362] Using FLASH_ATTN backend.", "FLASH_ATTN"),
        ("INFO 10-01 [cuda.py:366] Using AttentionBackendEnum.FLASHINFER backend.", "FLASHINFER"),
        ("INFO 11-24 [cuda.py:416] Using TRITON_ATTN attention backend out of potential backends: ['TRITON_ATTN']", "TRITON_ATTN"),
        ("INFO 03-02 [mxfp4.py:168] Using ipex marlin backend on XPU", None),
        ("INFO 03-02 [fp8.py:149] Using Triton backend for FP8 MoE", None),
        ("WARNING 06-12 selector.py:1] Cannot use FlashAttention-2 backend because the vllm_flash_attn package is not found.", None),
    ],
)
def test_attention_backend_phrasings(line: str, backend: str | None) -> None:
    info = parse_server_log_text("INFO vLLM API server version 0.9.0\n" + line + "\n", "x.log")
    assert info.attention_backend == backend


def test_capture_sizes_from_json_compilation_config() -> None:
    line = (
        "INFO 04-01 [core.py:58] Initializing a V1 LLM engine (v0.8.4) with config: model='m', dtype=torch.float16, "
        "max_seq_len=4096, tensor_parallel_size=1, enforce_eager=False, enable_prefix_caching=True, "
        'compilation_config={"level":3,"use_cudagraph":true,"cudagraph_capture_sizes":[4,2,1],"max_capture_size":4}'
    )
    info = parse_server_log_text(line, "v1.log")
    assert info.vllm_version == "0.8.4"
    assert info.dtype == "float16"
    assert info.cudagraph_capture_sizes == [1, 2, 4]
    assert info.cudagraph_mode is None


# --- bad and big input -----------------------------------------------------------------------


def test_not_a_server_log(fixtures_dir: Path) -> None:
    # a `vllm bench serve` client log: vLLM output, but not a server's
    with pytest.raises(InputFileError, match=r"does not look like a vLLM server log: none of .*non-default args"):
        parse_server_log(fixtures_dir / CPU_LOGS / "client_A_bench_in1024_c1.log")
    with pytest.raises(InputFileError, match="does not look like a vLLM server log"):
        parse_server_log(fixtures_dir / CPU_LOGS / "pip_install_recipe.log")


@pytest.mark.parametrize(
    "content,message",
    [(b"", "file is empty"), (b"\x00\x01\x02binary\x00" * 100, "is a binary file")],
)
def test_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=re.escape(message)) as err:
        parse_server_log(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_file_and_empty_text(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        parse_server_log(tmp_path / "nope.log")
    with pytest.raises(InputFileError, match="empty"):
        parse_server_log_text("  \n", "pasted")


def test_big_log_streams_with_bounded_stats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serverlog, "MAX_STATS_LINES", 1000)
    monkeypatch.setattr(serverlog, "MAX_LINE_BYTES", 4096)
    stat = (
        "INFO 01-01 00:00:{s:02d} [loggers.py:1] Avg prompt throughput: {p}.0 tokens/s, Avg generation "
        "throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
        "Prefix cache hit rate: 0.0%\n"
    )
    path = tmp_path / "big.log"
    with path.open("w") as fh:
        fh.write("x" * 100_000 + "\n")  # a line far longer than MAX_LINE_BYTES
        for i in range(5000):
            fh.write(stat.format(s=i % 60, p=i))
    info = parse_server_log(path)
    assert len(info.stats) == 1000
    assert info.stats[-1].prompt_tok_s == 4999.0
    assert any("kept the last 1,000 of 5,000" in n for n in info.notes)


def test_fast_stats_pattern_matches_field_by_field(fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-regex fast path and the per-field fallback read every real stats line the same."""
    paths = [fixtures_dir / GPT_OSS, fixtures_dir / QWEN3, _cpu(fixtures_dir, "A"), _cpu(fixtures_dir, "E")]
    fast = [parse_server_log(p).stats for p in paths]
    monkeypatch.setattr(serverlog, "_STAT_LINE", re.compile(r"(?!)"))
    slow = [parse_server_log(p).stats for p in paths]
    assert sum(len(s) for s in fast) == 93 + 91 + 21 + 2
    assert fast == slow
    v0_fast = parse_server_log_text(V0_LOG, "v0").stats
    assert [s.swapped for s in v0_fast] == [2, 0]


def test_an_xpu_log_is_answered_as_an_intel_deployment(fixtures_dir: Path) -> None:
    """The reviewer's U8: an Intel XPU server's log attached to `ask` got NVIDIA commands."""
    from vllm_advisor import Session

    answer = Session(kb=False, attachments=[fixtures_dir / GPT_OSS]).answer("why is ITL 30 ms?").answer.markdown
    assert "This deployment runs on Intel XPUs" in answer
