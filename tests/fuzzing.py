"""Seeded fuzzing of every reader: mutations of real files must end in an answer or in one of our
one-line errors, never in a foreign exception (the CLI's exit 70), a hang or runaway memory.

Why in-process: a CLI subprocess costs ~2 s of imports, so 10,000 inputs would take hours; the
readers are called as the CLI calls them (``load_runs``, ``load_metrics_file``, ``parse_server_log``,
``load_case``, ``gather``), each under a wall-clock alarm, and the process's peak RSS bounds every
single run's memory. A few CLI subprocess runs in the test suite check the same through ``main``.

Seeds: every file under ``../shared/fixtures``, the dev cases and ``examples/`` (read, never
copied). Mutations are structure-blind (bytes, lines, numbers) and structure-aware (a JSON or YAML
value replaced by one of another type or a hostile number), plus hostile constructs (alias bombs,
deep nesting, long lines, terminal escapes). Everything derives from ``--seed`` and the input's
index, so a failure is reproduced with ``--seed S --only N``.

``python tests/fuzzing.py --count 10000 [--results benchmarks/RESULTS.md]`` (``make fuzz``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


def peak_rss_mb() -> float:
    """This process's own peak resident memory (VmHWM) in MB. Not ru_maxrss: Linux carries the
    parent's high-water mark over fork and exec into it, so a child of a large pytest process would
    report the parent's peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SEED_DIRS = [SHARED / "fixtures", SHARED / "cases" / "dev", REPO / "examples"]
SEED_SUFFIXES = {".json", ".jsonl", ".yaml", ".yml", ".csv", ".txt", ".log", ".prom", ""}
MAX_SEED_BYTES = 2 * 1024 * 1024  # larger fixtures are cut to their first 2 MiB before mutation
MAX_INPUT_CHARS = 8 * 1024 * 1024  # a mutated input is cut here (huge files are a test of their own)
RUN_SECONDS = 10.0  # an input that takes longer is a failure (issue 19)
RUN_MEMORY_MB = 1024.0  # an input that raises the process's peak RSS by more is a failure

HOSTILE_NUMBERS = [
    "1e400", "-1e400", "NaN", "nan", "inf", "-inf", "Infinity", "-1", "0", "-0", "1e308", "4.9e-324",
    "18446744073709551616", "9" * 400, "1_000", "0x10", "1e9", "1000000000", "-9223372036854775809", "0.0000001",
]
HOSTILE_VALUES: list[Any] = [None, True, "abc", "", [], {}, [1, 2], {"a": 1}, -1, 0, 1e308, 10**30, "1e400", "NaN", "\x1b[31mred"]


class Timeout(BaseException):
    """Raised by the alarm; a BaseException so no reader's ``except Exception`` can swallow it."""


@dataclass
class Outcome:
    index: int
    seed_file: str
    reader: str
    mutations: list[str]
    kind: str  # ok | input_error | bug | slow
    detail: str = ""
    seconds: float = 0.0
    peak_mb: float = 0.0  # the process's peak RSS after this input (it only grows)


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    wall_s: float = 0.0

    @property
    def bugs(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind in ("bug", "slow")]

    def summary(self) -> dict[str, Any]:
        times = sorted(o.seconds for o in self.outcomes)
        return {
            "inputs": len(self.outcomes),
            "outcomes": dict(Counter(o.kind for o in self.outcomes)),
            "by_reader": dict(Counter(o.reader for o in self.outcomes)),
            "max_s": round(times[-1], 3) if times else 0.0,
            "median_ms": round(1000 * times[len(times) // 2], 2) if times else 0.0,
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "wall_s": round(self.wall_s, 1),
            "bug_kinds": dict(Counter(o.detail.split(":", 1)[0] for o in self.bugs)),
        }


# --------------------------------------------------------------------------- seeds


def seed_files() -> list[Path]:
    out = []
    for folder in SEED_DIRS:
        if folder.is_dir():
            for p in sorted(folder.rglob("*")):
                if p.is_file() and p.suffix.lower() in SEED_SUFFIXES and not p.name.startswith("."):
                    out.append(p)
    return out


def _kind(path: Path, text: str) -> str:
    name = str(path)
    if "/cases/" in name or "/examples/" in name:
        return "case"
    if "/logs/" in name or "real-logs" in name or path.suffix == ".log":
        return "serverlog"
    if "metrics" in name and ("# TYPE" in text[:20000] or '"families"' in text[:2000]):
        return "metrics"
    return "bench"


# --------------------------------------------------------------------------- mutations

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def _m_flip(rng: random.Random, text: str) -> str:
    data = bytearray(text.encode("utf-8", "replace"))
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("utf-8", "replace")


def _m_truncate(rng: random.Random, text: str) -> str:
    return text[: rng.randrange(max(1, len(text)))]


def _lines_op(rng: random.Random, text: str, op: str) -> str:
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    i = rng.randrange(len(lines))
    if op == "delete":
        del lines[i : i + rng.randint(1, 3)]
    elif op == "duplicate":
        lines[i:i] = [lines[i][:20_000]] * rng.randint(2, 50)
    elif op == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "long":
        lines.insert(i, rng.choice(["a", "{", "[", "9", "label=\"x"]) * rng.choice([300_000, 70_000]) + "\n")
    elif op == "escape":
        lines.insert(i, "\x1b[2J\x1b]0;title\x07 \x1b[31mERROR\x1b[0m INFO vLLM API server version 0.8.5\r\n")
    return "".join(lines)


def _m_number(rng: random.Random, text: str) -> str:
    matches = list(_NUMBER.finditer(text[:500_000]))
    if not matches:
        return text
    for _ in range(rng.randint(1, 4)):
        m = rng.choice(matches)
        text = text[: m.start()] + rng.choice(HOSTILE_NUMBERS + ["abc", "null", "[]", "{}", '"7"', "true"]) + text[m.end() :]
        matches = list(_NUMBER.finditer(text[:500_000]))
        if not matches:
            break
    return text


def _paths(value: Any, prefix: tuple = (), depth: int = 0) -> list[tuple]:
    out = [prefix]
    if depth > 6:
        return out
    if isinstance(value, dict):
        for k, v in list(value.items())[:60]:
            out.extend(_paths(v, prefix + (k,), depth + 1))
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            out.extend(_paths(v, prefix + (i,), depth + 1))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    node = value
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = new
    return value


def _m_structure(rng: random.Random, text: str, path: Path) -> str:
    import yaml

    try:
        if text.lstrip()[:1] in "{[":
            value, dump = json.loads(text), (lambda v: json.dumps(v, indent=1))
        else:
            value, dump = yaml.safe_load(text), (lambda v: yaml.safe_dump(v, allow_unicode=True))
    except Exception:
        return _m_number(rng, text)
    if not isinstance(value, (dict, list)):
        return _m_number(rng, text)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(value)
        target = rng.choice(paths[1:] or paths)
        value = _replace(value, target, rng.choice(HOSTILE_VALUES))
    try:
        return dump(value)
    except (TypeError, ValueError):
        return text


def _m_bomb(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:
        lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
        for i in range(1, 9):
            lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i-1}"] * 9) + "]")
        return "\n".join(lines) + "\nquestion: *a8\n" + text
    depth = rng.choice([200, 5000, 100_000])
    return "[" * depth + "]" * depth if rng.random() < 0.5 else "a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(min(depth, 3000)))


def _m_crossover(rng: random.Random, text: str, seeds: list[str]) -> str:
    other = rng.choice(seeds)
    lines, other_lines = text.splitlines(keepends=True), other.splitlines(keepends=True)
    if not lines or not other_lines:
        return text + other[:1000]
    i, j = rng.randrange(len(lines)), rng.randrange(len(other_lines))
    return "".join(lines[:i] + other_lines[j : j + rng.randint(1, 20)] + lines[i:])


MUTATIONS: dict[str, Callable[..., str]] = {
    "flip": lambda r, t, p, s: _m_flip(r, t),
    "truncate": lambda r, t, p, s: _m_truncate(r, t),
    "delete_lines": lambda r, t, p, s: _lines_op(r, t, "delete"),
    "duplicate_line": lambda r, t, p, s: _lines_op(r, t, "duplicate"),
    "swap_lines": lambda r, t, p, s: _lines_op(r, t, "swap"),
    "long_line": lambda r, t, p, s: _lines_op(r, t, "long"),
    "escape": lambda r, t, p, s: _lines_op(r, t, "escape"),
    "number": lambda r, t, p, s: _m_number(r, t),
    "structure": lambda r, t, p, s: _m_structure(r, t, p),
    "bomb": lambda r, t, p, s: _m_bomb(r, t),
    "crossover": lambda r, t, p, s: _m_crossover(r, t, s),
}
WEIGHTS = {"flip": 2, "truncate": 2, "delete_lines": 1, "duplicate_line": 1, "swap_lines": 1, "long_line": 0.5,
           "escape": 0.5, "number": 4, "structure": 5, "bomb": 0.4, "crossover": 1}


def mutate(rng: random.Random, text: str, path: Path, seeds: list[str]) -> tuple[str, list[str]]:
    names = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=rng.randint(1, 3))
    for name in names:
        text = MUTATIONS[name](rng, text, path, seeds)[:MAX_INPUT_CHARS]
    return text, names


# --------------------------------------------------------------------------- readers


def _readers() -> dict[str, Callable[[Path], Any]]:
    """The readers as the CLI uses them; each returns something or raises."""
    from vllm_advisor.diagnosis.inputs import gather
    from vllm_advisor.probe.bench import load_runs
    from vllm_advisor.probe.casefile import load_case, load_case_lenient
    from vllm_advisor.probe.metrics import compute_window, load_metrics_file, summarize_window
    from vllm_advisor.probe.serverlog import parse_server_log

    def metrics(p: Path):
        snaps = load_metrics_file(p)
        return summarize_window(compute_window(snaps))

    def ask_profile(p: Path):
        from vllm_advisor.answer import write_answer
        from vllm_advisor.diagnosis.engine import diagnose

        inputs = gather(profile=p, question="why is it slow?")
        return write_answer(inputs, diagnose(inputs))

    return {
        "bench": load_runs,
        "metrics": metrics,
        "serverlog": parse_server_log,
        "case": load_case,
        "case_lenient": load_case_lenient,
        "attach": lambda p: gather(question="why?", attachments=[p], predict=False),
        "ask_profile": ask_profile,
    }


READERS_FOR = {
    "bench": ["bench", "attach"],
    "metrics": ["metrics", "attach"],
    "serverlog": ["serverlog", "attach"],
    "case": ["case", "case_lenient", "ask_profile"],
}


def _alarm(signum, frame):  # noqa: ARG001
    raise Timeout()


def run(count: int, seed: int = 19, only: int | None = None, time_limit: float = RUN_SECONDS, verbose: bool = False,
        memory_limit_mb: float = RUN_MEMORY_MB) -> Report:
    from vllm_advisor.errors import AdvisorError

    import warnings

    warnings.simplefilter("ignore")  # numpy's RuntimeWarnings on hostile numbers are not findings
    readers = _readers()
    files = seed_files()
    texts = {p: p.read_bytes()[:MAX_SEED_BYTES].decode("utf-8", "replace") for p in files}
    seeds = list(texts.values())
    report = Report()
    base_mb = peak_rss_mb()
    start = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory(prefix="vllm-advisor-fuzz-") as tmp:
        os.environ.setdefault("VLLM_ADVISOR_HOME", tmp)
        for index in range(count):
            if only is not None and index != only:
                continue
            rng = random.Random(seed * 1_000_003 + index)
            path = rng.choice(files)
            kind = _kind(path, texts[path])
            reader = rng.choice(READERS_FOR[kind])
            text, names = mutate(rng, texts[path], path, seeds)
            target = Path(tmp) / f"in{index}{path.suffix}"
            target.write_text(text, encoding="utf-8", errors="surrogateescape")
            outcome = Outcome(index, str(path.relative_to(REPO.parent)), reader, names, "ok")
            t0 = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, time_limit)
            try:
                readers[reader](target)
            except Timeout:
                outcome.kind, outcome.detail = "slow", f"Timeout: over {time_limit:g} s"
            except AdvisorError as exc:
                outcome.kind, outcome.detail = "input_error", exc.one_line()[:200]
                if "\n" in exc.one_line() or "\x1b" in exc.one_line():
                    outcome.kind, outcome.detail = "bug", f"MultiLine: {exc.one_line()[:200]!r}"
            except Exception as exc:  # noqa: BLE001 - the point: anything not ours is a finding
                tb = traceback.extract_tb(exc.__traceback__)
                where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
                outcome.kind, outcome.detail = "bug", f"{type(exc).__name__}: {str(exc)[:120]} at {where}"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            outcome.seconds = time.perf_counter() - t0
            outcome.peak_mb = peak_rss_mb()
            grown = outcome.peak_mb - (report.outcomes[-1].peak_mb if report.outcomes else base_mb)
            if grown > memory_limit_mb and outcome.kind != "bug":
                outcome.kind, outcome.detail = "slow", f"Memory: peak RSS grew {grown:.0f} MB on this input"
            if outcome.seconds > time_limit and outcome.kind != "slow":
                outcome.kind, outcome.detail = "slow", f"Slow: {outcome.seconds:.1f} s"
            target.unlink(missing_ok=True)
            report.outcomes.append(outcome)
            if verbose and outcome.kind in ("bug", "slow"):
                print(f"#{index} {outcome.seed_file} {reader} {names}: {outcome.detail}", file=sys.stderr)
    signal.signal(signal.SIGALRM, old)
    report.wall_s = time.perf_counter() - start
    report.peak_rss_mb = peak_rss_mb()
    return report


def _results_row(report: Report, seed: int) -> str:
    s = report.summary()
    o = s["outcomes"]
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    return (
        f"| {time.strftime('%Y-%m-%d')} | {s['inputs']:,} | {seed} | {o.get('ok', 0):,} | {o.get('input_error', 0):,} | "
        f"{o.get('bug', 0)} | {o.get('slow', 0)} | {s['median_ms']} ms | {s['max_s']} s | {s['peak_rss_mb']:.0f} MB | {s['wall_s']} s | {load} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--only", type=int, help="run only input number N (to reproduce a finding)")
    ap.add_argument("--results", type=Path, help="append a row to this RESULTS.md section '## Fuzzing'")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    report = run(args.count, args.seed, args.only, verbose=args.verbose)
    print(json.dumps(report.summary(), indent=1))
    for o in report.bugs[:40]:
        print(f"#{o.index} {o.seed_file} {o.reader} {o.mutations}: {o.detail}")
    if args.results:
        row = _results_row(report, args.seed)
        text = args.results.read_text(encoding="utf-8") if args.results.exists() else ""
        args.results.write_text(add_results_row(text, row), encoding="utf-8")
    return 1 if report.bugs else 0


def add_results_row(text: str, row: str) -> str:
    """The row appended to the table of the '## Fuzzing' section (created at the end when absent)."""
    header = ("\n## Fuzzing (tests/fuzzing.py, `make fuzz`)\n\nMutations of the real fixtures, dev cases and examples through every "
                  "reader, in-process, each under a 10 s alarm; bugs = exceptions not ours (exit 70), slow = over 10 s; peak RSS of the "
                  "whole run bounds each input's memory.\n\n| date | inputs | seed | ok | input errors | bugs | slow | median | max | peak RSS | wall | load |\n"
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    if "## Fuzzing (tests/fuzzing.py" not in text:
        return text.rstrip("\n") + "\n" + header + row + "\n"
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## Fuzzing (tests/fuzzing.py"))
    end = start + 1
    while end < len(lines) and not lines[end].startswith("## "):
        end += 1
    last_row = max(i for i in range(start, end) if lines[i].startswith("|"))
    lines.insert(last_row + 1, row)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
