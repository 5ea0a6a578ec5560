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

from .. import __version__
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


class AdvisorGroup(click.Group):
    """A click group that turns exceptions into one-line messages and meaningful exit codes."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
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
        except click.exceptions.Abort:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except AdvisorError as exc:
            _say("error: ", exc.one_line())
            sys.exit(exc.exit_code)
        except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
            if os.environ.get("VLLM_ADVISOR_DEBUG"):
                raise
            _say("internal error: ", f"{type(exc).__name__}: {exc} (set VLLM_ADVISOR_DEBUG=1 for the traceback)")
            sys.exit(EXIT_INTERNAL)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=AdvisorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vllm-advisor")
def cli() -> None:
    """Explain why a vLLM deployment is slow and what to change, with numbers and sources.

    \b
    Exit codes: 0 ok, 1 advisor error, 2 usage error, 3 bad input file,
    4 endpoint failure, 70 internal error, 130 interrupted.
    """


def _register() -> None:
    from .ask import ask
    from .chat import chat
    from .estimate import catalog, estimate
    from .kb import kb
    from .logs import logs
    from .memo import memo
    from .probe import probe
    from .validate import validate

    cli.add_command(probe)
    cli.add_command(estimate)
    cli.add_command(catalog)
    cli.add_command(kb)
    cli.add_command(ask)
    cli.add_command(memo)
    cli.add_command(logs)
    cli.add_command(chat)
    cli.add_command(validate)


_register()
