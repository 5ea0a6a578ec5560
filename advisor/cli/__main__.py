"""``python -m vllm_advisor.cli``: the same as the ``vllm-advisor`` console script."""

from .main import cli

cli()
