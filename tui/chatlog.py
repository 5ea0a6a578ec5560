"""The chat's record in the advisor's run log (the same SQLite store as `ask` and `memo`).

WHY one row per exchange, written as soon as it happens: a crash, a closed terminal or Ctrl-C then
loses nothing, and `vllm-advisor logs` lists chat questions beside `ask` runs. Every row carries the
conversation id and the evidence as it stood (``inputs``), so `chat --resume` rebuilds the last
conversation, its messages and its evidence, from the rows alone. Secrets are scrubbed by the
store itself (see :mod:`vllm_advisor.logs`).
"""

from __future__ import annotations

import datetime as _dt
import secrets
from typing import Any

from vllm_advisor.logs import LogEntry, LogStore

COMMAND = "chat"
#: how far back `--resume` and the input history look
SCAN_LIMIT = 5000


def new_conversation_id() -> str:
    """Sortable and unique: time of the first message plus a random suffix."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{now}-{secrets.token_hex(3)}"


class ChatLog:
    """Writes and reads the chat's rows; ``enabled=False`` (``--no-log``) writes nothing."""

    def __init__(self, store: LogStore | None = None, *, enabled: bool = True) -> None:
        self.store = store or LogStore()
        self.enabled = enabled

    def record(
        self,
        conversation_id: str,
        *,
        event: str,
        state: dict[str, Any],
        question: str | None,
        output: str | None,
        findings: list[Any] | None = None,
        sources: list[Any] | None = None,
        duration_ms: float | None = None,
        llm_used: bool = False,
        error: str | None = None,
    ) -> int | None:
        """One exchange; raises AdvisorError when the log cannot be written (the app says so)."""
        if not self.enabled:
            return None
        inputs = {"conversation": conversation_id, "event": event, **state}
        return self.store.record(
            COMMAND,
            question=question,
            inputs=inputs,
            output=output,
            findings=findings,
            sources=sources,
            duration_ms=duration_ms,
            llm_used=llm_used,
            error=error,
        )

    def last_conversation_id(self) -> str | None:
        for entry in self.store.list(1, command=COMMAND):
            cid = entry.inputs.get("conversation")
            if isinstance(cid, str):
                return cid
        return None

    def entries(self, conversation_id: str) -> list[LogEntry]:
        """The conversation's rows, oldest first."""
        rows = [e for e in self.store.list(SCAN_LIMIT, command=COMMAND) if e.inputs.get("conversation") == conversation_id]
        return sorted(rows, key=lambda e: e.id)

    def recent_questions(self, limit: int = 100) -> list[str]:
        """Questions and commands typed in earlier chats, oldest first (the input history)."""
        seen: dict[str, None] = {}
        for entry in self.store.list(limit, command=COMMAND):
            if entry.question and entry.question not in seen:
                seen[entry.question] = None
        return list(reversed(list(seen)))
