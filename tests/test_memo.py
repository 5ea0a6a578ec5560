"""The tuning memo: sections, measured-vs-predicted rows, commands, plots, atomic write.

The diagnosis is built by hand here (the memo renders whatever diagnosis it is given); the inputs are
gathered for real from the bundled motivating case and from real files in ../shared.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.errors import InputFileError
from vllm_advisor.memo import write_memo
from vllm_advisor.memo.format import num
from vllm_advisor.memo.loadpoints import line_up
from vllm_advisor.memo.sections import number_sources, serve_command_with
from vllm_advisor.schema import Citation, Diagnosis, Evidence, Finding, MissingMeasurement, Recommendation
from vllm_advisor.schema.message import msg, q

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LLAMA70B_QPS4 = "real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"

KV_CARD = Citation(doc_id="card:kv-capacity", title="KV cache capacity and waiting requests", url="https://docs.vllm.ai/en/latest/configuration/optimization.html", heading="Preemption")
BENCH_CARD = Citation(doc_id="card:bench-method", title="Benchmark methodology", url="knowledge/cards/benchmark-methodology.md")


@pytest.fixture(scope="module")
def seed_inputs():
    return gather(profile=SEED, calibrate=True)


def kv_diagnosis(inputs) -> Diagnosis:
    """A diagnosis whose figures come from the inputs themselves (as the real one's do)."""
    mem = inputs.engine.memory
    fit = mem.requests_that_fit(inputs.input_len + inputs.output_len)
    c100 = next(r for r in inputs.predicted if r.offered_concurrency == 100)
    kv = Finding(
        cause="kv_capacity",
        severity="high",
        confidence=0.85,
        score=5.0,
        evidence=[
            Evidence(kind="model", origin="model", label=msg("ev.kv_capacity"), value=float(mem.kv_cache_tokens), unit="tokens",
                     detail=msg("detail.kv_capacity", per_token=q(128, "KiB"), fit=q(round(fit, 1), "requests"), length=q(64000, "tokens"))),
            Evidence(kind="reported", origin="case", label=msg("ev.speed_change", a="c=1", b="c=100", before=q(40, "tok/s"), after=q(20, "tok/s"))),
            Evidence(kind="model", origin="model", label=msg("ev.running"), load="c=100", value=round(c100.server_view.running_mean, 1), unit="requests"),
        ],
        reasons=[msg("reason.queue_beyond_fit")],
        recommendations=[
            Recommendation(change=msg("rec.kv_capacity_1"), flag="--kv-cache-dtype fp8", whatif=["kv_cache_dtype=fp8"],
                           predicted_effect=msg("effect.model", parts=[msg("effect.point", load="c=100", changes=[msg("effect.running", before=q(5, "requests"), after=q(10, "requests"))])]),
                           cost=msg("cost.kv_capacity_1")),
            Recommendation(change=msg("rec.kv_capacity_2"), flag="--data-parallel-size 2 (or a second server behind a load balancer)", whatif=["num_gpus=4", "dp=2"]),
        ],
        sources=[KV_CARD],
    )
    method = Finding(
        cause="benchmark_methodology",
        confidence=0.6,
        score=3.0,
        evidence=[Evidence(kind="reported", origin="case", label=msg("figure.output_throughput_tok_s"), load="c=40", value=880.0, unit="tok/s", detail=msg("detail.c_times_speed", c=40, per=q(22, "tok/s")))],
        sources=[BENCH_CARD],
    )
    return Diagnosis(
        findings=[method, kv],  # out of order: the memo ranks by score
        missing=[MissingMeasurement(decides=["kv_capacity", "queueing"], what=msg("missing.server_view"), command="vllm-advisor probe watch http://HOST:8000 --duration 120 -o run.jsonl")],
        language="zh",
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def row(markdown: str, *cells: str) -> str:
    """The one table row whose first cells are ``cells``."""
    prefix = "| " + " | ".join(cells) + " |"
    hits = [line for line in markdown.splitlines() if line.startswith(prefix)]
    assert len(hits) == 1, f"{prefix!r}: {hits}"
    return hits[0]


def test_seed_memo_in_chinese_with_facts_table_commands_and_plots(tmp_path, seed_inputs):
    diagnosis = kv_diagnosis(seed_inputs)
    out = tmp_path / "memo.md"
    result = write_memo(seed_inputs, diagnosis, [KV_CARD], out, seed=4242)
    md = out.read_text(encoding="utf-8")
    assert result.markdown == md and result.language == "zh" and result.seed == 4242

    for heading in ("结论摘要", "部署情况", "各负载点：实测与预测对比", "诊断结果（按可能性排序）", "建议的修改", "验证方案", "图表", "参考来源"):
        assert f"## {heading}" in md
    # Facts from the model, with their tags, and the assumed version
    mem = seed_inputs.engine.memory
    assert mem.kv_cache_tokens == 327_120
    assert mem.requests_that_fit(64_000) == pytest.approx(5.11, abs=0.01)
    assert "39.9 GiB = 327,120 个 token（20,445 个块，每块 16）" in md
    assert "5.11 个 64,000 token 的请求" in md
    assert "0.8.5（假定：未提供版本）" in md
    assert row(md, "`max_num_batched_tokens`", "2,048 token / 步").endswith("假定（vLLM 0.8.5 的默认值；未提供版本） |")
    assert md.count("Qwen/Qwen2.5-32B-Instruct) | [配置]") == 1

    # Measured vs predicted, matched by load point, with units; calibrated; beyond the ceiling flagged
    assert "**校准**" in md
    c1 = row(md, "c=1", "单请求输出速度（含首 token 时间）", "40 tok/s")
    predicted1 = next(r for r in seed_inputs.predicted if r.offered_concurrency == 1).request_output_tok_s.mean
    assert 20 < predicted1 < 80  # physics: one 63K-token stream on two H800s
    assert c1.endswith(f"| {num(predicted1)} tok/s | {num(next(r for r in seed_inputs.ceiling if r.offered_concurrency == 1).request_output_tok_s.mean)} tok/s | {40 / predicted1:.2f}x |")
    c40 = row(md, "c=40", "全服务输出吞吐", "880 tok/s")
    ceiling40 = next(r for r in seed_inputs.ceiling if r.offered_concurrency == 40).output_throughput_tok_s
    assert f"{num(ceiling40)} tok/s" in c40 and "超出上限" in c40 and ceiling40 < 880
    assert row(md, "c=100", "全服务输出吞吐", "2,000 tok/s")
    assert "首 token 时间均值" in md and " ms |" in md

    # Findings ranked by score, evidence with tags, sources numbered
    assert md.index("### 1. KV 缓存只能同时容纳很少的长请求") < md.index("### 2. 测量方法本身有误导")
    assert "- [模型估算] KV 缓存容量：**327,120 个 token**（每个 token 在每张卡上 128 KiB，相当于 5.1 个请求（每个 64,000 个 token）） — 模型" in md
    assert "- [用户报告] 全服务输出吞吐（并发 40）：**880 tok/s**（= 40 × 22 tok/s） — 案例文件" in md
    assert "1. 调优要点：KV cache capacity and waiting requests <https://docs.vllm.ai/en/latest/configuration/optimization.html>" in md
    assert "2. 调优要点：Benchmark methodology" in md  # cited by a finding, added to the list
    assert "来源：[1]" in md and "来源：[2]" in md
    assert "其次：测量方法本身有误导（`benchmark_methodology`，60%）。" in md

    # Recommendations: the exact serve command for a flag, none for prose; the what-if that models it
    assert "vllm serve Qwen/Qwen2.5-32B-Instruct --tensor-parallel-size 2 --kv-cache-dtype fp8" in md
    assert "load balancer)'" not in md
    assert f"vllm-advisor estimate --profile {SEED} --what-if kv_cache_dtype=fp8" in md

    # Verification: one `vllm bench serve` line per load point, new seeds, the workload's lengths
    bench = [line for line in md.splitlines() if line.startswith("vllm bench serve")]
    assert len(bench) == 3
    for clients, prompts, seed in ((1, 8, 4242), (40, 120, 4243), (100, 300, 4244)):
        line = next(b for b in bench if f"--max-concurrency {clients} " in b)
        for part in ("--model Qwen/Qwen2.5-32B-Instruct", "--dataset-name random", "--random-input-len 63000", "--random-output-len 1000",
                     f"--num-prompts {prompts}", f"--seed {seed}", "--percentile-metrics ttft,tpot,itl,e2el", "--save-result --save-detailed"):
            assert part in line
    running = next(r for r in seed_inputs.predicted if r.offered_concurrency == 100).server_view
    assert 4.5 < running.running_mean < 6.5  # ~5 requests of 64K fit
    assert f"| 引擎中运行的请求数 | {num(running.running_mean)} / {num(running.running_max)} |" in md
    assert "vllm:kv_cache_usage_perc" in md and "vllm:gpu_cache_usage_perc" in md
    assert "vllm-advisor probe watch http://HOST:8000 --duration 120 -o run.jsonl" in md

    # Plots: three real PNGs beside the memo, linked relatively
    assert [p.name for p in result.plots] == ["per_request_speed.png", "throughput.png", "kv_capacity.png"]
    for plot in result.plots:
        assert plot.parent == tmp_path / "memo_plots"
        width, height = png_size(plot)
        assert width >= 600 and height >= 400
        assert plot.stat().st_size > 20_000
        assert f"](memo_plots/{plot.name})" in md


def test_same_inputs_in_english(tmp_path, seed_inputs):
    inputs = dataclasses.replace(seed_inputs, language="en")
    result = write_memo(inputs, kv_diagnosis(seed_inputs), [], tmp_path / "en.md", seed=7)
    md = result.markdown
    assert result.language == "en"
    assert "## Summary" in md and "## Verification plan" in md
    summary = md.split("## Summary", 1)[1].split("##", 1)[0]
    assert "Qwen2.5-32B-Instruct on 2 x H800-SXM (TP 2), 63,000 tokens in and 1,000 tokens out per request." in summary
    assert "Most likely cause: The KV cache holds too few requests of this length (`kv_capacity`, confidence 85%)" in summary
    assert "The KV cache holds 5.1 requests of 64,000 tokens at once [model], while up to 100 clients send requests." in summary
    assert "First change to try: Halve KV bytes per token with an fp8 KV cache (`--kv-cache-dtype fp8`); predicted: c=100: running 5 requests → 10 requests." in summary
    assert "Also: The measurement itself misleads (`benchmark_methodology`, 60%)." in summary
    assert 3 <= summary.count(". ") + 1 <= 6
    assert row(md, "c=40", "output throughput, whole server", "880 tok/s")
    assert (tmp_path / "en_plots" / "kv_capacity.png").exists()


def test_memo_without_a_model_says_what_is_missing(tmp_path, shared_dir):
    inputs = gather(profile=shared_dir / "cases/dev/vllm-1026-long-prompt-blocks-decode.yaml")
    assert inputs.engine is None
    diagnosis = Diagnosis(findings=[Finding(cause="chunked_prefill_interference", confidence=0.8, evidence=[Evidence(kind="config", origin="deployment", label=msg("ev.setting", name="vllm_version"), value="0.1.7")])])
    result = write_memo(inputs, diagnosis, [], tmp_path / "m.md")
    md = result.markdown
    assert result.language == "en" and result.plots == []
    assert "The deployment is only partly known: model, GPU, input_len, output_len." in md
    assert "| model | unknown | [config] |" in md
    assert "| vLLM version | 0.1.7 | [config] |" in md
    assert "No performance model (model / GPU not given)." in md
    assert "No plot: nothing was measured or predicted at a load point." in md
    assert "- [config] `vllm_version`: **0.1.7** — deployment" in md
    assert "No sources were attached." in md


def test_measured_only_plots_when_the_gpu_is_unknown(tmp_path, fixtures_dir):
    case = tmp_path / "case.yaml"
    case.write_text(f"question: why?\ndeployment:\n  model: meta-llama/Llama-3.3-70B-Instruct\nattachments:\n  - {fixtures_dir / LLAMA70B_QPS4}\n")
    inputs = gather(profile=case)
    assert inputs.engine is None and len(inputs.measured) == 1
    measured = inputs.measured[0]
    result = write_memo(inputs, Diagnosis(), [], tmp_path / "out" / "memo.md")
    md = result.markdown
    assert [p.name for p in result.plots] == ["per_request_speed.png", "throughput.png"]
    assert "Not drawn: the KV-capacity plot needs the performance model." in md
    ttft = row(md, "rate=4/s", "TTFT mean")
    assert f"{num(measured.ttft_ms.mean)} ms" in ttft and ttft.endswith("| — | — | — |")
    assert "No performance model (GPU not given)." in md
    assert "--request-rate 4 --num-prompts 200" in md
    assert "--random-input-len 213 --random-output-len 212" in md
    assert "No finding: the inputs did not support any cause." in md


def test_line_up_matches_predicted_to_measured_rate(fixtures_dir):
    from vllm_advisor.probe.bench import load_runs

    measured = load_runs(fixtures_dir / LLAMA70B_QPS4)
    predicted = [measured[0].model_copy(update={"source": "model", "format": "model", "offered_concurrency": None})]
    rows = line_up(measured, predicted, [])
    assert len(rows) == 1 and rows[0].label == "rate=4/s" and rows[0].x == 4.0
    assert rows[0].measured == measured and rows[0].predicted is predicted[0]


def test_atomic_write_keeps_the_old_memo_when_writing_fails(tmp_path, seed_inputs, monkeypatch):
    out = tmp_path / "memo.md"
    out.write_text("the previous memo\n")
    import vllm_advisor.memo.writer as writer

    def refuse(src, dst):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(writer.os, "replace", refuse)
    with pytest.raises(InputFileError) as err:
        write_memo(seed_inputs, kv_diagnosis(seed_inputs), [], out)
    assert "No space left on device" in err.value.one_line() and "\n" not in err.value.one_line()
    assert out.read_text() == "the previous memo\n"
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    monkeypatch.undo()
    write_memo(seed_inputs, kv_diagnosis(seed_inputs), [], out)
    assert out.read_text(encoding="utf-8").startswith("# 调优备忘录")
    assert oct(out.stat().st_mode & 0o777) != "0o600"  # an ordinary file, not mkstemp's private mode
    assert [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")] == []


def test_a_folder_as_output_is_a_one_line_error(tmp_path, seed_inputs):
    with pytest.raises(InputFileError, match="is a folder"):
        write_memo(seed_inputs, Diagnosis(), [], tmp_path)


def test_serve_command_with_a_flag():
    base = "vllm serve Qwen/Qwen2.5-32B-Instruct --max-num-batched-tokens 2048 -tp 2 --enable-chunked-prefill"
    assert serve_command_with(base, "--max-num-batched-tokens 512") == "vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --enable-chunked-prefill --max-num-batched-tokens 512"
    assert serve_command_with("vllm serve m --max-num-batched-tokens=2048", "--max-num-batched-tokens=512") == "vllm serve m --max-num-batched-tokens=512"
    assert serve_command_with(base, "--kv-cache-dtype fp8 --calculate-kv-scales").endswith("--enable-chunked-prefill --kv-cache-dtype fp8 --calculate-kv-scales")
    assert serve_command_with(base, "--kv-transfer-config '{...}' on a prefill and a decode instance") is None
    assert serve_command_with(base, "client: vllm bench serve --max-concurrency C") is None
    assert serve_command_with(None, "--kv-cache-dtype fp8") is None


def test_sources_numbered_once_findings_citations_appended():
    f = Finding(cause="kv_capacity", confidence=0.5, sources=[BENCH_CARD, KV_CARD])
    numbered = number_sources([KV_CARD], [f])
    assert [(c.number, c.doc_id) for c in numbered] == [(1, "card:kv-capacity"), (2, "card:bench-method")]
    given = [KV_CARD.model_copy(update={"number": 2}), BENCH_CARD.model_copy(update={"number": 1})]
    assert [(c.number, c.doc_id) for c in number_sources(given, [f])] == [(1, "card:bench-method"), (2, "card:kv-capacity")]


def test_stale_plots_of_an_earlier_memo_are_removed(tmp_path, shared_dir):
    plots = tmp_path / "m_plots"
    plots.mkdir()
    (plots / "kv_capacity.png").write_bytes(PNG_SIGNATURE)
    inputs = gather(profile=shared_dir / "cases/dev/vllm-1026-long-prompt-blocks-decode.yaml")
    write_memo(inputs, Diagnosis(), [], tmp_path / "m.md")
    assert not (plots / "kv_capacity.png").exists()
    assert os.listdir(plots) == []
