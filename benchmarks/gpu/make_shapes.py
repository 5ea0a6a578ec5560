"""Write ``shapes.json``: the per-GPU GEMM and attention shapes that ``measure_step_parts.py`` times.

Why a separate file: the GPU machine has PyTorch but not pydantic, so it cannot import the
catalog (``vllm_advisor.perf.catalog``). This helper runs here, in the project's venv, reads the
catalog entries and writes plain JSON that travels with the working tree; the measuring script
then needs nothing but torch and the standard library.

Per-GPU shapes at tensor-parallel size t follow vLLM's column/row-parallel split:

- ``qkv_proj``: hidden -> (heads/t + 2 * kv_heads_per_gpu) * head_dim, where
  kv_heads_per_gpu = max(1, kv_heads // t) (KV heads are replicated once t exceeds them,
  as vLLM's QKVParallelLinear does and as ``ModelSpec.kv_heads_per_gpu`` says);
- ``o_proj``: heads/t * head_dim -> hidden;
- ``gate_up`` (merged gate and up): hidden -> 2 * intermediate / t;
- ``down``: intermediate / t -> hidden;
- MoE layers: ``router`` hidden -> num_experts (replicated), and one expert's
  ``expert_gate_up`` hidden -> 2 * moe_intermediate / t and ``expert_down`` moe_intermediate / t
  -> hidden (vLLM's default for MoE under TP splits every expert's width, no expert parallelism).

Usage: .venv/bin/python benchmarks/gpu/make_shapes.py [--out benchmarks/gpu/shapes.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vllm_advisor.perf.catalog import ModelSpec, get_model

#: Models of issue 8: the dense shapes the step-time model is calibrated on, and one MoE model.
MODELS = ("Qwen2.5-32B-Instruct", "Qwen2.5-72B-Instruct", "Llama-3.1-8B-Instruct", "Llama-3.1-70B-Instruct", "Qwen3-30B-A3B")
TPS = (1, 2, 4, 8)


def _split(value: int, tp: int, what: str, model: str) -> int:
    """An exact per-GPU share; a shape that does not divide is a catalog/TP mismatch, not a rounding matter."""
    if value % tp:
        raise ValueError(f"{model}: {what}={value} does not divide by tp={tp}")
    return value // tp


def per_gpu_shapes(model: ModelSpec, tp: int) -> dict:
    """GEMMs as {name: [K, N]} (input width, output width) and attention heads on one GPU."""
    heads = _split(model.num_attention_heads, tp, "num_attention_heads", model.name)
    kv_heads = model.kv_heads_per_gpu(tp)
    d = model.head_dim
    h = model.hidden_size
    gemms: dict[str, list[int]] = {
        "qkv_proj": [h, (heads + 2 * kv_heads) * d],
        "o_proj": [heads * d, h],
    }
    if not model.is_moe or model.num_dense_layers:
        inter = _split(model.intermediate_size, tp, "intermediate_size", model.name)
        gemms["gate_up"] = [h, 2 * inter]
        gemms["down"] = [inter, h]
    if model.is_moe:
        expert = _split(model.moe_intermediate_size, tp, "moe_intermediate_size", model.name)  # type: ignore[arg-type]
        gemms["router"] = [h, model.num_experts]  # type: ignore[list-item]
        gemms["expert_gate_up"] = [h, 2 * expert]
        gemms["expert_down"] = [expert, h]
    return {"q_heads": heads, "kv_heads": kv_heads, "head_dim": d, "gemms": gemms}


def build() -> dict:
    models = {}
    for name in MODELS:
        spec = get_model(name)
        models[spec.name] = {
            "hf_id": spec.hf_id,
            "num_layers": spec.num_layers,
            "hidden_size": spec.hidden_size,
            "intermediate_size": spec.intermediate_size,
            "num_attention_heads": spec.num_attention_heads,
            "num_kv_heads": spec.num_kv_heads,
            "head_dim": spec.head_dim,
            "qkv_bias": spec.qkv_bias,
            "moe": (
                {
                    "num_experts": spec.num_experts,
                    "experts_per_token": spec.experts_per_token,
                    "moe_intermediate_size": spec.moe_intermediate_size,
                    "num_moe_layers": spec.num_moe_layers,
                }
                if spec.is_moe
                else None
            ),
            "per_gpu": {str(tp): per_gpu_shapes(spec, tp) for tp in TPS},
        }
    return {
        "generated_by": "benchmarks/gpu/make_shapes.py from vllm_advisor.perf.catalog (models.yaml)",
        "dtype": "bfloat16",
        "tps": list(TPS),
        "gemm_shape": "[K, N]: F.linear(x[M, K], W[N, K]) -> [M, N]",
        "models": models,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("shapes.json"))
    args = parser.parse_args()
    args.out.write_text(json.dumps(build(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
