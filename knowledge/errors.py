"""The knowledge base's own errors.

``vllm_advisor_knowledge`` sits below ``vllm_advisor`` and must not import it, so it cannot raise
``AdvisorError``. The CLI translates these into one-line ``AdvisorError``s: a
:class:`SourceFileError` is the user's file (exit code 3), anything else an advisor error (exit 1).
Every message is one line that names the file, folder or setting at fault.
"""

from __future__ import annotations


class KnowledgeError(Exception):
    """Base class: a knowledge-base problem explained in one line."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.message = " ".join(message.split())
        self.source = source
        super().__init__(f"{source}: {self.message}" if source else self.message)


class SourceFileError(KnowledgeError):
    """A file or folder given to ingest is missing, binary, too big or not what it should be."""


class EmbeddingModelError(KnowledgeError):
    """The embedding model cannot be loaded, or differs from the one the index was built with."""


class IndexUnavailableError(KnowledgeError):
    """The index cannot be opened or repaired (a Chroma server that does not answer, a read-only dir)."""


class OnnxModelUnavailable(EmbeddingModelError):
    """The ONNX copy of the default model cannot be used for queries (missing, stale, damaged,
    or rejected at export); queries then go through torch. ``exportable``: exporting it again may
    help (False when an export from these very weights already disagreed with torch)."""

    def __init__(self, message: str, *, source: str | None = None, exportable: bool = True) -> None:
        super().__init__(message, source=source)
        self.exportable = exportable
