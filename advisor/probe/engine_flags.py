"""vLLM's command-line flags as data: name, aliases, value type, and what changed across versions.

Why a table and not vLLM's own parser: the advisor must read commands written for any vLLM version
(0.1 to today) without importing vLLM, so the flag names, short aliases and value types are copied
here from vLLM's ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``), the API-server
arguments, ``vllm/utils/argparse_utils.py`` (``FlexibleArgumentParser``: ``--a_b`` == ``--a-b``,
``-O3``, ``--json-arg.key value``, human-readable integers) and the docs in
``shared/corpus/vllm-docs`` (``cli/README.md``, ``design/optimization_levels.md``). Version notes
name the pull request that made the change where the exact release is not certain.

A flag whose ``field`` is a field of :class:`vllm_advisor.schema.EngineArgs` is typed there; any
other known flag lands in ``EngineArgs.extra`` under ``field`` with its value coerced to ``kind``.
Flags not in this table are kept in ``extra`` with their raw text, because vLLM versions differ
and an unknown flag is not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a flag's value is read.
#: - ``int``: plain integer; ``hint``: integer that also takes vLLM's human-readable suffixes
#:   (``64k`` = 64,000, ``32K`` = 32,768); ``hint_auto``: same plus ``auto`` / ``-1`` (= -1)
#: - ``float``, ``str``
#: - ``bool``: a switch; ``--no-<flag>`` sets False; an explicit ``=true/false`` (old V0 style
#:   ``--enable-chunked-prefill=False``) is accepted
#: - ``json``: a JSON object (kept as text when it does not parse, e.g. ``-O3`` levels)
#: - ``ints`` / ``strs``: one or more values (argparse ``nargs="+"``)
FlagKind = Literal["int", "hint", "hint_auto", "float", "str", "bool", "json", "ints", "strs"]


@dataclass(frozen=True)
class FlagSpec:
    """One vLLM flag. ``flag`` is the canonical long form, ``field`` the underscored engine-arg name."""

    flag: str
    field: str
    kind: FlagKind
    aliases: tuple[str, ...] = ()
    note: str | None = None
    deprecated: bool = False
    removed: bool = False
    #: For legacy speculative-decoding flags: the key they became inside ``--speculative-config``.
    speculative_key: str | None = None


def _f(flag: str, kind: FlagKind, *aliases: str, field_name: str | None = None, **kw: object) -> FlagSpec:
    name = field_name or flag.lstrip("-").replace("-", "_")
    return FlagSpec(flag=flag, field=name, kind=kind, aliases=tuple(aliases), **kw)  # type: ignore[arg-type]


FLAG_SPECS: tuple[FlagSpec, ...] = (
    # --- ModelConfig -------------------------------------------------------------------------
    _f("--model", "str"),
    _f("--served-model-name", "strs"),
    _f("--tokenizer", "str"),
    _f("--tokenizer-mode", "str"),
    _f("--trust-remote-code", "bool"),
    _f("--dtype", "str"),
    _f("--seed", "int"),
    _f("--revision", "str"),
    _f("--max-model-len", "hint_auto",
       note="human-readable values (64k, 32K, auto) need a recent vLLM; older versions take plain integers"),
    _f("--quantization", "str", "-q"),
    _f("--enforce-eager", "bool",
       note="since the -O levels (PR #26847, v0.12) equivalent to -O0: no torch.compile, no CUDA graphs"),
    _f("--max-seq-len-to-capture", "int", removed=True,
       note="removed in v0.11.0 (PR #25543); CUDA graphs are sized by compilation_config since"),
    _f("--max-context-len-to-capture", "int", field_name="max_seq_len_to_capture", removed=True,
       note="renamed to --max-seq-len-to-capture in 2024 (PR #4518), later removed"),
    _f("--max-logprobs", "int"),
    _f("--disable-sliding-window", "bool"),
    _f("--disable-cascade-attn", "bool"),
    _f("--load-format", "str"),
    _f("--download-dir", "str"),
    _f("--model-loader-extra-config", "json"),
    _f("--hf-overrides", "json"),
    _f("--generation-config", "str"),
    _f("--override-generation-config", "json"),
    _f("--limit-mm-per-prompt", "json"),
    _f("--mm-encoder-tp-mode", "str"),
    _f("--mm-processor-kwargs", "json"),
    _f("--media-io-kwargs", "json"),
    _f("--pooler-config", "json"),
    _f("--quantization-config", "json"),
    _f("--logprobs-mode", "str"),
    _f("--enable-prompt-embeds", "bool"),
    _f("--enable-sleep-mode", "bool"),
    _f("--task", "str", deprecated=True, note="deprecated; use --runner / --convert"),
    _f("--runner", "str"),
    _f("--skip-tokenizer-init", "bool"),
    # --- ParallelConfig ----------------------------------------------------------------------
    _f("--tensor-parallel-size", "int", "-tp"),
    _f("--pipeline-parallel-size", "int", "-pp"),
    _f("--data-parallel-size", "int", "-dp"),
    _f("--data-parallel-size-local", "int", "-dpl"),
    _f("--data-parallel-rank", "int", "-dpn"),
    _f("--data-parallel-start-rank", "int", "-dpr"),
    _f("--data-parallel-address", "str", "-dpa"),
    _f("--data-parallel-rpc-port", "int", "-dpp"),
    _f("--data-parallel-backend", "str", "-dpb"),
    _f("--data-parallel-hybrid-lb", "bool"),
    _f("--decode-context-parallel-size", "int", "-dcp"),
    _f("--enable-expert-parallel", "bool"),
    _f("--enable-eplb", "bool"),
    _f("--eplb-config", "json"),
    _f("--all2all-backend", "str"),
    _f("--distributed-executor-backend", "str"),
    _f("--disable-custom-all-reduce", "bool"),
    _f("--max-parallel-loading-workers", "int"),
    _f("--worker-use-ray", "bool", removed=True, note="V0 flag; use --distributed-executor-backend ray"),
    _f("--engine-use-ray", "bool", removed=True, note="V0 flag, removed in 2024"),
    # --- CacheConfig -------------------------------------------------------------------------
    _f("--block-size", "int"),
    _f("--gpu-memory-utilization", "float"),
    _f("--kv-cache-memory-bytes", "hint", "--kv-cache-memory"),
    _f("--swap-space", "float", note="GiB of CPU swap for V0 preemption by swapping; unused by the V1 engine"),
    _f("--kv-cache-dtype", "str"),
    _f("--num-gpu-blocks-override", "int"),
    _f("--enable-prefix-caching", "bool"),
    _f("--prefix-caching-hash-algo", "str"),
    _f("--cpu-offload-gb", "float"),
    _f("--calculate-kv-scales", "bool"),
    # --- SchedulerConfig ---------------------------------------------------------------------
    _f("--max-num-batched-tokens", "hint"),
    _f("--max-num-seqs", "int"),
    _f("--max-num-partial-prefills", "int"),
    _f("--max-long-partial-prefills", "int"),
    _f("--long-prefill-token-threshold", "int"),
    _f("--num-lookahead-slots", "int"),
    _f("--scheduling-policy", "str"),
    _f("--enable-chunked-prefill", "bool",
       note="V0 accepted --enable-chunked-prefill=False; V1 turns it on by default"),
    _f("--disable-chunked-mm-input", "bool"),
    _f("--async-scheduling", "bool"),
    _f("--scheduler-delay-factor", "float", note="V0 only"),
    _f("--preemption-mode", "str", removed=True, note="V0 only (recompute | swap); V1 always recomputes"),
    _f("--num-scheduler-steps", "int", removed=True,
       note="V0 multi-step scheduling, removed in 2025 (PR #22138)"),
    _f("--multi-step-stream-outputs", "bool", removed=True, note="V0 multi-step scheduling, removed (PR #22779)"),
    _f("--use-v2-block-manager", "bool", deprecated=True, removed=True,
       note="no-op since block manager v2 became the only one (PR #8704, Oct 2024); later removed (PR #13492)"),
    # --- Speculative decoding ----------------------------------------------------------------
    _f("--speculative-config", "json"),
    _f("--speculative-model", "str", removed=True, speculative_key="model",
       note="replaced by --speculative-config (PR #14434), removed in PR #15466 (2025-03)"),
    _f("--num-speculative-tokens", "int", removed=True, speculative_key="num_speculative_tokens",
       note="replaced by --speculative-config"),
    _f("--speculative-draft-tensor-parallel-size", "int", "-spec-draft-tp", removed=True,
       speculative_key="draft_tensor_parallel_size", note="replaced by --speculative-config"),
    _f("--speculative-max-model-len", "int", removed=True, speculative_key="max_model_len",
       note="replaced by --speculative-config"),
    _f("--speculative-disable-by-batch-size", "int", removed=True, speculative_key="disable_by_batch_size",
       note="replaced by --speculative-config"),
    _f("--ngram-prompt-lookup-max", "int", removed=True, speculative_key="prompt_lookup_max",
       note="replaced by --speculative-config"),
    _f("--ngram-prompt-lookup-min", "int", removed=True, speculative_key="prompt_lookup_min",
       note="replaced by --speculative-config"),
    _f("--speculative-model-quantization", "str", removed=True, speculative_key="quantization",
       note="replaced by --speculative-config"),
    _f("--spec-decoding-acceptance-method", "str", removed=True, speculative_key="acceptance_method",
       note="replaced by --speculative-config"),
    _f("--speculative-disable-mqa-scorer", "bool", removed=True, speculative_key="disable_mqa_scorer",
       note="replaced by --speculative-config"),
    # --- Compilation / CUDA graphs -----------------------------------------------------------
    _f("--compilation-config", "json", "-cc",
       note="-O was its alias until the -O levels (PR #26847, v0.12); -cc since"),
    _f("--optimization-level", "int",
       note="-O0..-O3 since PR #26847 (v0.12); before that -O<n> meant compilation level n"),
    _f("--cudagraph-capture-sizes", "ints", field_name="cuda_graph_sizes"),
    _f("--cuda-graph-sizes", "ints", deprecated=True, note="deprecated alias of --cudagraph-capture-sizes"),
    _f("--max-cudagraph-capture-size", "int"),
    # --- Attention, KV transfer --------------------------------------------------------------
    _f("--attention-backend", "str",
       note="recent vLLM; older versions select the backend with VLLM_ATTENTION_BACKEND"),
    _f("--attention-config", "json", "-ac"),
    _f("--kv-transfer-config", "json"),
    _f("--kv-events-config", "json"),
    _f("--additional-config", "json"),
    # --- LoRA ---------------------------------------------------------------------------------
    _f("--enable-lora", "bool"),
    _f("--max-loras", "int"),
    _f("--max-lora-rank", "int"),
    _f("--lora-modules", "strs"),
    # --- API server / frontend ---------------------------------------------------------------
    _f("--host", "str"),
    _f("--port", "int"),
    _f("--uds", "str"),
    _f("--api-server-count", "int", "-asc"),
    _f("--api-key", "str"),
    _f("--config", "str", note="YAML file of flags; its contents are not read by the advisor"),
    _f("--disable-log-requests", "bool", deprecated=True, removed=True,
       note="request logging is off by default since PR #21739; flag removed in PR #29402 (v0.12)"),
    _f("--enable-log-requests", "bool"),
    _f("--disable-log-stats", "bool"),
    _f("--max-log-len", "int"),
    _f("--disable-frontend-multiprocessing", "bool"),
    _f("--enable-auto-tool-choice", "bool"),
    _f("--tool-call-parser", "str"),
    _f("--reasoning-parser", "str"),
    _f("--chat-template", "str"),
    _f("--enable-prompt-tokens-details", "bool"),
    _f("--uvicorn-log-level", "str"),
    _f("--performance-mode", "str"),
    _f("--headless", "bool"),
    _f("--profiler-config", "json"),
    _f("--default-chat-template-kwargs", "json"),
)


def _index() -> tuple[dict[str, FlagSpec], dict[str, FlagSpec]]:
    by_flag: dict[str, FlagSpec] = {}
    by_field: dict[str, FlagSpec] = {}
    for spec in FLAG_SPECS:
        for name in (spec.flag, *spec.aliases):
            by_flag[name] = spec
        by_field.setdefault(spec.field, spec)
        by_field.setdefault(spec.flag.lstrip("-").replace("-", "_"), spec)
    return by_flag, by_field


#: ``"--tensor-parallel-size"`` / ``"-tp"`` -> spec
FLAGS_BY_NAME, FLAGS_BY_FIELD = _index()


def normalize_long_flag(token: str) -> str:
    """``--max_num_seqs`` -> ``--max-num-seqs`` (FlexibleArgumentParser accepts both spellings)."""
    if token.startswith("--"):
        return "--" + token[2:].replace("_", "-")
    return token


def lookup_flag(name: str) -> FlagSpec | None:
    """The spec of a flag as written on a command line (``--max_model_len``, ``-tp``), or None."""
    return FLAGS_BY_NAME.get(normalize_long_flag(name))


def lookup_field(key: str) -> FlagSpec | None:
    """The spec for a key of a case file's ``flags`` mapping (``max_num_seqs``, ``max-num-seqs``,
    ``--max-num-seqs``, ``tp``), or None."""
    key = key.strip()
    if key.startswith("-"):
        return lookup_flag(key)
    spec = FLAGS_BY_FIELD.get(key.replace("-", "_"))
    if spec is None:
        spec = FLAGS_BY_NAME.get("-" + key)  # short aliases written without the dash: tp, pp, dp
    return spec
