"""The ``vllm-advisor`` command: a click group whose sub-commands live in sibling modules.

Errors caused by the user's input are :class:`~vllm_advisor.errors.AdvisorError`s: they print one
line on stderr and exit with the error's code. Anything else is a bug: one line too, plus a hint to
set ``VLLM_ADVISOR_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import os
import re
import sys

import click

from ..errors import AdvisorError

EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|[\x00-\x08\x0b-\x1f\x7f]")


def error_line(text: str) -> str:
    """What an error line may show: one line, no terminal escape sequences (a file's content or a
    server's answer can carry them), and no credentials (the one redaction function of the log)."""
    from ..logs import redact_text

    return " ".join((redact_text(_ESCAPES.sub("", str(text))) or "").split())


def _say(prefix: str, message: str) -> None:
    click.echo(click.style(prefix, fg="red", bold=True) + error_line(message), err=True)


def _interrupted() -> None:
    """Ctrl-C: one line, exit 130 at once. Whatever had to be kept was saved on the way out (the
    commands' own handlers and ``finally`` blocks ran before this); the interpreter's shutdown is
    skipped because it waits on worker threads still stalled in a network call, and a Ctrl-C that
    lands there made Python die by the signal (exit -2) instead of 130, about one run in three once
    the package's bytecode was compiled and the command reached its wait sooner
    (tests/test_endpoint_faults.py, session 11)."""
    click.echo("interrupted", err=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)


def valid_text(arg: str) -> str:
    """A command-line argument as text every writer can encode. Bytes that are not UTF-8 (a question
    cut mid-character by ``head -c``, a file in another encoding pasted with ``$(cat ...)``) reach
    Python as lone surrogates, which the log, the terminal and ``--json`` cannot write: the whole
    ``ask`` ended as an internal error. Each such byte becomes U+FFFD, as a text editor shows it."""
    if not any("\ud800" <= ch <= "\udfff" for ch in arg):
        return arg
    try:
        return arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that is not an escaped byte
        return arg.encode("utf-8", "replace").decode("utf-8")


class AdvisorGroup(click.Group):
    """A click group that turns exceptions into one-line messages and meaningful exit codes."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        args = [valid_text(a) for a in (sys.argv[1:] if args is None else args)]
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:  # one line in the project's format, not click's three-line block
            command = exc.ctx.command_path if exc.ctx is not None else "vllm-advisor"
            _say("error: ", f"{exc.format_message()} (see '{command} --help')")
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            _say("error: ", exc.format_message())
            sys.exit(exc.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            _interrupted()
        except AdvisorError as exc:
            _say("error: ", exc.one_line())
            sys.exit(exc.exit_code)
        except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
            if os.environ.get("VLLM_ADVISOR_DEBUG"):
                raise
            _say("internal error: ", f"{type(exc).__name__}: {exc} (set VLLM_ADVISOR_DEBUG=1 for the traceback)")
            sys.exit(EXIT_INTERNAL)
        sys.exit(rv if isinstance(rv, int) else 0)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands' list in ``--help``, from ``COMMANDS``' summaries: the same lines click writes
        from each command's help, without importing every command's module to read it."""
        if not isinstance(self.commands, LazyCommands):
            return super().format_commands(ctx, formatter)
        names = sorted(COMMANDS)
        limit = formatter.width - 6 - max(len(n) for n in names)
        # a bare Command holding the summary shortens it exactly as the real command would
        rows = [(n, click.Command(n, help=COMMANDS[n][2]).get_short_help_str(limit)) for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=AdvisorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vllm-advisor", prog_name="vllm-advisor")
def cli() -> None:
    """Explain why a vLLM deployment is slow and what to change, with numbers and sources.

    \b
    Exit codes: 0 ok, 1 advisor error, 2 usage error, 3 bad input file,
    4 endpoint failure, 70 internal error, 130 interrupted.
    """


#: Sub-commands by name: module (relative to this package), attribute, and the first paragraph of the
#: command's help. Each module is imported when its command runs, not when the CLI starts: `ask` no
#: longer pays for importing `estimate`, `probe`, `validate`... (0.5 s of imports, measured with
#: ``python -X importtime``; issue 17). The help's first paragraph is kept here so that
#: ``vllm-advisor --help`` lists the commands without importing any of them (1.2 s -> 0.2 s on the
#: 2-core EPYC; ``tests/test_cli.py`` checks these lines against the commands' own help).
COMMANDS = {
    "probe": ("probe", "probe", "Read benchmark files, /metrics, server logs and serve commands."),
    "estimate": ("estimate", "estimate", "Predict KV capacity and every load point of a deployment, measured and predicted side by side."),
    "catalog": ("estimate", "catalog", "List the models and GPUs the performance model knows."),
    "kb": ("kb", "kb", "The knowledge base: our tuning cards, vLLM's docs and GitHub issue threads, searchable in English and Chinese."),
    "ask": ("ask", "ask", "Answer QUESTION about a slow vLLM deployment: causes ranked with evidence, changes with predicted effects, and numbered sources."),
    "memo": ("memo", "memo", "Write a tuning memo for a case: summary, deployment facts, measured vs predicted per load point, ranked findings with evidence, changes with predicted effects and commands, a verification plan, plots and sources."),
    "logs": ("logs", "logs", "Earlier runs (question, answer, findings, sources), kept in a local SQLite file: $VLLM_ADVISOR_HOME/advisor.db, else $XDG_DATA_HOME/vllm-advisor/advisor.db (~/.local/share/vllm-advisor/advisor.db). Secrets are never stored."),
    "chat": ("chat", "chat", "Talk to the advisor about your deployment: questions and answers with sources, evidence attached as you go (/attach, /profile, /serve-cmd, /probe), the model's tables (/estimate, /whatif) and the memo (/memo). F1 lists every command and key."),
    "validate": ("validate", "validate", "Re-predict every load point of real-vLLM runs (benchmarks/gpu/vllm_e2e.py) and print predicted vs measured per figure, with the error and its sign."),
}


class LazyCommands(dict):
    """The group's ``commands`` dict, filled on first use of each name: click reads one command
    (``get``) to run it, and all of them (iteration) only to list them in ``--help``."""

    def __init__(self, specs: dict[str, tuple[str, str, str]]) -> None:
        super().__init__()
        self._specs = specs

    def _load(self, name: str) -> None:
        if name in self._specs and not dict.__contains__(self, name):
            import importlib

            module, attr, _summary = self._specs[name]
            dict.__setitem__(self, name, getattr(importlib.import_module(f"{__package__}.{module}"), attr))

    def _load_all(self) -> None:
        for name in self._specs:
            self._load(name)

    def __getitem__(self, name: str):
        self._load(name)
        return dict.__getitem__(self, name)

    def get(self, name, default=None):
        self._load(name)
        return dict.get(self, name, default)

    def __contains__(self, name) -> bool:
        return name in self._specs or dict.__contains__(self, name)

    def __iter__(self):
        self._load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._load_all()
        return dict.__len__(self)

    def keys(self):
        self._load_all()
        return dict.keys(self)

    def values(self):
        self._load_all()
        return dict.values(self)

    def items(self):
        self._load_all()
        return dict.items(self)


cli.commands = LazyCommands(COMMANDS)
