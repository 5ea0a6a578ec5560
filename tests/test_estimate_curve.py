"""``estimate --concurrency 1..256``: the load curve, its knee, and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllm_advisor.cli.main import cli
from vllm_advisor.errors import UsageError
from vllm_advisor.perf.curve import curve_points, find_knee, parse_concurrency
from vllm_advisor.perf.predict import LoadPoint, build_engine_model, predict_load_point
from vllm_advisor.schema import Deployment, EngineArgs

SEED = Path(__file__).resolve().parents[1] / "examples" / "seed-qwen32b-h800-long-input.yaml"


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1..256", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
        ("3..20", [3, 4, 8, 16, 20]),
        ("1..100:3", [1, 10, 100]),
        ("1,40,100", [1, 40, 100]),
        ("1..4,40,4", [1, 2, 4, 40]),
        ("7..7", [7]),
    ],
)
def test_concurrency_ranges(text, expected):
    assert parse_concurrency(text) == expected


@pytest.mark.parametrize("text", ["0..8", "8..2", "1..x", "1..64:1", "a", "0"])
def test_bad_concurrency_is_one_clear_error(text):
    with pytest.raises(UsageError, match="--concurrency"):
        parse_concurrency(text)


def _curve(dep, args, input_len, output_len, clients, max_prompts=None):
    em = build_engine_model(dep, args, needed_model_len=input_len + output_len)
    runs = [
        predict_load_point(em, LoadPoint(concurrency=c), input_len=input_len, output_len=output_len, num_prompts=min(3 * c, max_prompts) if max_prompts else None)[0]
        for c in clients
    ]
    return em, curve_points(runs)


def test_seed_knee_is_the_kv_cache_at_about_five_requests():
    """63K-token prompts on two H800s: the KV cache holds ~5 of them, so running stops at ~5 and the
    rest of the clients wait (the motivating case's answer to "why does 100 look like 40?")."""
    dep = Deployment(engine="vllm", model="Qwen/Qwen2.5-32B-Instruct", gpu="H800", num_gpus=2, vllm_version="0.8.5")
    em, points = _curve(dep, EngineArgs(tensor_parallel_size=2), 63000, 1000, [1, 2, 4, 8, 16, 32], max_prompts=48)
    knee = find_knee(points, em.config.max_num_seqs)
    fit = em.memory.requests_that_fit(64000)
    assert knee.limit == "kv_cache" and knee.kv_usage_pct >= 80
    assert knee.last_unqueued is not None and knee.last_unqueued < fit < knee.first_queued
    assert knee.running_plateau == pytest.approx(fit, abs=1.0)
    assert all(not p.queued for p in points if p.concurrency <= knee.last_unqueued)
    assert all(p.queued for p in points if p.concurrency >= knee.first_queued)


def test_short_prompts_knee_is_max_num_seqs_when_it_binds():
    dep = Deployment(engine="vllm", model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", num_gpus=1, vllm_version="0.10.1")
    em, points = _curve(dep, EngineArgs(max_num_seqs=16), 500, 100, [4, 8, 16, 32, 64])
    knee = find_knee(points, em.config.max_num_seqs)
    assert knee.limit == "max_num_seqs" and knee.first_queued == 32 and knee.last_unqueued == 16
    assert knee.running_plateau == pytest.approx(16, abs=0.5)


def test_no_knee_when_nothing_queues():
    dep = Deployment(engine="vllm", model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", num_gpus=1, vllm_version="0.10.1")
    em, points = _curve(dep, EngineArgs(), 500, 100, [1, 2, 4])
    knee = find_knee(points, em.config.max_num_seqs)
    assert knee.first_queued is None and knee.last_unqueued == 4


def test_estimate_range_prints_the_knee_and_plots_it(tmp_path):
    png = tmp_path / "curve.png"
    out = " ".join(run("estimate", "--profile", str(SEED), "--vllm-version", "0.8.5", "--concurrency", "1..16", "--no-calibrate", "--plot", str(png)).split())
    assert "Load curve" in out and "Knee between 4 and 8 clients" in out and "KV cache is full" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    js = json.loads(run("estimate", "--profile", str(SEED), "--vllm-version", "0.8.5", "--concurrency", "1..16", "--no-calibrate", "--json"))
    assert [p["concurrency"] for p in js["curve"]["points"]] == [1, 2, 4, 8, 16]
    assert js["curve"]["knee"]["first_queued"] == 8 and js["curve"]["knee"]["limit"] == "kv_cache"


def test_plot_needs_a_curve():
    result = CliRunner().invoke(cli, ["estimate", "--profile", str(SEED), "--concurrency", "40", "--no-calibrate", "--plot", "x.png"])
    assert result.exit_code not in (0, 70) and "--plot" in result.output and "Traceback" not in result.output


def test_matplotlib_is_imported_only_for_the_plot():
    """matplotlib costs ~0.4 s to import: the curve without --plot must not pay it."""
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from vllm_advisor.cli.main import cli; "
        f"r = CliRunner().invoke(cli, ['estimate', '--profile', {str(SEED)!r}, '--concurrency', '1..4', '--no-calibrate', '--json']); "
        "assert r.exit_code == 0, r.output; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
