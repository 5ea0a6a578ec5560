"""The message catalog: every word a person reads, one YAML file per language.

WHY one catalog: the diagnosis hands writers message ids with typed parameters
(:class:`~vllm_advisor.schema.message.Msg`), never sentences, so the answer, the memo, the chat and
the plots all say the same thing in the asker's language. A message lives in
``advisor/messages/<lang>.yaml`` under a dotted id (``reason.kv_fit``, ``memo.title``, ``plot.speed``);
adding a language is adding one file with the same ids and placeholders (``tests/test_messages.py``
checks both). English is the fallback for an unknown language code.

Placeholders are ``{name}`` or ``{name:spec}``. Values are formatted by type: a
:class:`Quantity` as number + unit (units have their own ids, ``unit.requests``), a float or int by
:func:`fmt_number`, a nested :class:`Msg` rendered in the same language, a list joined by the
language's separator. Specs: ``cause`` (a cause id's short name), ``title`` (a cause's headline),
``pct`` (a fraction 0-1 as a percentage), ``num`` (a bare number), ``load`` (a load label, "c=32", in
the language's words: "并发 32"; ``load_at`` the same before a word glued to it, "并发 32 时" but
"不限速率时"), any Python format spec otherwise.
"""

from __future__ import annotations

import functools
import re
import string
from importlib import resources
from typing import Any

import yaml

from ..schema.message import Msg, Quantity, msg, q
from .numbers import fmt_cell, fmt_number

#: libyaml's safe loader when PyYAML has it (about 10x faster on these packaged files), else PyYAML's.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

__all__ = ["LANGUAGES", "Msg", "Quantity", "catalog", "fmt_cell", "fmt_number", "fmt_quantity", "msg", "normalize_language", "q", "render", "text"]


@functools.cache
def _available() -> tuple[str, ...]:
    names = [p.name for p in resources.files(__package__).iterdir() if p.name.endswith(".yaml")]
    return tuple(sorted(n[: -len(".yaml")] for n in names))


LANGUAGES = _available()


@functools.cache
def catalog(language: str) -> dict[str, str]:
    """All messages of one language, flattened to dotted ids."""
    raw = yaml.load(resources.files(__package__).joinpath(f"{language}.yaml").read_text(encoding="utf-8"), Loader=_YAML_LOADER) or {}
    out: dict[str, str] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = str(node)

    walk("", raw)
    return out


def normalize_language(language: str | None) -> str:
    """'zh', 'zh-CN', 'zh_TW' -> 'zh'; a language without a catalog -> 'en'."""
    code = (language or "en").lower().replace("_", "-").split("-")[0]
    return code if code in LANGUAGES else "en"


def has(language: str, id: str) -> bool:
    return id in catalog(normalize_language(language))


class _Formatter(string.Formatter):
    def __init__(self, language: str) -> None:
        self.language = language

    def format_field(self, value: Any, spec: str) -> str:
        lang = self.language
        if spec == "cause":
            return text(lang, f"cause.{value}") if has(lang, f"cause.{value}") else str(value).replace("_", " ")
        if spec == "title":
            return text(lang, f"title.{value}") if has(lang, f"title.{value}") else str(value).replace("_", " ")
        if spec == "load":
            return load_text(lang, str(value))
        if spec == "load_at":  # before a word that follows it ("并发 32 时", "不限速率时"): a space after a number only
            shown = load_text(lang, str(value))
            return shown + " " if shown[-1:].isdigit() else shown
        if spec == "pct":
            return f"{100 * float(value):.0f}%"
        if spec == "num":
            return fmt_number(value.value if isinstance(value, Quantity) else value)
        if spec:
            return format(value.value if isinstance(value, Quantity) else value, spec)
        return render_value(lang, value)


def render_value(language: str, value: Any) -> str:
    if isinstance(value, Msg):
        return render(value, language)
    if isinstance(value, Quantity):
        return fmt_quantity(language, value.value, value.unit)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return fmt_number(value)
    if isinstance(value, (list, tuple)):
        return text(language, "sep.list").join(render_value(language, v) for v in value)
    return str(value)


_LOAD_PART = re.compile(r"c=(\d+)|rate=(inf|[\d.e+]+)(?:/s)?")


def load_text(language: str, label: str) -> str:
    """A load label as the benchmark tools write it ("c=32", "rate=2/s", "c=100 rate=2/s", "rate=inf",
    "run 3") in the reader's words ("并发 32"); a label of another shape is shown as written."""
    run = re.fullmatch(r"run (\d+)", label)
    if run is not None:
        return text(language, "load.run", n=int(run.group(1)))
    parts = []
    for piece in label.split():
        m = _LOAD_PART.fullmatch(piece)
        if m is None:
            return label
        clients, rate = m.groups()
        parts.append(text(language, "load.clients", n=int(clients)) if clients
                     else text(language, "load.unlimited") if rate == "inf" else text(language, "load.rate", rate=fmt_number(float(rate))))
    return text(language, "load.join").join(parts) if parts else label


def text(language: str, id: str, **params: Any) -> str:
    """The message ``id`` in ``language`` (English when that language lacks it), filled in."""
    lang = normalize_language(language)
    table = catalog(lang)
    template = table.get(id)
    if template is None:
        template = catalog("en").get(id)
        if template is None:
            raise KeyError(f"no message {id!r} in the catalog")
    if not params and "{" not in template:
        return template
    return _Formatter(lang).vformat(template, (), params)


def render(message: Msg | None, language: str) -> str:
    if message is None:
        return ""
    return text(language, message.id, **message.args)


def unit_text(language: str, unit: str | None) -> str:
    if not unit:
        return ""
    key = f"unit.{unit}"
    return text(language, key) if has(language, key) else unit


def fmt_quantity(language: str, value: float | int | str | bool | None, unit: str | None) -> str:
    """'63,000 tokens', '22 tok/s', '4.8 个请求', '48%'; text values as given."""
    if value is None:
        return ""
    shown = value if isinstance(value, str) else fmt_number(value)
    if unit and value == 1 and unit.endswith("s") and has(language, f"unit.{unit[:-1]}"):
        unit = unit[:-1]  # "1 line", "1 request": the unit's singular where the catalog has one
    u = unit_text(language, unit)
    if not u:
        return shown
    return f"{shown}{u}" if u in ("%", "x", "×", "倍") else f"{shown} {u}"


def tag(language: str, kind: str) -> str:
    """'[measured]' / '[实测]': where a figure came from; an unknown kind is shown as itself."""
    key = f"tag.{kind}"
    return "[" + (text(language, key) if has(language, key) or has("en", key) else kind) + "]"


def cause_name(language: str, cause: str) -> str:
    key = f"cause.{cause}"
    return text(language, key) if has("en", key) else cause.replace("_", " ")


def cause_title(language: str, cause: str) -> str:
    key = f"title.{cause}"
    return text(language, key) if has("en", key) else cause.replace("_", " ")


def cause_mechanism(language: str, cause: str) -> str:
    """How the cause produces what was seen, in one sentence ("" for a cause without one)."""
    key = f"mechanism.{cause}"
    return text(language, key) if has("en", key) else ""


def render_all(messages, language: str) -> str:
    """Several messages as one paragraph (joined with a space in English, nothing in Chinese)."""
    return text(language, "sep.space").join(render(m, language).strip() for m in messages if m is not None)
