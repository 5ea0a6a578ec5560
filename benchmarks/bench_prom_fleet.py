"""Benchmark: a fleet's Prometheus range query -> one window per instance plus the summed fleet window.

Generates a ``/api/v1/query_range`` answer shaped exactly like Prometheus' (``{"status": "success",
"data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}``) for
``--instances`` vLLM 0.3x instances (one engine each; the family, label and bucket tables of
``bench_parse_metrics.py``: counters as ``X_total`` with an ``X_created`` gauge, histograms as one
series per bucket plus ``_sum``/``_count``/``_created``) over ``--steps`` steps, every counter and
histogram growing at every step (the costly case) and, for comparison, the same series held steady.
The matching ``/api/v1/metadata`` answer gives the types, as a scraped prometheus_client target does.

Times ``fleet_from_matrix`` (matrix -> per-step values -> the window math per instance, and the
instances summed -> the fleet window), median of ``--repeats``, and once more end to end:
``fetch_prometheus`` against an in-process HTTP server (a thread) serving both answers, so the HTTP
and JSON cost shows separately. No network beyond loopback.

Prints one JSON line. Run: ``.venv/bin/python benchmarks/bench_prom_fleet.py``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

from bench_parse_metrics import COUNTERS, GAUGES, HISTOGRAMS, median_time
from vllm_advisor.probe.metrics.prometheus import fetch_prometheus, fleet_from_matrix

END = 1_800_000_000.0  # unix seconds of the last step
MODEL = "org/model-0"


def _prom_number(v: float) -> str:
    """A sample value the way Prometheus writes it (Go's FormatFloat 'f', -1: no trailing '.0')."""
    text = repr(float(v))
    return text[:-2] if text.endswith(".0") else text


def _prom_time(t: float) -> float | int:
    return int(t) if t == int(t) else t


def make_answer(instances: int, steps: int, step_s: float, changing: bool, seed: int = 7) -> dict:
    """The query_range answer (whole JSON document) for ``instances`` targets of job "vllm"."""
    rng = random.Random(seed)
    start = END - (steps - 1) * step_s
    stamps = [_prom_time(start + k * step_s) for k in range(steps)]
    result: list[dict] = []

    def add(name: str, labels: dict[str, str], values: list[float]) -> None:
        result.append({"metric": {"__name__": name, **labels},
                       "values": [[t, _prom_number(v)] for t, v in zip(stamps, values)]})

    def grow(base: float, per_step: float) -> list[float]:
        """A counter that rises by about ``per_step`` at every step (or stays at ``base``)."""
        out, v = [], base
        for _ in range(steps):
            out.append(v)
            if changing:
                v += float(int(per_step * (0.5 + rng.random())))
        return out

    for i in range(instances):
        target = {"instance": f"10.0.{i // 250}.{i % 250 + 1}:8000", "job": "vllm", "engine": "0", "model_name": MODEL}
        created = 1_796_217_083.0 + i
        for name, variants in GAUGES.items():
            for v in variants:
                top = 1.0 if name.endswith("_perc") else 16.0
                add(name, {**target, **v},
                    [round(top * rng.random(), 4) if changing else top / 2 for _ in range(steps)])
        for name, variants in COUNTERS.items():
            for v in variants:
                add(f"{name}_total", {**target, **v}, grow(1000.0 * (i + 1), 40.0))
                add(f"{name}_created", {**target, **v}, [created] * steps)
        for name, bounds in HISTOGRAMS.items():
            counts = grow(100.0 * (i + 10), 8.0)
            shares = [1 - math.exp(-(j + 1) / 4) for j in range(len(bounds))]
            for le, share in zip(bounds, shares):
                add(f"{name}_bucket", {**target, "le": str(float(le))}, [float(int(c * share)) for c in counts])
            add(f"{name}_bucket", {**target, "le": "+Inf"}, counts)
            add(f"{name}_count", target, counts)
            add(f"{name}_sum", target, [round(c * 0.37, 3) for c in counts])
            add(f"{name}_created", target, [created] * steps)
    result.sort(key=lambda r: sorted(r["metric"].items()))  # Prometheus answers series sorted by labels
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def make_metadata() -> dict:
    """``/api/v1/metadata`` for these families as Prometheus records a prometheus_client target's."""
    meta: dict[str, list[dict]] = {}
    for name in GAUGES:
        meta[name] = [{"type": "gauge", "help": name, "unit": ""}]
    for name in COUNTERS:
        meta[f"{name}_total"] = [{"type": "counter", "help": name, "unit": ""}]
        meta[f"{name}_created"] = [{"type": "gauge", "help": name, "unit": ""}]
    for name in HISTOGRAMS:
        meta[name] = [{"type": "histogram", "help": name, "unit": ""}]
        meta[f"{name}_created"] = [{"type": "gauge", "help": name, "unit": ""}]
    return {"status": "success", "data": meta}


class _Server(ThreadingHTTPServer):
    daemon_threads = True


def serve(answers: dict[str, bytes]) -> ThreadingHTTPServer:
    """A loopback HTTP server answering ``answers[path]`` (query string ignored) on a thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = answers.get(self.path.split("?")[0])
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--steps", type=int, default=121)
    ap.add_argument("--step-s", type=float, default=15.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    start = END - (args.steps - 1) * args.step_s
    metadata_doc = make_metadata()
    meta = {name: entries[0]["type"] for name, entries in metadata_doc["data"].items()}
    answers: dict[str, bytes] = {"/api/v1/metadata": orjson.dumps(metadata_doc)}
    server = serve(answers)  # the converted windows name the URL, so both paths use the same one
    url = f"http://127.0.0.1:{server.server_address[1]}"

    timings: dict[str, float] = {}
    for mode in ("changing", "steady"):
        answer = make_answer(args.instances, args.steps, args.step_s, changing=mode == "changing")
        body = orjson.dumps(answer)
        data = orjson.loads(body)["data"]  # what fetch_prometheus hands over after its GET

        def convert(data=data) -> object:
            return fleet_from_matrix(data, meta, url=url, start=start, end=END, step=args.step_s)

        timings[mode] = median_time(convert, args.repeats)
        fleet = convert()
        if mode == "changing":
            changing_body, changing_fleet = body, fleet

    # end to end once more, through HTTP: two GETs, the bounded body read, orjson, then the same conversion
    answers["/api/v1/query_range"] = changing_body
    try:
        fetch = lambda: fetch_prometheus(url, since_s=END - start, end=END, step_s=args.step_s, timeout=60)  # noqa: E731
        e2e_s = median_time(fetch, args.repeats)
        fetched = fetch()
    finally:
        server.shutdown()
        server.server_close()
    parse_s = median_time(lambda: orjson.loads(changing_body), args.repeats)

    # the HTTP answer must give the same windows as the conversion timed above
    assert fetched.fleet == changing_fleet.fleet and fetched.instances == changing_fleet.instances
    fleet_requests = changing_fleet.fleet.find("vllm:request_success", finished_reason="stop")[0].delta
    assert len(fetched.instances) == args.instances and fleet_requests and fleet_requests > 0
    print(
        json.dumps(
            {
                "benchmark": "prometheus_fleet",
                "median_s": round(timings["changing"], 4),
                "steady_median_s": round(timings["steady"], 4),
                "fetch_prometheus_http_median_s": round(e2e_s, 4),
                "http_and_json_s": round(e2e_s - timings["changing"], 4),
                "orjson_loads_s": round(parse_s, 4),
                "instances": args.instances,
                "series": fetched.query.num_series,
                "series_per_instance": fetched.query.num_series // args.instances,
                "steps": fetched.query.points_per_series,
                "samples": fetched.query.num_series * fetched.query.points_per_series,
                "answer_bytes": len(changing_body),
                "fleet_window_series": len(changing_fleet.fleet.series),
                "instance_window_series": len(changing_fleet.instances[0].window.series),
                "repeats": args.repeats,
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
