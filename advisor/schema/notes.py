"""A piece of the user's input that was set aside, typed so writers can word it (message ids).

Why: one unreadable attachment or a foreign serve command must not cost the whole answer; the
piece is skipped and the answer says which file or field and why. The note carries a code (the
message id), where it happened (file, field) and the one-line reason the reader produced; the
sentence a person reads is made from these by a writer, never stored here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from ..errors import AdvisorError

#: The source name of figures read from log lines, a benchmark block or /metrics lines pasted into the question
#: (probe/pasted.py): writers word it as "your question" in the asker's language.
PASTED_SOURCE = "<question>"

InputNoteCode = Literal[
    "attachment_skipped",  # an attached file could not be read or is of no known kind
    "folder_skipped",  # a file inside an attached run folder was not recognised
    "profile_field_dropped",  # a case-file field failed validation and was left out
    "profile_unreadable",  # the case file itself could not be read; the question answered without it
    "serve_cmd_skipped",  # the serve command could not be read
    "serve_cmd_engine",  # the serve command or the flags are another engine's; mapped to vLLM's
    "flag_dropped",  # a flag of the case file's flags mapping has a bad value
    "workload_bounded",  # a workload value above what the model simulates
    "metrics_history",  # a /metrics window counting more than the attached benchmarks: its counters read as history
    "pasted_skipped",  # log lines or a benchmark block pasted into the question could not be read
    "model_from_words",  # the files' model is not in the catalog; the one the words name is modelled
    "partly_read",  # a file read in part (a server log's last stats lines): the rest not weighed
]


class InputNote(BaseModel):
    code: InputNoteCode
    source: str | None = None  # the file (or "--serve-cmd")
    field: str | None = None  # the field path inside it
    detail: str = ""  # the reader's own one-line reason, or the mapped flags
    #: serve_cmd_engine: the other engine, its flags rewritten ("--tp -> --tensor-parallel-size"),
    #: those with no vLLM counterpart ("--schedule-policy") and why some rewrites are approximate
    #: (message ids under input.flag_approx): typed, so the writer words them in the asker's language
    engine: str | None = None
    mapped: list[str] = Field(default_factory=list)
    kept: list[str] = Field(default_factory=list)
    approx: list[str] = Field(default_factory=list)
    #: why, typed: a message id under input.reason and its values, so a Chinese answer words it in
    #: Chinese (``detail`` is the reader's English line, which the English answer keeps)
    reason: str | None = None
    reason_args: dict[str, str | int] = Field(default_factory=dict)

    @classmethod
    def from_error(cls, code: str, exc: "AdvisorError", source: str | None, *, field: str | None,
                   detail: str | None = None) -> "InputNote":
        """The note for a piece set aside because a reader raised: the error's own message where it
        names this source (else its whole line) and its typed reason."""
        if detail is None:
            detail = exc.message if exc.source == source else exc.one_line()
        return cls(code=code, source=source, field=field, detail=detail,  # type: ignore[arg-type]
                   reason=exc.reason, reason_args=exc.reason_args)

    def text(self) -> str:
        """The English line, for writers that have no message catalogue of their own yet."""
        where = self.source or ""
        if self.field:
            where = f"{where}: field '{self.field}'" if where else f"field '{self.field}'"
        verb = {
            "attachment_skipped": "skipped",
            "folder_skipped": "skipped",
            "profile_field_dropped": "left out",
            "profile_unreadable": "not read",
            "serve_cmd_skipped": "serve command skipped",
            "serve_cmd_engine": "",
            "flag_dropped": "flag left out",
            "workload_bounded": "not modelled",
            "metrics_history": "counters not weighed",
            "pasted_skipped": "the lines pasted into the question were not read",
            "model_from_words": "",
            "partly_read": "partly read",
        }[self.code]
        head = " ".join(f"{where} {verb}".split())
        return f"{head}: {self.detail}" if head else self.detail
