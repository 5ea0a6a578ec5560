"""Modal screens: the help (commands and keys) and one cited source's text."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Label, Markdown


class TextScreen(ModalScreen[None]):
    """A scrollable Markdown page over the chat; Escape, q or F1 closes it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("f1", "dismiss", "Close", show=False),
    ]

    def __init__(self, title: str, markdown: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.title_text = title
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="page"):
            yield Label(self.title_text, classes="page-title")
            yield Markdown(self.markdown, open_links=False)
        yield Footer()

    def action_dismiss(self, result=None) -> None:  # type: ignore[override]
        self.dismiss(None)


class HelpScreen(TextScreen):
    def __init__(self, markdown: str) -> None:
        super().__init__("Help — vllm-advisor chat", markdown, id="help")


class SourceScreen(TextScreen):
    def __init__(self, citation, text: str) -> None:
        lines = [f"**{citation.title}**" + (f" — {citation.heading}" if citation.heading else ""), ""]
        if citation.url:
            lines += [f"<{citation.url}>", ""]
        lines += [f"*{citation.kind}*", "", "---", "", text or citation.snippet or "(no text stored for this source)"]
        super().__init__(f"Source [{citation.number}]", "\n".join(lines), id="source")
