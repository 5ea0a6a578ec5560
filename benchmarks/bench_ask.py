"""Benchmark: `ask` without an LLM, the path a user waits on.

Two figures for the bundled motivating case (Chinese question, 3 load points, performance model):
- in-process, warm (modules imported, caches filled by a first call): gather -> diagnose ->
  attach_sources -> write_answer, median of N;
- the whole command in a fresh process, `vllm-advisor ask --profile ... --json --no-log`, median of
  N (includes Python start-up and imports; the issue's target is under 3 s on a warm machine).

Usage: .venv/bin/python benchmarks/bench_ask.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "examples" / "seed-qwen32b-h800-long-input.yaml"


def in_process(repeats: int) -> float:
    from vllm_advisor.answer import attach_sources, write_answer
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather

    def once() -> None:
        inputs = gather(profile=PROFILE)
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


def whole_command(repeats: int) -> float:
    exe = Path(sys.executable).with_name("vllm-advisor")
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "VLLM_ADVISOR_HOME": home}
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            subprocess.run([str(exe), "ask", "--profile", str(PROFILE), "--json", "--no-log"], check=True, capture_output=True, env=env)
            times.append(time.perf_counter() - start)
        return statistics.median(times[1:])  # the first run fills the OS file cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps({"bench": "ask", "in_process_warm_median_s": round(in_process(args.repeats), 3), "command_median_s": round(whole_command(args.repeats), 3), "repeats": args.repeats}))


if __name__ == "__main__":
    main()
