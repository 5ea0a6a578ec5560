"""One session with the advisor: the inputs read once, the model built once, then diagnose, answer,
memo or estimate as often as asked.

WHY one object: the pipeline gather -> diagnose -> sources -> write used to be written out three
times (CLI ask, CLI memo, the chat's Conversation), each with its own order of steps, its own
secret scrubbing and its own fallbacks. Here it is written once; ``ask``, ``memo`` and ``chat`` are
thin callers. Gathering is the slow part (files parsed, the performance model built and
calibrated: seconds) and depends only on the evidence, so a Session gathers at most once, under a
lock (the chat asks from worker threads); a question only re-runs the diagnosis, which reads the
question's words.

    from vllm_advisor import Session
    s = Session(profile="examples/seed-qwen32b-h800-long-input.yaml")
    result = s.answer("为什么100并发和40并发差不多？")
    print(result.answer.markdown)
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import UsageError

Stage = Callable[[str, int], None]
Check = Callable[[], None]

#: what a memo answers when neither the case file nor the caller gives a question
DEFAULT_QUESTION = "Why is this deployment slow, and what should change?"


def _no_check() -> None:
    return None


def _no_stage(_text: str, _step: int) -> None:
    return None


@dataclass(frozen=True)
class LLMSettings:
    """An OpenAI-compatible endpoint that writes the prose from the same findings and sources."""

    base_url: str
    model: str | None = None
    key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0

    def to_dict(self) -> dict[str, Any]:
        return {"llm_base_url": self.base_url, "llm_model": self.model, "llm_key_env": self.key_env}


@dataclass
class Result:
    """One answered question: the answer and everything it was written from."""

    answer: Any  # answer.model.Answer
    diagnosis: Any  # schema.Diagnosis
    inputs: Any  # diagnosis.inputs.DiagnosisInputs
    sources: list = field(default_factory=list)
    streamed: bool = False  # the LLM's prose went out through on_token as it came


def scrub_user_text(inputs) -> None:
    """Remove credentials from the user's own words before anything reads them: the diagnosis
    quotes excerpts of the question, the LLM endpoint receives it, the answer, the memo and the log
    repeat it. A key has no diagnostic value, so it never gets that far."""
    from .logs import redact_text

    inputs.question = redact_text(inputs.question)
    if inputs.case is not None:
        inputs.case.question = redact_text(inputs.case.question)
        inputs.case.workload.dataset = redact_text(inputs.case.workload.dataset)
        for obs in inputs.case.observations:
            obs.notes = redact_text(obs.notes)
    for run in inputs.measured:
        if isinstance(run.metadata.get("user_notes"), str):
            run.metadata["user_notes"] = redact_text(run.metadata["user_notes"])


class Session:
    """The evidence of one deployment, read once; questions, memos and estimates over it."""

    def __init__(
        self,
        *,
        profile: str | Path | None = None,
        attachments: list[Path] | tuple[Path, ...] = (),
        metrics: list[str] | tuple[str, ...] = (),
        serve_cmd: str | None = None,
        overrides: dict[str, Any] | None = None,
        prometheus: dict[str, Any] | None = None,
        scrape_kwargs: dict[str, Any] | None = None,
        calibrate: bool = False,
        chroma_url: str | None = None,
        kb: Any = None,
        llm: LLMSettings | None = None,
    ) -> None:
        self.profile = Path(profile) if profile else None
        self.attachments = [Path(a) for a in attachments]
        self.metrics = list(metrics)
        self.serve_cmd = serve_cmd
        self.overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        self.prometheus = prometheus
        self.scrape_kwargs = scrape_kwargs
        self.calibrate = calibrate
        self.chroma_url = chroma_url
        self.kb = kb
        self.llm = llm
        self._gathered = None
        self._with_words: dict[str, object] = {}  # gathered again for questions that state deployment facts
        self._lock = threading.Lock()

    # -- reading (once) ----------------------------------------------------------------------------

    def gathered(self, check: Check = _no_check):
        """Every input parsed once and the deployment modelled (through ``diagnosis.inputs.gather``,
        which sets unreadable pieces aside with notes); cached for the session's life."""
        if self._gathered is not None:
            return self._gathered
        with self._lock:
            if self._gathered is None:
                check()
                self._gathered = self._gather()
        return self._gathered

    def _gather(self, question: str | None = None):
        """``diagnosis.inputs.gather`` over the session's inputs (``question``: read for deployment facts)."""
        from .diagnosis.inputs import gather

        return gather(
            question=question, profile=self.profile, attachments=list(self.attachments), metrics=list(self.metrics), serve_cmd=self.serve_cmd,
            overrides=dict(self.overrides), calibrate=self.calibrate, prometheus=self.prometheus, scrape_kwargs=self.scrape_kwargs,
        )

    def _gathered_with_words(self, base, question: str, check: Check):
        """The gathered inputs again, with ``question`` read for deployment facts, when it states one
        that the session's inputs lack ("Qwen2.5-32B on two H800s, 63K prompts, 40 clients"): the
        performance model then has something to compute. Kept per set of facts (a chat asks many
        questions; most state nothing new and share the session's own inputs)."""
        from .diagnosis.inputs import facts_from_words

        probe = copy.copy(base)
        probe.question = question
        said = facts_from_words(probe)
        if said.empty():
            return base
        key = said.model_dump_json()
        with self._lock:
            if key not in self._with_words:
                check()
                self._with_words[key] = self._gather(question)
            return self._with_words[key]

    def inputs(self, question: str | None = None, *, language_of: str | None = None, check: Check = _no_check):
        """A copy of the gathered inputs holding this question (the case file's when None), its
        language detected from ``language_of`` (default: the question), secrets scrubbed."""
        from .diagnosis.inputs import detect_language

        base = self.gathered(check)
        if question is not None and question != base.question:
            base = self._gathered_with_words(base, question, check)
        inputs = copy.copy(base)
        inputs.notes = list(base.notes)
        if question is not None:
            inputs.question = question
        inputs.language = detect_language(language_of or inputs.question)
        scrub_user_text(inputs)
        return inputs

    # -- what a session offers ---------------------------------------------------------------------

    def diagnose(self, question: str | None = None, *, language_of: str | None = None, check: Check = _no_check):
        from .diagnosis.engine import diagnose

        inputs = self.inputs(question, language_of=language_of, check=check)
        check()
        return diagnose(inputs)

    def answer(
        self,
        question: str | None = None,
        *,
        language_of: str | None = None,
        on_token: Callable[[str], None] | None = None,
        on_stage: Stage = _no_stage,
        check: Check = _no_check,
        on_diagnosis: Callable[[Any], None] | None = None,
        require_question: bool = True,
        short: bool = True,
    ) -> Result:
        """gather (cached) -> diagnose -> number the sources -> write (the LLM's prose when the
        session has an endpoint, falling back to the embedded writer with a note). ``short``: the
        answer that fits a screen (the reply to what was asked, key numbers, top changes); the
        full analysis is always in ``answer.full_markdown``."""
        from .answer import attach_sources, write_answer, write_answer_llm
        from .answer.embedded import number_sources_for_short
        from .diagnosis.engine import diagnose

        if self.kb is None and not self.chroma_url:  # the local index opens beside the diagnosis
            from .answer.sources import prefetch_knowledge_base

            prefetch_knowledge_base()
        on_stage("reading the evidence and modelling the deployment", 1)
        inputs = self.inputs(question, language_of=language_of, check=check)
        if require_question and not inputs.question:
            raise UsageError(f"{self.profile}: the case file has no question; give one as the QUESTION argument")
        check()
        on_stage("diagnosing", 2)
        diagnosis = diagnose(inputs)
        check()
        if on_diagnosis is not None:
            on_diagnosis(diagnosis)  # e.g. the chat says what changed before the prose streams
        on_stage("finding sources", 3)
        kb_args = {"kb": self.kb} if self.kb is not None else {}
        sources = attach_sources(diagnosis, inputs, chroma_url=self.chroma_url, **kb_args)
        check()
        streamed = False
        if self.llm is None:
            on_stage("writing the answer", 4)
            answer = write_answer(inputs, diagnosis, language=inputs.language, short=short)
            sources = answer.sources  # numbered as the answer cites them (the short one's first)
        else:
            if short:  # the LLM cites the numbers the embedded short answer would: its sources first
                sources = number_sources_for_short(inputs, diagnosis, inputs.language)
            on_stage(f"the LLM at {_display(self.llm.base_url)} is writing", 4)

            def token(piece: str) -> None:
                nonlocal streamed
                streamed = True
                if on_token is not None:
                    on_token(piece)

            answer = write_answer_llm(
                inputs, diagnosis, sources, base_url=self.llm.base_url, model=self.llm.model, api_key_env=self.llm.key_env,
                timeout=self.llm.timeout, on_token=token if on_token is not None else None, language=inputs.language,
                check=None if check is _no_check else check,
            )
        return Result(answer=answer, diagnosis=diagnosis, inputs=inputs, sources=sources, streamed=streamed)

    def memo(self, out_path: str | Path, question: str | None = None, *, seed: int | None = None):
        """The tuning memo (Markdown + plots) for the session's evidence; returns (Result-like
        pieces, MemoResult). Memos are calibrated: a session made for one is built with calibrate=True."""
        from .answer import attach_sources
        from .diagnosis.engine import diagnose
        from .memo import write_memo

        inputs = self.inputs(question)
        if not inputs.question:
            inputs.question = DEFAULT_QUESTION
            from .diagnosis.inputs import detect_language

            inputs.language = detect_language(inputs.question)
        diagnosis = diagnose(inputs)
        kb_args = {"kb": self.kb} if self.kb is not None else {}
        sources = attach_sources(diagnosis, inputs, chroma_url=self.chroma_url, **kb_args)
        result = write_memo(inputs, diagnosis, sources, Path(out_path), seed=seed)
        return Result(answer=None, diagnosis=diagnosis, inputs=inputs, sources=sources), result

    def estimate(self) -> "Estimate":
        """The performance model's view of the deployment: the engine model (memory, KV capacity,
        resolved settings) and the load points measured, predicted and at the hardware ceiling."""
        inputs = self.gathered()
        if inputs.engine is None:
            raise UsageError(inputs.engine_error or "model or GPU unknown: no performance model")
        return Estimate(engine=inputs.engine, measured=list(inputs.measured), predicted=list(inputs.predicted), ceiling=list(inputs.ceiling))


@dataclass
class Estimate:
    engine: Any  # perf.predict.EngineModel
    measured: list
    predicted: list
    ceiling: list


def _display(url: str) -> str:
    from .probe.metrics.scrape import display_url

    return display_url(url)
