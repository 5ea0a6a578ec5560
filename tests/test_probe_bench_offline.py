"""probe bench pieces that need no server: its result format, the server-view summary, the
KV-admission rule on real vLLM dumps, and the CLI's one-line errors. The live behaviour is
tested against a real vLLM in tests/real_vllm/."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_advisor.messages import render
from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.errors import InputFileError
from vllm_advisor.probe.bench import detect_format, load_runs
from vllm_advisor.probe.loadgen import BenchSpec, default_num_prompts
from vllm_advisor.probe.loadgen.prompts import pseudo_words
from vllm_advisor.probe.metrics import compute_window, load_metrics_file, summarize_window

ADVISOR = str(Path(sys.executable).parent / "vllm-advisor")
KV_DUMPS = ("E_00_before_bench_in6000_c8.txt", "E_01_during_bench_in6000_c8_kv-pressure.txt", "E_02_after_bench_in6000_c8.txt")


@pytest.fixture
def kv_pressure_dumps(fixtures_dir: Path) -> list[Path]:
    return [fixtures_dir / "vllm-cpu-real" / "metrics" / name for name in KV_DUMPS]


def test_waiting_by_reason_is_summarised(kv_pressure_dumps):
    snaps = [s for p in kv_pressure_dumps for s in load_metrics_file(p)]
    eng = summarize_window(compute_window(snaps))["engines"][0]
    assert eng["requests_waiting_for_capacity"]["max"] == 7  # E_01: waiting_by_reason{reason="capacity"} 7
    assert eng["requests_running"]["max"] == 1
    assert eng["kv_cache_usage_pct"]["max"] == pytest.approx(50.5, abs=0.1)
    assert eng["preemptions"] == 31


def test_kv_admission_rule_on_real_kv_pressure_dumps(kv_pressure_dumps):
    inputs = gather(question="why do requests wait?", attachments=kv_pressure_dumps, predict=False)
    diagnosis = diagnose(inputs)
    kv = next(f for f in diagnosis.findings if f.cause == "kv_capacity")
    fits = next(e for e in kv.evidence if e.label.id == "ev.kv_fits_length")
    assert fits.value == 1  # one running request held 50.5% of the cache: room for one, not 1.98 (requests are whole)
    assert "while 7 waited" in render(fits.detail, "en")
    # the server's own histograms: most of its TTFT was time in the queue (E run: TTFT ~3 s at c=8)
    queueing = next(f for f in diagnosis.findings if f.cause == "queueing")
    share = next(e for e in queueing.evidence if e.label.id == "ev.queue_share")
    assert share.value >= 50 and "vllm:request_queue_time_seconds" in render(share.detail, "en")


def _result_line(fixtures_dir: Path, **block) -> dict:
    src = fixtures_dir / "vllm-cpu-real/results/kv-pressure/bench_in6000_out64_c8_n32_seed401.json"
    obj = json.loads(src.read_text())
    obj["vllm_advisor"] = {"tool": "vllm-advisor probe bench", "version": "test", "seed": 401, **block}
    return obj


def test_result_file_round_trip_with_server_window(fixtures_dir, kv_pressure_dumps, tmp_path):
    snaps = [s for p in kv_pressure_dumps for s in load_metrics_file(p)]
    window = json.loads(compute_window(snaps).model_dump_json())
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps(_result_line(fixtures_dir, server={"samples": 3, "window": window})) + "\n")
    assert detect_format(out) == "vllm-advisor-bench"
    run = load_runs(out)[0]
    assert run.completed == 32 and not run.failed_checks()
    assert run.server_metrics is not None and run.server_metrics.num_snapshots == 3
    assert any(math.isinf(b[1]) for s in run.server_metrics.series for b in s.quantile_bounds.values())
    # ask reads the server window of an attached result like a /metrics dump
    inputs = gather(question="why?", attachments=[out], predict=False)
    assert inputs.metrics_summaries and inputs.metrics_summaries[0]["engines"][0]["preemptions"] == 31


def test_a_broken_server_window_is_one_line_naming_the_field(fixtures_dir, tmp_path):
    out = tmp_path / "broken.jsonl"
    out.write_text(json.dumps(_result_line(fixtures_dir, server={"window": {"series": "nope"}})) + "\n")
    with pytest.raises(InputFileError) as err:
        load_runs(out)
    assert "vllm_advisor.server.window" in str(err.value) and "\n" not in str(err.value)


def test_plain_vllm_bench_files_are_not_claimed(fixtures_dir):
    src = fixtures_dir / "vllm-cpu-real/results/eager/bench_in6000_out64_c8_n32_seed303.json"
    assert detect_format(src) == "vllm-bench"


def test_spec_defaults_and_checks():
    spec = BenchSpec(base_url="http://x", input_len=100, output_len=10, concurrencies=[1, 16])
    assert spec.prompts_for(1) == default_num_prompts(1) == 8 and spec.prompts_for(16) == 64
    assert spec.seed != BenchSpec(base_url="http://x", input_len=100, output_len=10, concurrencies=[1]).seed
    assert len(pseudo_words(__import__("random").Random(1), 50).split()) == 50


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--concurrency", "1,x"], 2, "--concurrency expects integers"),
        (["--shared-prefix-len", "200"], 2, "must be shorter than --input-len"),
        (["--request-rate", "-1"], 2, "--request-rate must be positive"),
        ([], 4, "cannot reach the server"),
    ],
)
def test_cli_errors_are_one_line(args, code, needle, tmp_path):
    proc = subprocess.run([ADVISOR, "probe", "bench", "http://127.0.0.1:9", "--input-len", "100", "--output-len", "8",
                           "-o", str(tmp_path / "r.jsonl"), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()


def test_memo_from_a_probe_bench_result_without_a_case_file(fixtures_dir, kv_pressure_dumps, tmp_path):
    from vllm_advisor.probe.loadgen.sampler import timeline_point

    snaps = [s for p in kv_pressure_dumps for s in load_metrics_file(p)]
    for i, snap in enumerate(snaps):  # the dumps carry no scrape time: space them 5 s apart
        snap.timestamp = 1000.0 + 5 * i
    window = json.loads(compute_window(snaps).model_dump_json())
    timeline = [timeline_point(s, 1000.0) for s in snaps]
    assert [p["waiting"] for p in timeline] == [0, 7, 0] and timeline[1]["kv_cache_usage"] == pytest.approx(0.505, abs=1e-3)
    result = tmp_path / "bench.jsonl"
    result.write_text(json.dumps(_result_line(fixtures_dir, server={"samples": 3, "window": window, "timeline": timeline})) + "\n")
    proc = subprocess.run([ADVISOR, "memo", "--attach", str(result), "-o", str(tmp_path / "memo.md"), "--no-log"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    memo = (tmp_path / "memo.md").read_text()
    assert "Why is this deployment slow" in memo
    assert "`kv_capacity`" in memo and "vllm:num_preemptions_total increase: **31**" in memo
    assert "(memo_plots/server_timeline.png)" in memo and (tmp_path / "memo_plots" / "server_timeline.png").stat().st_size > 10_000
    proc = subprocess.run([ADVISOR, "memo"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--attach" in proc.stderr


def test_chat_attach_names_the_server_view(fixtures_dir, kv_pressure_dumps, tmp_path):
    from vllm_advisor_tui.evidence import detect_file

    snaps = [s for p in kv_pressure_dumps for s in load_metrics_file(p)]
    window = json.loads(compute_window(snaps).model_dump_json())
    result = tmp_path / "bench.jsonl"
    result.write_text(json.dumps(_result_line(fixtures_dir, server={"samples": 3, "window": window})) + "\n")
    detected = detect_file(result)
    assert (detected.kind, detected.label) == ("bench", "vllm-advisor-bench: 1 load point (c=8), server /metrics for 1")


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (400, b'{"error": {"message": "This model\'s maximum context length is 8192 tokens", "type": "BadRequestError"}}',
         "HTTP 400: This model's maximum context length is 8192 tokens"),
        (200, b"data: {not json\n\n", "the stream carried a chunk that is not JSON"),
        (200, b"data: [1, 2]\n\n", "the stream carried a chunk that is not a JSON object"),
        (200, b"data: [DONE]\n\n", "the stream ended without a single token"),
        (200, b'data: {"choices": [{"delta": null}]}\n\ndata: [DONE]\n\n', "the stream ended without a single token"),
    ],
)
def test_a_server_that_answers_badly_is_a_failed_request_not_a_crash(status, body, error):
    """Protocol-level: what one streamed request records when the answer is wrong (the live
    behaviour against vLLM is in tests/real_vllm)."""
    import asyncio

    import httpx

    from vllm_advisor.probe.loadgen.stream import request_body, send_request

    async def go():
        transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
        async with httpx.AsyncClient(transport=transport) as client:
            endpoint = "chat" if b"delta" in body else "completions"
            return await send_request(client, "http://x/v1/completions", request_body(endpoint, "m", "p", 4, True), endpoint, 0)

    record = asyncio.run(go())
    assert not record.ok and record.error == error


def test_prompts_without_a_tokenizer_are_estimates_with_a_note():
    """A gateway that hides /tokenize: prompts are sized by characters, marked inexact, and the run
    says so (input lengths then come from the server's usage report)."""
    import random

    import httpx

    from vllm_advisor.probe.loadgen.prompts import PromptBuilder

    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(404, json={"detail": "Not Found"})

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        builder = PromptBuilder(client, "http://gateway", "m")
        prompt = builder.build(1000, random.Random(3))
    assert seen == ["/tokenize"]  # asked once, then never again
    assert prompt.tokens is None and not prompt.exact and 3500 <= len(prompt.text) <= 4000
    assert not builder.has_tokenizer and "no usable /tokenize" in builder.notes[0]


def _streamed(chunks: list[str], completion_tokens: int) -> bytes:
    lines = [json.dumps({"choices": [{"text": text, "finish_reason": None}]}) for text in chunks]
    lines.append(json.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens}}))
    return "".join(f"data: {line}\n\n" for line in lines).encode() + b"data: [DONE]\n\n"


@pytest.mark.parametrize(("chunks", "tokens", "noted"), [
    (["a"] * 8, 8, False),           # one token per chunk, as vLLM streams an idle server's steps
    (["a", "bbbbbbb"], 8, True),     # the API server merged seven steps into one chunk
    (["a", "bb", "bb", "bbb"], 8, True),
])
def test_tokens_merged_into_chunks_are_counted_and_noted(chunks, tokens, noted):
    """A busy API server merges engine steps into one chunk: the record keeps the chunk count, the
    usage report keeps the token count, and the load point says its TPOT and ITL time chunks."""
    import asyncio

    import httpx

    from vllm_advisor.probe.loadgen.result import load_point_record
    from vllm_advisor.probe.loadgen.runner import LoadPoint
    from vllm_advisor.probe.loadgen.stream import request_body, send_request

    body = _streamed(chunks, tokens)

    async def go():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
        async with httpx.AsyncClient(transport=transport) as client:
            return await send_request(client, "http://x/v1/completions", request_body("completions", "m", "p", tokens, True),
                                      "completions", 0)

    record = asyncio.run(go())
    assert record.ok and record.token_chunks == len(chunks) and record.output_tokens == tokens
    point = LoadPoint(concurrency=1, num_prompts=2, records=[record, record],
                      prompts=[], started_at=0.0, duration_s=1.0)
    line = load_point_record(BenchSpec(base_url="http://x", input_len=5, output_len=tokens, concurrencies=[1]), point, "m", [])
    assert line["vllm_advisor"]["token_chunks"] == [len(chunks)] * 2
    notes = [n for n in _loaded(line).notes if "per chunk" in n]
    if noted:
        assert notes and f"{2 * tokens} tokens in {2 * len(chunks)} chunks" in notes[0]
    else:
        assert notes == []


def _loaded(line: dict):
    """A probe bench line read back the way ask and memo read the file."""
    from vllm_advisor.probe.bench.advisor_bench import run_from_object

    return run_from_object(json.loads(json.dumps(line)), source="bench.jsonl", index=0)
