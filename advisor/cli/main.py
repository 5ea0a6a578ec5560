"""The ``vllm-advisor`` command: a click group whose sub-commands live in sibling modules.

Errors caused by the user's input are :class:`~vllm_advisor.errors.AdvisorError`s: they print one
line on stderr and exit with the error's code. Anything else is a bug: one line too, plus a hint to
set ``VLLM_ADVISOR_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from ..errors import AdvisorError

EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class AdvisorGroup(click.Group):
    """A click group that turns exceptions into one-line messages and meaningful exit codes."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except AdvisorError as exc:
            click.echo(click.style("error: ", fg="red", bold=True) + exc.one_line(), err=True)
            sys.exit(exc.exit_code)
        except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
            if os.environ.get("VLLM_ADVISOR_DEBUG"):
                raise
            name = type(exc).__name__
            click.echo(
                click.style("internal error: ", fg="red", bold=True)
                + f"{name}: {exc} (set VLLM_ADVISOR_DEBUG=1 for the traceback)",
                err=True,
            )
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
