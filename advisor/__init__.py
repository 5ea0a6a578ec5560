"""vllm-advisor's core: probe, performance model, diagnosis, answering, memo and CLI.

Installed under the import name ``vllm_advisor`` (the folder is ``advisor/``; the bare name is
taken on PyPI by an unrelated package).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vllm-advisor")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"


def __getattr__(name: str):
    """``vllm_advisor.Session`` without importing the whole core at ``import vllm_advisor``."""
    if name in ("Session", "LLMSettings"):
        from . import session

        return getattr(session, name)
    raise AttributeError(name)
