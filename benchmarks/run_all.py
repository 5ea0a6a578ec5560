"""Run every ``benchmarks/bench_*.py`` with its defaults and print their JSON lines.

The figures are medians on this machine; compare them with ``benchmarks/RESULTS.md`` and update
that file (with the old figure beside the new one) when a hot path changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"# {script.name}", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
        if proc.returncode != 0:
            failed += 1
            print(json.dumps({"bench": script.stem, "error": proc.stderr.strip().splitlines()[-1:]}))
            continue
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
