"""Case files: a deployment, a workload, what was measured, and a question.

The layout is the project's contract, ``shared/cases/FORMAT.md``: every field optional, unknown
values left out or ``null``. Loading and saving live in :mod:`vllm_advisor.probe.casefile`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cause_ids import CauseId
from .deployment import Deployment


#: Ranges a case file's numbers are checked against when it is read (issue 19: NaN, overflow and
#: nonsense stop at the schema with the field named, not deep inside the model). Generous: a value
#: outside them is not a deployment anyone runs.
MAX_TOKENS = 100_000_000  # per request: 100x the longest context windows of 2025
MAX_CLIENTS = 10_000_000
MAX_MS = 1e10  # about 115 days
MAX_RATE = 1e9  # tokens per second


class LatencyFigures(BaseModel):
    """mean / p50 / p99 of one latency in milliseconds, as a user reported them."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mean: float | None = Field(None, ge=0, le=MAX_MS)
    p50: float | None = Field(None, ge=0, le=MAX_MS)
    p99: float | None = Field(None, ge=0, le=MAX_MS)

    @model_validator(mode="before")
    @classmethod
    def _one_figure(cls, value):
        """``ttft_ms: 21000``: one figure without its statistic, as users write it, is read as the mean (a new
        user's find: it was refused with "expected a mapping"); ``{p50: 21000}`` says which."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"mean": value}
        return value

    def is_empty(self) -> bool:
        return self.mean is None and self.p50 is None and self.p99 is None


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    input_len: int | None = Field(None, ge=0, le=MAX_TOKENS, description="tokens, typical prompt length")
    output_len: int | None = Field(None, ge=0, le=MAX_TOKENS, description="tokens, typical completion length")
    shared_prefix_len: int | None = Field(None, ge=0, le=MAX_TOKENS, description="tokens common to all prompts")
    concurrency: int | None = Field(None, ge=0, le=MAX_CLIENTS, description="closed-loop client concurrency")
    request_rate: float | None = Field(None, ge=0, allow_inf_nan=True, description="open-loop requests per second (inf: all at once)")
    dataset: str | None = None


class Observation(BaseModel):
    """One hand-measured load point; any subset of the keys."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    concurrency: int | None = Field(None, ge=0, le=MAX_CLIENTS)
    request_rate: float | None = Field(None, ge=0, allow_inf_nan=True)
    output_tok_s_per_request: float | None = Field(None, ge=0, le=MAX_RATE, description="per-request generation speed, as the user computed it")
    output_tok_s_total: float | None = Field(None, ge=0, le=MAX_RATE, description="whole-server output throughput")
    ttft_ms: LatencyFigures | None = None
    tpot_ms: LatencyFigures | None = None
    itl_ms: LatencyFigures | None = None
    e2e_ms: LatencyFigures | None = None
    gpu_util_pct: float | None = Field(None, ge=0, le=100)
    kv_cache_usage_pct: float | None = Field(None, ge=0, le=100)
    num_requests_running: float | None = Field(None, ge=0, le=MAX_CLIENTS)
    num_requests_waiting: float | None = Field(None, ge=0, le=MAX_CLIENTS)
    preemptions: float | None = Field(None, ge=0, le=1e12)
    prefix_cache_hit_rate: float | None = Field(None, ge=0, le=100)
    notes: str | None = None


class CaseReport(BaseModel):
    """What a real thread established about a case: the label of a case-library entry.

    Kept apart from the user-facing fields so the diagnosis never reads it: the question and
    observations are what the reporter knew before the answer, this block is the answer.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{2,120}$")
    url: str = Field(pattern=r"^https?://\S+$")
    date: str | None = Field(None, pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$", description="the thread's opening date")
    language: Literal["en", "zh"] = "en"
    source_kind: Literal["github_issue", "github_discussion", "forum", "blog", "qa_site"] = "github_issue"
    causes: list[CauseId] = Field(min_length=1, max_length=4, description="established causes, most important first")
    root_cause: str
    fix: str | None = None
    confidence: Literal["high", "medium", "low"]
    established_by: Literal["maintainer", "accepted_answer", "reporter_confirmed", "community"] | None = None


class CaseFile(BaseModel):
    """A whole case. ``source`` is where it was loaded from (not written back)."""

    model_config = ConfigDict(extra="forbid")

    question: str | None = None
    deployment: Deployment = Field(default_factory=Deployment)
    workload: Workload = Field(default_factory=Workload)
    observations: list[Observation] = Field(default_factory=list)
    attachments: list[str] = Field(default_factory=list, description="paths relative to the case file")
    report: CaseReport | None = Field(None, description="case-library entries only: what the thread established")

    source: str | None = Field(None, exclude=True)

    def to_yaml_dict(self) -> dict[str, Any]:
        """The FORMAT.md layout, with unknown (None/empty) values left out."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"source"})
