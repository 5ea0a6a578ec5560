"""The embedded writer: structure, languages, figures with units and provenance, numbered sources."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllm_advisor.answer import Answer, attach_sources, write_answer
from vllm_advisor.answer.citations import check_citations, unsupported_numbers
from vllm_advisor.answer.figures import collect_figures
from vllm_advisor.messages import fmt_number
from vllm_advisor.diagnosis.inputs import DiagnosisInputs, gather
from vllm_advisor.messages import catalog
from vllm_advisor.schema import Diagnosis, Evidence, Finding, MissingMeasurement, Recommendation
from vllm_advisor.schema.message import msg, q

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"
BENCH = "fixtures/real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"


def hand_diagnosis(language: str = "en") -> Diagnosis:
    """Two findings with evidence of every provenance, recommendations and a missing measurement."""
    return Diagnosis(
        language=language,
        findings=[
            Finding(
                cause="kv_capacity",
                severity="high",
                confidence=0.8,
                reasons=[msg("reason.queue_beyond_fit")],
                evidence=[
                    Evidence(kind="model", origin="model", label=msg("ev.kv_capacity"), value=327120.0, unit="tokens",
                             detail=msg("detail.kv_capacity", per_token=q(128, "KiB"), fit=q(5.1, "requests"), length=q(64000, "tokens"))),
                    Evidence(kind="reported", origin="case", label=msg("figure.request_output_tok_s"), load="c=40", value=22.0, unit="tok/s"),
                    Evidence(kind="measured", origin="file", where="bench.json", label=msg("ev.itl_ratio"), value=85.2, unit="ms"),
                ],
                recommendations=[
                    Recommendation(
                        change=msg("rec.kv_capacity_1"),
                        flag="--kv-cache-dtype fp8",
                        whatif=["kv_cache_dtype=fp8"],
                        predicted_effect=msg("effect.model", parts=[msg("effect.kv", before=q(327120, "tokens"), after=q(654256, "tokens"))]),
                        cost=msg("cost.kv_capacity_1"),
                        verify="vllm bench serve --model MODEL --max-concurrency 40",
                    )
                ],
            ),
            Finding(
                cause="queueing",
                severity="medium",
                confidence=0.6,
                evidence=[],
                recommendations=[Recommendation(change=msg("rec.queueing_1"), verify="sum(vllm:num_requests_waiting)")],
            ),
        ],
        missing=[MissingMeasurement(decides=["kv_capacity", "queueing"], what=msg("missing.server_view"), command="vllm-advisor probe watch http://HOST:8000 --duration 120")],
    )


def source_numbers(markdown: str) -> list[int]:
    section = markdown.split("## Sources")[-1] if "## Sources" in markdown else markdown.split("## 参考来源")[-1]
    return [int(n) for n in re.findall(r"^- \[(\d+)\]", section, re.M)]


def test_english_answer_structure_and_figures():
    inputs = DiagnosisInputs(question="Why does per-request speed halve at 40 clients?", language="en")
    diagnosis = hand_diagnosis()
    sources = attach_sources(diagnosis, inputs, kb=False)
    answer = write_answer(inputs, diagnosis)
    md = answer.markdown
    assert isinstance(answer, Answer) and answer.language == "en" and not answer.llm_used
    # Sections in order.
    heads = [md.index(h) for h in ("## Answer", "## Why", "## What to change", "## What would decide it", "## Sources")]
    assert heads == sorted(heads)
    # The direct answer leads with the top finding and its key figures, tagged.
    direct = md.split("## Why")[0]
    assert "**KV cache capacity: The KV cache holds too few requests of this length**" in direct
    assert "KV cache capacity: **327,120 tokens** (128 KiB per token per GPU = 5.1 requests of 64,000 tokens) [model]" in direct
    assert "output speed per request (TTFT included) (c=40): **22 tok/s** [reported]" in direct
    # Evidence bullets: tag, value with unit, where it came from.
    assert "- [measured] ITL p99 / p50: **85.2 ms** — bench.json" in md
    assert "- [reported] output speed per request (TTFT included) (c=40): **22 tok/s** — case file" in md
    # Recommendations: flag, what-if, predicted effect tagged as model (prefix not doubled), verify in a code block.
    assert "   - Flag: `--kv-cache-dtype fp8`" in md
    assert "Predicted effect [model]: KV cache 327,120 tokens → 654,256 tokens" in md
    assert "```bash\n     vllm bench serve --model MODEL --max-concurrency 40\n     ```" in md
    assert "```promql\n     sum(vllm:num_requests_waiting)\n     ```" in md
    assert "prefix-cache hits on the server while the load runs (decides between: KV cache capacity / Queueing)" in md
    # Sources numbered 1..N, every inline marker resolves, every source is cited somewhere.
    assert [s.number for s in sources] == list(range(1, len(sources) + 1)) == source_numbers(md)
    check = check_citations(md.split("## Sources")[0], len(sources))
    assert check.ok and set(check.valid) == set(range(1, len(sources) + 1))
    assert [s.number for s in answer.sources] == [s.number for s in sources]


def test_chinese_answer_uses_chinese_structure_and_tags():
    inputs = DiagnosisInputs(question="为啥40并发时生成速率变慢？", language="zh")
    diagnosis = hand_diagnosis("zh")
    attach_sources(diagnosis, inputs, kb=False)
    md = write_answer(inputs, diagnosis).markdown
    for head in ("## 结论", "## 原因分析", "## 建议的修改", "## 还缺哪些测量", "## 参考来源"):
        assert head in md
    assert "## Why" not in md and "## Sources" not in md
    assert "**KV 缓存容量：KV 缓存只能同时容纳很少的长请求**" in md
    assert "- [实测] ITL p99 / p50：**85.2 毫秒** — bench.json" in md
    assert "- [用户报告] 单请求输出速度（含首 token 时间）（并发 40）：**22 tok/s** — 案例文件" in md  # the load worded in Chinese
    assert "KV 缓存容量：**327,120 个 token**（每个 token 在每张卡上 128 KiB，相当于 5.1 个请求（每个 64,000 个 token）） [模型估算]" in md
    assert "预计效果 [模型估算]：KV 缓存 327,120 个 token → 654,256 个 token" in md
    assert "### 2. 延迟主要来自排队等待，而不是计算（严重程度：中）" in md
    assert "（用于区分：KV 缓存容量 / 排队）" in md
    assert "调优要点" in md


def test_language_argument_overrides_inputs():
    inputs = DiagnosisInputs(question="Why slow?", language="en")
    diagnosis = hand_diagnosis()
    answer = write_answer(inputs, diagnosis, language="zh-CN")
    assert answer.language == "zh" and "## 结论" in answer.markdown


def test_finding_without_evidence_or_explanation_still_renders():
    inputs = DiagnosisInputs(question="slow", language="en")
    diagnosis = Diagnosis(findings=[Finding(cause="cuda_graph", confidence=0.4)])
    answer = write_answer(inputs, diagnosis)  # no attach_sources call: the writer attaches the cards itself
    md = answer.markdown
    assert "### 1. CUDA graphs are off or do not cover the batch sizes (severity: medium)" in md  # the title names the cause: said once
    assert "No figures were recorded for this finding" in md
    assert answer.sources and all("cuda_graph" in s.doc_id or s.kind == "card" for s in answer.sources)
    assert check_citations(md.split("## Sources")[0], len(answer.sources)).ok
    assert "## What to change" not in md  # nothing to change and nothing missing: no empty section


def test_no_findings_points_to_the_missing_measurements():
    diagnosis = Diagnosis(missing=[MissingMeasurement(decides=["queueing"], what=msg("missing.per_request"), command="vllm bench serve --save-detailed")])
    answer = write_answer(DiagnosisInputs(question="why?"), diagnosis)
    assert "No cause could be established from what was given. The measurements below would decide it." in answer.markdown
    assert "No change to recommend yet" in answer.markdown
    assert "```bash\n  vllm bench serve --save-detailed\n  ```" in answer.markdown
    assert answer.sources == [] and "No sources were attached." in answer.markdown


def test_motivating_case_figures_come_from_the_model_and_the_user():
    inputs = gather(profile=SEED)
    memory = inputs.engine.memory
    figs = collect_figures(inputs)
    # The user's figures are 'reported'; the model's rows sit beside them at the same load.
    rows = {(r.load, r.kind): r for r in figs.loads}
    assert rows[("c=40", "reported")].per_request_tok_s == pytest.approx(22.0)
    assert rows[("c=40", "reported")].output_tok_s == pytest.approx(880.0)
    assert rows[("c=100", "reported")].per_request_tok_s == pytest.approx(20.0)
    assert rows[("c=1", "reported")].per_request_tok_s == pytest.approx(40.0)
    predicted = {r.load_label: r for r in inputs.predicted}
    assert rows[("c=100", "model")].waiting == predicted["c=100"].server_view.waiting_mean
    assert [f.kind for f in figs.workload] == ["reported", "reported"]

    diagnosis = hand_diagnosis("zh")
    attach_sources(diagnosis, inputs, kb=False)
    md = write_answer(inputs, diagnosis).markdown
    assert f"KV 缓存容量：**{memory.kv_cache_tokens:,} 个 token** [模型估算，估计值]" in md
    fit = memory.requests_that_fit(63000 + 1000)
    assert f"（每个请求 64,000 个 token，输入 + 输出）：**{fmt_number(fit)} 个请求** [模型估算，估计值]" in md
    assert "每个 token 在每张卡上占用的 KV 缓存：**128 KiB** [模型估算，精确值]" in md  # Qwen2.5-32B: 64 x 8 x 128 x 2 x 2 B / TP 2
    assert "输入长度：**63,000 个 token** [用户报告]" in md
    assert "`tensor_parallel_size`：**2** [用户设置]" in md
    assert "`max_num_batched_tokens`：**2,048 个 token** [假定的默认值]" in md
    c40 = predicted["c=40"]
    assert f"| 并发 40 | [模型估算] | {fmt_number(c40.request_output_tok_s.mean)} | {fmt_number(c40.request_decode_tok_s.mean)} |" in md
    assert "| 并发 40 | [用户报告] | 22 | — | — | 880 |" in md


def given_texts(inputs, diagnosis: Diagnosis, answer: Answer) -> list[str]:
    """Every figure the writer was allowed to print: the diagnosis, the model's estimate and
    configuration, each benchmark run, the sources and the user's question."""
    texts = [diagnosis.model_dump_json(), json.dumps([s.model_dump() for s in answer.sources]), inputs.question or ""]
    texts += list(catalog(answer.language).values())  # the catalog's own fixed words ("10-30x slower than NVLink")
    texts += inputs.notes
    if inputs.engine is not None:
        texts += [inputs.engine.memory.model_dump_json(), inputs.engine.config.model_dump_json(), *inputs.engine.notes]
        per_request = (inputs.input_len or 0) + (inputs.output_len or 0)
        texts.append(str(inputs.engine.memory.requests_that_fit(per_request)))
    texts += [r.model_dump_json() for r in [*inputs.measured, *inputs.predicted]]
    texts += [str(r.ttft_ms.mean / 1000) for r in [*inputs.measured, *inputs.predicted] if r.ttft_ms and r.ttft_ms.mean]
    texts += [str(inputs.input_len), str(inputs.output_len)]
    from vllm_advisor.answer.sources import card_upstream

    texts += [" ".join(card_upstream(s)) for s in answer.sources]
    return texts


@pytest.mark.parametrize("language", ["zh", "en"])
def test_every_number_printed_has_a_source(language, shared_dir):
    """No figure in the answer is the writer's own: each is in a finding, the memory estimate,
    the engine configuration, a benchmark run, a source or the question (to the digits shown)."""
    inputs = gather(profile=SEED, attachments=[shared_dir / BENCH])
    diagnosis = hand_diagnosis(language)
    attach_sources(diagnosis, inputs, kb=False)
    answer = write_answer(inputs, diagnosis, language=language)
    assert unsupported_numbers(answer.markdown, given_texts(inputs, diagnosis, answer), rel=0.005, ignore_below=0) == []
    # The real vLLM bench file is a measured row (rate 4/s, 35.1 tok/s per request, 50.3 ms TTFT).
    assert "| rate=4/s | [measured] | 35.1 | " in answer.markdown or "| 每秒 4 个请求 | [实测] | 35.1 | " in answer.markdown


def test_every_number_printed_has_a_source_with_the_real_diagnosis():
    from vllm_advisor.diagnosis.engine import diagnose

    inputs = gather(profile=SEED)
    diagnosis = diagnose(inputs)
    attach_sources(diagnosis, inputs, kb=False)
    answer = write_answer(inputs, diagnosis)
    assert answer.language == "zh"
    assert unsupported_numbers(answer.markdown, given_texts(inputs, diagnosis, answer), rel=0.005, ignore_below=0) == []
    assert check_citations(answer.markdown.split("## 参考来源")[0], len(answer.sources)).ok


def test_unsupported_numbers_catches_an_invented_figure():
    given = ["KV cache capacity 327120 tokens, 5.11125 requests, 0.9 utilization, Qwen32B"]
    assert unsupported_numbers("327,120 tokens; 5.11 requests; 90%; 32B; 327K tokens", given) == []
    assert unsupported_numbers("about 41,000 tokens and 7.5 requests", given) == ["41,000", "7.5"]


DEV_CASES = sorted((Path(__file__).resolve().parents[1].parent / "shared" / "cases" / "dev").glob("*.yaml"))


def test_dev_cases_are_there(shared_dir):
    assert len(DEV_CASES) >= 12 and all(p.parent == shared_dir / "cases" / "dev" for p in DEV_CASES)


@pytest.mark.parametrize("case_file", DEV_CASES, ids=lambda p: p.stem)
def test_dev_cases_answer_with_sourced_numbers_and_resolving_citations(case_file):
    """Every real case of shared/cases/dev, through the real diagnosis: the answer is in the case's
    language, prints no figure of its own and every [n] names a listed source."""
    from vllm_advisor.diagnosis.engine import diagnose

    inputs = gather(profile=case_file)
    diagnosis = diagnose(inputs)
    attach_sources(diagnosis, inputs, kb=False)
    answer = write_answer(inputs, diagnosis)
    assert answer.language == inputs.language
    assert unsupported_numbers(answer.markdown, given_texts(inputs, diagnosis, answer), rel=0.005, ignore_below=0) == []
    sources_head = "## 参考来源" if answer.language == "zh" else "## Sources"
    body = answer.markdown.split(sources_head)[0]
    check = check_citations(body, len(answer.sources))
    assert not check.invalid and set(check.valid) == {s.number for s in answer.sources}
    assert source_numbers(answer.markdown) == list(range(1, len(answer.sources) + 1))


def test_a_finding_without_evidence_quotes_the_users_closest_sentence():
    """A cosine figure ("closeness ... (cosine): 0.61") meant nothing to reviewers; a finding that rests
    on the words alone quotes the sentence of them closest to the cause's symptoms."""
    from pathlib import Path

    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather

    case = Path(__file__).resolve().parents[1] / "knowledge" / "cases" / "lmdeploy-2327-internvl2-requests-served-one-by-one.yaml"
    inputs = gather(profile=case)
    quoted = [e for f in diagnose(inputs).findings for e in f.evidence if e.label.id == "ev.closest_words"]
    assert quoted and all(isinstance(e.value, str) and " ".join(e.value.split()[:3]) in " ".join(inputs.text.split()) for e in quoted)


def test_load_table_rows_are_named_in_the_answers_language_and_told_apart():
    """"run 0" stood in Chinese answers, and two reported "c=1" rows (fp16, AWQ) looked the same."""
    from vllm_advisor.answer.embedded import render_load_table
    from vllm_advisor.answer.figures import LoadRow

    rows = [LoadRow(load="run 0", kind="reported", run_index=0, output_tok_s=1012.0), LoadRow(load="run 1", kind="reported", run_index=1, output_tok_s=1160.0)]
    table = "\n".join(render_load_table(rows, "zh"))
    assert "第 1 次" in table and "第 2 次" in table and "run" not in table
    twins = [LoadRow(load="c=1", kind="reported", per_request_tok_s=30.0, ttft_s=1.0), LoadRow(load="c=1", kind="reported", per_request_tok_s=45.0, ttft_s=0.8),
             LoadRow(load="c=1", kind="model", per_request_tok_s=40.0, ttft_s=0.9)]
    table = "\n".join(render_load_table(twins, "en"))
    assert "| c=1 (1) |" in table and "| c=1 (2) |" in table and "| c=1 | [model" in table


@pytest.mark.parametrize("language,question", [("en", "Why is TTFT high at 16 clients?"), ("zh", "为什么16并发时首token这么慢？")])
def test_the_short_answer_says_when_the_gauges_missed_the_run(tmp_path, fixtures_dir, language, question):
    """Two idle scrapes around a benchmark (before and after it): the gauges are left out, and the
    short answer, not only the full one, says so (the reader may otherwise take 0 running as read)."""
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.probe.metrics import load_metrics_file

    dumps = fixtures_dir / "vllm-cpu-real/metrics"
    snaps = [load_metrics_file(dumps / name, timestamp=t)[0] for name, t in (("A_05a_before_bench_in1024_c16.txt", 0.0), ("A_05b_after_bench_in1024_c16.txt", 12.0))]
    watch = tmp_path / "watch.jsonl"
    watch.write_text("".join(s.model_dump_json() + "\n" for s in snaps))
    inputs = gather(question=question, metrics=[str(watch)])
    diagnosis = diagnose(inputs)
    assert "note.gauges_missed_load" in [n.id for n in diagnosis.notes]
    attach_sources(diagnosis, inputs, kb=False)
    said = catalog(language)["note.gauges_missed_load"].split("{snapshots}")[1][:10]
    assert said in write_answer(inputs, diagnosis, language=language, short=True).markdown
