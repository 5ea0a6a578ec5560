"""The chat's conversation, evidence detection, reports, log and live probe, without the UI.

Real inputs: the bundled motivating case and files under ../shared/fixtures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vllm_advisor.messages import cause_title
from vllm_advisor.errors import InputFileError, UnknownFormatError, UsageError
from vllm_advisor.logs import LogStore
from vllm_advisor.schema import Finding
from vllm_advisor_tui.chatlog import ChatLog
from vllm_advisor_tui.conversation import Conversation, since_previous
from vllm_advisor_tui.evidence import Evidence, detect_file, parse_fact
from vllm_advisor_tui.probe_live import LiveProbe
from vllm_advisor_tui.reports import estimate_markdown, parse_points, whatif_markdown

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"
LLAMA = "real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
SECRET = "sk-live-9fQ2mX7rT4wZ1pK8vN3b"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "advisor-home"
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "fake-home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return folder


@pytest.fixture(scope="module")
def seed_conversation() -> Conversation:
    """The motivating case, gathered once for the module (the model is calibrated: seconds)."""
    conv = Conversation()
    conv.apply_file(SEED, detect_file(SEED))
    conv.gathered()
    return conv


# -- detection ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kind, label",
    [
        (LLAMA, "bench", "vllm-bench: 1 load point (rate=4/s)"),
        ("vllm-cpu-real/results/kv-pressure/bench_in6000_out64_c8_n32_seed401.json", "bench", "vllm-bench: 1 load point (c=8)"),
        ("real-bench/guidellm/guidellm-bench_gpt-oss-20b_tp4_benchmarks.json", "bench", "guidellm: 1 load point (c=1)"),
        ("vllm-cpu-real/metrics/E_01_during_bench_in6000_c8_kv-pressure.txt", "metrics", "/metrics: one snapshot"),
        ("vllm-cpu-real/logs/server_E_eager_kv96blocks_maxseqs8.log", "server log", "server log: vLLM 0.32.0, ./tiny-qwen2, KV cache 12,288 tokens, 2 stats lines"),
    ],
)
def test_detects_real_files(fixtures_dir, name, kind, label):
    found = detect_file(fixtures_dir / name)
    assert (found.kind, found.label) == (kind, label)
    # the chat's own detection says the same, from what the session's gather parsed
    assert Conversation().detect(fixtures_dir / name) == found


def test_detects_the_case_file():
    found = detect_file(SEED)
    assert found.kind == "case"
    assert found.label == "case file: Qwen/Qwen2.5-32B-Instruct, 2 x H800, 3 observations"
    assert Conversation().detect(SEED) == found


def test_an_attached_file_is_parsed_once(fixtures_dir, monkeypatch):
    """/attach, the side panel and the next question read the file once: the label comes from the
    Session that the question then uses."""
    import vllm_advisor.probe.bench as bench_loaders

    calls = []
    real = bench_loaders.load_runs

    def counting(path, *a, **k):
        calls.append(Path(path).name)
        return real(path, *a, **k)

    monkeypatch.setattr(bench_loaders, "load_runs", counting)
    conv = Conversation()
    bench = fixtures_dir / LLAMA
    conv.apply_file(bench, conv.detect(bench))
    conv.refresh()
    conv.answer("why is TTFT so high?")
    assert calls == [bench.name]


def test_the_chat_refuses_what_gather_sets_aside(fixtures_dir):
    with pytest.raises(InputFileError, match="not a format the advisor reads"):
        Conversation().detect(fixtures_dir / "vllm-cpu-real/recipe/bench.sh")


def test_refuses_what_is_no_evidence(fixtures_dir, tmp_path):
    with pytest.raises(UnknownFormatError) as err:
        detect_file(fixtures_dir / "vllm-cpu-real/recipe/bench.sh")
    assert "not a benchmark result, /metrics dump, server log or case file" in err.value.one_line()
    assert "bench.sh" in err.value.one_line()
    binary = tmp_path / "weights.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(InputFileError, match="binary"):
        detect_file(binary)
    with pytest.raises(InputFileError):
        detect_file(tmp_path / "missing.json")


def test_case_becomes_the_profile_then_further_files_attach(fixtures_dir):
    conv = Conversation()
    reply = conv.apply_file(SEED, detect_file(SEED))
    assert "as the deployment's case file" in reply and conv.evidence.profile == SEED.resolve()
    bench = fixtures_dir / LLAMA
    assert conv.apply_file(bench, detect_file(bench)).startswith("Attached **llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json**")
    assert "already attached" in conv.apply_file(bench, detect_file(bench))
    assert conv.evidence.attachments == [bench.resolve()]
    assert [name for name, _ in conv.evidence.lines()] == [SEED.name, bench.name]
    with pytest.raises(UsageError, match="not a case file"):
        conv.apply_file(bench, detect_file(bench), as_profile=True)


def test_serve_command_and_facts():
    conv = Conversation()
    assert conv.apply_serve_cmd("vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2 --max-model-len 65536") == "Serve command set for **Qwen/Qwen2.5-32B-Instruct**."
    with pytest.raises(UsageError):
        conv.apply_serve_cmd("vllm serve m --max-model-len lots")
    assert parse_fact("gpu=H800") == ("gpu", "H800")
    assert parse_fact("num-gpus=2") == ("num_gpus", 2)
    with pytest.raises(UsageError, match="not a whole number"):
        parse_fact("num_gpus=two")
    with pytest.raises(UsageError, match="not a deployment fact"):
        parse_fact("max_num_seqs=8")


def test_signature_follows_the_files(tmp_path, fixtures_dir):
    copy = tmp_path / "bench.json"
    copy.write_bytes((fixtures_dir / LLAMA).read_bytes())
    ev = Evidence(attachments=[copy])
    before = ev.signature()
    time.sleep(0.01)
    copy.write_bytes(copy.read_bytes() + b"\n")
    assert ev.signature() != before


# -- answering ------------------------------------------------------------------------------------


def test_answer_on_the_motivating_case(seed_conversation):
    conv = seed_conversation
    stages, tokens = [], []
    turn = conv.answer(
        "Why is each request so much slower at 40 clients than alone, and why do 100 clients look like 40?",
        on_stage=lambda text, step: stages.append(step),
        on_token=tokens.append,
    )
    assert stages == [1, 2, 3, 4]
    assert "".join(tokens) == turn.text
    assert turn.answer.language == "en"
    causes = [f.cause for f in turn.diagnosis.findings]
    assert causes[0] == "kv_capacity" and "benchmark_methodology" in causes[:3]
    facts = {f.label.id: f for f in turn.diagnosis.facts}
    assert facts["fact.kv_tokens"].value == 327120 and facts["fact.kv_tokens"].unit == "tokens" and facts["fact.kv_tokens"].basis == "model"
    assert facts["fact.requests_fit"].value == 5.1 and facts["fact.requests_fit"].label.args["length"].value == 64000
    numbers = [s.number for s in turn.sources]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 3
    assert "Sources" in turn.answer.full_markdown and f"[{numbers[-1]}]" in turn.answer.full_markdown
    assert "Sources" in turn.text and "/details" in turn.text  # the short answer; the full analysis one command away
    assert turn.text.rstrip().endswith(">")  # the last line is the last source it cites, with its URL
    assert turn.text.index("prefill") < turn.text.index("## What to change")  # asked why slower: the prefill-chunk stall first


def test_a_chinese_question_gets_a_chinese_answer(seed_conversation):
    turn = seed_conversation.answer("为啥40并发时生成速率变得这么慢？")
    assert turn.answer.language == "zh" and "结论" in turn.text


def test_follow_up_keeps_earlier_questions_as_context(seed_conversation):
    conv = Conversation(evidence=seed_conversation.evidence)
    conv.questions = ["why is 40 clients slow?"]
    inputs = conv.inputs_for("and would fp8 KV cache help?")
    assert inputs.question.startswith("Earlier in this conversation:")
    assert "- why is 40 clients slow?" in inputs.question
    assert "Qwen32B + TP2 + H800" in inputs.question  # the case file's own question
    assert inputs.question.endswith("Question now: and would fp8 KV cache help?")
    assert inputs.language == "en"


def test_secrets_never_reach_the_diagnosis(seed_conversation):
    inputs = seed_conversation.inputs_for(f"why slow? my key is {SECRET}")
    assert SECRET not in inputs.question and "[redacted]" in inputs.question


def test_since_previous_names_what_changed(seed_conversation):
    findings = seed_conversation.refresh().findings
    assert since_previous([], findings, "en") == ""
    assert since_previous(findings, findings, "en") == ""
    changed = [f.model_copy(update={"confidence": max(0.0, f.confidence - 0.3)}) if i == 1 else f for i, f in enumerate(findings)]
    extra = Finding(cause="preemption", confidence=0.5)
    text = since_previous(changed[1:] + [extra], findings, "en")
    assert text.startswith("**Since the previous answer:**")
    title = lambda f: cause_title("en", f.cause)  # noqa: E731
    assert f"now leading: {title(findings[0])}" in text
    assert f"new: {title(findings[0])} (confidence {findings[0].confidence:.0%})" in text
    assert f"{title(findings[1])}: confidence {changed[1].confidence:.0%} → {findings[1].confidence:.0%}" in text
    assert "no longer found: Running requests are preempted and recomputed" in text
    assert since_previous(changed, findings, "zh").startswith("**与上一个回答相比：**")


# -- the log and --resume ---------------------------------------------------------------------------


def test_log_and_resume(seed_conversation, home, fixtures_dir):
    log = ChatLog()
    conv = Conversation(evidence=seed_conversation.evidence, log=log)
    bench = fixtures_dir / LLAMA
    conv.note(f"/attach {bench}", conv.apply_file(bench, detect_file(bench)), event="evidence")
    turn = conv.answer(f"why is it slow at 40 clients? token: {SECRET}")
    row = conv.commit(turn)
    entry = LogStore().get(row)
    assert entry.command == "chat" and entry.inputs["conversation"] == conv.id and entry.inputs["event"] == "question"
    assert SECRET not in json.dumps(entry.to_dict()) and "[redacted]" in entry.question
    assert entry.output == turn.text and [s["number"] for s in entry.sources] == [s.number for s in turn.sources]

    other = Conversation.resume(ChatLog())
    assert other is not None and other.id == conv.id
    assert other.evidence.profile == SEED.resolve() and other.evidence.attachments == [bench.resolve()]
    assert [m.role for m in other.messages] == ["user", "advisor", "user", "advisor"]
    assert other.messages[-1].text == turn.text
    assert [c.number for c in other.sources] == [c.number for c in turn.sources]
    assert [f.cause for f in other.findings] == [f.cause for f in turn.diagnosis.findings]
    assert len(other.questions) == 1
    assert ChatLog().recent_questions()[-1] == entry.question


def test_resume_without_a_log_and_with_a_moved_file(tmp_path, fixtures_dir):
    assert Conversation.resume(ChatLog()) is None
    moved = tmp_path / "bench.json"
    moved.write_bytes((fixtures_dir / LLAMA).read_bytes())
    conv = Conversation(log=ChatLog())
    conv.note("/attach bench.json", conv.apply_file(moved, detect_file(moved)), event="evidence")
    moved.unlink()
    back = Conversation.resume(ChatLog())
    assert back.evidence.attachments == [] and back.notes == [f"no longer found, left out: {moved.resolve()}"]


def test_no_log_writes_nothing(home, seed_conversation):
    conv = Conversation(evidence=seed_conversation.evidence, log=ChatLog(enabled=False))
    assert conv.note("/estimate", "table", event="estimate") is None
    assert not (home / "advisor.db").exists()


# -- /estimate and /whatif --------------------------------------------------------------------------


def test_estimate_table_of_the_motivating_case(seed_conversation):
    text = estimate_markdown(seed_conversation.inputs_for(None))
    assert "Qwen2.5-32B-Instruct on 2 x H800" in text and "calibrated to your measurements" in text
    assert "| KV cache | 39.93 GiB (327,120 tokens, 20,445 blocks of 16) |" in text
    assert "| requests that fit | 5.1 of 64,000 tokens |" in text
    rows = [line for line in text.splitlines() if line.startswith("| c=")]
    assert [r.split(" | ")[0:2] for r in rows] == [["| c=1", "model"], ["| c=1", "reported"], ["| c=40", "model"], ["| c=40", "reported"], ["| c=100", "model"], ["| c=100", "reported"]]
    assert rows[3].split(" | ")[5:7] == ["22.0", "880"]  # the user's own figures, in the end-to-end column
    running_c40 = float(rows[2].split(" | ")[7])
    assert 4.5 < running_c40 < 5.5  # ~5 requests of 64K tokens fit; the rest wait


def test_estimate_at_given_points(seed_conversation):
    points = parse_points("8, rate=0.5")
    assert [p.label for p in points] == ["c=8", "rate=0.5/s"]
    text = estimate_markdown(seed_conversation.inputs_for(None), points[:1])
    assert "| c=8 | model |" in text
    with pytest.raises(UsageError, match="not a client count"):
        parse_points("forty")


def test_whatif_fp8_doubles_the_kv_cache(seed_conversation):
    text = whatif_markdown(seed_conversation.inputs_for(None), ["kv_cache_dtype=fp8"])
    assert "KV cache 327,120 → 654,256 tokens; maximum concurrency 5.11x → 10.22x." in text
    running = [line for line in text.splitlines() if line.startswith("| c=40 | requests running")]
    before, after = (float(x) for x in running[0].split(" | ")[2:4])
    assert after > 1.8 * before
    with pytest.raises(UsageError, match="not known"):
        whatif_markdown(seed_conversation.inputs_for(None), ["warp_speed=9"])


def test_estimate_needs_a_deployment(fixtures_dir):
    conv = Conversation()
    bench = fixtures_dir / LLAMA
    conv.apply_file(bench, detect_file(bench))
    with pytest.raises(UsageError, match="model or GPU unknown"):
        estimate_markdown(conv.inputs_for(None))


# -- the live /metrics watch ------------------------------------------------------------------------


class _Dumps(BaseHTTPRequestHandler):
    bodies: list[bytes] = []
    hits = 0

    def do_GET(self):  # noqa: N802
        cls = type(self)
        body = cls.bodies[min(cls.hits, len(cls.bodies) - 1)]
        cls.hits += 1
        if body == b"500":
            self.send_response(500)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve_dumps(bodies: list[bytes]):
    handler = type("Handler", (_Dumps,), {"bodies": bodies, "hits": 0})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def test_live_probe_reads_a_kv_pressure_run(fixtures_dir, tmp_path):
    metrics = fixtures_dir / "vllm-cpu-real" / "metrics"
    bodies = [(metrics / f).read_bytes() for f in ("E_00_before_bench_in6000_c8.txt", "E_01_during_bench_in6000_c8_kv-pressure.txt", "E_02_after_bench_in6000_c8.txt")]
    httpd, url = serve_dumps(bodies + [b"500"])
    points, errors = [], []
    out = tmp_path / "probe.jsonl"
    probe = LiveProbe(url, out, interval=0.1, on_point=points.append, on_error=errors.append, timeout=2)
    worker = threading.Thread(target=probe.run)
    worker.start()
    deadline = time.monotonic() + 10
    while (len(points) < 3 or not errors) and time.monotonic() < deadline:
        time.sleep(0.02)
    probe.stop()
    worker.join(5)
    httpd.shutdown()
    assert not worker.is_alive()
    assert probe.shown == f"{url}/metrics"
    first, during, after = points[:3]
    assert (first.running, first.waiting, first.kv_usage_pct) == (0, 0, 0) and first.itl_p50_ms is None
    assert during.running == 1 and during.waiting == 7
    assert during.kv_usage_pct == pytest.approx(50.526, abs=0.01)
    assert during.finished == 8  # TTFT count 0 -> 8 between the two scrapes
    assert during.ttft_p50_ms > 0 and during.itl_p99_ms >= during.itl_p50_ms > 0
    assert after.running == 0 and after.finished == 24  # 32 requests in all
    assert errors and "HTTP 500" in errors[0]
    from vllm_advisor.probe.metrics import load_metrics_file

    assert len(load_metrics_file(out)) == probe.samples == 3


def test_live_probe_refuses_a_bad_url(tmp_path):
    from vllm_advisor.errors import EndpointError

    with pytest.raises(EndpointError, match="not an http"):
        LiveProbe("ftp://host/metrics", tmp_path / "x.jsonl")


def test_start_up_does_not_import_the_heavy_modules():
    code = (
        "import sys, vllm_advisor_tui.app, vllm_advisor.cli.main;"
        "heavy = [m for m in ('torch', 'matplotlib', 'langchain_core', 'chromadb', 'bm25s', 'vllm_advisor.perf.predict', 'vllm_advisor.diagnosis.engine') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
