"""Deployment facts a person states in their own words ("Qwen2.5-32B, TP2 on two H800s, 63K-token
prompts, 40 clients"), typed once so the gatherer, the notes and the answer read the same values."""

from __future__ import annotations

from pydantic import BaseModel, Field

from .deployment import MAX_TOKENS


class StatedFacts(BaseModel):
    """What the words name, each value only when they name exactly one (catalog names resolved)."""

    model: str | None = None  # the model catalog's entry name
    gpu: str | None = None  # the GPU catalog's entry name
    num_gpus: int | None = Field(None, ge=1, le=4096)
    tensor_parallel_size: int | None = Field(None, ge=1, le=4096)
    vllm_version: str | None = None
    #: a per-request speed the words state ("生成速度只有 8 token/s", "11 tok/s for one request"): one
    #: figure with a tokens-per-second unit and no throughput word before it
    request_tok_s: float | None = Field(None, gt=0, le=100_000)
    #: the words say that speed is each request's even at many clients ("8 users, each gets 20 tok/s")
    per_request: bool = False
    #: a speed said of one request alone ("a single request gets 60 tok/s", "单个请求 60 token/s") even
    #: where a load is named after it ("..., at 32 clients 900 tok/s in total")
    single_tok_s: float | None = Field(None, gt=0, le=100_000)
    #: the whole server's output rate the words state ("吞吐 900 token/s", "total throughput 900 tok/s"),
    #: and whether it counts prompt tokens too (vLLM bench's "Total Token throughput")
    throughput_tok_s: float | None = Field(None, gt=0, le=10_000_000)
    throughput_counts_input: bool = False
    #: a decode speed the words give in Chinese characters a second ("每秒 30 个字"), and whether it is one
    #: request alone's; the gatherer turns it into tok/s with the model's tokenizer family
    chars_per_s: float | None = Field(None, gt=0, le=100_000)
    chars_single: bool = False
    #: the weights' format the words name ("GPTQ 4bit", "an AWQ checkpoint"), as vLLM's --quantization spells it
    #: a time to first token the words state ("TTFT 16 s", "首 token 要等 20 多秒"), ms, and the client count
    #: it was seen at (None: not said)
    ttft_ms: float | None = Field(None, gt=0, le=3_600_000)
    ttft_clients: int | None = Field(None, ge=1, le=100_000)
    quantization: str | None = None
    input_len: int | None = Field(None, ge=1, le=MAX_TOKENS)
    #: tokens every prompt shares ("a 7.5k shared system prompt", "共用一个 7.5k 的系统提示词")
    shared_prefix_len: int | None = Field(None, ge=1, le=MAX_TOKENS)
    output_len: int | None = Field(None, ge=1, le=MAX_TOKENS)
    #: a length the words give in Chinese characters ("输入约 5 万字"), not tokens: the gatherer turns it
    #: into tokens with the model's tokenizer family (diagnosis/inputs.py) and the answer says both
    input_chars: int | None = Field(None, ge=1, le=MAX_TOKENS * 4)
    output_chars: int | None = Field(None, ge=1, le=MAX_TOKENS * 4)
    tokens_per_char: float | None = Field(None, gt=0, description="the ratio the characters were read at (diagnosis/char_lengths.py)")
    concurrency: list[int] = Field(default_factory=list)  # client counts, ascending
    #: vLLM settings the words give with their value ("max-model-len 设成 128K", "max_num_seqs=8"),
    #: engine-arg name -> value; the gatherer uses one only where no serve command or flag set it
    flags: dict[str, int | float | str] = Field(default_factory=dict)
    #: the words report figures of a running deployment (tok/s, ms, TTFT): the deployment they
    #: describe ran, so a memory model that says it cannot start has its own inputs wrong
    reports_figures: bool = False

    def empty(self) -> bool:
        """Nothing read that a field of the deployment or workload could take."""
        return not any(getattr(self, name) for name in type(self).model_fields if name not in ("reports_figures", "per_request", "throughput_counts_input", "ttft_clients", "chars_single"))
