"""SGLang, TGI, TensorRT-LLM and LMDeploy launch flags as data: which vLLM flag each one corresponds to, where one exists.

Why: a user who compares engines (or moved from one) pastes the command of the other engine. The
advisor models vLLM's scheduler, so the command is read as the closest vLLM configuration: the
flags that set the same quantity (tensor parallelism, the per-step prefill budget, the batch cap,
the memory fraction, the context length) are rewritten to vLLM's spelling and then parsed by the
ordinary vLLM parser, every rewrite is reported, and flags with no vLLM counterpart are kept as
given under ``<engine>_<name>`` in ``EngineArgs.extra``. Nothing here guesses a value.

Sources: SGLang's ``python/sglang/srt/server_args.py`` (``ServerArgs.add_cli_args``), TGI's
``launcher/src/main.rs`` (clap ``Args``), TensorRT-LLM's ``trtllm-serve`` and LMDeploy's
``lmdeploy serve api_server`` references, as documented in their server-argument pages.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field

Engine = str  # "sglang" | "tgi" | "tensorrt-llm" | "lmdeploy"


@dataclass(frozen=True)
class ForeignFlag:
    """One flag of another engine. ``vllm``: the vLLM flag written instead (None: no equivalent);
    ``switch``: the flag takes no value; ``off``: a value meaning the feature is off (written as
    ``off_flag`` instead of ``vllm VALUE``)."""

    names: tuple[str, ...]
    vllm: str | None
    switch: bool = False
    off: str | None = None
    off_flag: str | None = None
    #: why the mapping is only approximate: a message id under ``input.flag_approx`` (the note's writer
    #: words it in the asker's language)
    approx: str | None = None


def _f(*names: str, vllm: str | None = None, **kw) -> ForeignFlag:
    return ForeignFlag(names=names, vllm=vllm, **kw)


SGLANG: tuple[ForeignFlag, ...] = (
    _f("--model-path", "--model", vllm="--model"),
    _f("--tp", "--tp-size", "--tensor-parallel-size", vllm="--tensor-parallel-size"),
    _f("--dp", "--dp-size", "--data-parallel-size", vllm="--data-parallel-size"),
    _f("--pp", "--pp-size", "--pipeline-parallel-size", vllm="--pipeline-parallel-size"),
    _f("--context-length", vllm="--max-model-len"),
    _f("--mem-fraction-static", "--mem-frac", vllm="--gpu-memory-utilization",
       approx="static_fraction"),
    _f("--max-running-requests", vllm="--max-num-seqs"),
    _f("--chunked-prefill-size", vllm="--max-num-batched-tokens", off="-1", off_flag="--no-enable-chunked-prefill"),
    _f("--kv-cache-dtype", vllm="--kv-cache-dtype"),
    _f("--quantization", vllm="--quantization"),
    _f("--dtype", vllm="--dtype"),
    _f("--trust-remote-code", vllm="--trust-remote-code", switch=True),
    _f("--disable-radix-cache", vllm="--no-enable-prefix-caching", switch=True),
    _f("--disable-cuda-graph", vllm="--enforce-eager", switch=True),
    _f("--cuda-graph-max-bs", vllm="--max-cudagraph-capture-size"),
    _f("--attention-backend", vllm="--attention-backend", approx="backend_names"),
    _f("--served-model-name", vllm="--served-model-name"),
    _f("--tokenizer-path", vllm="--tokenizer"),
    _f("--host", vllm="--host"),
    _f("--port", vllm="--port"),
    _f("--api-key", vllm="--api-key"),
    _f("--enable-ep-moe", "--enable-expert-parallel", vllm="--enable-expert-parallel", switch=True),
    _f("--max-prefill-tokens", vllm=None),
    _f("--max-total-tokens", vllm=None),
    _f("--schedule-policy", vllm=None),
    _f("--schedule-conservativeness", vllm=None),
    _f("--enable-torch-compile", vllm=None, switch=True),
    _f("--enable-dp-attention", vllm=None, switch=True),
    _f("--enable-mixed-chunk", vllm=None, switch=True),
    _f("--disable-overlap-schedule", vllm=None, switch=True),
    _f("--log-requests", vllm=None, switch=True),
    _f("--enable-metrics", vllm=None, switch=True),
    _f("--speculative-algorithm", vllm=None),
    _f("--speculative-draft-model-path", vllm=None),
    _f("--speculative-num-steps", vllm=None),
    _f("--speculative-eagle-topk", vllm=None),
    _f("--speculative-num-draft-tokens", vllm=None),
)

TGI: tuple[ForeignFlag, ...] = (
    _f("--model-id", vllm="--model"),
    _f("--num-shard", vllm="--tensor-parallel-size"),
    _f("--max-total-tokens", vllm="--max-model-len", approx="total_tokens"),
    _f("--max-batch-prefill-tokens", vllm="--max-num-batched-tokens"),
    _f("--max-batch-size", vllm="--max-num-seqs"),
    _f("--cuda-memory-fraction", vllm="--gpu-memory-utilization"),
    _f("--quantize", vllm="--quantization"),
    _f("--dtype", vllm="--dtype"),
    _f("--kv-cache-dtype", vllm="--kv-cache-dtype"),
    _f("--trust-remote-code", vllm="--trust-remote-code", switch=True),
    _f("--revision", vllm="--revision"),
    _f("--port", vllm="--port"),
    _f("--hostname", vllm="--host"),
    _f("--sharded", vllm=None),
    _f("--max-input-length", "--max-input-tokens", vllm=None),
    _f("--max-batch-total-tokens", vllm=None),
    _f("--max-concurrent-requests", vllm=None),
    _f("--max-waiting-tokens", vllm=None),
    _f("--waiting-served-ratio", vllm=None),
    _f("--cuda-graphs", vllm=None),
    _f("--speculate", vllm=None),
    _f("--disable-custom-kernels", vllm=None, switch=True),
    _f("--json-output", vllm=None, switch=True),
)

#: ``trtllm-serve MODEL [OPTIONS]`` (TensorRT-LLM's OpenAI server; its flags are written with
#: underscores, read here like every other name with dashes). Source: TensorRT-LLM's trtllm-serve
#: command reference (nvidia.github.io/TensorRT-LLM, commands/trtllm-serve).
TRTLLM: tuple[ForeignFlag, ...] = (
    _f("--tp-size", vllm="--tensor-parallel-size"),
    _f("--pp-size", vllm="--pipeline-parallel-size"),
    _f("--max-batch-size", vllm="--max-num-seqs"),
    _f("--max-num-tokens", vllm="--max-num-batched-tokens"),
    _f("--max-seq-len", vllm="--max-model-len"),
    _f("--kv-cache-free-gpu-memory-fraction", "--free-gpu-memory-fraction", vllm="--gpu-memory-utilization", approx="free_fraction"),
    _f("--tokenizer", vllm="--tokenizer"),
    _f("--served-model-name", vllm="--served-model-name"),
    _f("--trust-remote-code", vllm="--trust-remote-code", switch=True),
    _f("--host", vllm="--host"),
    _f("--port", vllm="--port"),
    _f("--ep-size", vllm=None),
    _f("--backend", vllm=None),
    _f("--max-beam-width", vllm=None),
    _f("--extra-llm-api-options", "--config", vllm=None),
    _f("--num-postprocess-workers", vllm=None),
    _f("--gpus-per-node", vllm=None),
    _f("--cluster-size", vllm=None),
    _f("--log-level", vllm=None),
)

#: ``lmdeploy serve api_server MODEL [OPTIONS]``. Source: LMDeploy's ``lmdeploy serve api_server -h``
#: (TurboMind and PyTorch engine options, as its serving guide lists them).
LMDEPLOY: tuple[ForeignFlag, ...] = (
    _f("--tp", vllm="--tensor-parallel-size"),
    _f("--session-len", vllm="--max-model-len"),
    _f("--max-batch-size", vllm="--max-num-seqs"),
    _f("--max-prefill-token-num", vllm="--max-num-batched-tokens"),
    _f("--cache-max-entry-count", vllm="--gpu-memory-utilization", approx="free_fraction"),
    _f("--cache-block-seq-len", vllm="--block-size"),
    _f("--enable-prefix-caching", vllm="--enable-prefix-caching", switch=True),
    _f("--server-name", vllm="--host"),
    _f("--server-port", vllm="--port"),
    _f("--model-name", vllm="--served-model-name"),
    _f("--backend", vllm=None),
    _f("--model-format", vllm=None),
    _f("--quant-policy", vllm=None),
    _f("--instance-num", vllm=None),
    _f("--log-level", vllm=None),
    _f("--chat-template", vllm=None),
    _f("--api-keys", vllm=None),
)

TABLES: dict[Engine, tuple[ForeignFlag, ...]] = {"sglang": SGLANG, "tgi": TGI, "tensorrt-llm": TRTLLM, "lmdeploy": LMDEPLOY}
ENGINE_NAMES = {"sglang": "SGLang", "tgi": "TGI", "vllm": "vLLM", "tensorrt-llm": "TensorRT-LLM", "lmdeploy": "LMDeploy"}
#: Other spellings of the engines above, as case files and users write them.
#: Engine names as written with their separators dropped ("TRT_LLM", "tensorrt llm", "TensorRT-LLM" and
#: "trtllm" are one name): the TABLES key each selects. The diagnosis names an engine in the answer
#: from the same spellings (``report_facts.ENGINES_IN_TEXT``), so a name it shows is one whose flags map.
ENGINE_ALIASES = {
    "sglang": "sglang",
    "tgi": "tgi",
    "textgenerationinference": "tgi",
    "textgenerationlauncher": "tgi",
    "tensorrtllm": "tensorrt-llm",
    "trtllm": "tensorrt-llm",
    "lmdeploy": "lmdeploy",
}
_SEPARATORS = re.compile(r"[-_\s]+")


def kept_prefix(engine: Engine) -> str:
    """The ``EngineArgs.extra`` prefix of an engine's flags with no vLLM counterpart (an identifier:
    ``tensorrtllm_ep_size``, ``sglang_schedule_policy``)."""
    return engine.replace("-", "") + "_"


def engine_key(name: str | None) -> str:
    """The TABLES key of an engine name as written (case and separators ignored); any other name
    lower-cased as given."""
    key = (name or "").strip().lower()
    return ENGINE_ALIASES.get(_SEPARATORS.sub("", key), key)


def _index(table: tuple[ForeignFlag, ...]) -> dict[str, ForeignFlag]:
    return {name: spec for spec in table for name in spec.names}


_INDEX = {engine: _index(table) for engine, table in TABLES.items()}


@dataclass
class Translation:
    """A foreign command's arguments in vLLM's spelling, with what was rewritten and what was kept."""

    args: list[str]
    mapped: list[str]  # "--chunked-prefill-size -> --max-num-batched-tokens"
    kept: dict[str, object]  # flags with no vLLM equivalent: extra key -> value as given
    approx: list[str] = field(default_factory=list)  # ForeignFlag.approx of the mapped flags


def _is_flag(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not tok.lstrip("-").replace(".", "", 1).isdigit()


def translate(engine: Engine, args: list[str]) -> Translation:
    """Rewrite ``args`` (what follows the launcher) of ``engine`` into vLLM arguments."""
    index = _INDEX[engine]
    out = Translation(args=[], mapped=[], kept={})
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not _is_flag(tok):
            out.args.append(tok)  # a positional (TGI and SGLang take none; kept for the model guess)
            continue
        name, has_eq, inline = tok.partition("=")
        name = "--" + name.lstrip("-").replace("_", "-")
        spec = index.get(name)
        value: str | None = inline if has_eq else None
        if value is None and (spec is None or not spec.switch) and i < len(args) and not _is_flag(args[i]):
            value = args[i]
            i += 1
        key = kept_prefix(engine) + name.lstrip("-").replace("-", "_")
        if spec is None or spec.vllm is None:
            out.kept[key] = True if value is None else value
            continue
        if spec.off is not None and value is not None and value.strip() == spec.off and spec.off_flag:
            out.args.append(spec.off_flag)
            out.mapped.append(f"{name} {value} -> {spec.off_flag}")
            continue
        if spec.switch:
            if value is not None and value.strip().lower() in ("false", "0", "no"):
                continue
            out.args.append(spec.vllm)
        elif value is None:
            out.kept[key] = True  # a value flag without its value: kept, the vLLM parser never sees it
            continue
        else:
            out.args.extend([spec.vllm, value])
        if spec.vllm != name:
            out.mapped.append(f"{name} -> {spec.vllm}")
            if spec.approx:
                out.approx.append(spec.approx)
    return out


def flags_to_args(engine: Engine, flags: dict[str, object]) -> tuple[list[str], dict[str, object]]:
    """A profile's ``deployment.flags`` of ``engine``: (the keys that are that engine's flags, as
    arguments for :func:`translate`; the other keys, left for the vLLM reader). A profile that says
    ``engine: sglang`` writes SGLang's names (``chunked_prefill_size: 256``, ``tp: 4``); read as
    vLLM's they would set nothing. Keys of vLLM's own (``max_num_seqs``) and environment variables
    stay with the vLLM reader."""
    index = _INDEX.get(engine)
    if not index:
        return [], dict(flags)
    args: list[str] = []
    rest: dict[str, object] = {}
    for key, raw in flags.items():
        text = str(key)
        name = "--" + text.lstrip("-").replace("_", "-")
        if name not in index:  # the tables hold lower-case names: environment variables stay too
            rest[key] = raw
        elif raw is True or raw is None:
            args.append(name)
        else:
            value = str(raw).lower() if isinstance(raw, bool) else str(raw)
            args.append(f"{name}={value}")
    return args, rest
