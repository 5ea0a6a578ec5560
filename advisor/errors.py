"""Errors the user sees as one line.

Every failure caused by the user's input (a file, a field, an endpoint) is raised as an
:class:`AdvisorError` subclass.

Exit codes (documented in the README): 0 success, 1 other advisor error, 2 usage error,
3 bad input file, 4 endpoint failure, 70 internal error (a bug), 130 interrupted. The CLI prints ``str(error)`` on one line and exits with the
error's ``exit_code``; it never shows a traceback for these. Anything else is a bug.
"""

from __future__ import annotations


class AdvisorError(Exception):
    """Base class: a problem with what the user gave us, explained in one line.

    ``reason`` (a message id under ``input.reason``, with ``reason_args``) says the same thing typed,
    so that an answer which skips the piece can word why in the asker's language; the English
    ``message`` stays the precise line the CLI prints."""

    exit_code = 1
    default_reason = "invalid"

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None,
                 reason: str | None = None, reason_args: dict[str, str | int] | None = None) -> None:
        self.message = message
        self.source = source
        self.field = field
        self.reason = reason or self.default_reason
        self.reason_args = dict(reason_args or {})
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.source or ""
        if self.field:
            where = f"{where}: field '{self.field}'" if where else f"field '{self.field}'"
        text = f"{where}: {self.message}" if where else self.message
        return " ".join(text.split())


class InputFileError(AdvisorError):
    """A file could not be read or does not hold what it should (exit code 3)."""

    exit_code = 3


class UnknownFormatError(InputFileError):
    """No loader recognised the file; the message lists what was tried."""

    default_reason = "unknown_format"


class EndpointError(AdvisorError):
    """An HTTP endpoint timed out, refused, failed or answered with something unusable (exit code 4)."""

    exit_code = 4
    default_reason = "endpoint_unusable"


class UsageError(AdvisorError):
    """The command line itself is inconsistent (exit code 2, the same as click's usage errors)."""

    exit_code = 2


class ShardingRefused(UsageError):
    """A tensor-parallel size vLLM refuses for this model (its heads do not divide): ``note`` says so as
    a message the answer writes in the asker's language."""

    def __init__(self, message: str, *, note) -> None:
        super().__init__(message)
        self.note = note
