"""What `ask` returns: the answer text and everything it was written from.

``--json`` prints this object, so a program reading it gets the findings (with their evidence and
sources), the Markdown answer, the numbered sources its ``[n]`` markers point to, whether an LLM
wrote the prose, and every caveat (an unreachable endpoint, a repaired citation, an assumed version).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..schema.finding import Citation, Finding, MissingMeasurement


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    markdown: str = Field(description="what is shown: the short answer (reply, key numbers, top changes) or, asked for, the full analysis")
    full_markdown: str = Field("", description="the full analysis (every finding with its evidence, the figures, what would decide it)")
    tail: str = Field("", description="the end of markdown (caveats, numbered sources): what to print after LLM prose that already streamed")
    language: str = Field(description="'en' or 'zh': the language the answer is written in")
    sources: list[Citation] = Field(default_factory=list, description="numbered 1..N; the [n] markers in markdown point here")
    findings: list[Finding] = Field(default_factory=list)
    missing: list[MissingMeasurement] = Field(default_factory=list)
    llm_used: bool = Field(False, description="True when an LLM wrote the prose and its citations checked out")
    llm_model: str | None = None
    notes: list[str] = Field(default_factory=list, description="caveats, one line each")
