"""Several GPUs and no parallelism given: weights that cannot fit on one GPU ran sharded. The model
assumes the smallest tensor-parallel size that holds them and says so, instead of N replicas of TP 1
with 0 KV tokens each (Qwen2.5-32B, 61 GiB in BF16, on 2 x A100-40GB)."""

from __future__ import annotations

from pathlib import Path

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather

CASES = Path(__file__).resolve().parents[1] / "knowledge" / "cases"
TWO_A100_40 = CASES / "vllm-9452-multi-lora-slower-newer-versions.yaml"


def test_two_gpus_without_tp_are_one_tp2_engine_when_the_weights_need_both():
    inputs = gather(profile=TWO_A100_40)
    engine = inputs.engine
    assert engine is not None and engine.num_gpus == 2
    assert engine.config.tensor_parallel_size == 2 and engine.config.source_of("tensor_parallel_size") == "derived"
    assert engine.replicas == 1 and engine.memory.kv_cache_tokens > 0
    notes = {n.id: n for n in diagnose(inputs).notes}
    assert "note.tp_assumed" in notes and "note.served_but_does_not_fit" not in notes


def test_a_tp_the_user_gave_is_never_changed():
    inputs = gather(profile=TWO_A100_40)
    inputs.engine_args = inputs.engine_args.model_copy(update={"tensor_parallel_size": 1})
    from vllm_advisor.diagnosis.inputs import _model

    _model(inputs, calibrate=False)
    assert inputs.engine.config.tensor_parallel_size == 1 and not inputs.engine.memory.fits


def test_the_changes_are_costed_from_the_assumed_tp(tmp_path):
    # the what-ifs of the advice start from the deployment as modelled: TP 2 for a 70B on 2 x A100-80GB
    # with no TP given (from the user's own arguments, TP 1 does not fit, and every change read "not modelled")
    import yaml

    case = {
        "question": "Throughput at 32 clients is lower than I hoped. What should I change?",
        "deployment": {"engine": "vllm", "vllm_version": "0.26.0", "model": "Llama-3.1-70B-Instruct", "gpu": "A100-80GB", "num_gpus": 2,
                       "serve_command": "vllm serve meta-llama/Llama-3.1-70B-Instruct --max-model-len 8192"},
        "workload": {"input_len": 4000, "output_len": 500, "concurrency": [32]},
    }
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    inputs = gather(profile=path)
    assert inputs.engine.config.tensor_parallel_size == 2 and inputs.engine_args.tensor_parallel_size is None
    effects = [r.predicted_effect for f in diagnose(inputs).findings[:3] for r in f.recommendations if r.whatif]  # the first three are costed
    assert effects and all(e is not None and e.id == "effect.model" for e in effects)
