"""Predicted beside measured for runs of a real vLLM server: the model's error, figure by figure.

Produced by :mod:`advisor.perf.validation` (``vllm-advisor validate RUN_DIR``) and read by the
memo/estimate writers to say how far the model was from real vLLM on runs it was not fitted to.
Errors are signed relative errors, ``predicted / measured - 1``: negative = the model predicts less
than vLLM measured (too optimistic for latencies, too pessimistic for throughput).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: Figures compared per load point, in report order, with their units.
FIGURES: dict[str, str] = {
    "ttft_p50": "s",
    "ttft_p90": "s",
    "tpot_p50": "ms",
    "itl_p50": "ms",
    "e2e_p50": "s",
    "output_throughput": "tok/s",
    "running_mean": "requests",
    "waiting_mean": "requests",
}


class FigureComparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    figure: str
    unit: str
    measured: float | None = None
    predicted: float | None = None
    error: float | None = Field(None, description="predicted / measured - 1 (signed); None when either is missing or measured is ~0")


class PointValidation(BaseModel):
    """One measured load point re-predicted from its deployment and workload."""

    model_config = ConfigDict(extra="forbid")

    run: str = Field(description="the server run (plan) the point belongs to")
    point: str
    split: str = Field(description="'fit' (used to fit vLLM's own costs), 'holdout', 'other' (a setting those costs do not model, scored apart) or 'unsplit'")
    model: str
    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int | None = None
    request_rate: float | None = Field(None, description="req/s; inf = all at once; None for a closed loop")
    prefix_len: int = 0
    max_num_batched_tokens: int | None = None
    figures: list[FigureComparison]


class KvValidation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str
    split: str
    model: str
    measured_tokens: int
    predicted_tokens: int
    error: float


class FigureError(BaseModel):
    """Median and worst absolute error of one figure over a set of points."""

    model_config = ConfigDict(extra="forbid")

    figure: str
    split: str
    points: int
    median_abs_error: float
    median_signed_error: float
    worst_abs_error: float
    worst_point: str


class ValidationReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    engine: str = Field(description="what the runs measured, e.g. 'vLLM 0.26.0 on H200 (dummy weights)'")
    split_rule: str = ""
    points: list[PointValidation]
    kv_cache: list[KvValidation]
    summary: list[FigureError]
    notes: list[str] = Field(default_factory=list)


__all__ = ["FIGURES", "FigureComparison", "FigureError", "KvValidation", "PointValidation", "ValidationReport"]
