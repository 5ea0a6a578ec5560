"""The step-time model's parameters: how close real kernels come to the datasheet, and fixed costs.

Two kinds of parameter live here, and the difference matters when reading a prediction:

- **Measured** (GEMM, grouped MoE GEMM, decode and prefill attention, the cost of running a
  layer's kernels back to back): fitted on one H200 by ``benchmarks/gpu/fit_efficiency.py`` from
  the sweeps in ``benchmarks/gpu/data/`` and shipped as data in ``catalog/kernels-h200.yaml``. They
  are the defaults for every GPU. Efficiencies are fractions of the datasheet peak TFLOP/s or
  bandwidth, so on another GPU they are applied to *its* datasheet numbers ("scaled from H200 by
  specs"); latencies in µs are taken as they are (no spec to scale them by).
- **Sourced** (all-reduce): the torch sweep does not time them, so they keep published starting points:

  - ``allreduce_latency_us`` 15 / ``eff_comm`` 0.70: NCCL small-message all-reduce latency on
    NVLink is ~10-20 µs; bus bandwidth ~70% of link peak for MB-sized messages (nccl-tests).

- **Eager steps** (``--enforce-eager``: no CUDA graphs, no torch.compile): the host launches every
  layer's kernels from Python, and a step takes the longer of those launches and the kernels
  (``step_time.EAGER_OVERLAP``). ``eager_launch_us_per_layer`` (dense layer, 445 µs) and
  ``eager_moe_launch_us_per_layer`` (MoE layer, 962 µs) were fitted by ``benchmarks/gpu/fit_eager.py``
  to real vLLM 0.26.0 on one H100 (runs/2026-12-06-h100-eager); a sourced 60 µs (10-15 launches of
  ~5 µs) added to the kernels had put an eager MoE step at 9 ms where it took 45 ms. They are host
  (CPU) times: another host CPU moves them (two H100 machines differed by about 15%).

- **Fitted to a real vLLM server** (what torch's kernels cannot show: vLLM's visible per-step host
  cost, the CUDA-graph decode step, the torch.compile'd mixed prefill+decode step): fitted by
  ``benchmarks/gpu/fit_vllm_costs.py`` on end-to-end runs of vLLM 0.26.0 on an H200 and shipped as
  ``catalog/vllm-h200.yaml`` with its source runs and hold-out errors (``vllm-advisor validate``).
  ``step_overhead_ms`` and ``per_seq_overhead_us`` were sourced (2.0 ms, 10 µs from vLLM's V1 blog)
  before those runs existed.

The formulas that use the measured parameters are in :mod:`.kernels`; what each parameter means is
in its field description.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from .catalog import GpuSpec

#: libyaml's safe loader when PyYAML has it (about 10x faster on these packaged files), else PyYAML's.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The shipped calibration, next to the GPU datasheets it is scaled by.
CALIBRATION_FILE = "kernels-h200.yaml"
#: vLLM's own costs, fitted to end-to-end runs of a real server (issue 18).
ENGINE_FIT_FILE = "vllm-h200.yaml"


class HoldoutError(BaseModel):
    """Relative step-part error on points left out of the fit: |predicted / measured - 1|."""

    model_config = ConfigDict(extra="forbid")

    points: int
    median_abs_error: float
    worst_abs_error: float
    worst_point: str


class ComponentFit(BaseModel):
    """One fitted component: which kernel was timed, what was fitted, how well it predicts held-out points."""

    model_config = ConfigDict(extra="forbid")

    kernel: str
    form: str
    fit_points: int
    split: str
    values: dict[str, float]
    fit: HoldoutError
    holdout: HoldoutError
    notes: str = ""


class KernelCalibration(BaseModel):
    """The shipped calibration file: provenance, fitted components, and reference kernels."""

    model_config = ConfigDict(extra="forbid")

    gpu: str = Field(description="catalog name of the GPU the sweeps ran on")
    measured_utc: str
    fitted: str
    sources: list[str]
    script: str
    software: dict[str, str]
    bars: dict[str, float]
    components: dict[str, ComponentFit] = Field(description="what the step model uses for vLLM")
    reference: dict[str, ComponentFit] = Field(
        default_factory=dict, description="fits of kernels vLLM does not run (torch's FlashAttention-2), kept to document the gap"
    )
    notes: list[str] = Field(default_factory=list)

    def values(self) -> dict[str, float]:
        """All fitted parameters of the vLLM-facing components, by Efficiency field name."""
        out: dict[str, float] = {}
        for comp in self.components.values():
            out.update(comp.values)
        return out

    def basis(self, gpu: GpuSpec, compute_dtype: str = "bf16") -> str:
        """Where the GPU-kernel parts of a prediction come from, in one phrase."""
        if gpu.name == self.gpu and compute_dtype == "bf16":
            return f"measured on {self.gpu} (torch kernels, {self.measured_utc[:10]}; fit {self.fitted})"
        what = "FP8 peak TFLOP/s (bf16 efficiencies)" if compute_dtype == "fp8" else "peak TFLOP/s"
        return f"scaled from {self.gpu} by specs: {self.gpu}'s measured efficiencies applied to {gpu.name}'s datasheet {what} and bandwidth"


@functools.cache
def shipped_calibration() -> KernelCalibration:
    """The calibration that ships with the package (``catalog/kernels-h200.yaml``)."""
    text = resources.files(f"{__package__}.catalog").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8")
    return KernelCalibration(**yaml.load(text, Loader=_YAML_LOADER))


class EngineFit(BaseModel):
    """The shipped fit of vLLM's own costs to a real server's end-to-end runs (``catalog/vllm-h200.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    engine: str
    gpu: str
    measured_utc: str
    fitted: str
    runs: str = Field(description="folder of the source runs (benchmarks/gpu/vllm_e2e.py results)")
    fit_runs: list[str]
    moe_fit_runs: list[str] = Field(default_factory=list, description="MoE servers whose engine steps fitted the MoE kernel factors")
    holdout_runs: list[str]
    split_rule: str
    script: str
    objective: str
    values: dict[str, float]
    fit_error: dict[str, float] = Field(default_factory=dict, description="median |predicted / measured - 1| per figure, fit points")
    holdout_error: dict[str, float] = Field(default_factory=dict, description="the same on held-out points")
    notes: list[str] = Field(default_factory=list)


@functools.cache
def shipped_engine_fit() -> EngineFit:
    """vLLM's own per-step costs as fitted to real vLLM runs (``catalog/vllm-h200.yaml``)."""
    text = resources.files(f"{__package__}.catalog").joinpath(ENGINE_FIT_FILE).read_text(encoding="utf-8")
    return EngineFit(**yaml.load(text, Loader=_YAML_LOADER))


def _engine(name: str, description: str) -> Any:
    """A field whose default is fitted to a real vLLM server."""
    return Field(default_factory=lambda: shipped_engine_fit().values[name], description=description)


def _measured(name: str, description: str) -> Any:
    """A field whose default is the shipped fitted value."""
    return Field(default_factory=lambda: shipped_calibration().values()[name], description=description)


class Efficiency(BaseModel):
    """Fractions of the datasheet peak that real kernels reach, and fixed costs (see the module doc).

    The default of every measured field is the shipped H200 fit; ``Efficiency(eff_gemm=0.6)`` overrides
    one. ``calibrate`` (fit to the user's own load points) scales ``eff_mem``/``eff_attn_decode`` and
    ``eff_gemm``/``eff_attn_prefill``. Frozen: change it with ``model_copy(update=...)`` (the step
    model caches GEMM times per parameter set).
    """

    model_config = ConfigDict(frozen=True)

    # --- GEMM (cuBLAS, F.linear) ---------------------------------------------------------------
    eff_mem: float = _measured("eff_mem", "GEMM bytes (weights + activations) move at this fraction of peak bandwidth")
    eff_gemm: float = _measured("eff_gemm", "GEMM tensor-core fraction of peak at M <= gemm_knee_tokens")
    gemm_large_m_ratio: float = _measured(
        "gemm_large_m_ratio", "compute efficiency at M >= gemm_large_tokens relative to eff_gemm (long kernels run at power-limited clocks); linear in log2 M between"
    )
    gemm_knee_tokens: float = _measured("gemm_knee_tokens", "M where compute efficiency starts to fall (fixed, not fitted)")
    gemm_large_tokens: float = _measured("gemm_large_tokens", "M where it reaches eff_gemm x gemm_large_m_ratio (fixed, not fitted)")
    gemm_fill_outputs: float = _measured(
        "gemm_fill_outputs", "output elements (M x N) at which tensor cores run at half efficiency: too few output tiles leave SMs idle"
    )
    gemm_sharpness: float = _measured("gemm_sharpness", "exponent p of the smooth maximum (mem^p + compute^p)^(1/p) between the two rooflines")
    gemm_latency_us: float = _measured("gemm_latency_us", "fixed time of one GEMM kernel, µs")
    # --- grouped MoE GEMM (all experts of one layer in one kernel) -----------------------------------
    moe_eff_mem: float = _measured("moe_eff_mem", "grouped GEMM bytes at this fraction of peak bandwidth")
    moe_eff_gemm: float = _measured("moe_eff_gemm", "grouped GEMM tensor-core fraction of peak")
    moe_tile_us: float = _measured("moe_tile_us", "cost per (expert with rows x 128-column output tile), µs: the per-group set-up that dominates tiny experts")
    moe_sharpness: float = _measured("moe_sharpness", "exponent of the smooth maximum of tile cost, memory and compute time")
    moe_latency_us: float = _measured("moe_latency_us", "fixed time of one grouped GEMM call, µs")
    # --- attention -----------------------------------------------------------------------------
    eff_attn_decode: float = _measured("eff_attn_decode", "decode attention reads K/V at this fraction of peak bandwidth (enough parallel streams)")
    attn_decode_half_streams: float = _measured(
        "attn_decode_half_streams", "(requests x KV heads per GPU) at which decode attention reaches half of eff_attn_decode"
    )
    attn_decode_latency_us: float = _measured("attn_decode_latency_us", "fixed time of one decode-attention call (one per layer), µs")
    eff_attn_prefill: float = _measured("eff_attn_prefill", "prefill attention FLOPs at this fraction of peak (FA3-class kernel)")
    attn_prefill_tail_rows: float = _measured(
        "attn_prefill_tail_rows", "query rows of one head that run alone over the chunk's C keys at the end (causal imbalance), added to the FLOPs"
    )
    attn_prefill_latency_us: float = _measured("attn_prefill_latency_us", "fixed time of one prefill-attention call (one per layer), µs")
    # --- a layer's kernels back to back ---------------------------------------------------------------
    sustained_factor: float = _measured(
        "sustained_factor", "a layer's kernels run back to back take this multiple of the sum of each timed alone"
    )
    # --- sourced, not measured -------------------------------------------------------------------------
    eff_comm: float = Field(0.70, description="all-reduce bus bandwidth fraction of link peak (sourced)")
    allreduce_latency_us: float = Field(15.0, description="NCCL all-reduce latency per call, µs (sourced)")
    # --- eager steps: fitted to real vLLM 0.26.0 on an H100 (benchmarks/gpu/fit_eager.py), every release --------
    eager_launch_us_per_layer: float = Field(
        445.8, description="host time to launch a dense layer's kernels without CUDA graphs or torch.compile, µs (fitted: benchmarks/gpu/fit_eager.py)"
    )
    eager_moe_launch_us_per_layer: float = Field(
        961.8, description="host time to launch an MoE layer's kernels without CUDA graphs or torch.compile, µs (fitted: benchmarks/gpu/fit_eager.py)"
    )
    # --- fitted to a real vLLM server (catalog/vllm-h200.yaml) ----------------------------------------
    step_overhead_ms: float = _engine("step_overhead_ms", "vLLM's per-step host time not hidden behind the GPU: scheduling, input preparation, sampling (fitted)")
    per_seq_overhead_us: float = _engine("per_seq_overhead_us", "vLLM's per-step host time per scheduled request (output processing, detokenisation, streaming), µs (fitted)")
    prefill_request_overhead_ms: float = _engine(
        "prefill_request_overhead_ms", "vLLM's host time per request whose prefill starts in a step (request intake, KV allocation, first-token output), ms (fitted)"
    )
    intake_delay_ms: float = _engine(
        "intake_delay_ms",
        "time from a request's send to the moment vLLM's scheduler sees it (HTTP, API server, engine-core queue), ms (fitted); "
        "spent off the GPU, so other requests' steps run meanwhile",
    )
    decode_graph_factor: float = _engine(
        "decode_graph_factor", "a decode-only step replayed as a CUDA graph of torch.compile'd kernels takes this multiple of the kernels timed one by one (fitted)"
    )
    mixed_step_factor: float = _engine(
        "mixed_step_factor", "a step with prefill tokens (piecewise graphs, FA3 varlen) takes this multiple of the kernels timed one by one (fitted)"
    )
    moe_compute_factor: float = _engine(
        "moe_compute_factor",
        "vLLM's fused MoE kernel (routing, expert alignment, Triton grouped GEMM) takes this multiple of the grouped GEMM's compute roofline "
        "measured on torch's kernel: prefill-heavy steps of an MoE (fitted on engine steps of real MoE servers)",
    )
    moe_memory_factor: float = _engine(
        "moe_memory_factor",
        "the same for the grouped GEMM's per-tile and weight-reading terms: decode steps of an MoE (fitted on engine steps of real MoE servers)",
    )


#: Fields whose defaults are published starting points, neither measured by the torch sweep nor fitted to real vLLM.
SOURCED_FIELDS = ("eff_comm", "allreduce_latency_us")
#: What the engine fields were before the fit (sourced overheads, no graph factors): kept for vLLM
#: versions older than the one measured, or not given, whose host path and graphs may differ.
PRE_FIT_ENGINE_VALUES = {
    "step_overhead_ms": 2.0, "per_seq_overhead_us": 10.0, "prefill_request_overhead_ms": 0.0, "intake_delay_ms": 0.0, "decode_graph_factor": 1.0, "mixed_step_factor": 1.0,
    "moe_compute_factor": 1.0, "moe_memory_factor": 1.0,
}


def engine_fit_applies(vllm_version: str | None, version_assumed: bool) -> bool:
    """The fitted engine terms describe the vLLM release that was measured (and later ones, until
    measured otherwise); an older or unknown version keeps the sourced terms."""
    from .defaults import parse_version

    mine, measured = parse_version(vllm_version), parse_version(shipped_engine_fit().engine.split()[1])
    return not version_assumed and mine is not None and measured is not None and mine >= measured


def default_efficiency(vllm_version: str | None, version_assumed: bool) -> "Efficiency":
    """The shipped parameters for a deployment of this vLLM version (see :func:`engine_fit_applies`)."""
    eff = Efficiency()
    return eff if engine_fit_applies(vllm_version, version_assumed) else eff.model_copy(update=PRE_FIT_ENGINE_VALUES)


def real_vllm_error(vllm_version: str | None, version_assumed: bool) -> dict[str, Any]:
    """How far the shipped model was from a real vLLM server on runs it was not fitted to (the
    median absolute error per figure recorded in ``catalog/vllm-h200.yaml``), for estimate/memo."""
    fit = shipped_engine_fit()
    return {
        "engine": fit.engine,
        "gpu": fit.gpu,
        "runs": fit.runs,
        "holdout_runs": fit.holdout_runs,
        "median_abs_error_holdout": dict(fit.holdout_error),
        "applies": engine_fit_applies(vllm_version, version_assumed),
    }


#: Fields fitted to a real vLLM server's end-to-end runs (issue 18).
ENGINE_FIELDS = (
    "step_overhead_ms",
    "per_seq_overhead_us",
    "prefill_request_overhead_ms",
    "intake_delay_ms",
    "decode_graph_factor",
    "mixed_step_factor",
    "moe_compute_factor",
    "moe_memory_factor",
)

__all__ = [
    "CALIBRATION_FILE",
    "ENGINE_FIELDS",
    "ENGINE_FIT_FILE",
    "PRE_FIT_ENGINE_VALUES",
    "default_efficiency",
    "engine_fit_applies",
    "real_vllm_error",
    "ComponentFit",
    "Efficiency",
    "EngineFit",
    "HoldoutError",
    "KernelCalibration",
    "SOURCED_FIELDS",
    "shipped_calibration",
    "shipped_engine_fit",
]
