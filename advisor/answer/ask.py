"""From a diagnosis to the answer `ask` prints: sources, then the embedded or the LLM writer.

One call for the command line, so the order (number the sources first, then write) and the
fallbacks live in one place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..schema import Diagnosis
from .embedded import write_answer
from .llm import write_answer_llm
from .model import Answer
from .sources import Searcher, attach_sources


def answer_question(
    inputs,
    diagnosis: Diagnosis,
    *,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    llm_timeout: float = 60,
    on_token: Callable[[str], None] | None = None,
    kb: Searcher | bool | None = None,
    kb_dir: str | Path | None = None,
    max_per_finding: int = 3,
    language: str | None = None,
) -> Answer:
    """Attach and number the sources, then write: with the LLM when ``llm_base_url`` is given
    (falling back to the embedded writer, with a note, when it fails), else the embedded writer."""
    sources = attach_sources(diagnosis, inputs, max_per_finding=max_per_finding, kb=kb, kb_dir=kb_dir)
    if llm_base_url:
        return write_answer_llm(
            inputs,
            diagnosis,
            sources,
            base_url=llm_base_url,
            model=llm_model,
            api_key_env=api_key_env,
            timeout=llm_timeout,
            on_token=on_token,
            language=language,
        )
    return write_answer(inputs, diagnosis, language=language)
