"""parse_serve_command / engine_args_for: real serve commands from the dev cases, vLLM's argparse
conventions, and one-line errors for bad values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from vllm_advisor.errors import AdvisorError, UsageError
from vllm_advisor.probe.engine_flags import FLAG_SPECS, lookup_field, lookup_flag
from vllm_advisor.probe.serve_cmd import (
    coerce_value,
    engine_args_for,
    parse_command,
    parse_serve_command,
)
from vllm_advisor.schema import Deployment, EngineArgs


def _case_deployment(shared_dir: Path, case_id: str) -> Deployment:
    data = yaml.safe_load((shared_dir / "cases/dev" / f"{case_id}.yaml").read_text(encoding="utf-8"))
    return Deployment.model_validate(data["deployment"])


def _args(cmd: str) -> EngineArgs:
    return engine_args_for(parse_serve_command(cmd))


# --- the dev cases ---------------------------------------------------------------------------


def test_case_6494_ngram_spec_command(shared_dir: Path) -> None:
    deployment = _case_deployment(shared_dir, "vllm-6494-ngram-spec-slower")
    parsed = parse_serve_command(deployment.serve_command or "")
    assert parsed.engine == "vllm"
    assert parsed.model == "Qwen/Qwen1.5-1.8B-Chat"
    assert parsed.num_gpus is None  # no parallel flag, no CUDA_VISIBLE_DEVICES
    args = engine_args_for(deployment)
    assert args.model == "Qwen/Qwen1.5-1.8B-Chat"
    assert args.gpu_memory_utilization == 0.5
    assert args.enable_prefix_caching is True
    # the removed V0 spec-decode flags, folded the way vLLM moved them into --speculative-config
    assert args.speculative_config == {
        "model": "[ngram]",
        "num_speculative_tokens": 8,
        "prompt_lookup_max": 8,
        "prompt_lookup_min": 2,
    }
    assert args.extra == {"use_v2_block_manager": True}
    notes = parse_command(deployment.serve_command or "").notes
    assert any(n.startswith("--use-v2-block-manager is a removed vLLM flag") for n in notes)
    assert any(n.startswith("--speculative-model is a removed vLLM flag") for n in notes)


def test_case_club3090_env_flags(shared_dir: Path) -> None:
    args = engine_args_for(_case_deployment(shared_dir, "club3090-356-tp2-no-p2p"))
    assert args.tensor_parallel_size == 2
    assert args.disable_custom_all_reduce is True
    assert args.env == {"NCCL_P2P_DISABLE": "1"}
    assert args.extra == {}


def test_case_miaai_free_text_speculative_config(shared_dir: Path) -> None:
    args = engine_args_for(_case_deployment(shared_dir, "miaai-122-hybrid-kv-fixed-cost"))
    assert args.speculative_config == "DFlash2 draft, k=7, draft TP2"  # kept as the user wrote it
    assert (args.max_model_len, args.max_num_seqs, args.max_num_batched_tokens) == (262144, 4, 2048)
    assert args.gpu_memory_utilization == pytest.approx(0.78)
    assert args.model == "GLM-5.3-Flash"


def test_case_11345_command_plus_flags(shared_dir: Path) -> None:
    args = engine_args_for(_case_deployment(shared_dir, "vllm-11345-1p1d-disagg-l40s"))
    assert args.model == "Qwen/Qwen2.5-7B-Instruct"
    assert args.gpu_memory_utilization == pytest.approx(0.6)
    assert args.kv_transfer_config == {"kv_buffer_size": 10_000_000_000}


def test_case_7604_flags_only(shared_dir: Path) -> None:
    args = engine_args_for(_case_deployment(shared_dir, "vllm-7604-chunked-prefill-40k-offline"))
    assert (args.enable_chunked_prefill, args.max_num_batched_tokens, args.tensor_parallel_size) == (True, 4096, 8)
    assert args.trust_remote_code is True


# --- command shapes --------------------------------------------------------------------------


def test_env_continuations_quotes_and_aliases() -> None:
    cmd = (
        "CUDA_VISIBLE_DEVICES=0,1 NCCL_P2P_DISABLE=1 vllm serve Qwen/Qwen2.5-32B-Instruct \\\n"
        "  -tp 2 --max_model_len=64k --kv-cache-dtype fp8 \\\n"
        "  --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 5}' \\\n"
        "  --served-model-name qwen qwen-32b --port 8001"
    )
    deployment = parse_serve_command(cmd)
    assert deployment.model == "Qwen/Qwen2.5-32B-Instruct"
    assert deployment.num_gpus == 2
    assert deployment.serve_command == cmd
    args = engine_args_for(deployment)
    assert args.tensor_parallel_size == 2
    assert args.max_model_len == 64_000  # vLLM: k is decimal
    assert args.kv_cache_dtype == "fp8"
    assert args.speculative_config == {"method": "ngram", "num_speculative_tokens": 5}
    assert args.served_model_name == ["qwen", "qwen-32b"]
    assert args.port == 8001
    assert args.env == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1"}


def test_python_module_launcher_and_export() -> None:
    cmd = (
        "export VLLM_ATTENTION_BACKEND=FLASHINFER && python3 -m vllm.entrypoints.openai.api_server "
        "--model meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --pipeline-parallel-size 2 "
        "--quantization fp8 --enable-chunked-prefill False --disable-log-requests --swap-space 16"
    )
    deployment = parse_serve_command(cmd)
    assert deployment.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert deployment.num_gpus == 8
    assert deployment.quantization == "fp8"
    args = engine_args_for(deployment)
    assert args.enable_chunked_prefill is False  # V0 style explicit value
    assert args.disable_log_requests is True
    assert args.swap_space == 16.0
    assert args.attention_backend == "FLASHINFER"  # from the env var older versions used
    assert args.env["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"


def test_docker_launcher() -> None:
    cmd = (
        "docker run --gpus all -e HF_TOKEN=abc --env VLLM_USE_V1=1 -p 8000:8000 --ipc=host "
        "vllm/vllm-openai:v0.8.5 --model mistralai/Mistral-7B-Instruct-v0.3 -dp 2 --max-num-seqs 128"
    )
    deployment = parse_serve_command(cmd)
    assert deployment.model == "mistralai/Mistral-7B-Instruct-v0.3"
    assert deployment.num_gpus == 2
    args = engine_args_for(deployment)
    assert args.data_parallel_size == 2 and args.max_num_seqs == 128
    assert args.env == {"HF_TOKEN": "abc", "VLLM_USE_V1": "1"}


def test_bare_flags_and_cuda_visible_devices_only() -> None:
    args = _args("--tensor-parallel-size 2 --max-num-batched-tokens 32K")
    assert args.max_num_batched_tokens == 32_768  # K is binary
    assert args.model is None
    assert parse_serve_command("CUDA_VISIBLE_DEVICES=3 vllm serve m").num_gpus == 1


def test_booleans_and_negation() -> None:
    args = _args(
        "vllm serve m --no-enable-prefix-caching --enforce-eager --enable-chunked-prefill=false "
        "--async-scheduling --no-disable-custom-all-reduce"
    )
    assert args.enable_prefix_caching is False
    assert args.enforce_eager is True
    assert args.enable_chunked_prefill is False
    assert args.async_scheduling is True
    assert args.disable_custom_all_reduce is False


def test_compilation_flags() -> None:
    new_style = _args("vllm serve m -O3 -cc.cudagraph_mode=FULL_DECODE_ONLY -cc.cudagraph_capture_sizes+ 1,2")
    assert new_style.extra["optimization_level"] == 3
    assert new_style.compilation_config == {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [1, 2]}
    old_style = _args("vllm serve m -O '{\"level\": 3, \"cudagraph_capture_sizes\": [1, 2, 4]}'")
    assert old_style.compilation_config == {"level": 3, "cudagraph_capture_sizes": [1, 2, 4]}
    dotted = _args("vllm serve m --compilation-config.pass_config.fuse_norm_quant true --cuda-graph-sizes 1 2 4 8")
    assert dotted.compilation_config == {"pass_config": {"fuse_norm_quant": True}}
    assert dotted.cuda_graph_sizes == [1, 2, 4, 8]


def test_human_readable_and_auto_values() -> None:
    assert _args("vllm serve m --max-model-len 1M").max_model_len == 1_048_576
    assert _args("vllm serve m --max-model-len 25.6k").max_model_len == 25_600
    assert _args("vllm serve m --max-model-len auto").max_model_len == -1
    assert _args("vllm serve m --max-model-len -1").max_model_len == -1
    assert _args("vllm serve m --kv-cache-memory-bytes 8G").kv_cache_memory_bytes == 8 * 2**30


def test_unknown_flags_are_kept_raw() -> None:
    cmd = "vllm serve m --enable-auto-tool-choice --tool-call-parser hermes --brand-new-flag 7 --another-switch --multi a b"
    parsed = parse_command(cmd)
    args = _args(cmd)
    assert args.extra["brand_new_flag"] == "7"
    assert args.extra["another_switch"] is True
    assert args.extra["multi"] == ["a", "b"]
    assert args.extra["enable_auto_tool_choice"] is True and args.extra["tool_call_parser"] == "hermes"
    assert any("--brand-new-flag" in n for n in parsed.notes)


def test_flags_merge_command_wins() -> None:
    deployment = Deployment(
        serve_command="vllm serve m --max-num-seqs 64",
        flags={"max_num_seqs": 256, "--max-num-batched-tokens": "16k", "tp": 2, "VLLM_USE_V1": 0, "cuda_graph_sizes": "1,2"},
    )
    args = engine_args_for(deployment)
    assert args.max_num_seqs == 64
    assert args.max_num_batched_tokens == 16_000
    assert args.tensor_parallel_size == 2
    assert args.cuda_graph_sizes == [1, 2]
    assert args.env == {"VLLM_USE_V1": "0"}


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cmd,message",
    [
        ("vllm serve m --max-num-seqs abc", "flag --max-num-seqs: expected an integer, got 'abc'"),
        ("vllm serve m --gpu-memory-utilization high", "flag --gpu-memory-utilization: expected a number, got 'high'"),
        ("vllm serve m --enforce-eager=maybe", "flag --enforce-eager: expected true or false, got 'maybe'"),
        ("vllm serve m --max-model-len 1.5K", "flag --max-model-len: expected an integer (decimals are not allowed"),
        ("vllm serve m --max-model-len", "flag --max-model-len: expected a value"),
        ("vllm serve m --port --host 0.0.0.0", "flag --port: expected a value, got '--host'"),
        ("vllm serve m --speculative-config '{\"a\": 1}", "cannot split the serve command into words"),
        ("llamafactory-cli api --model m", "not a serve command"),
        ("   ", "the serve command is empty"),
    ],
)
def test_bad_commands(cmd: str, message: str) -> None:
    with pytest.raises(UsageError) as err:
        engine_args_for(parse_serve_command(cmd))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_bad_flag_values_in_flags_dict() -> None:
    with pytest.raises(AdvisorError, match=re.escape("flag --max-num-seqs: expected an integer, got 'lots'")):
        engine_args_for(Deployment(flags={"max_num_seqs": "lots"}))
    with pytest.raises(AdvisorError, match="expected true or false"):
        engine_args_for(Deployment(flags={"enforce_eager": "sometimes"}))


# --- the flag table itself -------------------------------------------------------------------


_SAMPLES = {"int": "8", "hint": "8k", "hint_auto": "auto", "float": "0.9", "str": "x", "bool": "true",
            "json": '{"a": 1}', "ints": "1 2", "strs": ["a"]}


@pytest.mark.parametrize("spec", FLAG_SPECS, ids=lambda s: s.flag)
def test_every_flag_coerces_into_engine_args(spec) -> None:
    value = coerce_value(spec, _SAMPLES[spec.kind])
    args = engine_args_for(Deployment(flags={spec.field: value}))
    if spec.speculative_key:
        assert args.speculative_config == {spec.speculative_key: value}
    elif spec.field in EngineArgs.model_fields:
        assert getattr(args, spec.field) == value
    else:
        assert args.extra[spec.field] == value
    assert lookup_flag(spec.flag) is spec and all(lookup_flag(a) is spec for a in spec.aliases)


def test_human_readable_flags_match_vllm_docs(shared_dir: Path) -> None:
    """The CLI guide lists which flags take 1k / 1K suffixes; the table must agree."""
    guide = (shared_dir / "corpus/vllm-docs/cli/README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in guide.splitlines() if "Supported arguments include" in ln]
    listed = re.findall(r"`(--[a-z-]+)`", line)
    assert "--max-model-len" in listed and "--max-num-batched-tokens" in listed
    known = [lookup_flag(f) for f in listed if lookup_flag(f) is not None]
    assert len(known) >= 3
    assert all(spec.kind in ("hint", "hint_auto") for spec in known)


def test_short_aliases_match_vllm_docs(shared_dir: Path) -> None:
    """Short flags used in the shipped docs (``-tp``, ``-dp``, ``-dcp``, ``-q``, ``-cc``, ``-ac``) resolve."""
    docs = "\n".join(p.read_text(encoding="utf-8") for p in (shared_dir / "corpus/vllm-docs").rglob("*.md"))
    used = set(re.findall(r"(?<![\w-])(-(?:tp|pp|dp|dcp|q|cc|ac))[ =.`]", docs))
    assert {"-tp", "-dp", "-cc"} <= used
    for alias in used:
        assert lookup_flag(alias) is not None, alias
    assert lookup_field("tp") is lookup_flag("--tensor-parallel-size")


# --- every serve command in the shipped vLLM docs ------------------------------------------


def _doc_serve_commands(docs: Path) -> list[tuple[str, str]]:
    """``vllm serve`` commands from the docs' code blocks, continuation lines joined (also across
    lines inside a quoted JSON argument)."""
    import shlex

    def complete(cmd: str) -> bool:
        try:
            shlex.split(re.sub(r"(?<=\s)\$'", "'", cmd))
            return True
        except ValueError:
            return False

    out = []
    for page in sorted(docs.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            if re.match(r"^(\w+=\S+ )*vllm serve\b", line):
                cmd = line
                while (cmd.endswith("\\") or not complete(cmd)) and i + 1 < len(lines):
                    i += 1
                    cmd = (cmd[:-1] if cmd.endswith("\\") else cmd + "\n") + " " + lines[i].strip()
                if complete(cmd):  # two are embedded in YAML strings and never close their quote
                    out.append((f"{page.name}:{i + 1}", cmd))
            i += 1
    return out


def test_every_serve_command_in_vllm_docs_parses(shared_dir: Path) -> None:
    commands = _doc_serve_commands(shared_dir / "corpus/vllm-docs")
    assert len(commands) >= 300
    with_model = 0
    for where, cmd in commands:
        try:
            deployment = parse_serve_command(cmd)
            engine_args_for(deployment)
        except AdvisorError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"{where}: {exc}")
        with_model += deployment.model is not None
    assert with_model >= 0.9 * len(commands)
    # a multi-line JSON argument, a shell variable and a "2>&1 | tee" tail, from the docs
    sky = [c for w, c in commands if "$SKYPILOT_NUM_GPUS_PER_NODE" in c][0]
    args = engine_args_for(parse_serve_command(sky))
    assert args.tensor_parallel_size is None
    assert args.extra["tensor_parallel_size"] == "$SKYPILOT_NUM_GPUS_PER_NODE"
    assert parse_serve_command(sky).num_gpus is None
    multi = [c for w, c in commands if "--kv-transfer-config '{\n" in c]
    assert len(multi) >= 5
    assert all(isinstance(engine_args_for(parse_serve_command(c)).kv_transfer_config, dict) for c in multi)


# --- other engines' commands -------------------------------------------------------------------


def test_sglang_command_maps_to_vllm_flags() -> None:
    cmd = ("CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct "
           "--tp 2 --chunked-prefill-size 4096 --mem-fraction-static 0.85 --max-running-requests 64 "
           "--context-length 32768 --disable-radix-cache --schedule-policy lpm")
    parsed = parse_command(cmd)
    assert parsed.engine == "sglang"
    args = engine_args_for(Deployment(serve_command=cmd))
    assert args.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert (args.tensor_parallel_size, args.max_num_batched_tokens, args.max_num_seqs, args.max_model_len) == (2, 4096, 64, 32768)
    assert args.gpu_memory_utilization == 0.85 and args.enable_prefix_caching is False
    assert args.extra["sglang_schedule_policy"] == "lpm"
    assert any("--chunked-prefill-size -> --max-num-batched-tokens" in m for m in parsed.mapped)
    assert parse_serve_command(cmd).engine == "sglang" and parse_serve_command(cmd).num_gpus == 2


def test_sglang_chunked_prefill_off_and_tgi_command() -> None:
    args = engine_args_for(Deployment(serve_command="python -m sglang.launch_server --model-path m --chunked-prefill-size -1"))
    assert args.enable_chunked_prefill is False and args.max_num_batched_tokens is None
    cmd = ("docker run --gpus all -p 8080:80 ghcr.io/huggingface/text-generation-inference:2.4 --model-id Qwen/Qwen2.5-7B "
           "--num-shard 2 --max-batch-prefill-tokens 8192 --max-total-tokens 16384 --max-concurrent-requests 128")
    parsed = parse_command(cmd)
    assert parsed.engine == "tgi"
    args = engine_args_for(Deployment(serve_command=cmd))
    assert (args.model, args.tensor_parallel_size, args.max_num_batched_tokens, args.max_model_len) == ("Qwen/Qwen2.5-7B", 2, 8192, 16384)
    assert args.extra["tgi_max_concurrent_requests"] == "128"
    args = engine_args_for(Deployment(serve_command="text-generation-launcher --model-id m --quantize awq --max-batch-size 32"))
    assert (args.quantization, args.max_num_seqs) == ("awq", 32)


def test_profile_flags_of_sglang_and_tgi_read_as_vllms() -> None:
    """A profile saying ``engine: sglang`` writes SGLang's flag names under ``flags``: they set the
    vLLM quantities they correspond to, as in a command; vLLM names and environment variables stay
    as they are, and a command, when given, wins."""
    flags = {"tp": 4, "chunked_prefill_size": 256, "max_running_requests": 32, "--mem-fraction-static": 0.88,
             "disable_radix_cache": True, "enable_dp_attention": True, "max_model_len": 8192, "SGLANG_FOO": "1"}
    args = engine_args_for(Deployment(engine="sglang", model="m", flags=flags))
    assert (args.tensor_parallel_size, args.max_num_batched_tokens, args.max_num_seqs) == (4, 256, 32)
    assert args.gpu_memory_utilization == 0.88 and args.enable_prefix_caching is False and args.max_model_len == 8192
    assert args.extra["sglang_enable_dp_attention"] is True and args.env["SGLANG_FOO"] == "1"
    assert engine_args_for(Deployment(engine="sglang", flags={"chunked_prefill_size": -1})).enable_chunked_prefill is False
    assert engine_args_for(Deployment(engine="sglang", flags={"disable_radix_cache": False})).enable_prefix_caching is None
    both = Deployment(engine="sglang", serve_command="python -m sglang.launch_server --model-path m --tp 2", flags={"tp": 8})
    assert engine_args_for(both).tensor_parallel_size == 2
    tgi = engine_args_for(Deployment(engine="tgi", flags={"num_shard": 2, "max_batch_prefill_tokens": 4096, "max_batch_size": 16}))
    assert (tgi.tensor_parallel_size, tgi.max_num_batched_tokens, tgi.max_num_seqs) == (2, 4096, 16)
    # the same names under vLLM are not vLLM's: kept aside, nothing typed
    assert engine_args_for(Deployment(engine="vllm", flags={"chunked_prefill_size": 256})).max_num_batched_tokens is None


def test_vllm_docker_command_still_vllm() -> None:
    cmd = ('docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface '
           '--env "HF_HUB_OFFLINE=1" -p 8000:8000 --ipc=host vllm/vllm-openai:latest --model mistralai/Mistral-7B-v0.1 -tp 2')
    parsed = parse_command(cmd)
    assert parsed.engine == "vllm" and parsed.model == "mistralai/Mistral-7B-v0.1" and parsed.env["HF_HUB_OFFLINE"] == "1"


def test_trtllm_serve_and_lmdeploy_commands_map_to_vllm_flags() -> None:
    """TensorRT-LLM writes its flags with underscores; LMDeploy starts with three words. Both set
    the batch cap, the step budget and the context length that vLLM's scheduler model reads."""
    cmd = ("CUDA_VISIBLE_DEVICES=0,1 trtllm-serve serve meta-llama/Llama-3.1-70B-Instruct --backend pytorch --tp_size 2 "
           "--max_batch_size 8 --max_num_tokens 2048 --max_seq_len 4096 --kv_cache_free_gpu_memory_fraction 0.9 --ep_size 2")
    parsed = parse_command(cmd)
    assert parsed.engine == "tensorrt-llm" and parsed.env["CUDA_VISIBLE_DEVICES"] == "0,1" and "free_fraction" in parsed.approx
    args = engine_args_for(Deployment(serve_command=cmd))
    assert args.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert (args.tensor_parallel_size, args.max_num_seqs, args.max_num_batched_tokens, args.max_model_len) == (2, 8, 2048, 4096)
    assert args.gpu_memory_utilization == 0.9 and args.extra["tensorrtllm_backend"] == "pytorch" and args.extra["tensorrtllm_ep_size"] == "2"
    assert engine_args_for(Deployment(serve_command="trtllm-serve m --max_batch_size=16")).max_num_seqs == 16
    cmd = "lmdeploy serve api_server internlm/internlm2-chat-7b --tp 2 --max-batch-size 64 --session-len 8192 --cache-max-entry-count 0.5 --quant-policy 8 --server-port 23333"
    parsed = parse_command(cmd)
    assert parsed.engine == "lmdeploy"
    args = engine_args_for(Deployment(serve_command=cmd))
    assert (args.model, args.tensor_parallel_size, args.max_num_seqs, args.max_model_len) == ("internlm/internlm2-chat-7b", 2, 64, 8192)
    assert args.gpu_memory_utilization == 0.5 and args.extra["lmdeploy_quant_policy"] == "8"
    assert parse_serve_command(cmd).num_gpus == 2


def test_profile_flags_of_trtllm_and_lmdeploy_read_as_vllms() -> None:
    trt = engine_args_for(Deployment(engine="TensorRT-LLM", flags={"max_batch_size": 128, "max_num_tokens": 1024, "tp_size": 8, "backend": "pytorch"}))
    assert (trt.max_num_seqs, trt.max_num_batched_tokens, trt.tensor_parallel_size) == (128, 1024, 8)
    assert engine_args_for(Deployment(engine="trtllm", flags={"max_num_tokens": 512})).max_num_batched_tokens == 512
    lmd = engine_args_for(Deployment(engine="lmdeploy", flags={"max_batch_size": 4, "max_prefill_token_num": 4096, "tp": 2}))
    assert (lmd.max_num_seqs, lmd.max_num_batched_tokens, lmd.tensor_parallel_size) == (4, 4096, 2)


def test_an_engine_field_selects_its_flag_table_however_it_is_spelled() -> None:
    """The answer names TensorRT-LLM for "TRT_LLM" or "tensorrt llm" (report_facts); its flags must map too."""
    from vllm_advisor.diagnosis.report_facts import engine_display_name

    for spelling in ("TRT_LLM", "tensorrt llm", "TensorRT_LLM", "trt llm"):
        assert engine_display_name(spelling) == "TensorRT-LLM"
        assert engine_args_for(Deployment(engine=spelling, flags={"max_batch_size": 8})).max_num_seqs == 8
    for spelling in ("text-generation-inference", "Text Generation Launcher"):
        assert engine_args_for(Deployment(engine=spelling, flags={"max_batch_prefill_tokens": 2048})).max_num_batched_tokens == 2048
