#!/usr/bin/env python3
"""Score the diagnosis on real-vLLM runs whose cause was planted (benchmarks/gpu/plans/planted-*.json).

For each run folder (``vllm_e2e.py`` output of a planted plan), the point is turned into a user's
folder by ``planted_artifacts.py`` and ``vllm-advisor ask --profile case.yaml --json`` is run on it, as
a user would. A finding is right when its cause is one of the plan's planted causes (the first listed
is the setting that was changed; the others are what that setting does, e.g. a small KV pool makes
requests wait for KV blocks and preempts them).

Usage: python benchmarks/gpu/planted_score.py RUNS_DIR [--split dev|holdout] [--json]
Prints, per run: split, planted causes, the first three findings and their confidences, hit marks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import planted_artifacts  # noqa: E402

ADVISOR = Path(sys.executable).with_name("vllm-advisor")


def diagnose(folder: Path) -> list[tuple[str, float]]:
    out = subprocess.run([str(ADVISOR), "ask", "--profile", str(folder / "case.yaml"), "--json"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"ask failed on {folder}: {out.stderr.strip()[-300:]}")
    doc = json.loads(out.stdout)
    return [(f["cause"], float(f.get("confidence") or 0.0)) for f in doc["findings"]]


def score_run(run: Path, work: Path) -> list[dict]:
    results, log, snaps = planted_artifacts.load_run(run)
    planted = results["plan"].get("planted") or {}
    if not planted.get("causes"):
        return []
    rows = []
    for point in results["points"]:
        if not point.get("requests"):
            continue
        folder = planted_artifacts.write_point(results, point, snaps.get(point["id"]), log, work, planted_artifacts.QUESTION)
        findings = diagnose(folder)
        causes = planted["causes"]
        top3 = [c for c, _ in findings[:3]]
        rows.append({
            "run": results["plan"]["name"], "point": point["id"], "split": planted.get("split"), "planted": causes,
            "findings": findings[:4], "top1": bool(top3) and top3[0] in causes, "primary_in_top3": causes[0] in top3,
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--split", choices=("dev", "holdout"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in sorted(p for p in args.runs.iterdir() if p.is_dir()):
            rows += [r for r in score_run(run, Path(tmp)) if not args.split or r["split"] == args.split]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| run / point | split | planted (first = the setting changed) | first findings (confidence) | top-1 | set cause in first 3 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        found = ", ".join(f"{c} {p:.2f}" for c, p in r["findings"][:3])
        print(f"| {r['run']} / {r['point']} | {r['split']} | {', '.join(r['planted'])} | {found} | {'yes' if r['top1'] else 'no'} | {'yes' if r['primary_in_top3'] else 'no'} |")
    for split in ("dev", "holdout"):
        sel = [r for r in rows if r["split"] == split]
        if sel:
            print(f"{split}: {len(sel)} runs, top-1 {sum(r['top1'] for r in sel)}/{len(sel)}, set cause in first 3 {sum(r['primary_in_top3'] for r in sel)}/{len(sel)}")


if __name__ == "__main__":
    main()
