"""`vllm-advisor chat`: the Textual app where a user talks to the advisor about their deployment.

The app owns the screen and the workers; :class:`~.conversation.Conversation` owns the evidence,
the messages and the log. Everything slow (reading files, building and calibrating the performance
model, the diagnosis, an LLM's answer, /estimate, /whatif, /memo, the /metrics watch, indexing the
tuning cards) runs in a thread worker: the status line says what is running and Escape abandons it,
so the interface never waits for it. Errors are notifications; a worker that fails never takes the
app down. Heavy modules are imported inside the workers, never at start-up.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Markdown
from textual.worker import get_current_worker

from vllm_advisor.errors import AdvisorError, UsageError

from .chatlog import ChatLog
from .commands import COMMANDS, ParsedCommand, help_markdown, is_command, parse_command
from .conversation import STAGES, Cancelled, Conversation, LLMSettings
from .evidence import parse_fact
from .palette import SlashCommands
from .screens import HelpScreen, SourceScreen
from .widgets import ChatView, EvidencePanel, FactsPanel, FindingsPanel, MessageWidget, ProbePanel, PromptInput, StatusLine

#: below this width the side panel starts hidden (Ctrl+B shows it)
SIDE_PANEL_MIN_WIDTH = 100
PROBE_INTERVAL_S = 2.0

WELCOME = """**Ask why your vLLM deployment is slow.** Give the advisor what you have, then ask in your own words (English or Chinese):

- `/attach FILE`: a benchmark result, a `/metrics` dump, a server log or a case file
- `/profile CASE.yaml` · `/serve-cmd "vllm serve ..."` · `/probe URL`
- `/estimate` · `/whatif kv_cache_dtype=fp8` · `/memo memo.md` · `/sources N`

F1 help · Ctrl+P commands · Tab completes · ↑↓ history · Esc cancels"""


class ChatApp(App[None]):
    CSS_PATH = Path(__file__).with_name("chat.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "vllm-advisor chat"
    COMMANDS = App.COMMANDS | {SlashCommands}
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("f1", "help", "Help"),
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+e", "estimate", "Estimate", priority=True),
        Binding("ctrl+o", "sources", "Sources"),
        Binding("ctrl+l", "clear", "Clear"),
        Binding("ctrl+b", "toggle_panels", "Panels"),
        Binding("pageup", "scroll_chat(-1)", "Scroll up", show=False),
        Binding("pagedown", "scroll_chat(1)", "Scroll down", show=False),
    ]

    def __init__(
        self,
        *,
        profile: Path | str | None = None,
        attachments: list[Path | str] | tuple = (),
        metrics: list[str] | tuple = (),
        serve_cmd: str | None = None,
        facts: dict[str, Any] | None = None,
        llm: LLMSettings | None = None,
        resume: bool = False,
        theme: str | None = None,
        log: bool = True,
        warm_up: bool = True,
        chroma_url: str | None = None,
    ) -> None:
        super().__init__()
        self.chat_log = ChatLog(enabled=log)
        self.llm = llm
        self.chroma_url = chroma_url  # the team's knowledge base (`--chroma-url`); None: the local index
        self.conversation = Conversation(llm=llm, log=self.chat_log, chroma_url=chroma_url)
        self._initial = {
            "profile": Path(profile) if profile else None,
            "attachments": [Path(a) for a in attachments],
            "metrics": list(metrics),
            "serve_cmd": serve_cmd,
            "facts": {k: v for k, v in (facts or {}).items() if v is not None},
        }
        self._resume = resume
        self._theme_name = theme
        self._warm_up = warm_up
        self._jobs: dict[str, tuple[str, float, int | None, int | None]] = {}  # group -> (text, started, step, total)
        self._pending: tuple[str, MessageWidget] | None = None  # the question being answered
        self._side_forced: bool | None = None
        self._probe = None
        self._probe_count = 0
        self._probe_failing = False
        self._recorded_exit = False

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        with Horizontal(id="main"):
            with Vertical(id="chat-column"):
                yield ChatView(id="chat")
                yield StatusLine(id="status")
                yield PromptInput(self._history(), id="prompt", placeholder="Ask about your deployment, or /help")
            with VerticalScroll(id="side"):
                yield FactsPanel(id="facts")
                yield EvidencePanel(id="evidence")
                yield FindingsPanel(id="findings")
                yield ProbePanel(id="probe")
        yield Footer()

    def _history(self) -> list[str]:
        try:
            return self.chat_log.recent_questions() if self.chat_log.enabled else []
        except AdvisorError:
            return []

    @property
    def chat(self) -> ChatView:
        return self.query_one(ChatView)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    async def on_mount(self) -> None:
        if self._theme_name:
            if self._theme_name in self.available_themes:
                self.theme = self._theme_name
            else:
                self.notify(f"unknown theme '{self._theme_name}'; Ctrl+P > Change theme lists them", severity="warning")
        self._place_side_panel()
        self.prompt.focus()
        self.set_interval(0.5, self._tick_status)
        resumed = False
        if self._resume:
            resumed = await self._resume_last()
        if not resumed:
            await self._welcome()
        await self._apply_initial_evidence()
        if self._warm_up:
            self.call_after_refresh(self._warm_up_worker)

    async def _welcome(self) -> None:
        widget = await self.chat.add("advisor", WELCOME)
        widget.add_class("welcome")

    def on_resize(self) -> None:
        self._place_side_panel()

    def _place_side_panel(self) -> None:
        side = self.query_one("#side")
        side.display = self._side_forced if self._side_forced is not None else self.size.width >= SIDE_PANEL_MIN_WIDTH

    def action_toggle_panels(self) -> None:
        side = self.query_one("#side")
        self._side_forced = not side.display
        side.display = self._side_forced

    def action_scroll_chat(self, direction: int) -> None:
        if direction < 0:
            self.chat.scroll_page_up()
        else:
            self.chat.scroll_page_down()

    def prefill_prompt(self, text: str) -> None:
        self.prompt.value = text
        self.prompt.cursor_position = len(text)
        self.prompt.focus()

    # -- jobs and the status line ----------------------------------------------------------------

    def _start_job(self, group: str, text: str, step: int | None = None, total: int | None = None) -> None:
        self._jobs[group] = (text, time.monotonic(), step, total)
        self._show_status()

    def _stage(self, group: str, text: str, step: int | None = None) -> None:
        if group in self._jobs:
            _, started, _, total = self._jobs[group]
            self._jobs[group] = (text, started, step, total)
            self._show_status()

    def _end_job(self, group: str) -> None:
        self._jobs.pop(group, None)
        self._show_status()

    def _show_status(self) -> None:
        status = self.query_one(StatusLine)
        if not self._jobs:
            status.hide()
            return
        group = next((g for g in ("task", "evidence", "refresh", "warmup") if g in self._jobs), next(iter(self._jobs)))
        text, started, step, total = self._jobs[group]
        elapsed = time.monotonic() - started
        status.show(f"{text}… {elapsed:.0f} s", step if step is not None else 0, total if total is not None else 1)

    def _tick_status(self) -> None:
        if self._jobs:
            self._show_status()

    @property
    def busy(self) -> bool:
        return "task" in self._jobs

    def _ui(self, callback: Callable, *args: Any) -> Any:
        """Run on the UI thread from a worker; quietly nothing once the app has closed."""
        try:
            return self.call_from_thread(callback, *args)
        except RuntimeError:
            return None

    @staticmethod
    def _checker() -> Callable[[], None]:
        worker = get_current_worker()

        def check() -> None:
            if worker.is_cancelled:
                raise Cancelled()

        return check

    def _error(self, message: str) -> None:
        self.notify(message, title="error", severity="error", timeout=8)

    async def action_cancel(self) -> None:
        cancelled = [g for g in ("task", "evidence", "refresh") if g in self._jobs]
        if not cancelled:
            return
        for group in cancelled:
            self.workers.cancel_group(self, group)
            self._end_job(group)
        if self._pending is not None:
            question, widget = self._pending
            self._pending = None
            await widget.finish("cancelled")
            self._log_safely(lambda: self.conversation.log.record(
                self.conversation.id, event="question", state=self.conversation.state(), question=question,
                output=widget.text or None, error="cancelled",
            ) if self.conversation.log else None)
        self.notify("cancelled", timeout=3)

    # -- input -----------------------------------------------------------------------------------

    @on(PromptInput.Submitted)
    async def _submitted(self, event: PromptInput.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        self.prompt.remember(text)
        self.prompt.value = ""
        if is_command(text):
            await self.run_slash(text)
        else:
            await self.ask(text)

    async def run_slash(self, text: str) -> None:
        try:
            command = parse_command(text)
        except UsageError as exc:
            self._error(exc.one_line())
            return
        handler = getattr(self, "cmd_" + command.name.replace("-", "_"))
        try:
            await handler(command, text)
        except AdvisorError as exc:
            self._error(exc.one_line())

    # -- questions -------------------------------------------------------------------------------

    async def ask(self, question: str) -> None:
        if self.busy:
            self.notify("still working on the last request; Esc cancels it", severity="warning")
            return
        await self.chat.add("user", question)
        widget = await self.chat.add("advisor", "", pending=True)
        self._pending = (question, widget)
        self._start_job("task", "reading the evidence", 0, STAGES)
        self._answer_worker(question, widget)

    @work(thread=True, group="task", exclusive=True, exit_on_error=False)
    def _answer_worker(self, question: str, widget: MessageWidget) -> None:
        check = self._checker()
        try:
            while "evidence" in self._jobs:  # files still being read (start-up, /attach): the question is about them
                check()
                time.sleep(0.05)
            turn = self.conversation.answer(
                question,
                on_stage=lambda text, step: self._ui(self._stage, "task", text, step),
                on_token=lambda piece: self._ui(widget.write, piece),
                check=check,
            )
            check()
        except Cancelled:
            return
        except AdvisorError as exc:
            self._ui(self._task_failed, widget, exc.one_line())
            return
        except Exception as exc:  # a bug must not take the conversation down
            self._ui(self._task_failed, widget, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._ui(self._answer_done, widget, turn)

    async def _answer_done(self, widget: MessageWidget, turn) -> None:
        await widget.finish()
        if widget.text != turn.text:
            await widget.replace(turn.text)
        self._pending = None
        self._end_job("task")
        try:
            self.conversation.commit(turn)
        except AdvisorError as exc:
            self.notify(f"not logged: {exc.one_line()}", severity="warning")
        self._show_diagnosis(turn.diagnosis)

    async def _task_failed(self, widget: MessageWidget | None, message: str) -> None:
        self._end_job("task")
        if widget is not None:
            await widget.finish()
            await widget.replace(f"*{message}*")
        if self._pending is not None:
            question, _ = self._pending
            self._pending = None
            self._log_safely(lambda: self.conversation.log.record(
                self.conversation.id, event="question", state=self.conversation.state(), question=question, output=None, error=message
            ) if self.conversation.log else None)
        self._error(message)

    def _log_safely(self, write: Callable[[], Any]) -> None:
        try:
            write()
        except AdvisorError as exc:
            self.notify(f"not logged: {exc.one_line()}", severity="warning")

    def _show_diagnosis(self, diagnosis) -> None:
        self.query_one(FindingsPanel).show(list(diagnosis.findings), language=diagnosis.language)
        self.query_one(FactsPanel).show(list(diagnosis.facts), language=diagnosis.language)

    def _show_evidence(self) -> None:
        self.query_one(EvidencePanel).show(self.conversation.evidence.lines())

    # -- evidence --------------------------------------------------------------------------------

    async def _apply_initial_evidence(self) -> None:
        init = self._initial
        ev = self.conversation.evidence
        if init["serve_cmd"]:
            try:
                self.conversation.apply_serve_cmd(init["serve_cmd"])
            except AdvisorError as exc:
                self._error(exc.one_line())
        for key, value in init["facts"].items():
            ev.facts[key] = value
        for source in init["metrics"]:
            self.conversation.add_metrics_source(source, "/metrics")
        files = ([(init["profile"], True)] if init["profile"] else []) + [(a, False) for a in init["attachments"]]
        self._show_evidence()
        if files:
            self._start_job("evidence", "reading the evidence")
            self._initial_files_worker(files)
        elif not ev.empty:
            self._refresh()

    @work(thread=True, group="evidence", exit_on_error=False)
    def _initial_files_worker(self, files: list[tuple[Path, bool]]) -> None:
        detected = []
        try:
            results = self.conversation.detect_many([(Path(p).expanduser(), as_profile) for p, as_profile in files])
        except AdvisorError as exc:  # an endpoint or a case file that fails the whole gather
            self._ui(self._error, exc.one_line())
            results = []
        for (path, as_profile), (_, found) in zip(files, results):
            if isinstance(found, Exception):
                self._ui(self._error, found.one_line() if isinstance(found, AdvisorError) else str(found))
            else:
                detected.append((path, found, as_profile))
        self._ui(self._initial_files_done, detected)

    def _initial_files_done(self, detected: list) -> None:
        # the job ends once the files are applied: a question waiting on it (_answer_worker, another
        # thread) must not start between the two and be answered without the case file
        try:
            for path, det, as_profile in detected:
                try:
                    self.conversation.apply_file(Path(path).expanduser(), det, as_profile=as_profile)
                except AdvisorError as exc:
                    self._error(exc.one_line())
        finally:  # and it ends whatever happens: a waiting question must not wait forever
            self._end_job("evidence")
        self._show_evidence()
        self._refresh()

    async def cmd_attach(self, command: ParsedCommand, raw: str, *, as_profile: bool = False) -> None:
        path = Path(command.args[0]).expanduser()
        await self.chat.add("user", raw)
        widget = await self.chat.add("advisor", "", pending=True)
        self._start_job("evidence", f"reading {path.name}")
        self._evidence_worker(raw, path, as_profile, widget)

    async def cmd_profile(self, command: ParsedCommand, raw: str) -> None:
        await self.cmd_attach(command, raw, as_profile=True)

    @work(thread=True, group="evidence", exit_on_error=False)
    def _evidence_worker(self, raw: str, path: Path, as_profile: bool, widget: MessageWidget) -> None:
        check = self._checker()
        try:
            detected = self.conversation.detect(path, as_profile=as_profile, check=check)
            check()
        except Cancelled:
            return
        except AdvisorError as exc:
            self._ui(self._evidence_failed, raw, widget, exc.one_line())
            return
        except Exception as exc:
            self._ui(self._evidence_failed, raw, widget, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._ui(self._evidence_detected, raw, widget, path, detected, as_profile)

    async def _evidence_detected(self, raw: str, widget: MessageWidget, path: Path, detected, as_profile: bool) -> None:
        try:
            reply = self.conversation.apply_file(path, detected, as_profile=as_profile)
        except AdvisorError as exc:
            await self._evidence_failed(raw, widget, exc.one_line())
            return
        except Exception as exc:  # ends the job too: a question waiting on it must not wait forever
            await self._evidence_failed(raw, widget, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._end_job("evidence")  # after the file is applied (see _initial_files_done)
        await self._reply(widget, raw, reply, event="evidence")
        self._show_evidence()
        self._refresh()

    async def _evidence_failed(self, raw: str, widget: MessageWidget, message: str) -> None:
        self._end_job("evidence")
        await self._reply(widget, raw, f"*Not added: {message}*", event="evidence", error=message)
        self._error(message)

    async def _reply(self, widget: MessageWidget, raw: str, reply: str, *, event: str, error: str | None = None, duration_ms: float | None = None) -> None:
        await widget.finish()
        await widget.replace(reply)
        self._log_safely(lambda: self.conversation.note(raw, reply, event=event, error=error, duration_ms=duration_ms))

    async def cmd_serve_cmd(self, command: ParsedCommand, raw: str) -> None:
        reply = self.conversation.apply_serve_cmd(command.args[0])
        await self._exchange(raw, reply, event="evidence")
        self._show_evidence()
        self._refresh()

    async def cmd_set(self, command: ParsedCommand, raw: str) -> None:
        parsed = [parse_fact(a) for a in command.args]  # all checked before any is applied
        replies = [self.conversation.apply_fact(k, v) for k, v in parsed]
        await self._exchange(raw, " ".join(replies), event="evidence")
        self._show_evidence()
        self._refresh()

    async def _exchange(self, raw: str, reply: str, *, event: str) -> None:
        await self.chat.add("user", raw)
        widget = await self.chat.add("advisor")
        await self._reply(widget, raw, reply, event=event)

    def _refresh(self) -> None:
        """Re-read the evidence and re-diagnose in the background, for the side panels."""
        if self.conversation.evidence.empty:
            return
        self.query_one(FindingsPanel).set_class(True, "stale")
        self._start_job("refresh", "reading the evidence and modelling the deployment")
        self._refresh_worker()

    @work(thread=True, group="refresh", exclusive=True, exit_on_error=False)
    def _refresh_worker(self) -> None:
        check = self._checker()
        try:
            diagnosis = self.conversation.refresh(check)
            check()
        except Cancelled:
            return
        except AdvisorError as exc:
            self._ui(self._refresh_failed, exc.one_line())
            return
        except Exception as exc:
            self._ui(self._refresh_failed, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._ui(self._refresh_done, diagnosis)

    def _refresh_done(self, diagnosis) -> None:
        self._end_job("refresh")
        self.query_one(FindingsPanel).set_class(False, "stale")
        if not self.busy:
            self.conversation.diagnosis = diagnosis
        self._show_diagnosis(diagnosis)

    def _refresh_failed(self, message: str) -> None:
        self._end_job("refresh")
        self._error(message)

    # -- /probe ----------------------------------------------------------------------------------

    async def cmd_probe(self, command: ParsedCommand, raw: str) -> None:
        from vllm_advisor.logs import default_db_path

        from .probe_live import LiveProbe

        if command.args[0].lower() == "stop":
            if self._probe is None:
                self.notify("no /metrics watch is running")
                return
            self._probe.stop()
            await self._exchange(raw, f"Stopped watching {self._probe.shown} after {self._probe.samples} samples.", event="evidence")
            return
        interval = PROBE_INTERVAL_S
        if len(command.args) > 1:
            try:
                interval = float(command.args[1])
            except ValueError:
                raise UsageError(f"/probe: '{command.args[1]}' is not a number of seconds") from None
        self._probe_count += 1
        folder = default_db_path().parent / "chat" / self.conversation.id
        out_path = folder / f"probe-{self._probe_count}.jsonl"
        probe = LiveProbe(command.args[0], out_path, interval=interval,
                          on_point=lambda p: self._ui(self._probe_point, probe, p),
                          on_error=lambda e: self._ui(self._probe_error, probe, e))
        if self._probe is not None:
            self._probe.stop()
        self._probe = probe
        self._probe_failing = False
        panel = self.query_one(ProbePanel)
        panel.start(probe.shown, probe.interval)
        await self._exchange(raw, f"Watching **{probe.shown}** every {probe.interval:g} s; the samples are kept as evidence ({out_path.name}). `/probe stop` ends it.", event="evidence")
        self._probe_worker(probe)

    @work(thread=True, group="probe", exit_on_error=False)
    def _probe_worker(self, probe) -> None:
        try:
            probe.run()
        except AdvisorError as exc:
            self._ui(self._error, exc.one_line())
        except Exception as exc:
            self._ui(self._error, f"internal error in the /metrics watch: {type(exc).__name__}: {exc}")
        finally:
            self._ui(self._probe_ended, probe)

    def _probe_point(self, probe, point) -> None:
        if probe is not self._probe:
            return
        self.query_one(ProbePanel).add(point)
        if self._probe_failing:
            self._probe_failing = False
            self.notify(f"{probe.shown} answers again")
        if point.index == 0:
            self.conversation.add_metrics_source(str(probe.out_path), f"/probe {probe.shown}")
            self._show_evidence()
            self._log_safely(lambda: self.conversation.log.record(
                self.conversation.id, event="evidence", state=self.conversation.state(), question=None,
                output=f"first sample from {probe.shown}",
            ) if self.conversation.log else None)

    def _probe_error(self, probe, message: str) -> None:
        if probe is not self._probe:
            return
        if not self._probe_failing:
            self._error(message)
        self._probe_failing = True
        self.query_one(ProbePanel).stopped(f"last scrape failed: {message}")

    def _probe_ended(self, probe) -> None:
        if probe is self._probe:
            self.query_one(ProbePanel).stopped(f"stopped: {probe.samples} samples from {probe.shown}")
            self._probe = None

    # -- /estimate, /whatif, /memo ---------------------------------------------------------------

    async def action_estimate(self) -> None:
        await self.run_slash("/estimate")

    async def cmd_estimate(self, command: ParsedCommand, raw: str) -> None:
        from .reports import estimate_markdown, parse_points

        spec = " ".join(command.args)

        def compute(inputs):
            return estimate_markdown(inputs, parse_points(spec))

        await self._model_task(raw, "running the performance model", compute, event="estimate")

    async def cmd_whatif(self, command: ParsedCommand, raw: str) -> None:
        from .reports import whatif_markdown

        changes = list(command.args)
        await self._model_task(raw, "predicting " + " ".join(changes), lambda inputs: whatif_markdown(inputs, changes), event="whatif")

    async def cmd_memo(self, command: ParsedCommand, raw: str) -> None:
        out = Path(command.args[0]).expanduser()

        def compute(inputs):
            _, result = self.conversation.session().memo(out, inputs.question)
            plots = f", {len(result.plots)} plots in `{result.plots[0].parent}`" if result.plots else ""
            return f"Memo written to `{result.path}`{plots}."

        await self._model_task(raw, f"writing the memo {out.name}", compute, event="memo")

    async def _model_task(self, raw: str, label: str, compute: Callable, *, event: str) -> None:
        if self.busy:
            self.notify("still working on the last request; Esc cancels it", severity="warning")
            return
        if self.conversation.evidence.empty:
            raise UsageError("no evidence yet: /profile CASE.yaml, /attach FILE or /serve-cmd first")
        await self.chat.add("user", raw)
        widget = await self.chat.add("advisor", "", pending=True)
        self._start_job("task", label, 0, 2)
        self._model_worker(raw, label, compute, event, widget)

    @work(thread=True, group="task", exclusive=True, exit_on_error=False)
    def _model_worker(self, raw: str, label: str, compute: Callable, event: str, widget: MessageWidget) -> None:
        check = self._checker()
        start = time.perf_counter()
        try:
            self._ui(self._stage, "task", "reading the evidence and modelling the deployment", 0)
            inputs = self.conversation.inputs_for(None, check)
            check()
            self._ui(self._stage, "task", label, 1)
            text = compute(inputs)
            check()
        except Cancelled:
            return
        except AdvisorError as exc:
            self._ui(self._model_failed, raw, widget, event, exc.one_line())
            return
        except Exception as exc:
            self._ui(self._model_failed, raw, widget, event, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._ui(self._model_done, raw, widget, event, text, (time.perf_counter() - start) * 1000)

    async def _model_done(self, raw: str, widget: MessageWidget, event: str, text: str, duration_ms: float) -> None:
        self._end_job("task")
        await self._reply(widget, raw, text, event=event, duration_ms=duration_ms)

    async def _model_failed(self, raw: str, widget: MessageWidget, event: str, message: str) -> None:
        self._end_job("task")
        await self._reply(widget, raw, f"*{message}*", event=event, error=message)
        self._error(message)

    # -- /sources, /clear, /help -----------------------------------------------------------------

    async def action_sources(self) -> None:
        if not self.conversation.sources:
            self.notify("no sources yet: ask a question first")
            return
        self.prefill_prompt("/sources ")

    async def cmd_details(self, command: ParsedCommand, raw: str) -> None:
        answer = self.conversation.last_answer
        if answer is None:
            raise UsageError("no answer yet: ask a question first")
        await self._exchange(raw, answer.full_markdown or answer.markdown, event="details")

    async def cmd_copy(self, command: ParsedCommand, raw: str) -> None:
        from .conversation import code_blocks

        answer = self.conversation.last_answer
        shown = "\n\n".join(m.text for m in self.conversation.messages[-2:] if m.role == "advisor") if self.conversation.messages else ""
        blocks = code_blocks(shown or (answer.markdown if answer is not None else ""))
        if not blocks:
            raise UsageError("the latest answer has no command or code block to copy")
        if not command.args:
            listing = "\n".join(f"{i}. `{b.splitlines()[0][:70]}`" for i, b in enumerate(blocks, start=1))
            await self._exchange(raw, listing, event="copy")
            return
        if not command.args[0].isdigit() or not 1 <= int(command.args[0]) <= len(blocks):
            raise UsageError(f"/copy takes a number from 1 to {len(blocks)}")
        text = blocks[int(command.args[0]) - 1]
        self.copy_to_clipboard(text)
        self.notify(f"copied: {text.splitlines()[0][:60]}")

    async def cmd_sources(self, command: ParsedCommand, raw: str) -> None:
        sources = self.conversation.sources
        if not sources:
            raise UsageError("no sources yet: ask a question first")
        n = int(command.args[0])
        found = next((c for c in sources if c.number == n), None)
        if found is None:
            raise UsageError(f"the latest answer has sources 1 to {len(sources)}, not {n}")
        self._source_worker(found)

    @work(thread=True, group="sources", exit_on_error=False)
    def _source_worker(self, citation) -> None:
        try:
            from vllm_advisor.answer.sources import passage_text

            text = passage_text(citation)
        except Exception as exc:  # the card index could not be read: show what the citation carries
            text = citation.snippet or f"(the source's text could not be read: {exc})"
        self._ui(self.push_screen, SourceScreen(citation, text))

    async def action_clear(self) -> None:
        await self.run_slash("/clear")

    async def cmd_clear(self, command: ParsedCommand, raw: str) -> None:
        everything = bool(command.args) and command.args[0].lower() == "all"
        if command.args and not everything:
            raise UsageError("/clear takes nothing or 'all'")
        await self.action_cancel()
        if everything and self._probe is not None:
            self._probe.stop()
        self.conversation.clear(evidence=everything)
        await self.chat.clear()
        await self._welcome()
        self.query_one(FindingsPanel).show([])
        if everything:
            self.query_one(FactsPanel).show([])
            self.query_one(ProbePanel).display = False
        self._show_evidence()
        self.notify("new conversation" + (" (evidence forgotten)" if everything else "; the evidence is kept"), timeout=3)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen(help_markdown(self.key_help())))

    async def cmd_help(self, command: ParsedCommand, raw: str) -> None:
        self.action_help()

    def key_help(self) -> list[tuple[str, str]]:
        keys = [(b.key, b.description) for b in self.BINDINGS if isinstance(b, Binding) and b.description]
        keys += [("ctrl+p", "Command palette (every command, themes)"), ("enter", "Send"), ("up / down", "Input history"),
                 ("tab", "Complete a command or a file path"), ("right", "Accept the suggestion")]
        keys += [(c.key, f"/{c.name}") for c in COMMANDS if c.key]
        return list(dict.fromkeys(keys))

    @on(Markdown.LinkClicked)
    def _link(self, event: Markdown.LinkClicked) -> None:
        self.copy_to_clipboard(event.href)
        self.notify(f"{event.href} (copied)", timeout=5)

    # -- resume, warm-up, quit ---------------------------------------------------------------------

    async def _resume_last(self) -> bool:
        try:
            conv = Conversation.resume(self.chat_log, llm=self.llm, chroma_url=self.chroma_url)
        except AdvisorError as exc:
            self._error(exc.one_line())
            return False
        if conv is None:
            self.notify("no earlier conversation in the log; starting a new one", severity="warning")
            return False
        self.conversation = conv
        for message in conv.messages:
            await self.chat.add(message.role, message.text)
        for note in conv.notes:
            self.notify(note, severity="warning", timeout=8)
        if conv.findings:
            self.query_one(FindingsPanel).show(conv.findings)
        self._show_evidence()
        self.notify(f"resumed the conversation of {conv.id[:8]} ({len(conv.questions)} questions)", timeout=4)
        self._refresh()
        return True

    @work(thread=True, group="warmup", exit_on_error=False)
    def _warm_up_worker(self) -> None:
        """Import the diagnosis, the performance model and the answer writer, and index the tuning
        cards, while the user types: the first answer then does not pay for them."""
        steps = [
            ("loading the performance model", "vllm_advisor.perf.predict"),
            ("loading the diagnosis", "vllm_advisor.diagnosis.engine"),
            ("loading the answer writer", "vllm_advisor.answer"),
        ]
        import importlib

        try:
            self._ui(self._start_job, "warmup", "warming up", 0, len(steps) + 1)
            for i, (text, module) in enumerate(steps):
                self._ui(self._stage, "warmup", text, i)
                importlib.import_module(module)
            self._ui(self._stage, "warmup", "indexing the tuning cards", len(steps))
            from vllm_advisor.answer.sources import card_corpus

            card_corpus(None)
        except Exception as exc:  # warm-up is an optimisation: the answer path reports real failures
            self._ui(self.notify, f"warm-up: {type(exc).__name__}: {exc}", severity="warning")
        finally:
            self._ui(self._end_job, "warmup")

    def _record_exit(self) -> None:
        if self._recorded_exit:
            return
        self._recorded_exit = True
        if self._probe is not None:
            self._probe.stop()
        if self._pending is not None:
            question, widget = self._pending
            self._pending = None
            try:
                self.conversation.record_interrupted(question, widget.text)
            except AdvisorError:
                pass

    async def action_quit(self) -> None:
        self._record_exit()
        self.workers.cancel_all()
        self.exit()

    def on_unmount(self) -> None:
        self._record_exit()


def main() -> None:  # pragma: no cover - `python -m vllm_advisor_tui.app` for development
    ChatApp().run()


if __name__ == "__main__":  # pragma: no cover
    main()
