"""Requests sent on a clock faster than the deployment completes them (physics._open_loop_overload).

The rule compares the offered rate with the service rate the scheduler simulation gives at the full
batch (perf/service_rate.py), and takes the measured completion rate as the check on the model. The
real benchmark files here are the controls a naive rule fails on: an open-loop run always completes
fewer requests a second than it offers (the last requests' latency stretches the duration), 74-79%
of the offered rate in these files, without any queue (TTFT p99 under 0.2 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.diagnosis.board import Board
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.diagnosis.physics import detect_physics

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real-bench" / "vllm-bench"
L40S_RATES = SHARED / "vllm-bench-automation_results_llama32-3b_l40s.jsonl"
LLAMA70B_QPS4 = SHARED / "llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"


def _overload_reasons(inputs) -> list:
    board = Board()
    detect_physics(inputs, board)
    h = board.hypotheses.get("queueing")
    return [r for r in (h.reasons if h else []) if r.id.startswith("reason.open_loop_overload")]


def _l40s_case(tmp_path: Path, num_gpus: int) -> Path:
    """The file's deployment as its PROVENANCE gives it (Llama-3.2-3B on L40S decode replicas) and
    its lengths (999 prompt tokens a request; 268 output tokens on average)."""
    case = tmp_path / "case.yaml"
    case.write_text(
        "question: Why is the request throughput lower than the request rate I set?\n"
        f"deployment: {{engine: vllm, model: meta-llama/Llama-3.2-3B-Instruct, gpu: L40S, num_gpus: {num_gpus}}}\n"
        "workload: {input_len: 999, output_len: 268}\n"
        f"attachments: [{L40S_RATES}]\n"
    )
    return case


def test_the_controls_would_fool_a_rule_on_the_completion_rate_alone():
    inputs = gather(attachments=[L40S_RATES, LLAMA70B_QPS4], predict=False)
    timed = [r for r in inputs.measured if r.offered_request_rate not in (None, float("inf"))]
    assert len(timed) == 7
    for run in timed:
        assert run.request_throughput_req_s < 0.85 * run.offered_request_rate
        assert run.ttft_ms.pct(99) < 250  # and no queue: every request started within a quarter second


@pytest.mark.parametrize("calibrate", [False, True])
@pytest.mark.parametrize("num_gpus", [1, 2, 4])
def test_a_run_that_kept_up_is_not_called_overloaded(tmp_path, num_gpus, calibrate):
    """Four replicas (the real deployment): 30 req/s is below their modelled service rate. One or
    two (a user who left the others out): the model's rate is below 30/1.25, but the server
    completed 22 req/s with TTFT p99 under 0.2 s, and the measured TPOT (or, for one replica, the
    completion rate above the modelled rate) says the model, not the server, is wrong: no evidence."""
    inputs = gather(profile=_l40s_case(tmp_path, num_gpus), calibrate=calibrate)
    assert inputs.service_rate is not None and inputs.service_rate.req_s > 0
    if num_gpus < 4:
        assert inputs.service_rate.req_s * 1.25 < 30  # the rate alone would have called it overload
    else:
        assert inputs.service_rate.req_s * 1.25 > 30
    assert _overload_reasons(inputs) == []


def test_a_light_rate_on_a_large_deployment_is_not_overload():
    inputs = gather(attachments=[LLAMA70B_QPS4], serve_cmd="vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 8", overrides={"gpu": "H100"}, calibrate=True)
    assert inputs.service_rate is not None and inputs.service_rate.req_s > 4 * 1.25
    assert _overload_reasons(inputs) == []


def test_no_service_rate_without_a_run_sent_on_a_clock():
    """Closed-loop runs (a number of clients) never need it: the simulation is not paid for."""
    seed = Path(__file__).resolve().parents[1] / "examples" / "seed-qwen32b-h800-long-input.yaml"
    inputs = gather(profile=seed)
    assert inputs.predicted and inputs.service_rate is None


def test_a_slow_service_rate_is_printed_and_offered_in_significant_figures():
    """A long-output deployment completes a request every few minutes: 0.0014 req/s is neither "0
    req/s" nor told to send 0.1 req/s (70 times more)."""
    from vllm_advisor.diagnosis.physics import _rate_below
    from vllm_advisor.messages import render

    rec = _rate_below(0.0014)
    assert rec.flag == "vllm bench serve --request-rate 0.00112"
    said = render(rec.change, "en")
    assert "0.00112 req/s" in said and "0.0014 req/s" in said and "80%" in said


@pytest.mark.parametrize("rate", [0, -5])
def test_a_rate_that_sends_nothing_is_set_aside_not_a_crash(tmp_path, rate):
    """A real file whose request_rate was edited to 0 or below: the load point is not simulated (one
    note says why) and the answer stands on the rest; it was a ZeroDivisionError and exit 70."""
    import json

    from vllm_advisor.diagnosis.engine import diagnose

    doc = json.loads(LLAMA70B_QPS4.read_text())
    doc["request_rate"] = rate
    edited = tmp_path / "bench.json"
    edited.write_text(json.dumps(doc))
    inputs = gather(attachments=[edited], serve_cmd="vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 8", overrides={"gpu": "H100"}, calibrate=True)
    assert any("a rate must be above 0" in n for n in inputs.notes)
    assert inputs.service_rate is None and diagnose(inputs, with_effects=False).findings
