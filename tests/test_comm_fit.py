"""The all-reduce fitter (benchmarks/gpu/fit_comm.py) and the measuring script's CPU-only parts (issue 9).

The fit tests use a SYNTHETIC CSV made here from known latencies and bus bandwidths (plus
deterministic +-2% noise): they test the code path (reading measure_allreduce.py's columns, the
split, the least squares, the layer check), not any hardware. No multi-GPU measurement exists yet;
the shipped world-size-1 smoke CSV must be refused as data.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
GPU_BENCH = REPO / "benchmarks" / "gpu"
SMOKE_CSV = GPU_BENCH / "data" / "allreduce-smoke-1gpu.csv"

#: (world size) -> (latency µs, bus bandwidth GB/s) the synthetic rows are generated from.
TRUE = {2: (11.0, 365.0), 4: (16.0, 342.0), 8: (23.0, 318.0)}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, GPU_BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fit_comm():
    return _load("fit_comm")


@pytest.fixture(scope="module")
def measure():
    return _load("measure_allreduce")


def _synthetic_csv(path: Path, measure, *, worlds=(2, 4, 8), noise: float = 0.02) -> None:
    """measure_allreduce.py's columns and message sizes, times from TRUE with +-noise (seeded)."""
    shapes = json.loads((GPU_BENCH / "shapes.json").read_text(encoding="utf-8"))
    sizes = measure.message_sizes(shapes)
    rng = np.random.default_rng(9)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=measure.CSV_COLUMNS)
        w.writeheader()
        common = {"gpu": "NVIDIA H200", "device": "cuda", "purpose": "data", "part": "allreduce", "op": "all_reduce_sum"}
        for n in worlds:
            lat, bw = TRUE[n]
            for mode in ("eager", "graph"):
                for size, info in sizes.items():
                    t = (lat + size * measure.bus_factor(n) / (bw * 1e3)) * (1 + rng.uniform(-noise, noise))
                    w.writerow({**common, "world_size": n, "mode": mode, "bytes": size, "median_us": round(t, 3),
                                "size_source": "+".join(sorted(info["sources"])), "note": "SYNTHETIC: test data"})
            # One layer at TP n, 128 tokens of a hidden-8192 model: GEMMs 300 µs, whole = parts exactly.
            ar = lat + 128 * 8192 * 2 * measure.bus_factor(n) / (bw * 1e3)
            layer = {**common, "part": "layer", "mode": "eager-queued", "world_size": n, "model": "Llama-3.1-70B-Instruct",
                     "tokens": 128, "hidden": 8192, "measurement_id": 1000 + n}
            for op, t in (("qkv_proj", 50.0), ("o_proj", 40.0), ("gate_up", 130.0), ("down", 80.0), ("allreduce", ar)):
                w.writerow({**layer, "op": op, "median_us": t, "bytes": 128 * 8192 * 2 if op == "allreduce" else ""})
            w.writerow({**layer, "op": "step_total", "median_us": 300.0 + 2 * ar, "bytes": 128 * 8192 * 2})


def test_recovers_known_latency_and_bus_bandwidth_within_5_percent(fit_comm, measure, tmp_path):
    path = tmp_path / "allreduce-SYNTHETIC.csv"
    _synthetic_csv(path, measure)
    samples, layer_rows, skipped = fit_comm.load_samples([path])
    assert skipped == {}
    assert len(samples) == 3 * 2 * 47
    result = fit_comm.fit_all(samples, layer_rows, link_gbs=450.0)
    for n, (lat, bw) in TRUE.items():
        for mode in ("eager", "graph"):
            g = result["per_world_size"][f"{mode} n={n}"]
            assert g["latency_us"] == pytest.approx(lat, rel=0.05)
            assert g["busbw_gbs"] == pytest.approx(bw, rel=0.05)
            assert g["eff_comm"] == pytest.approx(bw / 450.0, rel=0.05)
            assert g["fit"].worst_abs < 0.03  # the noise is +-2%
            assert g["holdout_model_sizes"].points > 0
    # The joint fit (the model's single latency and eff_comm) lies between the per-n values.
    joint = result["joint"]["graph all n"]
    assert 11.0 < joint["latency_us"] < 23.0 and 318.0 < joint["busbw_gbs"] < 365.0
    # The layer: whole equals GEMMs + 2 all-reduces by construction.
    assert [r["tp"] for r in result["layer"]] == [2, 4, 8]
    for r in result["layer"]:
        assert r["whole_over_parts"] == pytest.approx(1.0, abs=1e-4)
        assert abs(r["error_with_fitted_comm"]) < 0.02


def test_shipped_constants_are_judged_on_the_same_points(fit_comm, measure, tmp_path):
    path = tmp_path / "allreduce-SYNTHETIC.csv"
    _synthetic_csv(path, measure, worlds=(8,), noise=0.0)
    samples, layer_rows, _ = fit_comm.load_samples([path])
    result = fit_comm.fit_all(samples, layer_rows, link_gbs=450.0)
    shipped = result["shipped"]
    assert (shipped["latency_us"], shipped["busbw_gbs"]) == (15.0, pytest.approx(315.0))
    # At the smallest message (4 KiB) the synthetic n=8 time is 23 + 7168/318e3 µs; the shipped term says 15 + ...
    err = shipped["errors"]["graph n=8"]
    assert err.worst_abs == pytest.approx(abs((15.0 + 4096 * 1.75 / 315e3) / (23.0 + 4096 * 1.75 / 318e3) - 1), rel=1e-3)
    # Without noise the fit is exact.
    assert result["per_world_size"]["graph n=8"]["fit"].worst_abs < 1e-4


def test_smoke_csv_is_not_data_for_the_fit(fit_comm, capsys):
    samples, layer_rows, skipped = fit_comm.load_samples([SMOKE_CSV])
    assert samples == [] and layer_rows == []
    assert skipped == {"smoke (world size 1)": 178}
    assert fit_comm.main([str(SMOKE_CSV)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("fit_comm: ") and "\n" not in err
    assert "no multi-GPU all-reduce data to fit (178 smoke (world size 1))" in err
    assert "nvidia-h200-x2/x4/x8" in err


def test_smoke_csv_holds_the_world_size_1_run(fit_comm):
    """The shipped smoke run (H200, torch 2.11, NCCL 2.28.9): the all-reduce has nothing to move, so
    the eager call is the CPU cost of dist.all_reduce alone and the captured graph is empty."""
    rows = fit_comm.read_rows(SMOKE_CSV)
    assert {r["world_size"] for r in rows} == {"1"} and {r["purpose"] for r in rows} == {"smoke"}
    assert {r["nccl"] for r in rows} == {"2.28.9"}
    by = {(r["mode"], r["bytes"]): float(r["median_us"]) for r in rows if r["part"] == "allreduce"}
    assert len(by) == 2 * 47
    assert by[("eager", "10240")] == pytest.approx(22.882, abs=1e-3)
    assert by[("graph", "10240")] < 1.0
    layer = {(r["model"], r["tokens"], r["op"]): float(r["median_us"]) for r in rows if r["part"] == "layer"}
    assert layer[("Llama-3.1-70B-Instruct", "8192", "step_total")] == pytest.approx(21017.4, rel=1e-4)


def test_malformed_csv_is_one_line_error(fit_comm, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    assert fit_comm.main([str(bad)]) == 3


def test_measure_refuses_multicast_and_sets_it_off(measure):
    env = {"PATH": "/bin"}
    measure.enforce_no_multicast(env)
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["NVSHMEM_DISABLE_NVLS"] == "1"
    for override in ({"NCCL_NVLS_ENABLE": "1"}, {"NVSHMEM_DISABLE_NVLS": "0"}, {"NCCL_ALGO": "NVLS,Ring"}):
        with pytest.raises(SystemExit, match="refusing to run"):
            measure.enforce_no_multicast({**override})


def test_measure_sizes_span_decode_to_16k_prefill(measure):
    shapes = json.loads((GPU_BENCH / "shapes.json").read_text(encoding="utf-8"))
    sizes = measure.message_sizes(shapes)
    assert min(sizes) == 4096 and max(sizes) == 16384 * 8192 * 2
    assert "Qwen2.5-32B-Instruct T=1" in sizes[10240]["users"]  # 1 token x 5120 x 2 bytes
    assert sizes[2 * 1024 * 1024]["sources"] == {"log", "model-decode", "model-prefill"}
    assert measure.bus_factor(8) == 1.75 and measure.bus_factor(1) == 0.0
