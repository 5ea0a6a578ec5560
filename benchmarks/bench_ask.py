"""Benchmark: `ask` without an LLM, the path a user waits on.

Figures for the bundled motivating case (Chinese question, 3 load points, performance model):
- in-process, warm (modules imported, caches filled by a first call): gather -> diagnose ->
  attach_sources -> write_answer, median of N;
- the whole command in fresh processes, `vllm-advisor ask --profile ... --json --no-log`: wall and
  CPU medians of N runs after one uncounted run, the load average before and after (issue 17's
  target: under 1 s warm, without an index and with the full docs index);
- ``--kb-dir DIR``: the same command with DIR as the user's index (``$VLLM_ADVISOR_HOME/kb``), so
  its sources include docs passages;
- ``--against CHECKOUT``: the same commands run by another checkout's ``.venv/bin/vllm-advisor``
  (e.g. a worktree of the commit before a change), interleaved with this one's, plus whether the
  two give the same ``--json`` bytes.

Usage: .venv/bin/python benchmarks/bench_ask.py [--repeats 7] [--kb-dir DIR] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_process import Command, run_interleaved  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PROFILE = Path("examples") / "seed-qwen32b-h800-long-input.yaml"


def in_process(repeats: int) -> float:
    from vllm_advisor.answer import attach_sources, write_answer
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather

    def once() -> None:
        inputs = gather(profile=REPO / PROFILE)
        diagnosis = diagnose(inputs)
        attach_sources(diagnosis, inputs)
        write_answer(inputs, diagnosis)

    once()  # warm caches (catalogs, cards, cue table)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _home(root: Path, name: str, kb_dir: Path | None) -> Path:
    """A fresh VLLM_ADVISOR_HOME; with an index, a copy of it made of hard links where the file
    system allows (each checkout keeps its own: the search snapshot may be rewritten in a newer
    format on first use, by a rename that leaves the linked original alone)."""
    home = root / name
    home.mkdir()
    if kb_dir is not None:
        def link(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        shutil.copytree(kb_dir.resolve(), home / "kb", symlinks=True, copy_function=link)
    return home


def whole_command(repeats: int, kb_dir: Path | None, against: Path | None) -> dict:
    checkouts = {"this": REPO} | ({"against": against.resolve()} if against else {})
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            name: Command(
                [str(tree / ".venv" / "bin" / "vllm-advisor"), "ask", "--profile", str(tree / PROFILE), "--json", "--no-log"],
                env={"VLLM_ADVISOR_HOME": str(_home(Path(tmp), name, kb_dir))},
                cwd=tree,
            )
            for name, tree in checkouts.items()
        }
        result = run_interleaved(commands, repeats, normalize={name: str(tree).encode() for name, tree in checkouts.items()})
    if against:
        result["same_json_bytes"] = commands["this"].outputs == commands["against"].outputs
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--kb-dir", type=Path, help="a built index to answer with (e.g. one `kb build` made with the docs)")
    parser.add_argument("--against", type=Path, help="another checkout with its own .venv, run interleaved")
    parser.add_argument("--no-in-process", action="store_true")
    args = parser.parse_args()
    out = {"bench": "ask", "repeats": args.repeats}
    if not args.no_in_process:
        out["in_process_warm_median_s"] = round(in_process(args.repeats), 3)
    out["command_no_index"] = whole_command(args.repeats, None, args.against)
    out["command_median_s"] = out["command_no_index"]["this"]["wall_median_s"]
    if args.kb_dir:
        out["command_with_index"] = whole_command(args.repeats, args.kb_dir, args.against)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
