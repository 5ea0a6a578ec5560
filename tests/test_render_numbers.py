"""Numbers in the CLI's tables (cli/render.fmt)."""

from __future__ import annotations


def test_a_fraction_in_a_table_keeps_two_significant_digits():
    """A reviewer's find: `probe log` printed gpu_memory_utilization 0.35 as 0.3."""
    from vllm_advisor.cli.render import fmt

    assert (fmt(0.35), fmt(0.9), fmt(0.125), fmt(6.5), fmt(1234.5), fmt(None)) == ("0.35", "0.9", "0.12", "6.5", "1,234", "—")


def test_the_mean_decode_speed_is_over_tokens_not_over_each_requests_rate():
    """A reviewer's find on a real CPU run (vllm-cpu-real, c=1, TPOT 2.42 ms): two requests whose tokens came
    in one burst had decode rates of ~370,000 tok/s and made the mean 22,940 tok/s; over tokens it is ~413."""
    from pathlib import Path

    from vllm_advisor.probe.bench import load_runs

    path = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "vllm-cpu-real" / "results" / "compiled" / "bench_in1024_out64_c1_n32_seed101.json"
    run = load_runs(path)[0]
    assert abs(run.request_decode_tok_s.mean / (1000.0 / run.tpot_ms.mean) - 1.0) < 0.1
    assert run.request_decode_tok_s.max > 100_000  # the burst is still in the distribution's tail
