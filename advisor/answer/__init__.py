"""Answers: a diagnosis written for the person who asked, in their language, with numbered sources.

``attach_sources`` picks and numbers the sources of each finding; ``write_answer`` is the embedded,
deterministic writer (no LLM); ``write_answer_llm`` has any OpenAI-compatible endpoint write the
prose from the same findings and passages, checks its citations and falls back to the embedded
answer when they do not hold or the endpoint fails.
"""

from .embedded import write_answer
from .llm import build_prompt, write_answer_llm
from .model import Answer
from .sources import attach_sources

__all__ = ["Answer", "attach_sources", "build_prompt", "write_answer", "write_answer_llm"]
