"""vllm-advisor's core: probe, performance model, diagnosis, answering, memo and CLI.

Installed under the import name ``vllm_advisor`` (the folder is ``advisor/``; the bare name is
taken on PyPI by an unrelated package).
"""



def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm-advisor")
    except PackageNotFoundError:  # running from a source tree that was not installed
        return "0+unknown"


def __getattr__(name: str):
    """``vllm_advisor.Session`` without importing the whole core at ``import vllm_advisor``, and
    ``__version__`` without importlib.metadata's scan of the installed packages (~40 ms) at every
    start of the CLI: it is read when a memo or ``--version`` needs it."""
    if name == "__version__":
        value = _installed_version()
        globals()["__version__"] = value
        return value
    if name in ("Session", "LLMSettings"):
        from . import session

        return getattr(session, name)
    raise AttributeError(name)
