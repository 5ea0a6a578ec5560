"""vllm-advisor's core: probe, performance model, diagnosis, answering, memo and CLI.

Installed under the import name ``vllm_advisor`` (the folder is ``advisor/``; the bare name is
taken on PyPI by an unrelated package).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vllm-advisor")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"
