"""What a report says about its own deployment beyond the typed fields: the engine its words are
about, and whether its checkpoint is already quantised.

WHY: the advice (flags, "what would decide it") is vLLM's and assumes full-precision weights; a report
about Ollama or an AWQ checkpoint often says so only in its words or in the model's name. These facts
change how the answer is worded, never the ranking's evidence.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .inputs import DiagnosisInputs

#: A checkpoint whose name says its weights are already quantised (AWQ, GPTQ, GGUF's Q4_K_M, NVFP4...).
QUANTISED_NAME = re.compile(r"awq|gptq|gguf|\bq[2-8](_k)?(_[msl])?\b|int[48]|w[48]a(8|16)|\bfp8\b|nvfp4|mxfp4|bnb|[48][- ]?bit|exl[23]", re.I)


#: Words that say the weights run in a 4-bit format ("GPTQ 4bit", "an AWQ checkpoint", "Q4_K_M"): in a
#: question these describe what runs (an 8-bit or FP8 word may be the KV cache's, so it is not read).
QUANTISED_WORDS = re.compile(r"(?<![A-Za-z0-9])(awq|gptq|gguf|q[2-6]_k(_[msl])?|int4|w4a16|nvfp4|mxfp4|bnb|bitsandbytes|4[- ]?bit|exl[23])(?![A-Za-z0-9])", re.I)


def weights_quantised(inputs: DiagnosisInputs) -> bool:
    """The deployment's weights are already quantised (a setting, the checkpoint's name, or the format
    the catalog knows its published weights ship in: gpt-oss's MXFP4, DeepSeek-V3's FP8)."""
    from ..perf.catalog.models import find_model

    dep = inputs.deployment
    if dep.quantization or inputs.engine_args.quantization or QUANTISED_NAME.search(dep.model or ""):
        return True
    if QUANTISED_WORDS.search(inputs.question or ""):  # "用的是 GPTQ 4bit 的 32B": the asker runs it
        return True
    spec = find_model(dep.model) if dep.model else None
    return bool(spec and spec.checkpoint_quantization)


#: Engines a report may name in its own words (display name, pattern). The advice is vLLM's: a user
#: of another engine is told so in the short answer, not only in the full analysis.
#: Word edges are ASCII ones: in "引擎实为LMDeploy" a Chinese character touches the name, and \\b (which
#: counts Chinese characters as word characters) would not see an edge there.
#: The display name of the Hugging Face transformers loop (demo scripts, ``model.generate``): no batching server at all.
HF_TRANSFORMERS = "Hugging Face transformers"

_A = r"(?<![A-Za-z0-9_])"
_Z = r"(?![A-Za-z0-9_])"
ENGINES_IN_TEXT = (
    ("SGLang", _A + r"sglang" + _Z),
    ("TGI", r"text[- ]generation[- ](inference|launcher)|" + _A + r"tgi" + _Z),
    ("LMDeploy", _A + r"lmdeploy" + _Z),
    ("TensorRT-LLM", r"tensorrt[- _]?llm|" + _A + r"trt[- _]?llm" + _Z),
    ("llama.cpp", r"llama\.cpp|llama-server|llama_cpp"),
    ("Ollama", _A + r"ollama" + _Z),
    ("KTransformers", _A + r"ktransformers" + _Z),
    ("MLX", _A + r"mlx(?:[-_ ]?(?:lm|serve|cel))?" + _Z),
    ("LightLLM", _A + r"lightllm" + _Z),
    ("MindIE", _A + r"mindie" + _Z),
    ("MindNLP", _A + r"mindnlp" + _Z),
    ("Aphrodite", _A + r"aphrodite" + _Z),
    ("text-generation-webui", r"text-generation-webui|oobabooga|" + _A + r"textgen[- _]?webui" + _Z),
    ("LoRAX", _A + r"lorax" + _Z),
    ("FastChat", _A + r"fastchat" + _Z),
    ("LocalAI", _A + r"local-?ai" + _Z),
    ("Xinference", _A + r"xinference" + _Z),
    ("TabbyAPI", _A + r"tabby-?api" + _Z),
    (HF_TRANSFORMERS, _A + r"transformers.{0,20}(generate|pipeline)|" + _A + r"transformers\s*(推理|加载|运行|跑|部署|v?\d+\.\d+|==)|(hf|hugging ?face) transformers|model\.generate\(|"
     + _A + r"(AutoModelForCausalLM|from_pretrained|device_map)" + _Z + r"|(web|cli|openai_api)_demo|openai_api\.py|streamlit"),
)


@functools.lru_cache(maxsize=64)
def engine_named_in_text(text: str) -> str | None:
    """The other engine a report's words are about: the first one they name (None when they also
    name vLLM, other than "not vLLM", or name none). Cached: the advice rules ask it of the same words
    for every change (18 calls, 5 ms, per answer to the seed case)."""
    said = NOT_VLLM.sub(" ", text or "")
    if re.search(_A + r"vllm" + _Z, said, re.I):  # vLLM named too: a comparison, or a front end over vLLM
        return None
    found = [(m.start(), name) for name, pattern in ENGINES_IN_TEXT if (m := re.search(pattern, said, re.I))]
    return min(found)[1] if found else None  # the first one named (Ollama's "llama.cpp runner" comes after it)


def engine_display_name(engine: str) -> str:
    """An engine given as a deployment field ("ollama", "tensorrt-llm", "transformers") as people
    write it ("Ollama", "TensorRT-LLM", HF_TRANSFORMERS); a name this table lacks as given."""
    if re.fullmatch(r"(?:hf|hugging\s?face)?[-_ ]?transformers", engine.strip(), re.I):
        return HF_TRANSFORMERS
    found = [name for name, pattern in ENGINES_IN_TEXT if name != HF_TRANSFORMERS and re.fullmatch(pattern, engine.strip(), re.I)]
    return found[0] if found else engine


def transformers_loop(inputs: DiagnosisInputs) -> bool:
    """The report runs the model in a transformers script or demo (given as its engine, or said in its
    words): one request at a time, whatever a server's flags would do."""
    given = inputs.deployment.engine
    return (given is not None and engine_display_name(given) == HF_TRANSFORMERS) or engine_named_in_text(inputs.text) == HF_TRANSFORMERS


#: vLLM named only to say it is not what runs ("没有用 vllm", "not vLLM", "instead of vLLM").
NOT_VLLM = re.compile(
    r"(\bnot|instead of|rather than|without|(?<!是)不是|没有用|没用|未使用|而非|(?<![是而])非)\s*(the\s+)?vllm" + _Z
    # "是不是 vLLM 有问题？", "不是 vLLM 的问题", "not vLLM's fault": vLLM is what runs, asked about
    + r"(?!\s*(?:'s|’s|的|有|本身|问题|出了|慢|\bslow|\bissue|\bproblem|\bfault|\bbug))",
    re.I,
)


def words_about_another_engine(text: str) -> bool:
    """The words say another engine than vLLM is what runs (it is named without vLLM, or vLLM is
    named only to say it is not used): a model, GPU, release or parallelism they state is then that
    engine's setup. vLLM named beside another engine it is compared with is still vLLM's deployment."""
    return bool(NOT_VLLM.search(text or "")) or engine_named_in_text(text) is not None


#: GPUs and NPUs without FP8 tensor cores that the catalog may not list (Volta, Turing, Ampere, older
#: AMD Instinct, Ascend); the catalog's own entries say it with ``fp8_dense_tflops``.
NO_FP8_NAME = re.compile(r"v100|p100|p40|\bt4\b|20[78]0|30[789]0|a100|a800|a10\b|a10g|a30\b|a40\b|a6000|910|ascend|mi50|mi100|mi210|mi250", re.I)


def catalog_gpu(inputs: DiagnosisInputs):
    """The deployment's GPU from the catalog (the engine model's, when one was built), or None when
    none is given or the catalog lacks it."""
    if inputs.engine is not None:
        return inputs.engine.gpu
    if not inputs.deployment.gpu:
        return None
    from ..errors import AdvisorError
    from ..perf.catalog.gpus import get_gpu

    try:
        return get_gpu(inputs.deployment.gpu)
    except AdvisorError:
        return None


#: Attention kernels vLLM offers beside FlashAttention for portability: its own Triton kernels,
#: PyTorch's FlexAttention and SDPA, xFormers. On an NVIDIA GPU of compute capability 8.0 or newer
#: vLLM's own pick is FLASH_ATTN (FlashAttention 2; 3 on Hopper), faster in prefill and at long context.
#: Not the MLA backends: TRITON_MLA is vLLM's own choice for MLA models where FlashMLA does not run.
PORTABLE_ATTENTION = re.compile(r"triton(?![_ ]?mla)|flex|sdpa|xformers", re.IGNORECASE)


def compute_capability(gpu) -> float | None:
    """A catalog GPU's CUDA compute capability as a number (9.0), or None when it has none or it is not one."""
    try:
        return float(gpu.compute_capability) if gpu is not None and gpu.compute_capability else None
    except ValueError:
        return None


def flash_attention_gpu(inputs: DiagnosisInputs):
    """The catalog's NVIDIA GPU of compute capability 8.0 or newer (where vLLM picks FLASH_ATTN), or None."""
    gpu = catalog_gpu(inputs)
    return gpu if gpu is not None and gpu.vendor == "nvidia" and (compute_capability(gpu) or 0) >= 8.0 else None


def portable_attention_here(backend: str | None, inputs: DiagnosisInputs) -> bool:
    """``backend`` (a setting or the log's name) is a portable kernel on a GPU where vLLM would pick FLASH_ATTN."""
    return bool(backend) and PORTABLE_ATTENTION.search(backend) is not None and flash_attention_gpu(inputs) is not None


def portable_attention_set(inputs: DiagnosisInputs) -> str | None:
    """The portable attention backend the user set (flag or VLLM_ATTENTION_BACKEND) on a GPU where
    vLLM would pick FLASH_ATTN, or None."""
    chosen = inputs.engine_args.attention_backend
    return chosen if portable_attention_here(chosen, inputs) else None


def fp8_weights_unsupported(inputs: DiagnosisInputs) -> bool:
    """The deployment's accelerator has no FP8 tensor cores, so an FP8 checkpoint would not be faster."""
    spec = catalog_gpu(inputs)
    if spec is not None:
        return spec.fp8_dense_tflops is None
    return bool(NO_FP8_NAME.search(inputs.deployment.gpu or ""))


#: Accelerators other than NVIDIA GPUs that vLLM reaches through a plugin or its own backend (key of
#: the message ``platform.<key>``, pattern over the GPU field and the report's words). Attention backends, CUDA graphs and FP8
#: flags are NVIDIA's: such a user is told so before the changes.
PLATFORMS = (
    ("ascend", r"ascend|" + _A + r"910[abc]?\d?" + _Z + r"|vllm-ascend|" + _A + r"npu" + _Z + r"|昇腾"),
    ("gaudi", r"gaudi|" + _A + r"hpu" + _Z),
    ("xpu", _A + r"(xpu|arc\s?a?\d{3}|arc\s?b\d{2})" + _Z + r"|intel arc"),
    ("apple", _A + r"m[1-5]\s?(pro|max|ultra)?" + _Z + r"(?=.{0,40}(mac|apple|unified memory))|apple[\s-]+m[1-5]" + _Z + r"|macbook|mac studio|mac mini"),
    ("neuron", r"inferentia|trainium|neuron"),
    ("tenstorrent", r"tenstorrent|wormhole|blackhole"),
)


#: A server log's device (its engine config's ``device_config``) -> the platform (a PLATFORMS key).
LOG_DEVICES = {"XPU": "xpu", "HPU": "gaudi", "NPU": "ascend"}


def platform_named(inputs: DiagnosisInputs) -> str | None:
    """The non-NVIDIA accelerator the deployment runs on (a PLATFORMS key), from its GPU field or its
    words (None for a GPU of the catalog, or nothing said)."""
    if catalog_gpu(inputs) is not None:
        return None  # a GPU of the catalog (NVIDIA, AMD Instinct): the report's words do not override it
    for log in inputs.server_logs:  # the device a server log's engine config names
        if (log.device or "").upper() in LOG_DEVICES:
            return LOG_DEVICES[log.device.upper()]
    if "mlx" in (inputs.deployment.engine or "").lower():
        return "apple"  # MLX runs on Apple silicon only (mlx-lm, oMLX, mlx-serve, rapid-mlx...)
    where = f"{inputs.deployment.gpu or ''}\n{inputs.text}"
    found = [(m.start(), name) for name, pattern in PLATFORMS if (m := re.search(pattern, where, re.I))]
    return min(found)[1] if found else None


def offline_run(inputs: DiagnosisInputs) -> bool:
    """The report is about an offline run (``LLM.generate`` in a script), not a server: there is no
    API server to scale out."""
    text = inputs.text or ""
    if inputs.deployment.serve_command or re.search(r"vllm serve|api[_ ]server|openai|http|server|服务", text, re.I):
        return False
    return bool(re.search(r"offline|离线|llm\.generate|" + _A + r"LLM\(", text, re.I))


#: vLLM driven inside the user's own process (no vLLM API server to scale out): its engine classes or
#: ``LLM(...)`` / ``.generate(`` calls, not ``vllm serve`` or its OpenAI-compatible server.
IN_PROCESS_ENGINE = re.compile(r"AsyncLLMEngine|AsyncLLM\b|LLMEngine|" + _A + r"LLM\(|engine\.generate|llm\.generate|from vllm import")
VLLM_SERVER = re.compile(r"vllm serve|api_server|openai[- ]compatible|/v1/", re.I)


def in_process_engine(inputs: DiagnosisInputs) -> bool:
    """The report drives vLLM's engine from its own code (a script, its own web server around
    ``AsyncLLMEngine``): `--api-server-count` scales a server it does not run."""
    text = inputs.text or ""
    return not inputs.deployment.serve_command and bool(IN_PROCESS_ENGINE.search(text)) and not VLLM_SERVER.search(text)


def words_say(pattern: re.Pattern[str], inputs: DiagnosisInputs) -> bool:
    """The report's words (question, notes) match ``pattern``: the readers below differ only in it."""
    return bool(pattern.search(inputs.text or ""))


#: The words say prefix reuse is missing ("0% prefix cache hits", "the cache is never reused", "命中率为 0"),
#: not inflated: the advice is then to find why hits are lost, not to measure with fresh prompts.
NO_PREFIX_REUSE = re.compile(
    r"(?:\b(?:zero|0|0\.0|no|none|poor|low)\s*%?\s*(?:prefix[- ]?)?(?:cache\s*)?(?:hits?|hit[- ]rate|reuse)\b"
    r"|hits?(?:_total|[- ]?rate)?\s*(?:(?:is|are|was|were|of|stays?|stayed|remains?|remained|drops?|dropped|falls?|fell|goes|went|to|at|only|=|:)\s*){0,3}(?:zero\b|0(?:\.0+)?\s*%?(?![\d.]))"
    r"|\b(?:never|not|isn't|is\s+not|aren't|doesn't|don't|no\s+longer)\s+(?:being\s+)?(?:hit|reused?|hitting|reusing)\b"
    r"|\bno\s+(?:cache\s+)?(?:reuse|hits)\b"
    r"|命中率?\s*(?:为|是|只有|仅|都是|一直是|始终为|=|：|:)?\s*0(?![\d.])|(?:没有|没|未|无法|不)\s*(?:命中|复用)|命中率\s*(?:很低|极低|低)|缓存\s*(?:没有|未|不)\s*生效)",
    re.I,
)


def prefix_reuse_missing(inputs: DiagnosisInputs) -> bool:
    """The report's words say prefix-cache hits are missing or near zero."""
    return words_say(NO_PREFIX_REUSE, inputs)


#: The benchmark's prompts are random tokens: vllm bench serve's random dataset (``--dataset-name random``,
#: ``--random-input-len``), "random prompts", "随机生成的 prompt". Such prompts share no prefix unless
#: ``--random-prefix-len`` gives them one (vLLM's benchmarking docs), so a working prefix cache finds nothing to reuse.
RANDOM_PROMPTS = re.compile(
    r"dataset[-_ ]name\s*[= ]?\s*['\"]?random(?![-_]mm)" + _Z
    + r"|--random[-_]input[-_]len"
    + r"|\brandom(?:ly generated)?\s+(?:synthetic\s+)?(?:prompts?|inputs?|tokens?|dataset|data|text)\b"
    + r"|\b(?:prompts?|inputs?)\s+(?:are|were)\s+(?:generated\s+)?random(?:ly generated)?\b"
    + r"|随机\s*(?:生成\s*)?(?:的\s*)?(?:prompt|提示词|数据集?|输入|token|文本)",
    re.I,
)
#: ...unless the words give them a common part: ``--random-prefix-len N`` (N > 0), the prefix-repetition
#: dataset, a system prompt or template every request starts with.
SHARED_PREFIX_WORDS = re.compile(
    r"random[-_]prefix[-_]len\s*[= ]?\s*[1-9]|prefix[-_]repetition|shared[- ]prefix|common prefix|system prompt|same (?:prefix|template)"
    r"|共享前缀|公共前缀|相同的?前缀|系统提示",
    re.I,
)


#: A hit rate (percent of prompt tokens) that prompts sharing no prefix do not reach by chance.
RANDOM_PROMPT_HITS_PCT = 5.0


def prefix_hit_rates(inputs: DiagnosisInputs) -> tuple[list[float], list[float]]:
    """The prefix-cache hit rates (percent) measured for this deployment: (the server's own, from its
    /metrics windows and its log's stats lines; the report's observations)."""
    server = [eng.get("prefix_cache_hit_rate_pct") for summary in inputs.metrics_summaries for eng in summary.get("engines", [])]
    server += [line.prefix_cache_hit_rate_pct for log in inputs.server_logs for line in log.stats]
    said = [o.prefix_cache_hit_rate for o in inputs.observations]
    return [float(v) for v in server if isinstance(v, (int, float))], [float(v) for v in said if isinstance(v, (int, float))]


def prefix_hit_pct(inputs: DiagnosisInputs) -> float | None:
    """The highest prefix-cache hit rate (percent) measured for this deployment: the report's observations,
    a /metrics window, a server log's stats lines; None when none was measured."""
    server, said = prefix_hit_rates(inputs)
    return max(server + said) if server or said else None


def prompts_share_nothing(inputs: DiagnosisInputs) -> bool:
    """The benchmark's prompts are random tokens with no common part (the words, the case's workload, a
    benchmark file's recorded dataset): a prefix-cache hit rate near zero is then what a working cache shows."""
    w = inputs.case.workload if inputs.case else None
    if (w and w.shared_prefix_len) or inputs.shared_prefix_len or words_say(SHARED_PREFIX_WORDS, inputs):
        return False
    recorded = [(str(r.metadata.get("dataset_name") or ""), r.metadata.get("random_prefix_len")) for r in inputs.measured]
    if any(name.lower() == "random" and not prefix for name, prefix in recorded):
        return True
    return words_say(RANDOM_PROMPTS, inputs)


#: The words say prefix caching runs ("--enable-prefix-caching", "prefix caching is on", "开启了前缀缓存"),
#: not that it is off (``--no-enable-prefix-caching``, "enable_prefix_caching=False").
PREFIX_CACHING_STATED_ON = re.compile(
    r"(?<!no-)(?<![A-Za-z])enable[-_ ]prefix[-_ ]caching(?!\s*[=:]?\s*(?:false|0|off)\b)"
    r"|prefix[- _]caching\s+(?:is\s+|was\s+)?(?:on|enabled)\b"
    r"|(?:开启|打开|启用)了?\s*(?:prefix[ _-]?caching|前缀缓存)|前缀缓存\s*(?:已经?)?(?:开启|打开|启用)",
    re.I,
)


#: Words of a workload whose prompts repeat a prefix (turns of a session, an agent's history, a shared
#: system prompt): where an unstated prefix-cache setting is worth checking even on an engine that
#: caches by default (a packaged configuration may turn it off).
PREFIX_REUSE_WORDS = re.compile(
    r"multi[- ]?turn|session|agent|conversation|history|system prompt|shared prefix|prefix|cach|" + _A + r"rag" + _Z
    + r"|多轮|对话|会话|历史|前缀|缓存|系统提示",
    re.I,
)


def prefix_caching_on(inputs: DiagnosisInputs) -> bool:
    """The deployment is known to cache prefixes: its setting, a measured hit rate above zero, or the
    words. vLLM V1 caches by default, but a packaged configuration may turn it off, and then the flag is
    the fix (a report of the library): an unstated setting is not taken as on."""
    setting = inputs.engine_args.enable_prefix_caching
    if setting is not None:
        return setting
    if any((o.prefix_cache_hit_rate or 0) > 0 for o in inputs.observations):
        return True
    return words_say(PREFIX_CACHING_STATED_ON, inputs)


def max_num_seqs_in_effect(inputs: DiagnosisInputs) -> int | None:
    """vLLM's max_num_seqs for this deployment: as the user set it, else as the performance model
    reads the version's default on this GPU; None when neither is known."""
    if inputs.engine_args.max_num_seqs:
        return inputs.engine_args.max_num_seqs
    return inputs.engine.config.max_num_seqs if inputs.engine is not None else None


def highest_concurrency(inputs: DiagnosisInputs) -> int | None:
    """The most concurrent requests the report ran at: measured load points, the case's workload, or
    the words; None when none is known."""
    known = [r.offered_concurrency for r in inputs.measured if r.offered_concurrency]
    if inputs.case and inputs.case.workload and inputs.case.workload.concurrency:
        known.append(inputs.case.workload.concurrency)
    known += list(inputs.stated.concurrency or [])
    return max(known) if known else None


#: The words say requests are served one after another ("one at a time", "sent sequentially", "串行"):
#: the queue is made by whatever serialises them, and "keep the offered load below the service rate"
#: answers a different question (a reviewer's find, session 12: 6 of 56 reports).
SERIALISED = re.compile(
    r"\bone\s+(?:request\s+)?(?:at\s+a\s+time|by\s+one|after\s+(?:the\s+)?(?:other|another))\b|\bsequential(?:ly)?\b|\bserial(?:ly|i[sz]ed?|i[sz]ing)?\b"
    r"|\bnot\s+(?:run|processed|handled|served|executed)\s+(?:in\s+parallel|concurrently)\b|串行|一个一个|逐个处理|逐条|依次(?:处理|完成|执行|返回)|只能处理一个|一次只(?:处理|能处理|跑)一个"
    r"|(?:没有|不能|无法|没法)并行|并行不了|一[条个](?:请求)?(?:做|跑|处理|执行)完才",
    re.I,
)


def requests_serialised(inputs: DiagnosisInputs) -> bool:
    """The report's words say its requests are handled one after another."""
    return words_say(SERIALISED, inputs)


#: The words compute throughput from per-request speed and the client count ("=40*22/2", "concurrency
#: x per-request speed", "平均生成速率=生成总token/总耗时"): the measurement advice is then about that
#: formula. Without it, "not concurrency x per-request speed" answers nothing the user did (a
#: reviewer's find, session 14: 7 of 25 Chinese reports got it).
THROUGHPUT_FORMULA = re.compile(
    r"\d+\s*[*×]\s*\d+|concurrency\s*(?:x|×|\*|times)|(?:x|×|\*|times)\s*(?:the\s+)?(?:concurrency|clients|users)\b"
    r"|per[- ](?:request|stream|user)\s+(?:speed|rate|throughput|tok(?:ens)?/s).{0,40}(?:times|multipl|×|\*)"
    r"|并发\s*(?:数)?\s*[×*乘]|[×*乘]\s*并发|单(?:个)?请求(?:的)?(?:速度|速率).{0,20}[×*乘]|平均生成速率\s*[=＝]",
    re.I,
)


#: A load generator the report already measures with: "use vllm bench serve" is then no news.
#: An fp8 KV cache beside a 16-bit one in the words ("fp8 kv cache is slower than bf16", "kv-cache-dtype
#: auto vs fp8", "fp8 KV 比 bf16 慢"): "compare them" would repeat what the user did.
_KV_DTYPE_PAIR = re.compile(
    r"(?is)fp8.{0,160}(?:bf16|fp16|bfloat16|float16|dtype[ =]auto)|(?:bf16|fp16|bfloat16|float16|dtype[ =]auto).{0,160}fp8"
)


def kv_dtypes_compared(inputs: DiagnosisInputs) -> bool:
    """The words compare KV-cache dtypes: the pair of dtypes and the KV cache both named."""
    return words_say(_KV_DTYPE_PAIR, inputs) and "kv" in (inputs.text or "").lower()


BENCH_TOOL = re.compile(
    r"bench(?:mark)?[_ ]serv|vllm bench|benchmark_throughput|guidellm|evalscope|genai[- ]perf|aiperf|llmperf|llm[- ]perf|inference[- ]perf"
    r"|locust|" + _A + r"k6" + _Z + r"|sglang\.bench|bench_serving|profile_restful_api|llama[- ]benchy|ais[_ ]?bench",
    re.I,
)


#: "TP2 or two replicas?", "张量并行还是起两个实例？": a choice between splitting the model over the GPUs and
#: one copy per GPU, answered with the what-if the diagnosis modelled for it (a reviewer's find: it opened
#: with the ranking's first cause).
PARALLEL_CHOICE = re.compile(
    r"\b(?:tp\s*\d*|tensor[- ]parallel\w*)\b[^.?!]{0,80}\b(?:or|vs\.?|versus|instead of|than|compared (?:to|with))\b[^.?!]{0,60}\b(?:replicas?|instances?|copies|dp\s*\d*|data[- ]parallel\w*)\b"
    r"|\b(?:replicas?|instances?|copies|dp\s*\d*|data[- ]parallel\w*)\b[^.?!]{0,80}\b(?:or|vs\.?|versus|instead of|than|compared (?:to|with))\b[^.?!]{0,60}\b(?:tp\s*\d*|tensor[- ]parallel\w*)\b"
    r"|(?:tp\s*\d*|张量并行)[^。？?]{0,40}(?:还是|或者|vs|对比|比)[^。？?]{0,40}(?:实例|副本|dp\s*\d*|数据并行)"
    r"|(?:实例|副本|dp\s*\d*|数据并行)[^。？?]{0,40}(?:还是|或者|vs|对比|比)[^。？?]{0,40}(?:tp\s*\d*|张量并行)",
    re.I,
)


@dataclass(frozen=True)
class ServerKV:
    """What the server's own readings (stats lines of its logs, /metrics windows) say of its KV
    cache: the highest usage seen, and whether anything waited or was preempted."""

    usage_max_pct: float
    waiting_max: float
    preempted: bool
    busy_samples: int  # stats lines (or windows) with requests running
    #: a reading with requests waiting while fewer than max_num_seqs ran: something other than the cap
    #: held them (KV blocks whose peaks the readings missed, or the token budget)
    waiting_below_cap: bool = False


def server_kv(inputs: DiagnosisInputs) -> ServerKV | None:
    """The server's KV readings, or None where no log line or /metrics window gave a KV usage."""
    usage, waiting, preempted, busy, below = [], [0.0], False, 0, False
    seqs = max_num_seqs_in_effect(inputs)
    for log in inputs.server_logs:
        preempted = preempted or bool(log.preemption_warnings or log.preemptions_total)
        for s in log.stats:
            if s.kv_cache_usage_pct is not None:
                usage.append(s.kv_cache_usage_pct)
            waiting.append(float(s.waiting or 0))
            preempted = preempted or bool(s.preemptions)
            busy += bool(s.running)
            below = below or bool(s.waiting and (not seqs or (s.running or 0) < seqs))
    for summary in inputs.metrics_summaries:
        for eng in summary.get("engines", []):
            kv = (eng.get("kv_cache_usage_pct") or {}).get("max")
            if kv is not None:
                usage.append(kv)
            waited = float((eng.get("requests_waiting") or {}).get("max") or 0)
            running = (eng.get("requests_running") or {}).get("max") or 0
            waiting.append(waited)
            preempted = preempted or bool(eng.get("preemptions"))
            busy += bool(running)
            below = below or bool(waited and (not seqs or running < seqs * (summary.get("instances") or 1)))
    if not usage:
        return None
    return ServerKV(max(usage), max(waiting), preempted, busy, below)


#: A KV cache never seen past this share, with nothing waiting or preempted while requests ran, is not
#: what holds the server back (vLLM admits while it has blocks: a request waits for them only with the
#: pool nearly full; the margin is for peaks between readings).
KV_ROOMY_PCT = 70.0
#: ... a cache never seen full (vLLM admits while it has blocks; preemption needs a full cache).
KV_FULL_PCT = 90.0


def kv_ruled_out(inputs: DiagnosisInputs) -> bool:
    """The server's own readings rule out the KV cache as the limit: busy in at least two readings,
    the cache never past KV_ROOMY_PCT, nothing waiting, nothing preempted (a reviewer's DeepSeek-R1 on 8 x
    H200 ran 32 requests at 16% with none waiting and was told the KV cache holds too few)."""
    kv = server_kv(inputs)
    return kv is not None and kv.busy_samples >= 2 and kv.usage_max_pct < KV_ROOMY_PCT and not kv.waiting_max and not kv.preempted


#: A KV cache never seen past this share while requests waited below max_num_seqs, none preempted, was not
#: what held them: at that share the waiting requests' blocks were free many times over (a planted run at
#: --max-num-batched-tokens 256: 17 ran, 47 waited, the cache at 7.5%).
KV_LOW_PCT = 30.0


def admission_throttled(inputs: DiagnosisInputs) -> ServerKV | None:
    """The server's readings: requests waited while fewer than max_num_seqs ran, with the KV cache never
    past KV_LOW_PCT and nothing preempted: neither sequence slots nor KV blocks held them back (the step's
    token budget, or the engine's intake, did). None otherwise."""
    kv = server_kv(inputs)
    if kv is None or not kv.busy_samples or kv.preempted or not kv.waiting_below_cap or kv.usage_max_pct >= KV_LOW_PCT:
        return None
    return kv


#: A step budget below this is far under vLLM's (2,048 before the V1 engine, 8,192 or more since): a prompt
#: takes many steps to enter, and new requests queue behind it.
SMALL_STEP_BUDGET = 2048


def budget_throttled(inputs: DiagnosisInputs) -> ServerKV | None:
    """admission_throttled with a small --max-num-batched-tokens set: the step's token budget is what kept
    the waiting requests out, so the queue the readings show is its doing (None otherwise)."""
    budget = inputs.engine_args.max_num_batched_tokens
    return admission_throttled(inputs) if budget and budget < SMALL_STEP_BUDGET else None


def clients_beyond_fit(inputs: DiagnosisInputs, fit: float) -> int | None:
    """The client count where it is beyond ``fit`` requests of the KV cache and nothing says otherwise: at
    least one fits (fewer: the memory model misjudges a server that ran), no reading of the server saw room
    (a reviewer's find: "Running: 48, Waiting: 0"), and within max_num_seqs (beyond the scheduler's cap the
    load is a burst or a flood: max_num_seqs' own rule speaks). None otherwise."""
    clients = highest_concurrency(inputs)
    if not clients or fit < 1 or clients <= 1.1 * fit or kv_seen_with_room(inputs):
        return None
    seqs = max_num_seqs_in_effect(inputs)
    return None if seqs and clients > seqs else clients


def kv_seen_with_room(inputs: DiagnosisInputs) -> bool:
    """The server's readings never saw its KV cache full, nor a request preempted, nor one waiting
    while fewer than max_num_seqs ran (readings miss the cache's peaks between steps: a real run of
    64 clients of 16K-token prompts queued for blocks with no reading at 90%)."""
    kv = server_kv(inputs)  # an idle server's dump (taken after the run) says nothing of it: a reading while requests ran
    return kv is not None and kv.busy_samples >= 1 and kv.usage_max_pct < KV_FULL_PCT and not kv.preempted and not kv.waiting_below_cap
