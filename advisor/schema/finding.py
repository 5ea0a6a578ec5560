"""A diagnosis: ranked findings, each tied to its evidence, its fixes and its sources.

Language-neutral by design: a finding holds a cause id, numbers with units, codes and message ids
(:class:`~.message.Msg`), never a finished sentence, so every writer (answer, memo, chat, plots)
says it in the asker's language from one catalog (``advisor/messages/``). Every number a finding
shows is an :class:`Evidence` item that says where it came from (``origin``: the case file, a file,
/metrics, a server log, the model, ...), so an answer can always say whether a figure was measured,
reported by the user, or predicted by the model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .message import CauseId, Msg, Quantity

Severity = Literal["high", "medium", "low"]
EvidenceKind = Literal["measured", "reported", "model", "config", "text", "source"]
#: Where a figure was read: its catalog id is ``origin.<code>``; ``where`` names the file or engine.
Origin = Literal["case", "file", "model", "metrics", "log", "deployment", "workload", "question", "startup", "library"]


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: EvidenceKind = Field(description="measured (a file/metric), reported (the user's words/figures), model, config, text, source")
    origin: Origin = Field(description="where it was read")
    where: str | None = Field(None, description="the file name or engine tag, when origin is a file, metrics or a log")
    label: Msg = Field(description="what the figure is (a message id)")
    load: str | None = Field(None, description="the load point it belongs to, e.g. 'c=40'")
    value: float | str | None = Field(None, description="the figure; a str is a code or setting value, or the user's own words")
    unit: str | None = None
    detail: Msg | None = Field(None, description="one line of context, e.g. '= 4.8 requests of 64K tokens'")


class Recommendation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    change: Msg = Field(description="the change (a message id)")
    flag: str | None = Field(None, description="exact `vllm serve` flag(s) or client change, e.g. '--kv-cache-dtype fp8' (code, shown as is)")
    whatif: list[str] = Field(default_factory=list, description="the what-if keys that model it, e.g. ['kv_cache_dtype=fp8']")
    predicted_effect: Msg | None = Field(None, description="what the model predicts, with numbers and units")
    #: the model predicts every figure the user feels (TTFT, per-request speed, throughput) no better and at
    #: least one worse at the load modelled: shown as not worth making here, not as a change to make
    predicted_worse: bool = False
    #: ... every felt figure no worse and at least one better
    predicted_better: bool = False
    #: the server's output throughput the what-if predicts at the load modelled, tok/s (None: not modelled)
    predicted_throughput: float | None = None
    cost: Msg | None = None
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

    cause: CauseId = Field(description="a cause id from shared/cases/FORMAT.md; its headline is the catalog's title.<cause>")
    severity: Severity = "medium"
    confidence: float = Field(ge=0.0, le=1.0)
    score: float = Field(0.0, description="ranking score (higher first)")
    evidence: list[Evidence] = Field(default_factory=list)
    reasons: list[Msg] = Field(default_factory=list, description="the mechanism, one message per reason, with its figures")
    recommendations: list[Recommendation] = Field(default_factory=list)
    sources: list[Citation] = Field(default_factory=list)


class MissingMeasurement(BaseModel):
    """A measurement that would decide between candidate causes, with the command that takes it."""

    model_config = ConfigDict(extra="forbid")

    decides: list[CauseId] = Field(description="cause ids it separates")
    what: Msg
    command: str


class SimilarReport(BaseModel):
    """A case-library report close to the user's: its established causes, fix and thread."""

    model_config = ConfigDict(extra="forbid")

    id: str
    url: str
    causes: list[str]
    fix: str = ""
    similarity: float = Field(description="cosine of the multilingual sentence embeddings, -1..1")


class Fact(BaseModel):
    """A deployment fact shown beside an answer (the chat's side panel): a label, a value with its
    unit, and where it came from (a tag code: config, model, user, default, assumed, derived, exact)."""

    model_config = ConfigDict(extra="forbid")

    label: Msg
    value: float | str
    unit: str | None = None
    basis: str = "config"


class ModelAgreement(BaseModel):
    """Measured load points that agree with the performance model's uncalibrated prediction for the
    deployment (diagnosis/agreement.py): the first one's figures, and how many agreed."""

    model_config = ConfigDict(extra="forbid")

    load: str
    measured_tok_s: float
    predicted_tok_s: float
    measured_tpot_ms: float | None = None
    predicted_tpot_ms: float | None = None
    points: int = 1


class MeasuredTTFT(BaseModel):
    """The time to first token a benchmark file measured at its slowest load point, beside the
    performance model's uncalibrated prediction there (diagnosis/agreement.py): "why is TTFT so high?"
    answered with the figure it asks about before any cause."""

    model_config = ConfigDict(extra="forbid")

    load: str | None = Field(None, description="the load point, e.g. 'c=48'; None where the words give a figure and no client count")
    median_ms: float
    p99_ms: float | None = None
    predicted_median_ms: float | None = None
    #: the figure is the user's words, not a file's ("TTFT 16 s at 48 clients"); with no load it is set
    #: beside one prompt alone's (prefill and intake, the model's)
    stated: bool = False
    #: the prediction is one prompt alone's (prefill and intake), not the model's at ``load``
    alone: bool = False
    input_len: int | None = None


class WeightsExceed(BaseModel):
    """The weights as modelled do not fit the GPUs given, yet the words report figures of a running server
    (diagnosis/agreement.py): what serves them is not the deployment described. Even if it fit, reading
    the weights once a token caps one request's decode speed at ``ceiling_tok_s``."""

    model_config = ConfigDict(extra="forbid")

    weights_gib: float = Field(description="weights per GPU, GiB (modelled from the parameter count and format)")
    gpu_gib: float = Field(description="memory of each GPU, GiB")
    ceiling_tok_s: float = Field(description="the GPU's bandwidth over the weights per GPU: one request's decode ceiling, tok/s")
    stated_tok_s: float | None = None


class ExpectedFigures(BaseModel):
    """What the performance model expects of the deployment (diagnosis/agreement.py): one request alone,
    and, where the words or the case give a load, the figures at the heaviest one. The reply to "what
    speed should I expect?" when nothing was measured."""

    model_config = ConfigDict(extra="forbid")

    single_tok_s: float = Field(description="decode speed of one request alone, tok/s (modelled)")
    single_ttft_ms: float | None = Field(None, description="time to first token of one request alone, ms (modelled)")
    single_tok_s_measured_release: float | None = Field(
        None, description="the same with the engine terms fitted on the vLLM release measured on real GPUs, where this deployment's version is not given or older"
    )
    measured_release: str | None = Field(None, description="that release, e.g. '0.26.0'")
    load: str | None = Field(None, description="the load point of the figures below, e.g. 'c=16'")
    request_tok_s: float | None = Field(None, description="decode speed per request at that load, tok/s (1000 / TPOT)")
    tpot_ms: float | None = None
    ttft_ms: float | None = Field(None, description="TTFT p50 at that load, ms")
    output_tok_s: float | None = Field(None, description="the server's output throughput at that load, tok/s")
    running: float | None = Field(None, description="requests running at once (time-weighted mean)")
    input_len: int | None = None
    output_len: int | None = None
    #: capacity: requests of input + output tokens the KV cache holds at once (modelled), the cache's
    #: size and bytes per token, and the decode speed of each when that many run together
    request_tokens: int | None = None
    kv_cache_tokens: int | None = None
    kv_kib_per_token: float | None = Field(None, description="KV cache per token per GPU, KiB")
    fits: float | None = None
    full_batch: int | None = Field(None, description="requests decoding together at full capacity (the fit, at most max_num_seqs)")
    full_batch_tok_s: float | None = Field(None, description="decode speed per request at that batch, tok/s (modelled)")
    #: no request length given: how many fit at a few lengths (request tokens, requests), up to max_model_len
    fits_by_length: list[tuple[int, float]] = Field(default_factory=list)


class StatedSpeed(BaseModel):
    """A per-request speed the user's words state beside the performance model's decode speed of one
    request alone on the deployment (diagnosis/agreement.py): "is 8 tok/s normal?" answered from
    what the GPU's memory bandwidth and the model's bytes allow."""

    model_config = ConfigDict(extra="forbid")

    stated_tok_s: float
    modelled_tok_s: float
    context_tokens: int
    #: one request alone at the hardware's peak (weights and KV over the full memory bandwidth): the most
    #: the GPU allows, above which a stated figure is not one request's
    ceiling_tok_s: float | None = None
    #: where the vLLM version was not given: one request alone with the engine terms fitted on the release
    #: measured on real GPUs (``modelled_tok_s`` keeps the sourced terms assumed for older releases), and that release
    release_tok_s: float | None = None
    release: str | None = None
    #: the speed was stated at one client count above one ("8 users each get 20 tok/s"): that load, and the
    #: model's per-request output rate there counting the first token's wait (``modelled_tok_s`` is then
    #: the per-request decode speed at that load, not one request alone's)
    load: str | None = None
    modelled_output_tok_s: float | None = None


class StatedThroughput(BaseModel):
    """The whole server's output rate the user's words state at one client count, beside the performance
    model's at that load (diagnosis/agreement.py): "900 tok/s at 32 clients, normal?" answered from what
    the deployment's batch does there."""

    model_config = ConfigDict(extra="forbid")

    stated_tok_s: float
    #: the model's output tokens a second at that load (prompt tokens added where ``counts_input``)
    modelled_tok_s: float
    load: str
    #: the stated figure counts prompt tokens too (vLLM bench's "Total Token throughput")
    counts_input: bool = False
    #: the same load with every kernel at the hardware's peak: the most this deployment can give
    ceiling_tok_s: float | None = None


class Diagnosis(BaseModel):
    model_config = ConfigDict(extra="forbid")

    findings: list[Finding] = Field(default_factory=list)
    missing: list[MissingMeasurement] = Field(default_factory=list)
    similar_reports: list[SimilarReport] = Field(default_factory=list, description="nearest case-library reports")
    undecided: list[CauseId] = Field(default_factory=list, description="leading causes the evidence cannot separate")
    facts: list[Fact] = Field(default_factory=list)
    notes: list[Msg] = Field(default_factory=list)
    language: str = "en"
    #: the measured figures agree with the model's prediction for this deployment (None: not measured,
    #: not modelled, or they disagree)
    agreement: ModelAgreement | None = None
    #: a measured load point far slower than the model's prediction (None: none is)
    disagreement: ModelAgreement | None = None
    #: a single-request speed the words state, beside the model's (None: none stated, or not modelled)
    stated_speed: StatedSpeed | None = None
    #: each request's speed the words state at one load beside one request alone's ("alone 80 tok/s, but at
    #: 64 each gets 20"), beside the model's there (None: not stated so, or not modelled)
    stated_load_speed: StatedSpeed | None = None
    #: the measured time to first token at the slowest measured load point, beside the model's (None: no benchmark file gives one)
    measured_ttft: MeasuredTTFT | None = None
    weights_exceed: WeightsExceed | None = None
    #: the whole server's output rate the words state at one load, beside the model's (None: none stated, or not modelled)
    stated_throughput: StatedThroughput | None = None
    #: what the model expects of the deployment (None: not modelled, or measured runs say more)
    expected: ExpectedFigures | None = None

    @property
    def causes(self) -> list[str]:
        return [f.cause for f in self.findings]


__all__ = ["Citation", "Diagnosis", "Evidence", "ExpectedFigures", "Fact", "Finding", "MissingMeasurement", "ModelAgreement", "Msg", "Quantity", "Recommendation", "SimilarReport"]
