"""Evidence from the deployment's facts: flags, environment, versions, hardware, model size."""

from __future__ import annotations

import json
import math
import re

from ..perf.defaults import parse_version
from ..schema import Evidence, Recommendation
from ..schema.message import msg, q
from .board import Board
from .inputs import DiagnosisInputs
from .report_facts import admission_throttled, budget_throttled, catalog_gpu, compute_capability, flash_attention_gpu, kv_seen_with_room, max_num_seqs_in_effect, offline_run, portable_attention_set
from .text_cues import find_number, params_from_name

#: GPU names that mean PCIe cards when the catalog does not know the GPU (whole words only).
PCIE_NAME = re.compile(r"\b(rtx|geforce|3090|4090|5090|a6000|l40s?|l20|l4|a10g?|a40|a30|t4|pcie)\b", re.IGNORECASE)


def detect_config(inputs: DiagnosisInputs, board: Board) -> None:
    args, dep = inputs.engine_args, inputs.deployment
    text = inputs.text.lower()

    def cfg(label: str, value) -> Evidence:
        # a JSON setting as the user writes it on the command line, not Python's repr (a reviewer's find)
        shown = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else json.dumps(value) if isinstance(value, (dict, list, bool)) else str(value)
        return Evidence(kind="config", origin="deployment", label=msg("ev.setting", name=label), value=shown)

    if args.speculative_config is not None:
        board.add(
            "spec_decode",
            3.0,
            cfg("speculative_config", args.speculative_config),
            reason=msg("reason.spec_decode"),
        )
    if args.kv_transfer_config is not None:
        board.add(
            "disagg",
            3.0,
            cfg("kv_transfer_config", args.kv_transfer_config),
            reason=msg("reason.disagg"),
        )
    if args.kv_cache_dtype and args.kv_cache_dtype.startswith("fp8"):
        board.add("kv_quant", 1.5, cfg("kv_cache_dtype", args.kv_cache_dtype))
    if args.enforce_eager:
        board.add("cuda_graph", 2.0, cfg("enforce_eager", True), reason=msg("reason.cuda_graph_off"))
    _tensor_parallel(inputs, board, cfg)
    _versions(inputs, board, cfg, text)
    _batched_tokens(inputs, board, cfg, text)
    _budget_throttles(inputs, board, cfg)
    _max_num_seqs(inputs, board, cfg)
    _max_num_seqs_below_clients(inputs, board, cfg)
    _rocm_attention(inputs, board, cfg)
    _portable_attention(inputs, board, cfg)
    _forced_slow_kernel(inputs, board, cfg)
    _small_model(inputs, board)
    if one_gpu(inputs):
        board.exclude("tp_comm")  # no GPU-to-GPU traffic to limit anything


def one_gpu(inputs: DiagnosisInputs) -> bool:
    """The deployment runs on exactly one GPU (given, or said in the words) with no parallel size
    above 1: tensor-parallel communication cannot be its cause (none of the 328 library reports on
    one GPU has it established)."""
    args = inputs.engine_args
    return inputs.deployment.num_gpus == 1 and all((getattr(args, k) or 1) <= 1 for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"))


def _tensor_parallel(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    args, dep = inputs.engine_args, inputs.deployment
    env = {**{k.upper(): v for k, v in args.env.items()}, **{k.upper(): v for k, v in dep.flags.items() if k.isupper()}}
    tp = args.tensor_parallel_size or 1
    if str(env.get("NCCL_P2P_DISABLE", "")) in ("1", "True", "true"):
        board.add(
            "tp_comm",
            3.0,
            cfg("NCCL_P2P_DISABLE", env["NCCL_P2P_DISABLE"]),
            reason=msg("reason.nccl_p2p"),
        )
    if args.disable_custom_all_reduce:
        board.add("tp_comm", 1.0, cfg("disable_custom_all_reduce", True))
    if inputs.engine is not None:
        over_pcie = inputs.engine.gpu.interconnect == "pcie" and dep.interconnect != "nvlink"
    else:
        over_pcie = bool(PCIE_NAME.search((dep.gpu or "").replace("-", " ")))
    if tp > 1 and (dep.interconnect == "pcie" or over_pcie):
        board.add(
            "tp_comm",
            2.0,
            cfg("tensor_parallel_size", tp),
            cfg("interconnect", dep.interconnect or f"PCIe ({dep.gpu})"),
            reason=msg("reason.tp_pcie", tp=tp),
        )


def _versions(inputs: DiagnosisInputs, board: Board, cfg, text: str) -> None:
    """Facts of vLLM's own release history; another engine's version number says nothing about them
    (SGLang 0.3 had chunked prefill, vLLM 0.3 did not)."""
    if not inputs.deployment.is_vllm:
        return
    v = parse_version(inputs.deployment.vllm_version)
    if v is None:
        return
    if v < (0, 4, 0):
        # Chunked prefill arrived in 0.4 (opt-in) and became the V1 default: before it, a long prompt's
        # prefill ran as one step that stalled every running decode.
        if any(w in text for w in ("long prompt", "long input", "8k", "16k", "prompt of", "prompts of")):
            board.add(
                "chunked_prefill_interference",
                2.0,
                cfg("vllm_version", inputs.deployment.vllm_version),
                reason=msg("reason.no_chunked_prefill"),
            )
    if v < (0, 8, 0) and any(w in text for w in ("upgrad", "regress", "slower than", "became slower", "升级")):
        board.add("version_regression", 1.0, cfg("vllm_version", inputs.deployment.vllm_version))


def _chunked_prefill_on(inputs: DiagnosisInputs) -> bool:
    """Chunked prefill as set, else as the engine's defaults have it: on in the V1 engine (0.8 and
    later, and a version not given), and in SGLang and TGI, which chunk by default; the modelled
    configuration says it when there is one."""
    chunked = inputs.engine_args.enable_chunked_prefill
    if chunked is not None:
        return bool(chunked)
    if (inputs.deployment.engine or "").strip().lower() in ("sglang", "tgi"):
        return True
    if inputs.engine is not None:
        return bool(inputs.engine.config.enable_chunked_prefill)
    version = parse_version(inputs.deployment.vllm_version)
    return version is None or version >= (0, 8, 0)


def _batched_tokens(inputs: DiagnosisInputs, board: Board, cfg, text: str) -> None:
    args = inputs.engine_args
    budget = args.max_num_batched_tokens
    inp = inputs.input_len
    if budget and inp and budget < inp and _chunked_prefill_on(inputs):
        chunks = -(-inp // budget)
        # offline by its words or its script, not by the word "throughput": a served benchmark of
        # long prompts asks about throughput too (real vLLM bench serve runs read as offline)
        offline = offline_run(inputs) or any(w in text for w in ("offline", "benchmark_throughput", "离线"))
        board.add(
            "batched_tokens_limit",
            3.0 if offline else 2.0,
            cfg("max_num_batched_tokens", budget),
            Evidence(kind="reported", origin="workload", label=msg("ev.setting", name="input_len"), value=float(inp), unit="tokens", detail=msg("detail.chunks", chunks=chunks)),
            # offline, the chunks cost throughput; served, they are steps the prompt's first token waits for
            reason=msg("reason.batched_chunks" if offline else "reason.batched_chunks_ttft", budget=q(budget, "tokens"), input=q(inp, "tokens"), chunks=chunks),
        )
        if offline:
            board.add(
                "benchmark_methodology",
                1.5,
                Evidence(kind="text", origin="workload", label=msg("ev.offline_benchmark")),
                reason=msg("reason.offline_chunked"),
            )


def _budget_throttles(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    """A small --max-num-batched-tokens where the server's readings show requests waiting with sequence
    slots and KV blocks free (a planted real run at 256: 17 of 64 ran, 47 waited, the cache at 7.5%, TTFT
    4.4 s against 0.6 s at the default; the answer blamed max_num_seqs against vLLM's "Maximum
    concurrency"): the budget is what admits them, whatever the prompt length."""
    budget = inputs.engine_args.max_num_batched_tokens
    kv = budget_throttled(inputs)
    if kv is None:
        return
    waited = Evidence(kind="measured", origin="log" if inputs.server_logs else "metrics", label=msg("ev.waiting"), value=kv.waiting_max, unit="requests",
                      detail=msg("detail.kv_usage_max", kv=q(round(kv.usage_max_pct, 1), "%")))
    board.add("batched_tokens_limit", 3.0, cfg("max_num_batched_tokens", budget), waited,
              reason=msg("reason.budget_throttles", budget=q(budget, "tokens"), budget_flag=str(budget), waiting=q(round(kv.waiting_max), "requests"), kv=q(round(kv.usage_max_pct, 1), "%")), lead=True)


def _max_num_seqs(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    seqs = inputs.engine_args.max_num_seqs
    if not seqs:
        return
    admitted = min(seqs, _offered_clients(inputs) or _most_running(inputs) or seqs)
    if inputs.engine is not None and inputs.input_len and admitted <= inputs.engine.memory.requests_that_fit(inputs.input_len + (inputs.output_len or 0)):
        # vLLM's "Maximum concurrency" counts requests of max_model_len; with the workload's own
        # lengths known and as many of them as can be admitted (max_num_seqs, or fewer clients)
        # fitting, it cannot over-admit (real servers on their default max_model_len all print a
        # figure below 256)
        return
    if kv_seen_with_room(inputs) or admission_throttled(inputs):
        # the server's own readings never saw the cache full nor a request preempted: whatever vLLM's
        # "Maximum concurrency" (requests of max_model_len) says, this load was not over-admitted (a
        # reviewer's find: 64 running at the cap with the cache 30% full was told the opposite)
        return
    found = _max_concurrency(inputs)
    if found is not None and seqs > found[0]:
        reported, figure = found
        board.add("max_num_seqs_limit", 2.5, cfg("max_num_seqs", seqs), figure, reason=msg("reason.max_num_seqs_over", seqs=seqs, fit=q(reported, "x")))
        board.add("kv_capacity", 1.5, figure.model_copy())


def _max_concurrency(inputs: DiagnosisInputs) -> tuple[float, Evidence] | None:
    """vLLM's "Maximum concurrency" (requests of max_model_len) and its evidence, tagged by what gave
    it: the user's words, else an attached server log, else the memory model; None when nothing does."""
    said = find_number(inputs.text, r"maximum concurrency for [\d,]+ tokens per request:?\s*([\d.]+)\s*x")
    logged = next((log.max_concurrency for log in inputs.server_logs if log.max_concurrency), None)
    modelled = inputs.engine.memory.max_concurrency if inputs.engine is not None else None
    for value, kind, origin in ((said, "reported", "startup"), (logged, "measured", "log"), (modelled, "model", "model")):
        if value is not None:
            return value, Evidence(kind=kind, origin=origin, label=msg("ev.max_concurrency"), value=round(value, 2), unit="x")
    return None


def _offered_clients(inputs: DiagnosisInputs) -> int | None:
    """The most concurrent clients the user reports or measured (workload, observations, runs)."""
    counts = [o.concurrency for o in inputs.observations if o.concurrency]
    counts += [r.offered_concurrency for r in inputs.measured if r.offered_concurrency]
    # a burst (every request sent at once) has all its requests in flight
    counts += [r.num_prompts or r.completed for r in inputs.measured if not r.offered_concurrency and r.offered_request_rate is not None
               and math.isinf(r.offered_request_rate) and (r.num_prompts or r.completed)]
    if inputs.case is not None and inputs.case.workload.concurrency:
        counts.append(inputs.case.workload.concurrency)
    # the client counts the words state ("64 concurrent clients"), where nothing measured gives one (a
    # reviewer's find: 64 clients under max_num_seqs 256 were told the cap over-admits)
    counts += list(inputs.stated.concurrency)
    return int(max(counts)) if counts else None


def _most_running(inputs: DiagnosisInputs) -> int | None:
    """An open stream's in-flight requests, which no client count gives: the most the server ran at
    once (its /metrics during the run), else the most the simulation of the measured rate ran. A
    Poisson stream at 6 req/s of 4K-token prompts ran 58 at most in its simulation, where 205 of that
    length fit (21.9 of max_model_len): max_num_seqs=256 over-admits nothing there."""
    seen = [r.server_view.running_max for r in inputs.measured if r.server_view and r.server_view.running_max]
    seen = seen or [r.server_view.running_max for r in inputs.predicted if r.server_view and r.server_view.running_max]
    return math.ceil(max(seen)) if seen else None


def _max_num_seqs_below_clients(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    """The scheduler runs at most max_num_seqs requests per step: clients beyond it wait in the
    queue whatever the KV cache could hold. A value the user set is a fact (3.0); the default that
    vLLM picks for this version and GPU is the model's reading of the deployment (2.0)."""
    clients = _offered_clients(inputs)
    explicit = inputs.engine_args.max_num_seqs
    seqs = max_num_seqs_in_effect(inputs)
    if not (clients and seqs) or clients <= seqs:
        return
    board.add(
        "max_num_seqs_limit",
        3.0 if explicit else 2.0,
        cfg("max_num_seqs", seqs),
        Evidence(kind="reported", origin="workload", label=msg("ev.setting", name="concurrency"), value=float(clients), unit="clients"),
        reason=msg("reason.max_num_seqs_below_clients", seqs=seqs, clients=clients, waiting=clients - seqs),
        # the clients the cap turns away answer "why do requests queue?" before what the cap admits at full length
        # (a Chinese user's find: "--max-num-seqs 16 at 64 clients" opened with "16 admits more than 7.09 fit")
        lead=True,
    )


#: AMD GPUs by the names reports give them (Instinct MI2xx/MI3xx, Radeon RX/PRO, gfx targets)
AMD_GPU = re.compile(r"\bmi\s?[123]\d{2}[a-z]?\b|instinct|radeon|\br9700\b|\brx\s?\d{4}|\bgfx\d{3,4}", re.IGNORECASE)


#: Checkpoint formats vLLM runs with its Marlin kernels by itself on NVIDIA GPUs of compute capability 8.0
#: and newer. Named by hand (`--quantization gptq`), the method forces the older, slower kernels: vLLM logs
#: "... you specified quantization=gptq explicitly, so forcing gptq. Use quantization=gptq_marlin for
#: faster inference", and its maintainers answer "don't set the quantization argument" (vllm#5677).
MARLIN_BY_ITSELF = {"gptq": "gptq_marlin", "awq": "awq_marlin"}


def _forced_slow_kernel(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    """`--quantization gptq` or `awq` set by hand on a GPU where vLLM would convert the weights to Marlin
    (a reviewer's find: 9 tok/s of a GPTQ 72B on two A100s, read as the GPU's bandwidth)."""
    method = (inputs.engine_args.quantization or "").lower()
    cc = compute_capability(catalog_gpu(inputs))
    if method not in MARLIN_BY_ITSELF or cc is None or cc < 8.0:
        return
    marlin = MARLIN_BY_ITSELF[method]
    board.add("decode_bandwidth", 3.0, cfg("quantization", method), reason=msg("reason.forced_kernel", method=method, marlin=marlin),
              recommendation=Recommendation(change=msg("rec.forced_kernel", method=method, marlin=marlin)))


def _rocm_attention(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    """On ROCm, which attention kernel vLLM picks (its ROCm, Triton or AITER backends, the last
    switched by VLLM_ROCM_USE_AITER and the image) changes decode and long-context speed several
    times over, so an AMD GPU is evidence that the backend is worth checking first."""
    gpu = inputs.deployment.gpu or ""
    if AMD_GPU.search(gpu):
        board.add("attention_backend", 1.5, cfg("gpu", gpu), reason=msg("reason.rocm_attention"))


def _portable_attention(inputs: DiagnosisInputs, board: Board, cfg) -> None:
    """A portable attention backend set by hand on a GPU where vLLM would run FlashAttention: the
    performance model (and vLLM's own choice) assume FlashAttention, so the setting is the first
    thing to undo. (A backend only the server log names, picked by vLLM itself, is measured.py's.)"""
    chosen = portable_attention_set(inputs)
    if chosen:
        gpu = flash_attention_gpu(inputs)
        board.add("attention_backend", 2.0, cfg("attention_backend", chosen), reason=msg("reason.attention_portable", backend=chosen, gpu=gpu.name))


def _small_model(inputs: DiagnosisInputs, board: Board) -> None:
    """Small models make each GPU step short, so per-token CPU work (detokenization, scheduling,
    HTTP streaming) becomes a large share of the time."""
    params = inputs.engine.model.total_params if inputs.engine is not None else params_from_name(inputs.deployment.model)
    if params is None or params > 3e9:
        return
    ev = Evidence(kind="config", origin="deployment", label=msg("ev.model_size"), value=round(params / 1e9, 2), unit="B params")
    board.add(
        "detokenize",
        1.2,
        ev,
        reason=msg("reason.small_model"),
    )
    board.add("cpu_frontend", 0.8, ev)
