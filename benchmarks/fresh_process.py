"""Timing a command in fresh processes on a shared machine: wall and CPU medians, the load beside them.

The development machine has 2 cores shared by several sessions, so a wall-clock figure alone says
as much about the neighbours as about the code. Each run records its wall time and the CPU seconds
the child used (user + system, from ``RUSAGE_CHILDREN``), the load average is read before and after,
and when several commands are compared their runs are interleaved (A B A B ...), so a change in
load hits all of them alike. The first round is not counted (it fills the OS file cache and any
on-disk caches the command keeps, as in everyday use).
"""

from __future__ import annotations

import hashlib
import os
import resource
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to this process's environment
    cwd: Path | None = None
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    outputs: set[str] = field(default_factory=set)  # SHA-256 of each run's stdout (the answer's bytes)

    def summary(self) -> dict:
        return {
            "wall_median_s": round(statistics.median(self.walls), 3),
            "wall_min_s": round(min(self.walls), 3),
            "wall_max_s": round(max(self.walls), 3),
            "cpu_median_s": round(statistics.median(self.cpus), 3),
            "runs": len(self.walls),
            "distinct_outputs": len(self.outputs),
        }


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_interleaved(commands: dict[str, Command], runs: int, *, normalize: dict[str, bytes] | None = None) -> dict:
    """Run every command ``runs + 1`` times, interleaved; the first round is not counted.

    ``normalize``: per command, bytes replaced by ``TREE`` in its stdout before hashing (a checkout's
    own path), so two checkouts' answers compare equal when only their paths differ."""
    before = loadavg()
    for round_no in range(runs + 1):
        for label, cmd in commands.items():
            env = {**os.environ, **cmd.env}
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' runs read compiled bytecode
            cpu0 = _children_cpu()
            t0 = time.perf_counter()
            proc = subprocess.run(cmd.argv, capture_output=True, env=env, cwd=cmd.cwd)
            wall = time.perf_counter() - t0
            cpu = _children_cpu() - cpu0
            if proc.returncode != 0:
                raise RuntimeError(f"{label}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
            out = proc.stdout
            if normalize and label in normalize:
                out = out.replace(normalize[label], b"TREE")
            cmd.outputs.add(hashlib.sha256(out).hexdigest())
            if round_no:
                cmd.walls.append(wall)
                cmd.cpus.append(cpu)
    return {"loadavg_before": before, "loadavg_after": loadavg(), **{label: cmd.summary() for label, cmd in commands.items()}}
