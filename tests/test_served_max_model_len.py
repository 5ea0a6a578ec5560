"""A deployment that served its requests although the model's default max_model_len cannot fit the
KV cache: the model assumes the length the cache holds. That length is the advisor's assumption, not
the user's setting: its provenance is "derived" (the memo's table says so), and a note says why in
the reader's language (before, the rebuilt engine marked it as the user's own --max-model-len)."""

from __future__ import annotations

from pathlib import Path

from vllm_advisor.diagnosis.engine import diagnose
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.messages import render

CASE = Path(__file__).resolve().parents[1] / "knowledge" / "cases" / "devto-multitenant-prefix-cache-templating.yaml"


def test_the_length_a_served_deployment_must_have_had_is_derived_not_the_users():
    inputs = gather(profile=CASE)
    engine = inputs.engine
    assert inputs.served and engine is not None and engine.memory.fits
    assert engine.config.max_model_len < engine.model.max_position_embeddings
    assert engine.config.source_of("max_model_len") == "derived"
    assert engine.config.source_of("tensor_parallel_size") != "derived"  # only what was filled in is derived
    notes = {n.id: n for n in diagnose(inputs).notes}
    assert "note.max_model_len_served" in notes and "note.max_model_len_assumed" not in notes
    zh = render(notes["note.max_model_len_served"], "zh")
    assert "--max-model-len" in zh and "服务" in zh
