"""What one ``probe bench`` sweep asks of the server, fixed before the first request is sent."""

from __future__ import annotations

import math
import secrets
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...errors import UsageError

Endpoint = Literal["completions", "chat"]


def fresh_seed() -> int:
    """A new seed per run: the same seed repeats the same prompts, which a warm prefix cache then
    serves from memory and the TTFT looks better than any real user will see."""
    return secrets.randbelow(2**31 - 1) + 1


def default_num_prompts(concurrency: int) -> int:
    """Enough requests that most of them run at the full concurrency (ramp-up and drain are one
    concurrency's worth of requests each): 4 x concurrency, at least 8."""
    return max(8, 4 * concurrency)


#: Bounds of one sweep (issue 19): prompts are built and held in memory before a load point starts
#: (about 4 bytes a token), and each in-flight request is a connection.
MAX_CONCURRENCY = 10_000
MAX_LEN = 10_000_000
MAX_PROMPTS = 1_000_000
MAX_PROMPT_TOKENS = 100_000_000


class BenchSpec(BaseModel):
    """A sweep: the same prompt and output lengths at several concurrency levels (and request rates)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="server root, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted)")
    endpoint: Endpoint = "completions"
    model: str | None = Field(None, description="served model name; None = the first of /v1/models")
    input_len: int = Field(gt=0, description="prompt length in tokens (as the server's tokenizer counts them)")
    output_len: int = Field(gt=0, description="generated tokens per request")
    concurrencies: list[int] = Field(min_length=1)
    request_rates: list[float] = Field(default_factory=lambda: [math.inf], min_length=1,
                                       description="req/s offered (Poisson arrivals), one load point each per concurrency; inf = as fast as the cap allows")
    num_prompts: int | None = Field(None, description="requests per load point; None = default_num_prompts(concurrency)")
    shared_prefix_len: int = Field(0, ge=0, description="leading tokens every prompt of a load point shares")
    seed: int = Field(default_factory=fresh_seed)
    ignore_eos: bool = Field(True, description="ask vLLM to generate exactly output_len tokens")
    request_timeout_s: float = Field(600.0, gt=0)
    metrics_url: str | None = Field(None, description="/metrics to sample during the load; None = no sampling")
    metrics_interval_s: float = Field(1.0, gt=0)
    api_key: str | None = Field(None, exclude=True, repr=False, description="bearer token; never saved")

    @field_validator("concurrencies")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v <= 0 for v in values):
            raise ValueError("every concurrency must be a positive integer")
        return values

    def check(self) -> None:
        """Cross-field rules, raised as one-line usage errors."""
        if self.shared_prefix_len >= self.input_len:
            raise UsageError(
                f"--shared-prefix-len ({self.shared_prefix_len}) must be shorter than --input-len ({self.input_len})"
            )
        if any(not rate > 0 for rate in self.request_rates):
            raise UsageError("--request-rate must be positive (or inf)")
        if self.num_prompts is not None and self.num_prompts <= 0:
            raise UsageError("--num-prompts must be positive")
        for flag, value, limit in (("--concurrency", max(self.concurrencies), MAX_CONCURRENCY), ("--input-len", self.input_len, MAX_LEN),
                                   ("--output-len", self.output_len, MAX_LEN), ("--num-prompts", self.num_prompts or 0, MAX_PROMPTS)):
            if value > limit:
                raise UsageError(f"{flag} {value:,} is over the {limit:,} this load generator takes")
        worst = max(self.prompts_for(c) for c in self.concurrencies) * self.input_len
        if worst > MAX_PROMPT_TOKENS:
            raise UsageError(f"one load point would hold {worst:,} prompt tokens in memory (requests x --input-len), over {MAX_PROMPT_TOKENS:,}; "
                             "lower --num-prompts or --input-len")

    def load_points(self) -> list[tuple[int, float]]:
        """(concurrency, request rate) of every load point, in the order they run."""
        return [(c, r) for c in self.concurrencies for r in self.request_rates]

    def prompts_for(self, concurrency: int) -> int:
        return self.num_prompts if self.num_prompts is not None else default_num_prompts(concurrency)
