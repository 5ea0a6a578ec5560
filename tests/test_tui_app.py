"""The chat app driven through Textual's pilot (``App.run_test``): every command, the keys, streaming,
cancelling, the log and ``--resume``. Real inputs from ../shared and the bundled case."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vllm_advisor.logs import LogStore
from vllm_advisor_tui.app import ChatApp
from vllm_advisor_tui.conversation import LLMSettings
from vllm_advisor_tui.screens import HelpScreen, SourceScreen
from vllm_advisor_tui.widgets import EvidencePanel, FactsPanel, FindingsPanel, ProbePanel, StatusLine

pytestmark = pytest.mark.asyncio

REPO = Path(__file__).resolve().parents[1]
SEED = "examples/seed-qwen32b-h800-long-input.yaml"
LLAMA = "real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
QUESTION = "Why is each request so much slower at 40 clients than alone, and why do 100 clients look like 40?"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "advisor-home"
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "fake-home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.chdir(REPO)
    return folder


def make_app(**kwargs) -> tuple[ChatApp, list]:
    """The app with its notifications captured (message, severity)."""
    app = ChatApp(warm_up=kwargs.pop("warm_up", False), **kwargs)
    notes: list[tuple[str, str]] = []
    app.notify = lambda message, **kw: notes.append((str(message), kw.get("severity", "information")))  # type: ignore[method-assign]
    return app, notes


async def wait_until(pilot, condition, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.05)


async def idle(pilot, app: ChatApp, timeout: float = 120) -> None:
    await pilot.pause()
    await wait_until(pilot, lambda: not any(g in app._jobs for g in ("task", "evidence", "refresh")), timeout)
    await pilot.pause()


async def send(pilot, app: ChatApp, text: str) -> None:
    app.prompt.focus()
    app.prompt.value = text
    await pilot.press("enter")
    await pilot.pause()


def last(app: ChatApp) -> str:
    return app.chat.messages[-1].text


def text_of(app: ChatApp, selector: str) -> str:
    return str(app.query_one(selector).render())


def rows(command: str | None = "chat"):
    return list(reversed(LogStore().list(100, command=command)))


# -- first screen --------------------------------------------------------------------------------


async def test_first_screen_at_80x24():
    app, notes = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.focused is app.prompt
        assert app.chat.messages[0].text.startswith("**Ask why your vLLM deployment is slow.**")
        assert not app.query_one("#side").display  # too narrow: the chat gets the width
        await pilot.press("ctrl+b")
        assert app.query_one("#side").display
        shown = {key for key, b in app.active_bindings.items() if b.binding.show}
        assert {"ctrl+q", "f1", "escape", "ctrl+e", "ctrl+l", "ctrl+b"} <= {k for k in shown}
    assert notes == []


async def test_side_panel_shows_at_120_columns():
    app, _ = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert app.query_one("#side").display
        assert "nothing attached" in text_of(app, "#evidence-text")
        assert not app.query_one(ProbePanel).display


# -- evidence commands ---------------------------------------------------------------------------


async def test_attach_a_real_bench_file(fixtures_dir):
    app, notes = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await send(pilot, app, f"/attach {fixtures_dir / LLAMA}")
        await idle(pilot, app)
        assert last(app) == "Attached **llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json**: vllm-bench: 1 load point (rate=4/s)."
        assert "llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json" in text_of(app, "#evidence-text")
        assert "vllm-bench: 1 load point" in text_of(app, "#evidence-text")
    entry = rows()[0]
    assert entry.inputs["event"] == "evidence" and entry.question == f"/attach {fixtures_dir / LLAMA}"
    assert entry.inputs["evidence"]["attachments"] == [str((fixtures_dir / LLAMA).resolve())]
    assert [n for n, s in notes if s == "error"] == []


async def test_attach_a_file_that_is_no_evidence(fixtures_dir):
    app, notes = make_app()
    async with app.run_test() as pilot:
        await send(pilot, app, f"/attach {fixtures_dir / 'vllm-cpu-real/recipe/bench.sh'}")
        await idle(pilot, app)
        errors = [n for n, s in notes if s == "error"]
        assert len(errors) == 1 and "bench.sh: not a format the advisor reads" in errors[0]
        assert last(app).startswith("*Not added:")
        assert app.conversation.evidence.empty
    assert rows()[0].error == errors[0]


async def test_an_unexpected_error_applying_a_file_ends_its_job(fixtures_dir):
    """An exception that is no AdvisorError while a detected file is applied (on the UI thread) says so
    in one line and ends the "evidence" job: a question waiting on that job must not wait forever."""
    app, notes = make_app()
    async with app.run_test() as pilot:

        def broken(*_a, **_k):
            raise RuntimeError("disk vanished")

        app.conversation.apply_file = broken  # type: ignore[method-assign]
        await send(pilot, app, f"/attach {fixtures_dir / LLAMA}")
        await idle(pilot, app, timeout=30)  # fails here if the job stays open
        assert "evidence" not in app._jobs
        errors = [n for n, s in notes if s == "error"]
        assert len(errors) == 1 and "internal error: RuntimeError: disk vanished" in errors[0]
        assert last(app).startswith("*Not added:")


async def test_profile_then_the_motivating_question():
    app, notes = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, app, f"/profile {SEED}")
        await idle(pilot, app)
        assert "KV 缓存容量: 327,120 个 token [模型估算]" in text_of(app, "#facts-text")  # the case asks in Chinese
        assert "GPU: 2 × H800" in text_of(app, "#facts-text")
        await send(pilot, app, QUESTION)
        await idle(pilot, app)
        answer = last(app)
        assert "## Answer" in answer and "Sources" in answer and "[1]" in answer
        findings = text_of(app, "#findings-text")
        # the performance model establishes the KV limit: it leads, the misleading measurement follows
        assert findings.startswith("1. The KV cache holds too few requests of this length") and "2. The measurement itself misleads" in findings and "%" in findings
        assert not app.query_one(StatusLine).display
    question = [r for r in rows() if r.inputs["event"] == "question"][0]
    assert question.question == QUESTION and question.output == answer and question.sources
    assert question.causes[0] == "kv_capacity"
    assert [n for n, s in notes if s == "error"] == []


async def test_serve_cmd_set_and_an_estimate_without_a_workload():
    app, notes = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await send(pilot, app, '/serve-cmd "vllm serve Qwen/Qwen2.5-32B-Instruct -tp 2"')
        assert last(app) == "Serve command set for **Qwen/Qwen2.5-32B-Instruct**."
        await send(pilot, app, "/set gpu=H800 num_gpus=2")
        assert last(app) == "`gpu` = **H800**. `num_gpus` = **2**."
        await idle(pilot, app)
        assert "GPUs: 2 × H800" in text_of(app, "#facts-text")
        assert "KV cache size:" in text_of(app, "#facts-text")
        await pilot.press("ctrl+e")
        await idle(pilot, app)
        errors = [n for n, s in notes if s == "error"]
        assert errors and "prompt and output lengths are unknown" in errors[-1]
        await send(pilot, app, "/set max_num_seqs=8")
        assert "not a deployment fact" in [n for n, s in notes if s == "error"][-1]


async def test_estimate_whatif_and_memo_on_the_motivating_case(tmp_path):
    app, notes = make_app(profile=SEED)
    async with app.run_test(size=(120, 40)) as pilot:
        await idle(pilot, app)
        assert "seed-qwen32b-h800-long-input.yaml" in text_of(app, "#evidence-text")
        await pilot.press("ctrl+e")
        await idle(pilot, app)
        assert app.chat.messages[-2].text == "/estimate"
        assert "| KV cache | 39.93 GiB (327,120 tokens, 20,445 blocks of 16) |" in last(app)
        await send(pilot, app, "/estimate 8")
        await idle(pilot, app)
        assert "| c=8 | model |" in last(app)
        await send(pilot, app, "/whatif kv_cache_dtype=fp8")
        await idle(pilot, app)
        assert "KV cache 327,120 → 654,256 tokens" in last(app)
        memo = tmp_path / "out" / "memo.md"
        await send(pilot, app, f"/memo {memo}")
        await idle(pilot, app, timeout=180)
        assert last(app).startswith(f"Memo written to `{memo}`")
        assert memo.is_file() and "327,120" in memo.read_text()
    events = [r.inputs["event"] for r in rows()]
    assert events == ["estimate", "estimate", "whatif", "memo"]
    assert [n for n, s in notes if s == "error"] == []


async def test_sources_open_the_cited_text():
    app, notes = make_app(profile=SEED)
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, app, "/sources 1")
        assert "no sources yet" in notes[-1][0]
        await idle(pilot, app)
        await send(pilot, app, QUESTION)
        await idle(pilot, app)
        first = app.conversation.sources[0]
        await send(pilot, app, "/sources 1")
        await wait_until(pilot, lambda: isinstance(app.screen, SourceScreen))
        page = app.screen.markdown
        assert first.title in page and first.url in page
        assert len(page) > len(first.snippet or "")  # the whole card section, not the snippet
        await pilot.press("escape")
        assert not isinstance(app.screen, SourceScreen)
        await send(pilot, app, "/sources 99")
        assert f"sources 1 to {len(app.conversation.sources)}, not 99" in notes[-1][0]
        await pilot.press("ctrl+o")
        assert app.prompt.value == "/sources "


async def test_clear_and_clear_all(fixtures_dir):
    app, notes = make_app(attachments=[fixtures_dir / LLAMA])
    async with app.run_test(size=(120, 36)) as pilot:
        await idle(pilot, app)
        await send(pilot, app, "/estimate")
        await idle(pilot, app)
        first_id = app.conversation.id
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert app.conversation.id != first_id and len(app.chat.messages) == 1  # the welcome
        assert app.conversation.evidence.attachments  # kept
        await send(pilot, app, "/clear all")
        await pilot.pause()
        assert app.conversation.evidence.empty
        assert "nothing attached" in text_of(app, "#evidence-text")


async def test_help_by_command_and_by_key():
    app, _ = make_app()
    async with app.run_test() as pilot:
        await send(pilot, app, "/help")
        assert isinstance(app.screen, HelpScreen)
        assert "/probe URL [SECONDS]" in app.screen.markdown and "| `ctrl+q` | Quit |" in app.screen.markdown
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert not isinstance(app.screen, HelpScreen)


async def test_unknown_command_is_a_notification():
    app, notes = make_app()
    async with app.run_test() as pilot:
        await send(pilot, app, "/estimat")
        assert notes == [("unknown command /estimat (did you mean /estimate?); /help lists them", "error")]
        assert len(app.chat.messages) == 1


# -- /probe ----------------------------------------------------------------------------------------


class _Dumps(BaseHTTPRequestHandler):
    bodies: list[bytes] = []
    hits = 0

    def do_GET(self):  # noqa: N802
        cls = type(self)
        body = cls.bodies[min(cls.hits, len(cls.bodies) - 1)]
        cls.hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_server(fixtures_dir):
    metrics = fixtures_dir / "vllm-cpu-real" / "metrics"
    bodies = [(metrics / f).read_bytes() for f in ("E_00_before_bench_in6000_c8.txt", "E_01_during_bench_in6000_c8_kv-pressure.txt", "E_02_after_bench_in6000_c8.txt")]
    handler = type("Handler", (_Dumps,), {"bodies": bodies, "hits": 0})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


async def test_probe_shows_live_figures_and_becomes_evidence(metrics_server, home):
    app, notes = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await send(pilot, app, f"/probe {metrics_server} 0.2")
        panel = app.query_one(ProbePanel)
        assert panel.display
        await wait_until(pilot, lambda: panel.samples >= 2, timeout=20)
        await pilot.pause()
        assert list(panel.history["running"])[:2] == [0.0, 1.0]
        assert list(panel.history["waiting"])[:2] == [0.0, 7.0]
        assert list(panel.history["kv_usage_pct"])[1] == pytest.approx(50.526, abs=0.01)
        assert len(panel.history["itl_p50_ms"]) >= 1
        label = str(app.query_one("#probe-waiting-label").render())
        assert label.startswith("waiting:") and "(max 7)" in label
        probe_file = home / "chat" / app.conversation.id / "probe-1.jsonl"
        assert app.conversation.evidence.metrics == [str(probe_file)]
        assert "probe-1.jsonl" in text_of(app, "#evidence-text")
        await send(pilot, app, "/probe stop")
        await wait_until(pilot, lambda: app._probe is None, timeout=10)
        assert last(app).startswith(f"Stopped watching {metrics_server}/metrics after")
        assert probe_file.is_file()
        await send(pilot, app, "/probe ftp://nowhere")
        assert "not an http(s) URL" in notes[-1][0]


# -- answers from an LLM, streamed; cancelling; quitting ----------------------------------------------


class _OpenAI(BaseHTTPRequestHandler):
    answer = ""
    delay_s = 0.0
    chunk_pause_s = 0.0

    def do_GET(self):  # noqa: N802  (GET /v1/models)
        self._json({"object": "list", "data": [{"id": "test-model", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        cls = type(self)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        time.sleep(cls.delay_s)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        pieces = [cls.answer[i : i + 12] for i in range(0, len(cls.answer), 12)]
        try:
            for piece in [""] + pieces:
                chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"),
                         "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(cls.chunk_pause_s)
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _json(self, payload):
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def openai_server(answer: str, *, delay_s: float = 0.0, chunk_pause_s: float = 0.0):
    handler = type("Handler", (_OpenAI,), {"answer": answer, "delay_s": delay_s, "chunk_pause_s": chunk_pause_s})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


PROSE = (
    "Only about 5 requests of 64,000 tokens fit in the KV cache [1], so at 40 clients the rest wait "
    "and each running request shares its steps with long prefills [2]. More clients only add waiting time."
)


async def test_llm_answer_streams_then_ends_in_sources(monkeypatch):
    httpd, url = openai_server(PROSE, chunk_pause_s=0.25)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890abcdef")
    app, notes = make_app(profile=SEED, llm=LLMSettings(base_url=url))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await idle(pilot, app)
            await send(pilot, app, QUESTION)
            widget = app.chat.messages[-1]
            await wait_until(pilot, lambda: "KV cache [1]" in widget.text, timeout=60)
            partial = widget.text
            assert app.busy and partial.startswith("Only about 5 requests") and "Sources" not in partial
            await idle(pilot, app)
            assert widget.text.startswith(PROSE) and "Sources" in widget.text and "[2]" in widget.text
    finally:
        httpd.shutdown()
    entry = [r for r in rows() if r.inputs["event"] == "question"][0]
    assert entry.llm_used and entry.output == widget.text
    assert entry.inputs["llm_base_url"] == url and entry.inputs["llm_key_env"] == "OPENAI_API_KEY"
    assert "sk-test-1234567890abcdef" not in json.dumps(entry.to_dict())
    assert [n for n, s in notes if s == "error"] == []


async def test_escape_cancels_an_answer_and_the_app_stays_usable():
    httpd, url = openai_server(PROSE, delay_s=30)
    app, notes = make_app(profile=SEED, llm=LLMSettings(base_url=url, model="test-model", timeout=40))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await idle(pilot, app)
            await send(pilot, app, QUESTION)
            await wait_until(pilot, lambda: app._jobs.get("task", ("",))[0].startswith("the LLM"), timeout=60)
            await pilot.press("escape")
            await pilot.pause()
            assert not app.busy and not app.query_one(StatusLine).display
            assert last(app).endswith("*cancelled*")
            await send(pilot, app, "/help")
            assert isinstance(app.screen, HelpScreen)
    finally:
        httpd.shutdown()
    entry = [r for r in rows() if r.inputs["event"] == "question"][-1]
    assert entry.question == QUESTION and entry.error == "cancelled"


async def test_quitting_mid_answer_keeps_the_question(fixtures_dir):
    httpd, url = openai_server(PROSE, delay_s=30)
    app, _ = make_app(profile=SEED, llm=LLMSettings(base_url=url, model="test-model", timeout=40))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await idle(pilot, app)
            await send(pilot, app, QUESTION)
            await wait_until(pilot, lambda: app._jobs.get("task", ("",))[0].startswith("the LLM"), timeout=60)
            await pilot.press("ctrl+c")
            await pilot.pause()
    finally:
        httpd.shutdown()
    entry = rows()[-1]
    assert entry.question == QUESTION and entry.error == "interrupted before the answer was complete"


# -- input: history, completion, palette, resume, themes ----------------------------------------------


async def test_history_and_tab_completion():
    app, _ = make_app()
    async with app.run_test() as pilot:
        await send(pilot, app, "/help")
        await pilot.press("escape")
        await send(pilot, app, "/nothing")
        await pilot.press("up")
        assert app.prompt.value == "/nothing"
        await pilot.press("up")
        assert app.prompt.value == "/help"
        await pilot.press("down", "down")
        assert app.prompt.value == ""
        await pilot.press(*"/at")
        await pilot.pause(0.2)
        await pilot.press("tab")
        assert app.prompt.value == "/attach "
        await pilot.press(*"exampl")
        await pilot.pause(0.2)
        await pilot.press("tab")
        assert app.prompt.value == "/attach examples/"


async def test_palette_lists_and_runs_the_commands():
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        from textual.command import CommandPalette

        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"attach")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert app.prompt.value == "/attach "  # a command with an argument is typed for the user to finish
        await pilot.press("ctrl+p")
        await pilot.press(*"/help")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), timeout=5)


async def test_resume_continues_the_last_conversation(fixtures_dir):
    facts = {"model": "meta-llama/Llama-3.3-70B-Instruct", "gpu": "A100-40GB", "num_gpus": 8, "vllm_version": "0.8.3"}
    app, _ = make_app(attachments=[fixtures_dir / LLAMA], facts=facts)
    async with app.run_test(size=(120, 36)) as pilot:
        await idle(pilot, app)
        await send(pilot, app, "what limits this run?")
        await idle(pilot, app)
        answer = last(app)
        cid = app.conversation.id
    again, notes = make_app(resume=True)
    async with again.run_test(size=(120, 36)) as pilot:
        await idle(pilot, again)
        assert again.conversation.id == cid
        texts = [m.text for m in again.chat.messages]
        assert texts == ["what limits this run?", answer]
        assert "llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json" in text_of(again, "#evidence-text")
        assert again.conversation.sources and again.conversation.questions == ["what limits this run?"]
        assert again.conversation.evidence.facts == facts
        assert "GPUs: 8 × A100-40GB" in text_of(again, "#facts-text")
        assert again.prompt.history[-1] == "what limits this run?"
    assert any("resumed the conversation" in n for n, _ in notes)


async def test_resume_with_an_empty_log_starts_fresh():
    app, notes = make_app(resume=True)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.chat.messages[0].text.startswith("**Ask why")
    assert notes == [("no earlier conversation in the log; starting a new one", "warning")]


async def test_themes():
    app, notes = make_app(theme="nord")
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.theme == "nord"
    app, notes = make_app(theme="no-such-theme")
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.theme == "textual-dark" and "unknown theme 'no-such-theme'" in notes[0][0]


async def test_warm_up_indexes_the_cards_in_the_background():
    app, notes = make_app(warm_up=True)
    started: list[str] = []
    start_job = app._start_job
    app._start_job = lambda group, *a: (started.append(group), start_job(group, *a))  # type: ignore[method-assign]
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: "warmup" in started and "warmup" not in app._jobs, timeout=60)
        from vllm_advisor.answer.sources import card_corpus

        assert card_corpus.cache_info().currsize >= 1
        assert notes == []


async def test_a_question_asked_while_the_case_file_is_read_is_answered_with_it():
    # CI's tmux run once answered the motivating question without the case file: the start-up job ended
    # before the file was applied, and the answer worker (another thread) started in between. Applying
    # the file slowly here opens that window wide; the answer must still be the case file's
    app, notes = make_app(profile=SEED)
    applied = []
    apply_file = app.conversation.apply_file

    def slow_apply(*args, **kwargs):
        time.sleep(0.5)
        applied.append(args[0])
        return apply_file(*args, **kwargs)

    app.conversation.apply_file = slow_apply  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "evidence" in app._jobs)
        await send(pilot, app, QUESTION)
        await idle(pilot, app)
        assert applied
        assert "seed-qwen32b-h800-long-input.yaml" in text_of(app, "#evidence-text")
        assert "22" in last(app) and "Read from your words" not in last(app), last(app)
    assert [n for n, s in notes if s == "error"] == []
