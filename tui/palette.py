"""The command palette (Ctrl+P) lists every slash command beside Textual's own system commands.

A command that needs no argument runs at once; one that takes a file, a URL or a value is typed
into the prompt for the user to finish (with Tab completing paths).
"""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .commands import COMMANDS, CommandSpec


class SlashCommands(Provider):
    def _run(self, spec: CommandSpec) -> None:
        app = self.app
        if spec.args in ("none", "optional"):
            app.call_later(app.run_slash, f"/{spec.name}")  # type: ignore[attr-defined]
        else:
            app.prefill_prompt(f"/{spec.name} ")  # type: ignore[attr-defined]

    async def discover(self) -> Hits:
        for spec in COMMANDS:
            yield DiscoveryHit(spec.usage, partial(self._run, spec), help=spec.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for spec in COMMANDS:
            score = max(matcher.match(spec.usage), matcher.match(spec.help) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(spec.usage), partial(self._run, spec), help=spec.help)
