"""The chat's slash commands: what each one takes, how a typed line is split, and completion.

WHY a table: the help screen, the command palette, the footer hints, the input's completion and
the dispatcher in the app all read the same list, so a command documented is a command that works.
Parsing knows nothing about Textual; the app only receives a :class:`ParsedCommand`.
"""

from __future__ import annotations

import difflib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from vllm_advisor.errors import UsageError

ArgKind = Literal["none", "file", "path", "url", "text", "number", "changes", "optional"]


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    help: str
    args: ArgKind = "none"
    key: str | None = None  # the key binding that runs it, shown in the help screen


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("attach", "/attach FILE", "Attach a benchmark result, /metrics dump or watch file, server log or case file (format detected).", "file"),
    CommandSpec("profile", "/profile FILE", "Use a case file (YAML: deployment, workload, observations, question) as the deployment.", "file"),
    CommandSpec("serve-cmd", '/serve-cmd "vllm serve ..."', "The `vllm serve` command line the server runs with.", "text"),
    CommandSpec("set", "/set KEY=VALUE", "A deployment fact the evidence lacks: model, gpu, num_gpus, vllm_version, interconnect.", "changes"),
    CommandSpec("probe", "/probe URL [SECONDS] | /probe stop", "Watch a server's /metrics in the background (default every 2 s); the samples become evidence.", "url"),
    CommandSpec("estimate", "/estimate [1,40,100]", "The performance model's table for the current deployment (memory, predicted load points).", "optional", "ctrl+e"),
    CommandSpec("whatif", "/whatif KEY=VALUE [KEY=VALUE ...]", "Predict a change at the same load points, e.g. /whatif kv_cache_dtype=fp8.", "changes"),
    CommandSpec("memo", "/memo PATH", "Write the tuning memo (Markdown + plots) for the current evidence.", "path"),
    CommandSpec("details", "/details", "The full analysis behind the latest answer: every finding with its evidence, the figures per load point, what would decide it, verify commands.", "none"),
    CommandSpec("copy", "/copy N", "Copy code block N of the latest answer (commands, flags, queries) to the clipboard; /copy alone lists them.", "optional"),
    CommandSpec("sources", "/sources N", "Open the text of source [N] of the latest answer.", "number", "ctrl+o"),
    CommandSpec("clear", "/clear [all]", "Start a new conversation; 'all' also forgets the evidence.", "optional", "ctrl+l"),
    CommandSpec("help", "/help", "Commands and key bindings.", "none", "f1"),
)
BY_NAME = {c.name: c for c in COMMANDS}
#: a few spellings people type
ALIASES = {"serve": "serve-cmd", "servecmd": "serve-cmd", "serve_cmd": "serve-cmd", "what-if": "whatif", "what_if": "whatif", "source": "sources", "?": "help", "full": "details", "detail": "details"}


@dataclass
class ParsedCommand:
    name: str
    args: list[str] = field(default_factory=list)
    rest: str = ""  # everything after the command name, as typed (for /serve-cmd)

    @property
    def spec(self) -> CommandSpec:
        return BY_NAME[self.name]


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


def parse_command(text: str) -> ParsedCommand:
    """Split ``/name args...``; an unknown name or unbalanced quotes is a one-line UsageError."""
    body = text.strip()[1:]
    name, _, rest = body.partition(" ")
    name = ALIASES.get(name.lower(), name.lower())
    if name not in BY_NAME:
        close = difflib.get_close_matches(name, list(BY_NAME), n=1)
        hint = f" (did you mean /{close[0]}?)" if close else ""
        raise UsageError(f"unknown command /{name}{hint}; /help lists them")
    rest = rest.strip()
    spec = BY_NAME[name]
    if spec.args == "text":
        args = [_unquote(rest)] if rest else []
    else:
        try:
            args = shlex.split(rest)
        except ValueError as exc:
            raise UsageError(f"/{name}: {exc}") from None
    command = ParsedCommand(name, args, rest)
    _check_arity(command)
    return command


def _unquote(text: str) -> str:
    """A serve command typed inside one pair of quotes loses them; inner quotes stay."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].strip()
    return text


def _check_arity(command: ParsedCommand) -> None:
    spec = command.spec
    n = len(command.args)
    if spec.args in ("file", "path", "url", "number", "text", "changes") and n == 0:
        raise UsageError(f"{spec.usage}: {spec.help}")
    if spec.args in ("file", "path", "number") and n > 1:
        raise UsageError(f"/{spec.name} takes one argument (quote a path with spaces): {spec.usage}")
    if spec.args == "number" and not command.args[0].isdigit():
        raise UsageError(f"/{spec.name} takes a source number, e.g. /{spec.name} 2")
    if spec.args == "none" and n:
        raise UsageError(f"/{spec.name} takes no arguments")


# -- completion ------------------------------------------------------------------------------------


def complete(text: str, cwd: Path | None = None) -> str | None:
    """The line completed as far as it is unambiguous (a command name, then a file path), or None.

    The result always starts with ``text``, which is what Textual's suggester needs."""
    if not is_command(text):
        return None
    body = text.lstrip()[1:]
    if " " not in body:
        names = [c.name for c in COMMANDS if c.name.startswith(body.lower())]
        if not names:
            return None
        done = names[0] + " " if len(names) == 1 else os.path.commonprefix(names)
        return _keep_prefix(text, "/" + done, len(text) - len(body) - 1)
    name, _, arg = body.partition(" ")
    spec = BY_NAME.get(ALIASES.get(name.lower(), name.lower()))
    if spec is None or spec.args not in ("file", "path"):
        if spec is not None and spec.name == "clear" and arg and "all".startswith(arg):
            return text[: len(text) - len(arg)] + "all"
        return None
    completed = complete_path(arg, cwd or Path.cwd())
    return text[: len(text) - len(arg)] + completed if completed and completed != arg else None


def _keep_prefix(text: str, completed: str, lead: int) -> str:
    return text[:lead] + completed


def complete_path(partial: str, cwd: Path) -> str | None:
    """The longest unambiguous completion of a (possibly relative, possibly ~) file path."""
    if partial.startswith(("'", '"')):
        return None
    expanded = os.path.expanduser(partial)
    base = Path(expanded) if os.path.isabs(expanded) else cwd / expanded
    folder, stem = (base, "") if partial.endswith("/") or partial == "" else (base.parent, base.name)
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.startswith(stem) and not (e.name.startswith(".") and not stem.startswith(".")))
    except OSError:
        return None
    if not names:
        return None
    common = os.path.commonprefix(names)
    out = partial + common[len(stem):]
    if len(names) == 1 and (folder / names[0]).is_dir():
        out += "/"
    return out


def help_markdown(bindings: list[tuple[str, str]]) -> str:
    """The help screen's text: every command, then every key."""
    lines = ["# Commands", "", "| command | what it does |", "|---|---|"]
    lines += [f"| `{c.usage}` | {c.help} |" for c in COMMANDS]
    lines += ["", "Anything else you type is a question; follow-up questions keep the evidence and the earlier findings.", ""]
    lines += ["# Keys", "", "| key | action |", "|---|---|"]
    lines += [f"| `{k}` | {d} |" for k, d in bindings]
    return "\n".join(lines) + "\n"
