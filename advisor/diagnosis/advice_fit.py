"""Does a change fit this deployment? The generic changes of a cause (causes.py) checked against what
the deployment already is, before anyone reads them.

WHY: two reviews of 60 answers found advice that contradicts the user's own setup in about one in
three (the fp8 KV cache to a deployment that already runs it, ``--gpu-memory-utilization 0.95`` to
one at 0.955, a TP-to-replicas swap for a model that cannot fit on one GPU, "PCIe" advice on NVLink,
FlashInfer on a V100, ``pip install vllm==...`` to users of other engines, flags that the user's
vLLM release does not have). Each rule reads typed inputs only (the engine arguments, the catalog's
GPU, the performance model's memory, the version); the words of a dropped flag stay when they still
say something true, and a change that cannot help this deployment is dropped.
"""

from __future__ import annotations

import re

from ..schema import Recommendation
from ..schema.message import msg
from .inputs import DiagnosisInputs
from .causes import WEIGHT_QUANT_FLAG
from .deciding import fitted_command
from .report_facts import (
    _A, _Z, BENCH_TOOL, HF_TRANSFORMERS, THROUGHPUT_FORMULA, catalog_gpu, compute_capability, engine_named_in_text, fp8_weights_unsupported, highest_concurrency, in_process_engine, kv_dtypes_compared,
    offline_run, platform_named, portable_attention_set, PREFIX_REUSE_WORDS, RANDOM_PROMPT_HITS_PCT, prefix_caching_on, prefix_hit_pct, prefix_reuse_missing, prompts_share_nothing, requests_serialised, transformers_loop, weights_quantised, words_say,
)

#: The first vLLM release that has a flag or command (conservative: a release known to have it). A
#: deployment on an older release gets the change's words without the flag.
FLAG_SINCE: tuple[tuple[str, tuple[int, int]], ...] = (
    ("--api-server-count", (0, 9)),
    ("vllm bench serve", (0, 9)),
    ("--data-parallel-size", (0, 9)),
    ("--attention-backend", (0, 11)),
    ("--compilation-config", (0, 7)),
    ("--kv-transfer-config", (0, 7)),
    ("--quantization fp8", (0, 5)),
    ("--kv-cache-dtype fp8", (0, 4)),
)

#: "quantised is slower than 16-bit": the unfused dequantisation path, not the memory bound.
QUANT_SLOWER = re.compile(
    r"(int[48]|4[- ]?bit|8[- ]?bit|awq|gptq|gguf|quantiz|quantis|w[48]a16|量化)[^。.\n]{0,80}(slower|not faster|no faster|no speed|慢|没有加速|没加速|并没有更快|反而)"
    r"|(slower|慢)[^。.\n]{0,40}(than|比)[^。.\n]{0,20}(fp16|bf16|16[- ]?bit|原始|非量化|未量化)",
    re.I,
)


#: A memory fraction the report's words give ("gpu_memory_utilization 0.9555", "--mem-fraction-static 0.95").
MEMORY_FRACTION_IN_TEXT = re.compile(r"(?:gpu[-_ ]memory[-_ ]utili[sz]ation|mem[-_]fraction[-_]static)\D{0,4}(0?\.\d+|1\.0*(?!\d))", re.I)


def memory_fraction_in_use(inputs: DiagnosisInputs) -> float | None:
    """The highest GPU memory fraction the deployment is known to run at: the engine argument, or a
    value the report's words give when the serve command did not (a reviewer found 0.95 offered to a
    user whose notes said 0.9555)."""
    said = [float(m.group(1)) for m in MEMORY_FRACTION_IN_TEXT.finditer(inputs.text or "")]
    values = [v for v in (inputs.engine_args.gpu_memory_utilization, *said) if v is not None and 0 < v <= 1]
    return max(values) if values else None


def vllm_release(inputs: DiagnosisInputs) -> tuple[int, int] | None:
    """(major, minor) of the vLLM release given, None when none is given or it does not parse."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", inputs.deployment.vllm_version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


VERSION_IN_TEXT = re.compile(r"(?<![\d.])v?(0\.\d{1,2}\.\d{1,2}(?:\.post\d)?)(?![\d.])")
#: Packages whose 0.x releases a report names beside vLLM's (a reviewer's find: "pip install vllm==0.6.12"
#: offered where 0.6.12 was the FlashInfer release).
OTHER_PACKAGE_BEFORE = re.compile(
    r"(flashinfer|flash[-_ ]?attn|flash[- ]attention|torch|pytorch|transformers|triton|xformers|sglang|lmcache|nccl|cuda|driver|python|ray|"
    r"lmdeploy|ollama|mlx|omlx|llama\.cpp|tensorrt|trt-llm|tgi|deepgemm|aiter|vllm-ascend|vllm_ascend|nixl|ucx|dynamo|aibrix|guidellm)[^\n,;]{0,12}$",
    re.I,
)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split(".post")[0]))


#: The words tell of a change of release: an upgrade, a regression, an older or newer version.
RELEASE_CHANGE_WORDS = re.compile(
    r"upgrad|updat|downgrad|regress|(?:new|old)(?:er)?\s+(?:version|release|build)|previous\s+(?:version|release)|since\s+v?\d|after\s+(?:the\s+)?(?:upgrade|update|bump)"
    r"|升级|更新|降级|回退|新版|旧版|老版本|之前的版本|换了版本",
    re.I,
)


#: A release as reports name one: with its "v" ("v0.3", "v1.2.1") or in three parts ("0.10.1").
RELEASES_NAMED = re.compile(r"(?<![\w.])v\d+\.\d+(?:\.\d+)*(?![\d.])|(?<![\w.])\d+\.\d+\.\d+(?![\d.])", re.I)


def release_change_in_view(inputs: DiagnosisInputs) -> bool:
    """The report speaks of a change of release (its words, or two releases named): "pin the previous
    version and bisect" answers it; without one it asked a user who never upgraded to bisect."""
    return words_say(RELEASE_CHANGE_WORDS, inputs) or len(set(RELEASES_NAMED.findall(inputs.text or ""))) >= 2


def previous_release(inputs: DiagnosisInputs) -> str | None:
    """The release the user compares against: the oldest one their words name below the version they
    run (``0.21.0`` in "fast on v0.21.0, slow on v0.23.0"; ``0.5.0`` in "slower with each release,
    0.5.0 -> 0.5.4 -> 0.6.2"); None when the words name none."""
    current = inputs.deployment.vllm_version
    text = inputs.text or ""
    # a version right after another package's name is that package's ("FlashInfer 0.6.12", "torch 2.5.1")
    named = {m.group(1) for m in VERSION_IN_TEXT.finditer(text) if not OTHER_PACKAGE_BEFORE.search(text[max(0, m.start() - 24) : m.start()])}
    if not current or not named:
        return None
    older = [v for v in named if _key(v) < _key(current)]
    return min(older, key=_key) if older else None


def experts_in_host_memory(inputs: DiagnosisInputs) -> bool:
    """KTransformers keeps a MoE's experts in host memory and computes them on the CPUs: decode reads
    them from DDR, so GPU memory, more GPUs or replicas are not what bounds it (reviewers: 4 of 16
    Chinese answers called it GPU-memory-bound and offered more GPUs)."""
    return (inputs.deployment.engine or "").strip().lower() == "ktransformers" or engine_named_in_text(inputs.text) == "KTransformers"


def engine_is_vllm(inputs: DiagnosisInputs) -> bool:
    """The engine is vLLM, on whatever accelerator (a vendor plugin such as vllm-ascend keeps vLLM's
    commands, metrics and log lines)."""
    return inputs.deployment.is_vllm and engine_named_in_text(inputs.text) is None


def on_vllm(inputs: DiagnosisInputs) -> bool:
    """The report is about vLLM itself (not another engine given or named, not a vendor plugin)."""
    return engine_is_vllm(inputs) and platform_named(inputs) is None


def vllm_evident(inputs: DiagnosisInputs) -> bool:
    """Something the user gave says vLLM runs: the engine, a vLLM version, a serve command or engine
    flags, or the word itself. A report that never names vLLM (an upgraded chat app over transformers,
    say) is not told to pin a vLLM wheel (a reviewer's find, session 14)."""
    dep = inputs.deployment
    return bool(dep.engine or dep.vllm_version or dep.serve_command or dep.flags or re.search(_A + r"vllm", inputs.text or "", re.I))


#: ``--name value`` pairs of a change's flag (``-tp`` is vLLM's short form of the TP size).
_FLAG_PAIR = re.compile(r"(?:^|\s)(--[a-z][a-z0-9-]*|-tp)\s+([^\s'<-][^\s']*)")
_SHORT_FLAGS = {"-tp": "tensor_parallel_size"}
#: What vLLM runs when the flag is not given (only where it is the same in every release). Not the KV
#: dtype: a report that names its fp8 KV cache only in words sets no flag, and needs ``auto`` to go back.
_UNSET_MEANS = {"tensor_parallel_size": 1, "data_parallel_size": 1, "pipeline_parallel_size": 1}


def already_runs(flag: str, args, resolved=None) -> bool:
    """Every ``--name value`` of the change's flag is what the deployment runs now (``--kv-cache-dtype
    auto`` to a deployment that set it, ``--max-num-batched-tokens 8192`` to one at 8192):
    a reviewer's find, advice that repeats the user's own setting. ``resolved``: the engine model's
    configuration, whose value counts where it is the given release's default (a reviewer's find:
    8192 advised to a release whose default it is). Commands and placeholders never match."""
    pairs = _FLAG_PAIR.findall(flag) if flag.startswith("-") else []
    for name, value in pairs:
        field = _SHORT_FLAGS.get(name, name[2:].replace("-", "_"))
        current = getattr(args, field, None) if field in type(args).model_fields else None
        if current is None and resolved is not None and resolved.source_of(field) == "default":
            current = getattr(resolved, field, None)
        current = _UNSET_MEANS.get(field) if current is None else current
        if current is None or str(current).lower() != value.lower():
            return False
    return bool(pairs)


#: An AMD GPU the catalog may lack ("MI250", "Radeon", "RX 7900", "gfx1100") or its software stack.
AMD_NAMED = re.compile(_A + r"(?:mi\d{3}[a-z]?|rx\s?\d{4}|gfx\d{3,4}|w7900)" + _Z + r"|radeon|rocm|instinct", re.I)


#: Words of a quantised KV cache ("fp8 kv", "kv int8", "q8_0 cache", "quant_policy").
QUANTISED_KV_WORDS = re.compile(r"fp8|int8|int4|q8|q4|quant", re.I)


def not_nvidia(inputs: DiagnosisInputs, gpu) -> bool:
    """The accelerator is known not to be NVIDIA's: an AMD GPU of the catalog or named (given as the
    GPU, or in the words when no GPU of the catalog is given), or another platform named."""
    if gpu is not None:
        return gpu.vendor != "nvidia"
    return platform_named(inputs) is not None or bool(AMD_NAMED.search(f"{inputs.deployment.gpu or ''}\n{inputs.text}"))


def caching_by_default(inputs: DiagnosisInputs, release: tuple[int, int] | None) -> bool:
    """The engine caches prefixes unless told not to: vLLM V1 (0.8 on; a release not given is taken
    as current), SGLang's radix cache; the user set nothing about it."""
    if inputs.engine_args.enable_prefix_caching is not None:
        return False
    if (inputs.deployment.engine or "").strip().lower() == "sglang":
        return True
    return on_vllm(inputs) and (release is None or release >= (0, 8))


def _too_new(flag: str, release: tuple[int, int] | None) -> bool:
    return release is not None and any(flag.startswith(name) or f" {name}" in flag for name, since in FLAG_SINCE if release < since)


#: "72B", "1.5B", "550b" in a model's name: its parameter count, when the catalog lacks the model.
PARAMS_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![A-Za-z])")


def _weights_fit_one_gpu(inputs: DiagnosisInputs, gpu) -> bool | None:
    """The weights of one TP-1 replica fit one GPU's share of memory: from the performance model, or
    for a model the catalog lacks from the parameter count in its name (2 bytes each, 1 or 0.5 when
    the name says 8 or 4 bits); None when neither is known. ``gpu``: the catalog's GPU, or None."""
    e = inputs.engine
    if e is not None:
        return e.memory.weights_gib * e.config.tensor_parallel_size < e.memory.requested_gib
    name = inputs.deployment.model or ""
    m = PARAMS_IN_NAME.search(name)
    if gpu is None or m is None:
        return None
    per_param = 0.5 if re.search(r"awq|gptq|int4|4[- ]?bit|q4|nvfp4|mxfp4", name, re.I) else 1.0 if re.search(r"fp8|int8|8[- ]?bit|q8", name, re.I) else 2.0
    return float(m.group(1)) * 1e9 * per_param < 0.9 * gpu.memory_bytes


def _gpus(inputs: DiagnosisInputs) -> int | None:
    """The deployment's GPUs: the performance model's, else the case's; None when not given."""
    return inputs.engine.num_gpus if inputs.engine is not None else inputs.deployment.num_gpus


def _nvlink(inputs: DiagnosisInputs, gpu) -> bool:
    if inputs.deployment.interconnect:
        return inputs.deployment.interconnect.lower() == "nvlink"
    return gpu is not None and gpu.interconnect == "nvlink"


def _reworded(rec: Recommendation, inputs: DiagnosisInputs) -> None:
    """Changes whose words depend on the deployment, before the rules below read them."""
    if rec.flag == WEIGHT_QUANT_FLAG and (weights_quantised(inputs) or fp8_weights_unsupported(inputs)):
        # already quantised, or no FP8 tensor cores: no flag, and words that do not ask to quantise
        rec.flag, rec.change = None, msg("rec.decode_bandwidth_quantised")
    if rec.change.id in ("rec.decode_bandwidth_1", "rec.decode_bandwidth_quantised") and experts_in_host_memory(inputs):
        rec.flag, rec.change = None, msg("rec.decode_bandwidth_host")  # the experts are read from DDR, not from the GPUs
    if rec.change.id == "rec.cpu_frontend_1" and offline_run(inputs):  # no API server to scale out
        rec.flag, rec.change = None, msg("rec.cpu_frontend_offline")
    elif rec.change.id == "rec.cpu_frontend_1" and in_process_engine(inputs):  # the user's own process drives the engine
        rec.flag, rec.change = None, msg("rec.cpu_frontend_in_process")
    elif rec.change.id == "rec.cpu_frontend_1" and not on_vllm(inputs):  # another engine: no --api-server-count
        rec.flag, rec.change = None, msg("rec.cpu_frontend_other_engine")
    if rec.change.id == "rec.cuda_graph_1" and not inputs.engine_args.enforce_eager:
        rec.change = msg("rec.cuda_graph_sizes")  # "drop --enforce-eager" only to a user who set it
    if rec.change.id == "rec.prefix_cache_1" and prompts_share_nothing(inputs) and (prefix_hit_pct(inputs) or 0.0) < RANDOM_PROMPT_HITS_PCT:
        # random prompts: no hits is a working cache; the test that shows it work shares a prefix
        rec.flag, rec.change = None, msg("rec.prefix_cache_random")
    elif rec.change.id == "rec.prefix_cache_1" and prefix_reuse_missing(inputs):
        # hits are missing, not inflated: "measure with fresh prompts" answers the opposite complaint
        rec.flag, rec.change = None, msg("rec.prefix_cache_no_hits")
    if rec.change.id == "rec.memory_config_1" and inputs.engine is not None and inputs.engine.config.enable_chunked_prefill:
        rec.change = msg("rec.memory_config_chunked")  # chunked prefill already on: not a change to make
    if rec.change.id == "rec.queueing_1" and requests_serialised(inputs):
        rec.flag, rec.change = None, msg("rec.queueing_serialised")  # the queue is made by what serialises the requests
    if rec.change.id == "rec.benchmark_methodology_1" and not words_say(THROUGHPUT_FORMULA, inputs):
        # no throughput formula in the words: check what the benchmark times, with the standard
        # client only for a vLLM user who has not named the one they measured with
        rec.change = msg("rec.benchmark_methodology_check")
        if words_say(BENCH_TOOL, inputs) or not on_vllm(inputs):
            rec.flag = None
    if rec.change.id == "rec.version_regression_1" and not release_change_in_view(inputs):
        rec.flag, rec.change = None, msg("rec.version_regression_compare")  # no upgrade to undo: compare releases
    if rec.change.id == "rec.benchmark_methodology_check" and offline_run(inputs):
        rec.change = msg("rec.benchmark_methodology_offline")  # no stream, no client: what generate() timing includes
    if rec.change.id in ("rec.attention_backend_1", "rec.attention_backend_check") and portable_attention_set(inputs):
        rec.flag, rec.change = "--attention-backend FLASH_ATTN", msg("rec.attention_backend_default")  # undo the user's own setting
    if rec.change.id == "rec.spec_decode_1" and (highest_concurrency(inputs) or 99) <= 2:
        # one or two streams: "off at high concurrency" does not apply; the drafts or the drafter's cost do
        rec.change = msg("rec.spec_decode_low_load")


def fit_to_deployment(rec: Recommendation, inputs: DiagnosisInputs) -> Recommendation | None:
    """The change as this deployment should read it, or None when it cannot help here."""
    _reworded(rec, inputs)
    args, flag = inputs.engine_args, rec.flag or ""
    change = rec.change.id
    gpu, release = catalog_gpu(inputs), vllm_release(inputs)
    if flag.startswith("--kv-cache-dtype fp8") and (args.kv_cache_dtype or "").startswith("fp8"):
        return None  # already an fp8 KV cache
    if change in ("rec.memory_config_1", "rec.memory_config_chunked") and (memory_fraction_in_use(inputs) or 0) >= 0.95:
        rec.flag, rec.whatif = None, []  # never a value at or below one the user already runs
    if flag.startswith("--attention-backend") and ((compute_capability(gpu) or 8.0) < 7.5 or (args.attention_backend or "").upper() in flag.upper()):
        return None  # FlashInfer needs Turing or newer; or it is the backend already in use
    if change == "rec.tp_comm_1":
        gpus = _gpus(inputs)
        if _weights_fit_one_gpu(inputs, gpu) is False or (gpus is not None and gpus < 2):
            return None  # one replica per GPU needs the weights on one GPU, and two GPUs
        if _nvlink(inputs, gpu):
            rec.change = msg("rec.tp_comm_replicas")
    if flag.startswith("vllm bench serve --max-concurrency") and any(r.offered_concurrency for r in inputs.measured if r.format != "observations"):
        rec.flag = None  # the attached benchmark already caps its clients (a reviewer's find: 10 of 17 real runs)
    if change == "rec.prefix_cache_1" and args.enable_prefix_caching is False:
        return None  # nothing is cached: fresh prompts measure what these already measure
    if change == "rec.chunked_prefill_interference_1" and _gpus(inputs) == 1:
        return None  # a prefill instance beside a decode instance needs two GPUs at least
    if change == "rec.kv_capacity_2":
        if (highest_concurrency(inputs) or 99) <= 1 or experts_in_host_memory(inputs):
            return None  # one request at a time: more replicas serve more requests, not this one faster
        if inputs.engine is not None and inputs.input_len and inputs.input_len + (inputs.output_len or 0) > inputs.engine.memory.kv_cache_tokens:
            return None  # one request does not fit one replica's KV cache: more replicas do not help it
    if flag == "--quantization fp8" and inputs.engine is not None and inputs.engine.memory.weights_gib / 2 >= inputs.engine.memory.requested_gib:
        rec.flag, rec.change = None, msg("rec.decode_bandwidth_too_big")  # even FP8 weights do not fit: 4-bit or more GPUs
    if change in ("rec.decode_bandwidth_1", "rec.decode_bandwidth_quantised") and weights_quantised(inputs) and QUANT_SLOWER.search(inputs.text or ""):
        rec.flag, rec.change = None, msg("rec.decode_bandwidth_dequant")
    if change == "rec.cuda_graph_1":
        rec.flag = None  # the change is a removal (--enforce-eager); a capture list would narrow vLLM's default
    if change == "rec.cuda_graph_sizes":
        rec.flag = None
    if change == "rec.prefill_compute_1" and (prefix_caching_on(inputs) or (inputs.input_len is not None and inputs.input_len < 1024)
                                               or (caching_by_default(inputs, release) and not words_say(PREFIX_REUSE_WORDS, inputs))):
        rec.flag = None  # already caching prefixes, or prompts too short for a prefix to matter, or no prefix to reuse
    if flag == "--kv-cache-dtype auto" and (args.kv_cache_dtype or "auto").lower() == "auto" and not words_say(QUANTISED_KV_WORDS, inputs):
        rec.flag = None  # no quantised KV cache set or named: "auto" is what it runs (bf16 would not add capacity)
    if change == "rec.kv_quant_1" and kv_dtypes_compared(inputs):
        rec.change = msg("rec.kv_quant_compared")  # they measured both: which to keep, and when fp8 pays
    if change == "rec.kv_capacity_2" and (args.data_parallel_size or 1) > 1:
        rec.flag = f"--data-parallel-size {2 * args.data_parallel_size}"  # "more replicas" than it runs
    if rec.flag and already_runs(rec.flag, args, inputs.engine.config if inputs.engine is not None else None):
        rec.flag = None  # the setting it runs now: the change's words stay
    if flag.startswith("pip install vllm") and not (on_vllm(inputs) and vllm_evident(inputs)):
        rec.flag = None  # the regression is in the engine, plugin or app the report uses, not in vLLM's wheel
    elif flag.startswith("pip install vllm==<previous>") and (previous := previous_release(inputs)):
        rec.flag = f"pip install vllm=={previous}"
    vllm, nvidia = engine_is_vllm(inputs), not not_nvidia(inputs, gpu)
    if rec.flag and not vllm and rec.flag.startswith("vllm "):
        rec.flag = None  # another engine: vLLM's commands are not there
    if rec.verify:  # vLLM's metrics and log lines for vLLM only, NVIDIA's tools for NVIDIA only
        rec.verify = fitted_command(rec.verify, vllm=vllm, nvidia=nvidia) or None
    if rec.flag and _too_new(rec.flag, release):
        rec.flag = None
    if rec.verify and _too_new(rec.verify, release):
        rec.verify = None
    return rec


#: What is left to do when every generic change of a cause was dropped for this deployment.
FALLBACK = {
    "tp_comm": Recommendation(change=msg("rec.tp_comm_link"), flag=None, verify="nvidia-smi topo -m"),
    "kv_capacity": Recommendation(change=msg("rec.kv_capacity_room"), flag=None, verify="grep -E 'GPU KV cache size|Maximum concurrency' SERVER.log"),
    "attention_backend": Recommendation(change=msg("rec.attention_backend_check"), flag=None),
    "chunked_prefill_interference": Recommendation(change=msg("rec.chunked_prefill_cap"), flag=None),
}


#: Causes that a server with continuous batching removes when the report's engine has none (a
#: transformers script or demo: one request at a time, whatever the flags).
BATCHING_CAUSES = ("queueing", "max_num_seqs_limit", "cpu_frontend", "benchmark_methodology")


def serve_with_batching(cause: str, inputs: DiagnosisInputs) -> Recommendation | None:
    """For a report served by the transformers loop itself: serve the model with a batching server
    first (the maintainers' usual answer in such threads), before any flag of one."""
    if cause not in BATCHING_CAUSES or not transformers_loop(inputs):
        return None
    # one request at a time: batching is not the gain there, the engine's kernels are
    change = "rec.serve_with_engine_single" if (highest_concurrency(inputs) or 99) <= 1 else "rec.serve_with_batching"
    return Recommendation(change=msg(change), flag=f"vllm serve {inputs.deployment.model or 'MODEL'}")


def fitted_changes(cause: str, recs: list[Recommendation], inputs: DiagnosisInputs) -> list[Recommendation]:
    """The changes that fit this deployment; when none is left, the cause's fallback (a check), or the
    first change as it was, so a finding always says what to do next."""
    kept = [fitted for r in recs if (fitted := fit_to_deployment(r.model_copy(deep=True), inputs)) is not None]
    if (first := serve_with_batching(cause, inputs)) is not None:
        kept.insert(0, first)
    if kept or not recs:
        return kept
    if cause in FALLBACK:
        return [FALLBACK[cause].model_copy(deep=True)]
    first = recs[0].model_copy(deep=True)
    _reworded(first, inputs)
    return [first]
