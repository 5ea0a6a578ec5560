"""What the user gave the chat as evidence, and what kind of file each attachment is.

WHY detect here as well as in ``gather``: the side panel shows each attachment with its format and
what it holds (``vllm-bench: 1 load point``) the moment it is attached, and a file that is none of
the known kinds is refused then, with one line, instead of failing the next question. Detection
uses the probe's own loaders, so what the panel says is what the diagnosis will read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vllm_advisor.errors import InputFileError, UnknownFormatError, UsageError

Kind = Literal["case", "bench", "metrics", "server log"]
CASE_KEYS = {"deployment", "observations", "workload", "question"}
#: deployment facts a user may state with /set (the keys `ask` takes as flags)
FACT_KEYS = {"model": str, "gpu": str, "num_gpus": int, "vllm_version": str, "interconnect": str, "quantization": str}


@dataclass
class Detected:
    kind: Kind
    label: str  # one line for the side panel: format and what it holds


def detect_file(path: Path) -> Detected:
    """The kind of an attached file, read with the loader that owns it; one-line errors otherwise."""
    from vllm_advisor.probe.files import check_readable, looks_binary, read_head

    check_readable(path)
    head = read_head(path, 4096)
    if looks_binary(head[:1024]):
        raise InputFileError("is a binary file, expected a benchmark result, /metrics dump, server log or case file", source=str(path))
    text = head.decode("utf-8", "replace")
    if path.suffix.lower() in (".yaml", ".yml") and _looks_like_case(path):
        return _case(path)
    if "# TYPE vllm:" in text or "# HELP vllm:" in text or (text.lstrip().startswith('{"source"') and '"families"' in text):
        from vllm_advisor.probe.metrics import load_metrics_file

        snaps = load_metrics_file(path)
        what = f"{len(snaps)} snapshots" if len(snaps) > 1 else "one snapshot"
        return Detected("metrics", f"/metrics: {what}")
    from vllm_advisor.probe.bench import detect_format, load_runs

    try:
        fmt = detect_format(path)
    except UnknownFormatError as exc:
        bench_reason = exc.message
    else:
        return _bench_label(fmt, load_runs(path))
    from vllm_advisor.probe.serverlog import parse_server_log

    try:
        info = parse_server_log(path)
    except InputFileError as exc:
        if "does not look like" not in exc.message:
            raise
        info = None
    if info is None:
        raise UnknownFormatError(
            "not a benchmark result, /metrics dump, server log or case file (no benchmark format matched and no vLLM log line found)",
            source=str(path),
        )
    if not _log_facts(info) and not info.non_default_args:
        raise UnknownFormatError(f"not a benchmark result, /metrics dump, server log or case file ({bench_reason})", source=str(path))
    return _log_label(info)


def _bench_label(fmt: str, runs) -> Detected:
    loads = ", ".join(dict.fromkeys(r.load_label for r in runs))
    n = len(runs)
    served = sum(r.server_metrics is not None for r in runs)
    extra = f", server /metrics for {served}" if served else ""
    return Detected("bench", f"{fmt}: {n} load point{'s' if n != 1 else ''} ({loads}){extra}")


def _log_facts(info) -> list[str]:
    found = [
        f"vLLM {info.vllm_version}" if info.vllm_version else None,
        info.model,
        f"KV cache {info.kv_cache_tokens:,} tokens" if info.kv_cache_tokens else None,
        f"{len(info.stats)} stats lines" if info.stats else None,
    ]
    return [f for f in found if f]


def _log_label(info) -> Detected:
    return Detected("server log", "server log: " + (", ".join(_log_facts(info)) or f"{len(info.non_default_args)} engine args"))


def _case_label(case) -> Detected:
    dep = case.deployment
    what = [x for x in (dep.model, f"{dep.num_gpus or '?'} x {dep.gpu}" if dep.gpu else None) if x]
    if case.observations:
        what.append(f"{len(case.observations)} observations")
    return Detected("case", "case file" + (": " + ", ".join(what) if what else ""))


def label_from_inputs(path: Path, inputs, *, as_case: bool) -> Detected | None:
    """What the side panel says about ``path``, read off the inputs a Session gathered with it (the
    file parsed once, by gather); None when the gathered inputs do not show it (the caller then
    detects it on its own)."""
    for note in getattr(inputs, "skipped", []) or []:
        if note.source and Path(note.source).expanduser().resolve() == path:
            raise InputFileError(note.detail or "could not be read", source=str(path))
    if as_case:
        return _case_label(inputs.case) if inputs.case is not None else None

    def same(source: str | None) -> bool:
        try:
            return bool(source) and Path(source).expanduser().resolve() == path
        except (OSError, ValueError):
            return False

    runs = [r for r in inputs.measured if same(r.source)]
    if runs:
        return _bench_label(runs[0].format, runs)
    windows = [w for w in inputs.metrics_windows if same(w.source)]
    if windows:
        snaps = windows[0].num_snapshots
        return Detected("metrics", f"/metrics: {snaps} snapshots" if snaps > 1 else "/metrics: one snapshot")
    logs = [log for log in inputs.server_logs if same(log.source)]
    return _log_label(logs[0]) if logs else None


def _looks_like_case(path: Path) -> bool:
    import yaml

    from vllm_advisor.probe.files import load_yaml, read_text

    try:
        data = load_yaml(read_text(path), str(path))  # bounded: an alias bomb is refused, not expanded
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and bool(CASE_KEYS & set(data))


def _case(path: Path) -> Detected:
    from vllm_advisor.probe.casefile import load_case

    return _case_label(load_case(path))


def parse_fact(text: str) -> tuple[str, Any]:
    """``gpu=H800`` -> ("gpu", "H800"); ``num_gpus=2`` -> ("num_gpus", 2)."""
    if "=" not in text:
        raise UsageError(f"/set '{text}': expected KEY=VALUE, e.g. gpu=H800")
    key, value = (p.strip() for p in text.split("=", 1))
    key = key.lstrip("-").replace("-", "_").lower()
    if key not in FACT_KEYS:
        raise UsageError(f"/set: '{key}' is not a deployment fact; one of {', '.join(sorted(FACT_KEYS))} (engine flags go in /serve-cmd, changes in /whatif)")
    if not value:
        return key, None
    if FACT_KEYS[key] is int:
        try:
            return key, int(value)
        except ValueError:
            raise UsageError(f"/set {key}: '{value}' is not a whole number") from None
    return key, value


@dataclass
class Evidence:
    """Everything `gather` is given, plus what the side panel says about each file."""

    profile: Path | None = None
    attachments: list[Path] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # watch files written by /probe (and dumps given as --metrics)
    serve_cmd: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # str(path) -> detected label

    def signature(self) -> tuple:
        """Changes whenever gathering again could give a different answer (a file rewritten, a
        probe file grown)."""

        def stamp(p: str | Path) -> tuple:
            try:
                st = Path(p).stat()
                return (str(p), st.st_mtime_ns, st.st_size)
            except OSError:
                return (str(p), None, None)

        return (
            stamp(self.profile) if self.profile else None,
            tuple(stamp(a) for a in self.attachments),
            tuple(stamp(m) if not m.startswith(("http://", "https://")) else (m,) for m in self.metrics),
            self.serve_cmd,
            tuple(sorted((k, str(v)) for k, v in self.facts.items())),
        )

    @property
    def empty(self) -> bool:
        return not (self.profile or self.attachments or self.metrics or self.serve_cmd or self.facts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": str(self.profile) if self.profile else None,
            "attachments": [str(a) for a in self.attachments],
            "metrics": list(self.metrics),
            "serve_cmd": self.serve_cmd,
            "facts": dict(self.facts),
            "labels": dict(self.labels),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Evidence":
        data = data or {}
        return cls(
            profile=Path(data["profile"]) if data.get("profile") else None,
            attachments=[Path(a) for a in data.get("attachments") or []],
            metrics=list(data.get("metrics") or []),
            serve_cmd=data.get("serve_cmd"),
            facts=dict(data.get("facts") or {}),
            labels=dict(data.get("labels") or {}),
        )

    def lines(self) -> list[tuple[str, str]]:
        """(what, label) for the side panel; file names only (the full path is in the log)."""
        out: list[tuple[str, str]] = []
        if self.profile:
            out.append((self.profile.name, self.labels.get(str(self.profile), "case file")))
        for a in self.attachments:
            out.append((a.name, self.labels.get(str(a), "attachment")))
        for m in self.metrics:
            out.append((Path(m).name if not m.startswith("http") else m, self.labels.get(m, "/metrics")))
        if self.serve_cmd:
            out.append(("serve command", self.serve_cmd))
        for k, v in self.facts.items():
            out.append((k, str(v)))
        return out
