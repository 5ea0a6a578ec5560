"""The chat's widgets: messages, the chat pane, the prompt, the status line and the side panels.

Each widget only shows what it is given; the app decides what to give it. Nothing here imports
the advisor's heavy modules (the performance model, the knowledge base), so the first screen
appears without waiting for them.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.suggester import Suggester
from textual.widgets import Input, Label, Markdown, ProgressBar, Sparkline, Static

from .commands import complete

ROLE_TITLES = {"user": "You", "advisor": "Advisor"}


class MessageWidget(Vertical):
    """One message: who said it, and the text as Markdown. An advisor's answer streams in."""

    def __init__(self, role: str, text: str = "", **kwargs: Any) -> None:
        super().__init__(classes=f"message {role}", **kwargs)
        self.role = role
        self.text = text
        self._stream = None

    def compose(self) -> ComposeResult:
        yield Label(ROLE_TITLES.get(self.role, self.role), classes="role")
        yield Markdown(self.text, classes="body", open_links=False)

    @property
    def body(self) -> Markdown:
        return self.query_one(".body", Markdown)

    async def write(self, piece: str) -> None:
        """Append streamed text. The first piece is drawn before this returns (the reader sees the
        answer start at once); later pieces go through Textual's MarkdownStream, which batches
        fragments that arrive faster than they can be drawn."""
        if not piece:
            return
        self.text += piece
        if self._stream is None:
            self.remove_class("pending")
            await self.body.update(self.text)
            self._stream = Markdown.get_stream(self.body)
            return
        await self._stream.write(piece)

    async def finish(self, note: str | None = None) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.remove_class("pending")
        if note:
            self.text += f"\n\n*{note}*"
            await self.body.update(self.text)

    async def replace(self, text: str) -> None:
        self.text = text
        await self.body.update(text)


class ChatView(VerticalScroll):
    """The conversation, newest at the bottom; it follows new text unless the user scrolled up."""

    can_focus = True
    BINDINGS = [
        Binding("pageup", "page_up", show=False),
        Binding("pagedown", "page_down", show=False),
        Binding("home", "scroll_home", show=False),
        Binding("end", "scroll_end", show=False),
    ]

    def compose(self) -> ComposeResult:
        # Fills the space below short conversations, so anchoring (which keeps the view at the
        # bottom while an answer streams) leaves them at the top; it shrinks to nothing once the
        # messages fill the view.
        yield Static("", id="chat-spacer")

    def on_mount(self) -> None:
        self.anchor()

    async def add(self, role: str, text: str = "", *, pending: bool = False) -> MessageWidget:
        widget = MessageWidget(role, text)
        if pending:
            widget.add_class("pending")
        await self.mount(widget, before="#chat-spacer")
        self.anchor()  # a new message (the user's own, or a reply starting) always comes into view
        return widget

    async def clear(self) -> None:
        await self.query(MessageWidget).remove()

    @property
    def messages(self) -> list[MessageWidget]:
        return list(self.query(MessageWidget))


class SlashSuggester(Suggester):
    """Completes command names, then file paths for /attach, /profile and /memo."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        return complete(value)


class PromptInput(Input):
    """The question box: Enter sends, Up/Down walk the history, Tab completes a command or path."""

    BINDINGS = [
        Binding("up", "history(-1)", "Previous", show=False),
        Binding("down", "history(1)", "Next", show=False),
        Binding("tab", "complete", "Complete", show=False),
    ]

    def __init__(self, history: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(suggester=SlashSuggester(), **kwargs)
        self.history: list[str] = list(history or [])
        self._position: int | None = None  # index into history while browsing
        self._draft = ""

    def remember(self, text: str) -> None:
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._position = None
        self._draft = ""

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._position is None:
            if step > 0:
                return
            self._draft = self.value
            self._position = len(self.history)
        self._position = max(0, min(len(self.history), self._position + step))
        self.value = self._draft if self._position == len(self.history) else self.history[self._position]
        if self._position == len(self.history):
            self._position = None
        self.cursor_position = len(self.value)

    def action_complete(self) -> None:
        if self._suggestion and self._suggestion != self.value:
            self.value = self._suggestion
            self.cursor_position = len(self.value)
        else:
            self.screen.focus_next()


class StatusLine(Horizontal):
    """What is running now, how far it got, and how to stop it. Hidden when idle."""

    def compose(self) -> ComposeResult:
        yield ProgressBar(total=4, show_eta=False, show_percentage=False, id="progress")
        yield Label("", id="status-text")

    def show(self, text: str, step: int | None = None, total: int | None = None) -> None:
        bar = self.query_one(ProgressBar)
        if total is not None:
            bar.update(total=total)
        if step is not None:
            bar.update(progress=step)
        self.query_one("#status-text", Label).update(Text(text))
        self.display = True

    def hide(self) -> None:
        self.display = False


class PanelSection(Vertical):
    """A titled block of the side panel."""

    def __init__(self, title: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = title


class FactsPanel(PanelSection):
    """The deployment facts the diagnosis established (model, GPUs, KV cache, ...)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Deployment", **kwargs)

    def compose(self) -> ComposeResult:
        yield Static("no deployment yet: /profile, /serve-cmd or /attach", classes="dim", id="facts-text")

    def show(self, facts: list[Any], language: str = "en") -> None:
        from vllm_advisor.messages import fmt_quantity, render, tag

        text = Text()
        for i, fact in enumerate(facts):
            if i:
                text.append("\n")
            text.append(f"{render(fact.label, language)}: ", style="bold")
            text.append(f"{fmt_quantity(language, fact.value, fact.unit)} {tag(language, fact.basis)}")
        static = self.query_one("#facts-text", Static)
        static.set_class(not facts, "dim")
        static.update(text if facts else "no deployment yet: /profile, /serve-cmd or /attach")


class EvidencePanel(PanelSection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Evidence", **kwargs)

    def compose(self) -> ComposeResult:
        yield Static("nothing attached", classes="dim", id="evidence-text")

    def show(self, lines: list[tuple[str, str]]) -> None:
        text = Text()
        for i, (name, label) in enumerate(lines):
            if i:
                text.append("\n")
            text.append("• ")
            text.append(name, style="bold")
            text.append(f"\n  {label}", style="italic")
        static = self.query_one("#evidence-text", Static)
        static.set_class(not lines, "dim")
        static.update(text if lines else "nothing attached")


SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def confidence_bar(confidence: float, width: int = 8) -> str:
    filled = max(0, min(width, round(confidence * width)))
    return "█" * filled + "░" * (width - filled)


class FindingsPanel(PanelSection):
    """The current ranked findings with their confidence."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Findings", **kwargs)

    def compose(self) -> ComposeResult:
        yield Static("none yet", classes="dim", id="findings-text")

    def show(self, findings: list[Any], stale: bool = False, language: str = "en") -> None:
        from vllm_advisor.messages import cause_title

        text = Text()
        for i, f in enumerate(findings, start=1):
            if i > 1:
                text.append("\n")
            text.append(f"{i}. ", style="bold")
            text.append(cause_title(language, f.cause), style=SEVERITY_STYLE.get(f.severity, ""))
            text.append(f"\n   {confidence_bar(f.confidence)} {f.confidence:.0%}")
        static = self.query_one("#findings-text", Static)
        static.set_class(not findings or stale, "dim")
        static.update(text if findings else "none yet")


PROBE_SERIES = (
    ("running", "running", "requests"),
    ("waiting", "waiting", "requests"),
    ("kv_usage_pct", "KV cache", "%"),
    ("itl_p50_ms", "ITL p50", "ms"),
    ("itl_p99_ms", "ITL p99", "ms"),
    ("ttft_p50_ms", "TTFT p50", "ms"),
    ("ttft_p99_ms", "TTFT p99", "ms"),
)
PROBE_HISTORY = 60


class ProbePanel(PanelSection):
    """The live /metrics watch: one sparkline per figure, with the latest value."""

    samples = reactive(0)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("Live /metrics", **kwargs)
        self.history: dict[str, deque] = {key: deque(maxlen=PROBE_HISTORY) for key, _, _ in PROBE_SERIES}
        self.latest: dict[str, float | None] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="probe-source", classes="dim")
        for key, label, unit in PROBE_SERIES:
            yield Label(f"{label}: —", id=f"probe-{key}-label", classes="probe-label")
            yield Sparkline([], id=f"probe-{key}", summary_function=max)

    def start(self, source: str, interval: float) -> None:
        for values in self.history.values():
            values.clear()
        self.latest = {}
        self.samples = 0
        self.query_one("#probe-source", Static).update(f"{source} every {interval:g} s")
        for key, label, _ in PROBE_SERIES:
            self.query_one(f"#probe-{key}-label", Label).update(f"{label}: —")
            self.query_one(f"#probe-{key}", Sparkline).data = []
        self.display = True

    def add(self, point: Any) -> None:
        self.samples += 1
        for key, label, unit in PROBE_SERIES:
            value = getattr(point, key)
            self.latest[key] = value
            series = self.history[key]
            if value is not None:
                series.append(float(value))
            shown = "—" if value is None else (f"{value:,.0f}" if value >= 100 or float(value).is_integer() else f"{value:.3g}")
            peak = f"  (max {max(series):,.4g})" if series else ""
            self.query_one(f"#probe-{key}-label", Label).update(f"{label}: {shown} {unit if value is not None else ''}{peak}".rstrip())
            self.query_one(f"#probe-{key}", Sparkline).data = list(series)

    def stopped(self, why: str) -> None:
        self.query_one("#probe-source", Static).update(why)
