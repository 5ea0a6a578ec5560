"""Hold the performance model to runs of a real vLLM server: re-predict every measured load point.

Why: the step-time parts were measured with torch kernels and the scheduler is simulated; only an
end-to-end comparison with a real server says how far a prediction can be trusted. The runs come
from ``benchmarks/gpu/vllm_e2e.py`` (one ``results.json[.gz]`` per server start: its flags, the
server log's KV cache size, and per load point the per-request arrays and the ``/metrics`` window).
Each point is predicted from the same deployment (catalog model, GPU, vLLM version, the server's
flags) and workload (lengths, prompts, concurrency or rate, shared prefix) with the shipped
parameters, exactly as ``estimate`` would, and compared figure by figure.

Measured figures are recomputed here from the per-request arrays (the harness's own summary is not
trusted): TTFT p50/p90, TPOT p50 ((E2E - TTFT) / (output tokens - 1) per request), ITL p50 (pooled
gaps), E2E p50, output throughput (output tokens / point duration), and the server's mean running
and waiting requests over the ``/metrics`` samples taken during the point.

Which runs were used to fit vLLM's own costs is read from ``split.json`` in the run directory
(``{"rule": "...", "fit": [run names], "other": [...], "moe_fit": [...]}``); every other run is held out.
"""

from __future__ import annotations

import gzip
import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from ..errors import InputFileError, UsageError
from ..schema import Deployment, EngineArgs
from ..schema.validation import FIGURES, FigureComparison, FigureError, KvValidation, PointValidation, ValidationReport
from .predict import LoadPoint, build_engine_model, predict_load_point
from ..probe.serve_cmd import engine_args_for
from .step_time import Efficiency

RESULT_NAMES = ("results.json", "results.json.gz")
#: |measured| below this is treated as zero: no relative error (e.g. waiting requests at c=1).
_ZERO = {"waiting_mean": 0.05, "running_mean": 0.05}


def read_results(path: Path) -> Any:
    """A harness results file (``results.json`` or its ``.gz``), or one line naming the file."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return json.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: not a readable results file ({type(exc).__name__}: {str(exc)[:120]})") from exc


def find_result_files(root: Path) -> list[Path]:
    """Every harness results file under ``root`` (a file itself, or a folder searched recursively)."""
    if not root.exists():
        raise UsageError(f"{root}: no such file or directory")
    if root.is_file():
        return [root]
    files = sorted(p for p in root.rglob("*") if p.name in RESULT_NAMES)
    if not files:
        raise UsageError(f"{root}: no results.json or results.json.gz of benchmarks/gpu/vllm_e2e.py under it")
    return files


@dataclass(frozen=True)
class RunSplit:
    """Which server runs a fit of vLLM's own costs used, written before it ran (``split.json``):
    ``fit`` (plan names fitted on), ``other`` (runs that test a setting those terms do not model,
    e.g. another attention backend or eager mode: scored apart, neither fitted nor held out);
    every other run is held out."""

    fit: set[str] | None
    rule: str
    other: frozenset[str] = frozenset()
    #: MoE servers whose engine steps fitted vLLM's MoE kernel factors (session 25): fitted on, so
    #: not held out, but not part of the dense terms' fit either
    moe_fit: frozenset[str] = frozenset()

    def of(self, name: str) -> str:
        if self.fit is None:
            return "unsplit"
        return "fit" if name in self.fit or name in self.moe_fit else "other" if name in self.other else "holdout"


def read_split(root: Path) -> RunSplit:
    """The fit/hold-out split written before fitting (``split.json`` at or above the results)."""
    for d in ([root] if root.is_dir() else []) + list(root.parents)[:2]:
        f = d / "split.json"
        if f.is_file():
            data = read_results(f)
            return RunSplit(set(data.get("fit", [])), str(data.get("rule", "")), frozenset(data.get("other", [])), frozenset(data.get("moe_fit", [])))
    return RunSplit(None, "")


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def measured_figures(point: dict) -> dict[str, float | None]:
    """The figures of one measured point, from its per-request arrays and /metrics window."""
    ok = [r for r in point.get("requests", []) if r.get("ok") and r.get("ttft") is not None and r.get("e2e") is not None]
    ttft = [r["ttft"] for r in ok]
    e2e = [r["e2e"] for r in ok]
    tpot = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1) * 1e3 for r in ok if (r.get("output_tokens") or 0) > 1]
    itl = [x * 1e3 for r in ok for x in r.get("itl", [])]
    out_tokens = sum(r.get("output_tokens") or 0 for r in ok)
    duration = point.get("duration_s") or 0.0
    window = point.get("metrics_window") or {}

    def gauge(name: str) -> float | None:
        g = window.get(name)
        return float(g["mean"]) if isinstance(g, dict) and "mean" in g else None

    return {
        "ttft_p50": _pct(ttft, 50),
        "ttft_p90": _pct(ttft, 90),
        "tpot_p50": _pct(tpot, 50),
        "itl_p50": _pct(itl, 50),
        "e2e_p50": _pct(e2e, 50),
        "output_throughput": out_tokens / duration if duration > 0 and ok else None,
        "running_mean": gauge("vllm:num_requests_running"),
        "waiting_mean": gauge("vllm:num_requests_waiting"),
    }


def predicted_figures(run: Any) -> dict[str, float | None]:
    """The same figures from a predicted :class:`BenchmarkRun` (units as in :data:`FIGURES`)."""

    def dist(d: Any, q: str | None = None, scale: float = 1.0) -> float | None:
        if d is None:
            return None
        v = d.median if q is None else d.percentiles.get(q)
        return None if v is None else v * scale

    return {
        "ttft_p50": dist(run.ttft_ms, None, 1e-3),
        "ttft_p90": dist(run.ttft_ms, "p90", 1e-3),
        "tpot_p50": dist(run.tpot_ms),
        "itl_p50": dist(run.itl_ms),
        "e2e_p50": dist(run.e2e_ms, None, 1e-3),
        "output_throughput": run.output_throughput_tok_s,
        "running_mean": run.server_view.running_mean if run.server_view else None,
        "waiting_mean": run.server_view.waiting_mean if run.server_view else None,
    }


def _error(figure: str, measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or abs(measured) <= _ZERO.get(figure, 1e-12):
        return None
    return predicted / measured - 1.0


def card_name(result: dict) -> str:
    """The card a harness run measured, as nvidia-smi names it (first field of its first line); "" when
    the file does not say. The harness wrote "gpu": "H200" whatever the card, so that field is a fallback."""
    return str((result.get("env") or {}).get("nvidia-smi") or "").split(",")[0].strip()


def _typed_command(ran: list, model: str) -> str:
    """The ``vllm serve`` command a harness run recorded (``server.command``), as a user would type it:
    the catalog model's name in place of the dummy model's folder."""
    flags = [str(a) for a in ran[ran.index("serve") + 2:]]
    return shlex.join(["vllm", "serve", model, *flags])


def deployment_of(result: dict, path: Path) -> tuple[Deployment, EngineArgs]:
    """The deployment a harness run measured: catalog model, GPU, vLLM version and server flags."""
    try:
        plan = result["plan"]
        server = plan["server"]
        model = result["catalog_model"]
        ran = result["server"]["command"]
        ran.index("serve")
    except (KeyError, TypeError, ValueError) as exc:
        raise InputFileError(f"{path}: not a benchmarks/gpu/vllm_e2e.py results file (missing {exc})") from exc
    version = str((result.get("env") or {}).get("vllm") or result.get("server_log", {}).get("vllm_version") or "0.26.0")
    smi = card_name(result)
    tp = int(server.get("tensor_parallel_size") or 1)
    dep = Deployment(engine="vllm", vllm_version=version, model=model, gpu=smi or result.get("gpu") or "H200", num_gpus=tp)
    # the flags are read from the command the harness ran, by the serve-command parser every other input goes through
    args = engine_args_for(dep.model_copy(update={"serve_command": _typed_command(ran, model)}))
    args = args.model_copy(update={"model": model, "dtype": args.dtype or "bfloat16"})
    return dep, args


def _rate(spec: dict) -> float | None:
    if spec.get("concurrency"):
        return None
    r = spec.get("rate", "inf")
    return math.inf if r in (None, "inf") else float(r)


def _recorded_sends(point: dict) -> tuple[float, ...] | None:
    """An open loop's send times as the client recorded them (``requests[].sent``, s), failed requests
    included (they were sent); None when any is missing, and the point is drawn from its rate instead."""
    sends = [r.get("sent") for r in point.get("requests", [])]
    if not sends or not all(isinstance(t, (int, float)) and math.isfinite(t) for t in sends):
        return None
    return tuple(float(t) for t in sends)


def validate_file(path: Path, split_of: Any, efficiency: Efficiency | None = None, *, result: Any = None) -> tuple[list[PointValidation], KvValidation | None, list[str]]:
    """Every measured point of one results file against the model's prediction; ``result`` is the
    file already read (validate_runs reads each once: a gzipped run with its per-request data is MBs)."""
    result = read_results(path) if result is None else result
    dep, args = deployment_of(result, path)
    name = str(result["plan"].get("name") or path.parent.name)
    split = split_of(name)
    notes: list[str] = []
    points = [p for p in result.get("points", []) if not p.get("skipped") and p.get("requests")]
    longest = max((p["spec"]["input_len"] + p["spec"]["output_len"] for p in points), default=None)
    engine = build_engine_model(dep, args, efficiency=efficiency, needed_model_len=longest)
    kv = None
    measured_kv = (result.get("server_log") or {}).get("kv_cache_tokens")
    if measured_kv:
        pred = int(engine.memory.kv_cache_tokens)
        kv = KvValidation(run=name, split=split, model=engine.model.name, measured_tokens=int(measured_kv), predicted_tokens=pred, error=pred / measured_kv - 1.0)
    out: list[PointValidation] = []
    for p in points:
        spec = p["spec"]
        rate = _rate(spec)
        lp = LoadPoint(concurrency=spec.get("concurrency"), request_rate=rate)
        run, _ = predict_load_point(
            engine,
            lp,
            input_len=int(spec["input_len"]),
            output_len=int(spec["output_len"]),
            num_prompts=int(spec["num_prompts"]),
            shared_prefix_len=int(spec.get("prefix_len", 0)),
            seed=int(p.get("seed", 0)),
            arrivals=_recorded_sends(p) if rate is not None else None,
        )
        meas, predv = measured_figures(p), predicted_figures(run)
        figs = [FigureComparison(figure=f, unit=u, measured=meas[f], predicted=predv[f], error=_error(f, meas[f], predv[f])) for f, u in FIGURES.items()]
        failed = sum(1 for r in p["requests"] if not r.get("ok"))
        if failed:
            notes.append(f"{name}/{p['id']}: {failed} request(s) failed on the server; figures use the rest")
        out.append(
            PointValidation(
                run=name,
                point=str(p["id"]),
                split=split,
                model=engine.model.name,
                input_len=int(spec["input_len"]),
                output_len=int(spec["output_len"]),
                num_prompts=int(spec["num_prompts"]),
                concurrency=spec.get("concurrency"),
                request_rate=rate,
                prefix_len=int(spec.get("prefix_len", 0)),
                max_num_batched_tokens=args.max_num_batched_tokens,
                figures=figs,
            )
        )
    return out, kv, notes


def summarize(points: list[PointValidation], kv: list[KvValidation]) -> list[FigureError]:
    """Median / worst absolute error per figure and split (and 'all')."""
    rows: list[FigureError] = []
    splits = sorted({p.split for p in points}) + (["all"] if len({p.split for p in points}) > 1 else [])
    for split in splits:
        sel = [p for p in points if split == "all" or p.split == split]
        for fig in FIGURES:
            errs = [(f.error, f"{p.run}/{p.point}") for p in sel for f in p.figures if f.figure == fig and f.error is not None]
            if errs:
                worst = max(errs, key=lambda e: abs(e[0]))
                rows.append(FigureError(figure=fig, split=split, points=len(errs), median_abs_error=median(abs(e) for e, _ in errs), median_signed_error=median(e for e, _ in errs), worst_abs_error=abs(worst[0]), worst_point=worst[1]))
        kerr = [(k.error, k.run) for k in kv if split == "all" or k.split == split]
        if kerr:
            worst = max(kerr, key=lambda e: abs(e[0]))
            rows.append(FigureError(figure="kv_cache_tokens", split=split, points=len(kerr), median_abs_error=median(abs(e) for e, _ in kerr), median_signed_error=median(e for e, _ in kerr), worst_abs_error=abs(worst[0]), worst_point=worst[1]))
    return rows


def validate_runs(root: Path, efficiency: Efficiency | None = None) -> ValidationReport:
    """Re-predict every measured point under ``root`` and compare."""
    root = Path(root)
    files = find_result_files(root)
    split = read_split(root)

    points: list[PointValidation] = []
    kvs: list[KvValidation] = []
    notes: list[str] = []
    engines = set()
    for f in files:
        res = read_results(f)
        try:
            pts, kv, n = validate_file(f, split.of, efficiency, result=res)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a damaged or hand-edited file: one line, not a traceback
            raise InputFileError(f"{f}: a load point or server field is missing or malformed ({type(exc).__name__}: {str(exc)[:120]})") from exc
        points += pts
        kvs += [kv] if kv else []
        notes += n
        card = card_name(res) or res.get("gpu", "?")
        engines.add(f"vLLM {(res.get('env') or {}).get('vllm', '?')} on {card} (dummy weights)")
    return ValidationReport(source=str(root), engine="; ".join(sorted(engines)), split_rule=split.rule, points=points, kv_cache=kvs, summary=summarize(points, kvs), notes=notes)


__all__ = ["card_name", "deployment_of", "find_result_files", "measured_figures", "predicted_figures", "read_results", "read_split", "RunSplit", "summarize", "validate_file", "validate_runs"]
