"""A local log of what the advisor was asked and what it answered (SQLite, one row per run).

WHY: a user can look back at an earlier answer (``vllm-advisor logs show 12``), compare answers after
a change, and the chat reuses the same store. The log lives in the user's data folder:
``$VLLM_ADVISOR_HOME/advisor.db`` when that variable is set, else
``$XDG_DATA_HOME/vllm-advisor/advisor.db``, else ``~/.local/share/vllm-advisor/advisor.db``.

Nothing secret is stored. Callers pass paths, flags and the *names* of environment variables,
never their values; on top of that every text and every JSON value is scrubbed of anything that
looks like a credential (API keys such as ``sk-...``, bearer tokens, Hugging Face / GitHub / AWS /
Slack tokens, ``--api-key VALUE``, ``token=VALUE``, passwords in URLs), and JSON keys that name a
secret (``api_key``, ``token``, ``password``, ...) have their values replaced, except keys ending
in ``_env`` whose value is an environment variable's name.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import AdvisorError, InputFileError

Command = Literal["ask", "memo", "chat", "bench"]
COMMANDS: tuple[str, ...] = ("ask", "memo", "chat", "bench")
REDACTED = "[redacted]"
DB_NAME = "advisor.db"

_RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS {name} (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    time        TEXT    NOT NULL,
    command     TEXT    NOT NULL CHECK (command IN ({commands})),
    question    TEXT,
    inputs      TEXT    NOT NULL DEFAULT '{{}}',
    output      TEXT,
    findings    TEXT    NOT NULL DEFAULT '[]',
    sources     TEXT    NOT NULL DEFAULT '[]',
    duration_ms INTEGER,
    llm_used    INTEGER NOT NULL DEFAULT 0,
    error       TEXT
);
"""
_COMMANDS_SQL = ", ".join(f"'{c}'" for c in COMMANDS)
SCHEMA = _RUNS_TABLE.format(name="runs", commands=_COMMANDS_SQL) + """
CREATE INDEX IF NOT EXISTS runs_command_time ON runs (command, time);
"""

# --------------------------------------------------------------------------- redaction

#: Values that are credentials whatever they are called.
_SECRET_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # "Bearer abc.def": any value after the scheme word, however short, except the prose around it
    (re.compile(r"(?i)\b(bearer)\s+(?!(?:tokens?|auth\w*|header|scheme|\[redacted\])\b)[A-Za-z0-9._~+/=-]{3,}"), r"\1 " + REDACTED),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?!bearer\b)\S{8,}"), r"\1" + REDACTED),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{8,}"), REDACTED),
    # Hugging Face tokens (hf_ + 34 letters and digits), also shortened ones (hf_XXXX) as long as they
    # hold an upper-case letter or a digit: hf_transfer, hf_overrides are names, not tokens
    (re.compile(r"\bhf_(?:[A-Za-z0-9]{20,}|(?=[A-Za-z0-9]*[A-Z0-9])[A-Za-z0-9]{4,})\b"), REDACTED),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), REDACTED),  # JWT
    # command-line flags and key=value pairs that carry a secret
    (re.compile(r"(?i)(--(?:api-key|api_key|token|hf-token|auth-token|access-token|password|secret|llm-key)(?:=|\s+))(?!\[redacted\])\S+"), r"\1" + REDACTED),
    # key=value / key: value. A token's value must look like one (letters and digits, or 20+ characters):
    # "per token: 131072" is a figure and "each token: quantized weights" is prose, not secrets.
    (re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|token)\s*[=:]\s*)(?!\[redacted\])"
                r"((?=[^\s&,;\"']*[A-Za-z])(?=[^\s&,;\"']*\d)[^\s&,;\"']{6,}|[^\s&,;\"']{20,})"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b((?:password|passwd|secret)\s*[=:]\s*)(?!\[redacted\])[^\s&,;\"']{4,}"), r"\1" + REDACTED),
    # user:password@ in URLs
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@"), r"\1" + REDACTED + "@"),
]

#: JSON keys whose values are secrets: whole words of the key, so ``max_num_batched_tokens`` is not one.
_SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?key|key|token|secret|password|passwd|authorization|credentials?|cookie)(?:$|[_-])")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def redact_text(text: str | None) -> str | None:
    """The text with every credential-looking value replaced by ``[redacted]``."""
    if not text:
        return text
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any, key: str | None = None) -> Any:
    """A JSON-able value with secrets removed, recursively (dict keys decide as well as values)."""
    if key is not None and _SECRET_KEY.search(key):
        if key.lower().endswith("_env") and (value is None or (isinstance(value, str) and _ENV_NAME.match(value))):
            return value  # the *name* of an environment variable, never its value
        return None if value is None else REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


# --------------------------------------------------------------------------- store


def default_db_path() -> Path:
    """``$VLLM_ADVISOR_HOME/advisor.db``, else the XDG data folder."""
    home = os.environ.get("VLLM_ADVISOR_HOME")
    if home:
        return Path(home).expanduser() / DB_NAME
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "vllm-advisor" / DB_NAME


@dataclass
class LogEntry:
    id: int
    time: str
    command: str
    question: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    output: str | None = None
    findings: list[Any] = field(default_factory=list)
    sources: list[Any] = field(default_factory=list)
    duration_ms: int | None = None
    llm_used: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def causes(self) -> list[str]:
        return [f.get("cause") for f in self.findings if isinstance(f, dict) and f.get("cause")]


def _jsonable(value: Any) -> Any:
    """Pydantic models and dataclasses to plain JSON values (paths as strings)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def _dump(value: Any) -> str:
    return json.dumps(redact(_jsonable(value)), ensure_ascii=False, default=str)


def _allow_new_commands(conn: sqlite3.Connection) -> None:
    """A log written by an older version checks ``command`` against a shorter list (SQLite cannot
    alter a CHECK constraint): copy its rows into a table with the current list, in one transaction."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
    if row is None or all(f"'{c}'" in row[0] for c in COMMANDS):
        return
    with conn:
        conn.execute("DROP TABLE IF EXISTS runs_migrating")
        conn.execute(_RUNS_TABLE.format(name="runs_migrating", commands=_COMMANDS_SQL))
        conn.execute("INSERT INTO runs_migrating SELECT * FROM runs")
        conn.execute("DROP TABLE runs")
        conn.execute("ALTER TABLE runs_migrating RENAME TO runs")
        conn.execute("CREATE INDEX IF NOT EXISTS runs_command_time ON runs (command, time)")


class LogStore:
    """The run log. Opens (and creates) the database lazily; each call is its own transaction."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_db_path()

    def _connect(self) -> sqlite3.Connection:
        try:
            if not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                os.chmod(self.path.parent, 0o700)  # questions and answers are the user's own business
            fresh = not self.path.exists()
            conn = sqlite3.connect(self.path, timeout=10)
            if fresh:
                os.chmod(self.path, 0o600)
            conn.row_factory = sqlite3.Row
            conn.executescript(SCHEMA)
            _allow_new_commands(conn)
            return conn
        except sqlite3.DatabaseError as exc:
            raise InputFileError(f"not a usable advisor log ({exc}); move it away or set VLLM_ADVISOR_HOME", source=str(self.path)) from None
        except OSError as exc:
            raise InputFileError(f"cannot open the advisor log: {exc.strerror or exc}", source=str(self.path)) from None

    def record(
        self,
        command: Command | str,
        *,
        question: str | None = None,
        inputs: dict[str, Any] | None = None,
        output: str | None = None,
        findings: list[Any] | None = None,
        sources: list[Any] | None = None,
        duration_ms: int | float | None = None,
        llm_used: bool = False,
        error: str | None = None,
        time: str | None = None,
    ) -> int:
        """Store one run (secrets scrubbed) and return its id."""
        if command not in COMMANDS:
            raise AdvisorError(f"unknown log command '{command}' (one of {', '.join(COMMANDS)})")
        row = (
            time or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            command,
            redact_text(question),
            _dump(inputs or {}),
            redact_text(output),
            _dump(findings or []),
            _dump(sources or []),
            None if duration_ms is None else int(round(duration_ms)),
            1 if llm_used else 0,
            redact_text(error),
        )
        conn = self._connect()
        try:
            with conn:
                cur = conn.execute(
                    "INSERT INTO runs (time, command, question, inputs, output, findings, sources, duration_ms, llm_used, error)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
            return int(cur.lastrowid)
        except sqlite3.DatabaseError as exc:
            raise InputFileError(f"cannot write to the advisor log ({exc})", source=str(self.path)) from None
        finally:
            conn.close()

    def list(self, limit: int = 20, command: str | None = None) -> list[LogEntry]:
        """The newest runs first."""
        if command is not None and command not in COMMANDS:
            raise AdvisorError(f"unknown log command '{command}' (one of {', '.join(COMMANDS)})")
        sql = "SELECT * FROM runs" + (" WHERE command = ?" if command else "") + " ORDER BY id DESC LIMIT ?"
        params: tuple = (command, max(0, int(limit))) if command else (max(0, int(limit)),)
        return [self._entry(r) for r in self._query(sql, params)]

    def get(self, run_id: int) -> LogEntry | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (int(run_id),))
        return self._entry(rows[0]) if rows else None

    def _query(self, sql: str, params: tuple) -> list[sqlite3.Row]:
        if not self.path.exists():
            return []  # nothing logged yet: reading never creates the file
        conn = self._connect()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputFileError(f"cannot read the advisor log ({exc})", source=str(self.path)) from None
        finally:
            conn.close()

    @staticmethod
    def _entry(r: sqlite3.Row) -> LogEntry:
        def load(text: str | None, empty: Any) -> Any:
            try:
                return json.loads(text) if text else empty
            except json.JSONDecodeError:
                return empty

        return LogEntry(
            id=r["id"],
            time=r["time"],
            command=r["command"],
            question=r["question"],
            inputs=load(r["inputs"], {}),
            output=r["output"],
            findings=load(r["findings"], []),
            sources=load(r["sources"], []),
            duration_ms=r["duration_ms"],
            llm_used=bool(r["llm_used"]),
            error=r["error"],
        )
