"""What a report says about its own deployment beyond the typed fields: the engine its words are
about, and whether its checkpoint is already quantised.

WHY: the advice (flags, "what would decide it") is vLLM's and assumes full-precision weights; a report
about Ollama or an AWQ checkpoint often says so only in its words or in the model's name. These facts
change how the answer is worded, never the ranking's evidence.
"""

from __future__ import annotations

import re

from .inputs import DiagnosisInputs

#: A checkpoint whose name says its weights are already quantised (AWQ, GPTQ, GGUF's Q4_K_M, NVFP4...).
QUANTISED_NAME = re.compile(r"awq|gptq|gguf|\bq[2-8](_k)?(_[msl])?\b|int[48]|w[48]a(8|16)|\bfp8\b|nvfp4|mxfp4|bnb|[48][- ]?bit|exl[23]", re.I)


def weights_quantised(inputs: DiagnosisInputs) -> bool:
    """The deployment's weights are already quantised (a setting, or the checkpoint's name)."""
    dep = inputs.deployment
    return bool(dep.quantization or inputs.engine_args.quantization or QUANTISED_NAME.search(dep.model or ""))


#: Engines a report may name in its own words (display name, pattern). The advice is vLLM's: a user
#: of another engine is told so in the short answer, not only in the full analysis.
ENGINES_IN_TEXT = (
    ("SGLang", r"\bsglang\b"),
    ("TGI", r"text[- ]generation[- ](inference|launcher)|\btgi\b"),
    ("LMDeploy", r"\blmdeploy\b"),
    ("TensorRT-LLM", r"tensorrt[- _]?llm|\btrt[- _]?llm\b"),
    ("llama.cpp", r"llama\.cpp|llama-server|llama_cpp"),
    ("Ollama", r"\bollama\b"),
    ("KTransformers", r"\bktransformers\b"),
    ("MLX", r"\bmlx\b"),
    ("LightLLM", r"\blightllm\b"),
    ("MindIE", r"\bmindie\b"),
)


def engine_named_in_text(text: str) -> str | None:
    """The other engine a report's words are about: the first one they name (None when they also
    name vLLM, other than "not vLLM", or name none)."""
    said = re.sub(r"(\bnot|instead of|rather than|without|不是|没有用|没用|未使用)\s*(the\s+)?vllm\b", " ", text or "", flags=re.I)
    if re.search(r"\bvllm\b", said, re.I):  # vLLM named too: a comparison, or a front end over vLLM
        return None
    found = [(m.start(), name) for name, pattern in ENGINES_IN_TEXT if (m := re.search(pattern, said, re.I))]
    return min(found)[1] if found else None  # the first one named (Ollama's "llama.cpp runner" comes after it)
