"""One chat with the advisor: the evidence given, the messages exchanged, the latest findings.

WHY a class without Textual in it: the app drives it from worker threads and commits the results
on the UI thread; tests and benchmarks drive it directly. The split is strict:

* ``answer`` / ``refresh`` / ``estimate`` ... compute only (gather, diagnose, write) and return a
  result; they may run in a thread and may be abandoned (``check`` raises :class:`Cancelled`);
* ``commit`` / ``note`` / ``apply_*`` change the conversation and write the log, on one thread.

Gathering is the slow part (the performance model is built and calibrated: seconds), and it only
depends on the evidence, so its result is cached by the evidence's signature; a question only
re-runs the diagnosis, which reads the question's words.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from vllm_advisor.errors import UsageError
from vllm_advisor.session import LLMSettings  # noqa: F401  (the chat's endpoint settings are the session's)

from .chatlog import ChatLog, new_conversation_id
from .evidence import Detected, Evidence

Stage = Callable[[str, int], None]
Check = Callable[[], None]
STAGES = 4
#: earlier questions handed to the diagnosis (and the LLM) as context
MAX_EARLIER = 4
_GATHER_CACHE: "OrderedDict[tuple, Any]" = OrderedDict()
_GATHER_CACHE_SIZE = 4
_GATHER_LOCK = threading.Lock()


class Cancelled(Exception):
    """The user pressed Escape: the result of this computation is not wanted any more."""


def _no_check() -> None:
    return None


def _no_stage(_text: str, _step: int) -> None:
    return None


@dataclass
class Message:
    role: Literal["user", "advisor"]
    text: str
    sources: list[Any] = field(default_factory=list)  # Citation, for advisor answers


@dataclass
class Turn:
    """What one question produced, before it is committed."""

    question: str
    text: str  # everything shown for the answer (the note on what changed, then the answer)
    answer: Any  # vllm_advisor.answer.Answer
    diagnosis: Any  # vllm_advisor.schema.Diagnosis
    duration_ms: float

    @property
    def sources(self) -> list:
        return list(self.answer.sources)


class Conversation:
    def __init__(
        self,
        *,
        evidence: Evidence | None = None,
        llm: LLMSettings | None = None,
        log: ChatLog | None = None,
        conversation_id: str | None = None,
        chroma_url: str | None = None,
    ) -> None:
        self.id = conversation_id or new_conversation_id()
        self.evidence = evidence or Evidence()
        self.llm = llm
        self.chroma_url = chroma_url  # answers cite this team Chroma server's documents, not the local index
        self.log = log
        self.messages: list[Message] = []
        self.questions: list[str] = []
        self.diagnosis: Any = None  # the latest Diagnosis (an answer's, or a refresh's)
        self.findings: list[Any] = []  # the findings of the latest answer: what "since" compares with
        self.sources: list[Any] = []  # the numbered sources of the latest answer
        self.last_answer: Any = None  # the latest Answer: its full analysis is one /details away
        self.notes: list[str] = []

    # -- evidence (UI thread) ------------------------------------------------------------------

    def detect(self, path: Path, *, as_profile: bool = False, check: Check = _no_check) -> Detected:
        """What an attached file is, read once: the evidence with the file added is gathered by the
        Session that the next question will use (cached per evidence state), and the side panel's
        label comes from what it parsed. A file gather sets aside is refused with its reason."""
        found = self.detect_many([(path, as_profile)], check)[0][1]
        if isinstance(found, Exception):
            raise found
        return found

    def detect_many(self, files: list[tuple[Path, bool]], check: Check = _no_check) -> list[tuple[Path, Any]]:
        """``detect`` for several files given together (the chat's start-up files): one gather for
        all of them. Each result is a Detected or the AdvisorError that refuses the file."""
        from vllm_advisor.errors import AdvisorError
        from vllm_advisor.probe.files import check_readable

        from .evidence import _looks_like_case, detect_file, label_from_inputs

        candidate = copy.deepcopy(self.evidence)
        plan: list[tuple[Path, bool, Any]] = []  # path, read as a case, a result already known
        for raw, as_profile in files:
            path = Path(raw).expanduser().resolve()
            try:
                check_readable(path)
                as_case = path.suffix.lower() in (".yaml", ".yml") and _looks_like_case(path)
                if as_case and (as_profile or candidate.profile is None or candidate.profile == path):
                    candidate.profile = path
                    if path in candidate.attachments:
                        candidate.attachments.remove(path)
                    plan.append((path, True, None))
                elif as_case or as_profile:
                    plan.append((path, as_case, detect_file(path)))  # a case beside the profile, or a profile that is none
                else:
                    if path not in candidate.attachments and path != candidate.profile:
                        candidate.attachments.append(path)
                    plan.append((path, False, None))
            except AdvisorError as exc:
                plan.append((path, False, exc))
        check()
        todo = [p for p in plan if p[2] is None]
        inputs = self._session_for(candidate).gathered(check) if todo else None
        out: list[tuple[Path, Any]] = []
        for path, as_case, known in plan:
            if known is not None:
                out.append((path, known))
                continue
            try:
                found = label_from_inputs(path, inputs, as_case=as_case)
                out.append((path, found if found is not None else detect_file(path)))
            except AdvisorError as exc:
                out.append((path, exc))
        return out

    def apply_file(self, path: Path, detected: Detected, *, as_profile: bool = False) -> str:
        """Add an attached file already detected (in a worker) and say what happened."""
        path = Path(path).expanduser().resolve()
        self.evidence.labels[str(path)] = detected.label
        if detected.kind == "case" and (as_profile or self.evidence.profile is None or self.evidence.profile == path):
            replaced = self.evidence.profile if self.evidence.profile not in (None, path) else None
            self.evidence.profile = path
            if path in self.evidence.attachments:
                self.evidence.attachments.remove(path)
            extra = f" (replaces {replaced.name})" if replaced else ""
            return f"Using **{path.name}** as the deployment's case file{extra}: {detected.label}."
        if as_profile:
            raise UsageError(f"{path.name} is not a case file ({detected.label}); use /attach for it")
        if path in self.evidence.attachments or path == self.evidence.profile:
            return f"**{path.name}** is already attached ({detected.label})."
        self.evidence.attachments.append(path)
        extra = " Its observations are read as measured load points; the deployment stays the one from the profile." if detected.kind == "case" else ""
        return f"Attached **{path.name}**: {detected.label}.{extra}"

    def apply_serve_cmd(self, command: str) -> str:
        from vllm_advisor.probe.serve_cmd import engine_args_for, parse_serve_command

        parsed = parse_serve_command(command)  # one-line UsageError for a bad command
        engine_args_for(parsed)
        self.evidence.serve_cmd = command
        model = f" for **{parsed.model}**" if parsed.model else ""
        return f"Serve command set{model}."

    def apply_fact(self, key: str, value: Any) -> str:
        if value is None:
            self.evidence.facts.pop(key, None)
            return f"`{key}` unset."
        self.evidence.facts[key] = value
        return f"`{key}` = **{value}**."

    def add_metrics_source(self, source: str, label: str) -> None:
        if source not in self.evidence.metrics:
            self.evidence.metrics.append(source)
        self.evidence.labels[source] = label

    def clear(self, *, evidence: bool = False) -> None:
        """A new conversation (new id): messages, findings and sources forgotten."""
        self.id = new_conversation_id()
        self.messages.clear()
        self.questions.clear()
        self.findings = []
        self.sources = []
        self.diagnosis = None
        if evidence:
            self.evidence = Evidence()

    # -- computing (any thread) ----------------------------------------------------------------

    def session(self):
        """The library Session for the evidence as it stands (one per evidence state, shared by
        the conversations of this process, so switching back to earlier evidence is free)."""
        return self._session_for(copy.deepcopy(self.evidence))

    def _session_for(self, ev: Evidence):
        from vllm_advisor.session import Session

        key = (ev.signature(), self.llm, self.chroma_url)
        with _GATHER_LOCK:
            if key in _GATHER_CACHE:
                _GATHER_CACHE.move_to_end(key)
                return _GATHER_CACHE[key]
            session = Session(
                profile=ev.profile, attachments=list(ev.attachments), metrics=list(ev.metrics), serve_cmd=ev.serve_cmd,
                overrides=dict(ev.facts), calibrate=True, chroma_url=self.chroma_url, llm=self.llm,
            )
            _GATHER_CACHE[key] = session
            while len(_GATHER_CACHE) > _GATHER_CACHE_SIZE:
                _GATHER_CACHE.popitem(last=False)
        return session

    def gathered(self, check: Check = _no_check):
        """The evidence read and modelled, once per evidence state (the Session gathers under a lock)."""
        return self.session().gathered(check)

    def question_context(self, question: str, case_question: str | None) -> str:
        """The text the diagnosis reads: the question, with earlier ones (and the case file's) as context."""
        earlier = [q for q in self.questions if q.strip() != question.strip()][-MAX_EARLIER:]
        if case_question and case_question.strip() != question.strip() and case_question not in earlier:
            earlier.insert(0, case_question)
        if not earlier:
            return question
        return "Earlier in this conversation:\n" + "\n".join(f"- {q}" for q in earlier) + f"\n\nQuestion now: {question}"

    def _question_and_language(self, question: str | None, check: Check) -> tuple[str | None, str | None]:
        base = self.gathered(check)
        case_question = base.case.question if base.case else None
        if question:
            return self.question_context(question, case_question), question
        last = self.questions[-1] if self.questions else None
        return (self.question_context(last, case_question) if last else case_question), (last or case_question)

    def inputs_for(self, question: str | None, check: Check = _no_check):
        """A copy of the gathered inputs holding this question (scrubbed of secrets)."""
        text, language_of = self._question_and_language(question, check)
        return self.session().inputs(text, language_of=language_of, check=check)

    def answer(self, question: str, *, on_stage: Stage = _no_stage, on_token: Callable[[str], None] | None = None, check: Check = _no_check) -> Turn:
        """The session answers (gather cached, diagnose, sources, write); the text is streamed to
        ``on_token``, after a note on what changed since the previous answer."""
        start = time.perf_counter()
        shown: list[str] = []

        def emit(piece: str) -> None:
            check()
            shown.append(piece)
            if on_token is not None:
                on_token(piece)

        session = self.session()
        text, language_of = self._question_and_language(question, check)

        def said_what_changed(diagnosis) -> None:
            since = since_previous(self.findings, diagnosis.findings, diagnosis.language)
            if since:
                emit(since + "\n\n")

        result = session.answer(text, language_of=language_of, on_stage=on_stage, check=check, on_diagnosis=said_what_changed,
                                on_token=emit if self.llm is not None else None)
        check()  # a cancel inside the stream made the writer fall back; the result is not wanted
        answer, diagnosis = result.answer, result.diagnosis
        if self.llm is None:
            for section in markdown_sections(answer.markdown):
                emit(section)  # the direct answer is drawn while the rest is still being laid out
        elif result.streamed and answer.llm_used:
            emit("\n\n" + answer.tail)
        elif result.streamed:
            why = answer.notes[0] if answer.notes else "the LLM's answer was not used"
            emit(f"\n\n---\n\n*{why}*\n\n" + answer.markdown)
        else:
            emit(answer.markdown)
        return Turn(question=question, text="".join(shown), answer=answer, diagnosis=diagnosis, duration_ms=(time.perf_counter() - start) * 1000)

    def refresh(self, check: Check = _no_check):
        """The diagnosis of the evidence as it stands (no answer written): for the side panels."""
        text, language_of = self._question_and_language(None, check)
        return self.session().diagnose(text, language_of=language_of, check=check)

    # -- state and log (UI thread) -------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What every log row carries, so `--resume` can rebuild the conversation."""
        out: dict[str, Any] = {"evidence": self.evidence.to_dict(), "turn": len(self.questions)}
        if self.llm is not None:
            out.update(self.llm.to_dict())
        if self.chroma_url:
            out["chroma_url"] = self.chroma_url  # the log scrubs a password in it
        return out

    def commit(self, turn: Turn) -> int | None:
        """Add an answered question to the conversation and the log (raises AdvisorError if the
        log cannot be written; the conversation itself is updated first)."""
        self.messages.append(Message("user", turn.question))
        self.messages.append(Message("advisor", turn.text, turn.sources))
        self.questions.append(turn.question)
        self.diagnosis = turn.diagnosis
        self.findings = list(turn.diagnosis.findings)
        self.sources = turn.sources
        self.last_answer = turn.answer
        if self.log is None:
            return None
        return self.log.record(
            self.id, event="question", state=self.state(), question=turn.question, output=turn.text,
            findings=turn.answer.findings, sources=turn.answer.sources, duration_ms=turn.duration_ms,
            llm_used=turn.answer.llm_used,
        )

    def note(self, command: str, reply: str, *, event: str, error: str | None = None, duration_ms: float | None = None) -> int | None:
        """A command and the advisor's reply (evidence changes, estimates, what-ifs, memos)."""
        self.messages.append(Message("user", command))
        self.messages.append(Message("advisor", reply))
        if self.log is None:
            return None
        return self.log.record(self.id, event=event, state=self.state(), question=command, output=reply, error=error, duration_ms=duration_ms)

    def record_interrupted(self, question: str, partial: str) -> int | None:
        """A question whose answer was cut short by quitting: kept, with what had streamed."""
        if self.log is None:
            return None
        return self.log.record(self.id, event="question", state=self.state(), question=question, output=partial or None, error="interrupted before the answer was complete")

    @classmethod
    def resume(cls, log: ChatLog, *, llm: LLMSettings | None = None, chroma_url: str | None = None) -> "Conversation | None":
        """The newest logged conversation: its messages, evidence (files that still exist), latest
        findings and sources. None when there is none."""
        from vllm_advisor.schema import Citation, Finding

        cid = log.last_conversation_id()
        if cid is None:
            return None
        entries = log.entries(cid)
        if not entries:
            return None
        last = entries[-1].inputs
        evidence = Evidence.from_dict(last.get("evidence"))
        conv = cls(evidence=evidence, llm=llm, log=log, conversation_id=cid, chroma_url=chroma_url)
        missing = [str(p) for p in [evidence.profile, *evidence.attachments] if p is not None and not p.exists()]
        missing += [m for m in evidence.metrics if not m.startswith("http") and not Path(m).exists()]
        if missing:
            evidence.attachments = [a for a in evidence.attachments if a.exists()]
            evidence.metrics = [m for m in evidence.metrics if m.startswith("http") or Path(m).exists()]
            if evidence.profile is not None and not evidence.profile.exists():
                evidence.profile = None
            conv.notes.append("no longer found, left out: " + ", ".join(missing))
        for e in entries:
            if e.question:
                conv.messages.append(Message("user", e.question))
            reply = e.output or (f"*{e.error}*" if e.error else "")
            if e.inputs.get("event") == "question":
                conv.questions.append(e.question or "")
                if e.output and not e.error:
                    conv.sources = _validated(Citation, e.sources)
                    conv.findings = _validated(Finding, e.findings)
            if reply:
                conv.messages.append(Message("advisor", reply, _validated(Citation, e.sources)))
        return conv


def code_blocks(markdown: str) -> list[str]:
    """The fenced code blocks of an answer, in order (what /copy N copies), without their fences."""
    import re

    import textwrap

    return [textwrap.dedent(m.group(2)).strip("\n") for m in re.finditer(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", markdown, re.M | re.S)] + [
        m.group(1) for m in re.finditer(r"(?<!`)`([^`\n]{2,})`(?!`)", markdown) if m.group(1).lstrip().startswith(("--", "vllm", "-q", "-tp", "pip "))
    ]


def markdown_sections(markdown: str) -> list[str]:
    """The text cut before each ``## `` heading; the pieces join back to the same text."""
    pieces: list[str] = []
    current: list[str] = []
    for line in markdown.splitlines(keepends=True):
        if line.startswith("## ") and current:
            pieces.append("".join(current))
            current = []
        current.append(line)
    if current:
        pieces.append("".join(current))
    return pieces


def _validated(model, items: list) -> list:
    out = []
    for item in items or []:
        try:
            out.append(model.model_validate(item))
        except Exception:  # a row written by another version: show what can be read
            continue
    return out


def _display(url: str) -> str:
    from vllm_advisor.probe.metrics.scrape import display_url

    return display_url(url)


# -- what changed since the previous answer -------------------------------------------------------

CONFIDENCE_STEP = 0.1


def since_previous(previous: list, current: list, language: str) -> str:
    """One short Markdown list of how the findings changed (new evidence, a different question);
    '' when nothing changed or there was no earlier answer."""
    if not previous:
        return ""
    from vllm_advisor.messages import text

    def say(key: str, **values) -> str:
        return text(language, f"since.{key}", **values)

    before = {f.cause: f for f in previous}
    after = {f.cause: f for f in current}
    lines: list[str] = []
    if current and previous and current[0].cause != previous[0].cause:
        lines.append(say("top", t=current[0].cause))
    for f in current:
        if f.cause not in before:
            lines.append(say("new", t=f.cause, c=f.confidence))
        elif abs(f.confidence - before[f.cause].confidence) >= CONFIDENCE_STEP:
            lines.append(say("conf", t=f.cause, a=before[f.cause].confidence, b=f.confidence))
    for f in previous:
        if f.cause not in after:
            lines.append(say("gone", t=f.cause))
    if not lines:
        return ""
    return say("head") + "\n\n" + "\n".join(f"- {line}" for line in lines)

