"""A diagnosis: ranked findings, each tied to its evidence, its fixes and its sources.

Every number a finding shows is an :class:`Evidence` item that names where it came from
(``bench.json: p99_itl_ms``, ``metrics: vllm:num_requests_waiting``, ``model: KV capacity``,
``user: observation at c=40``), so an answer can always say whether a figure was measured, reported
by the user, or predicted by the model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["high", "medium", "low"]
EvidenceKind = Literal["measured", "reported", "model", "config", "text", "source"]


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: EvidenceKind = Field(description="measured (a file/metric), reported (the user's words/figures), model, config, text, source")
    source: str = Field(description="where: 'bench.json', 'metrics', 'server log', 'case file', 'model', 'question'")
    label: str = Field(description="what, e.g. 'p99_itl_ms' or 'KV capacity'")
    value: float | str | None = None
    unit: str | None = None
    detail: str | None = Field(None, description="one line of context, e.g. '= 4.8 requests of 64K tokens'")

    def render(self) -> str:
        value = "" if self.value is None else format_value(self.value)
        unit = f" {self.unit}" if self.unit else ""
        detail = f" ({self.detail})" if self.detail else ""
        head = f"{self.source}: {self.label}"
        return f"{head} = {value}{unit}{detail}" if value else f"{head}{detail}"


def format_value(value: float | str) -> str:
    """Numbers as people read them: 327,120 / 38.2 / 0.505; never scientific notation."""
    if not isinstance(value, float):
        return str(value)
    if value.is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return f"{value:.3g}"


class Recommendation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    change: str = Field(description="the change in words")
    flag: str | None = Field(None, description="exact `vllm serve` flag(s) or client change, e.g. '--kv-cache-dtype fp8'")
    whatif: list[str] = Field(default_factory=list, description="the what-if keys that model it, e.g. ['kv_cache_dtype=fp8']")
    predicted_effect: str | None = Field(None, description="what the model predicts, with numbers and units")
    cost: str | None = None
    verify: str | None = Field(None, description="a command that verifies it (vllm bench serve ..., a PromQL query)")


class Citation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    number: int = 0  # position in the answer's source list (assigned by the writer)
    doc_id: str
    chunk_id: str | None = None
    title: str
    url: str
    heading: str | None = None
    kind: str = "card"
    snippet: str | None = None


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cause: str = Field(description="a cause id from shared/cases/FORMAT.md")
    title: str
    severity: Severity = "medium"
    confidence: float = Field(ge=0.0, le=1.0)
    score: float = Field(0.0, description="ranking score (higher first)")
    evidence: list[Evidence] = Field(default_factory=list)
    explanation: str = ""
    recommendations: list[Recommendation] = Field(default_factory=list)
    sources: list[Citation] = Field(default_factory=list)


class MissingMeasurement(BaseModel):
    """A measurement that would decide between candidate causes, with the command that takes it."""

    model_config = ConfigDict(extra="forbid")

    decides: list[str] = Field(description="cause ids it separates")
    what: str
    command: str


class SimilarReport(BaseModel):
    """A case-library report close to the user's: its established causes, fix and thread."""

    model_config = ConfigDict(extra="forbid")

    id: str
    url: str
    causes: list[str]
    fix: str = ""
    similarity: float = Field(description="cosine of the multilingual sentence embeddings, -1..1")


class Diagnosis(BaseModel):
    model_config = ConfigDict(extra="forbid")

    findings: list[Finding] = Field(default_factory=list)
    missing: list[MissingMeasurement] = Field(default_factory=list)
    similar_reports: list[SimilarReport] = Field(default_factory=list, description="nearest case-library reports")
    undecided: list[str] = Field(default_factory=list, description="leading causes the evidence cannot separate")
    facts: dict[str, str] = Field(default_factory=dict, description="deployment facts shown in answers (name -> value with unit)")
    notes: list[str] = Field(default_factory=list)
    language: str = "en"

    @property
    def causes(self) -> list[str]:
        return [f.cause for f in self.findings]
