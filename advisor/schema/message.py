"""Words as data: a message id with typed parameters, rendered by a writer in the reader's language.

WHY: the diagnosis, the model and the probe decide *what* to say; the writers (answer, memo, chat,
plots) decide *how*, in the asker's language. So nothing that crosses into a writer is a finished
sentence: it is a :class:`Msg` (an id of ``advisor/messages/<lang>.yaml`` plus its parameters) whose
numbers are :class:`Quantity` values with units, whose causes are :data:`CauseId` codes and whose
nested phrases are messages again. ``vllm_advisor.messages.render`` turns one into text.
"""

from __future__ import annotations

from typing import Union

from pydantic import BaseModel, ConfigDict

from .cause_ids import CAUSE_IDS, CauseId  # noqa: F401  (re-exported: findings and messages share them)


class Quantity(BaseModel):
    """A number with its unit ('tok/s', 'ms', 's', 'GiB', 'KiB', 'tokens', 'requests', '%', 'x')."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    unit: str


class Msg(BaseModel):
    """A message id and its parameters. Parameter values are numbers, quantities, codes or quoted
    text (``str``: a load label like ``c=40``, a flag, a file name, the user's own words), nested
    messages, or lists of any of these (rendered with the language's list separator)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    args: dict[str, "Param"] = {}


Param = Union[bool, int, float, Quantity, Msg, list[Union[Msg, Quantity, str, int, float]], str]
Msg.model_rebuild()


def msg(id: str, **args) -> Msg:
    """Shorthand: ``msg("ev.kv_capacity", tokens=q(327120, "tokens"))``."""
    return Msg(id=id, args={k: v for k, v in args.items() if v is not None})


def q(value: float, unit: str) -> Quantity:
    return Quantity(value=float(value), unit=unit)


def q_time(value: float, unit: str) -> Quantity:
    """``q``, with a duration of 10 s or more in whole seconds (26 s, not 26,278 ms)."""
    if unit == "ms" and value >= 10_000:
        return q(round(value / 1000), "s")
    return q(value, unit)
