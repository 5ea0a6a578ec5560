"""Numbers in the CLI's tables (cli/render.fmt)."""

from __future__ import annotations


def test_a_fraction_in_a_table_keeps_two_significant_digits():
    """A reviewer's find: `probe log` printed gpu_memory_utilization 0.35 as 0.3."""
    from vllm_advisor.cli.render import fmt

    assert (fmt(0.35), fmt(0.9), fmt(0.125), fmt(6.5), fmt(1234.5), fmt(None)) == ("0.35", "0.9", "0.12", "6.5", "1,234", "—")
