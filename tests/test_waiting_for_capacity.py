"""vLLM's count of requests waiting for scheduling capacity (`vllm:num_requests_waiting_by_reason`,
reason "capacity") is KV-capacity evidence measured directly: the sampled KV usage can miss its peaks
(a real-vLLM run under KV pressure showed 7 requests waiting for capacity while every sample read 0%)."""

from __future__ import annotations

from vllm_advisor.diagnosis.board import Board
from vllm_advisor.diagnosis.inputs import DiagnosisInputs, gather
from vllm_advisor.diagnosis.measured import _metrics
from vllm_advisor.schema import EngineArgs

METRIC = 'vllm:num_requests_waiting_by_reason{reason="capacity"}'


def _engine(running: float, preemptions: float, kv_max: float) -> dict:
    gauge = lambda top: {"min": 0.0, "mean": top / 2, "max": top, "last": 0.0}  # noqa: E731
    return {"engine": "0", "kv_cache_usage_pct": gauge(kv_max), "requests_running": gauge(running), "requests_waiting": gauge(7.0),
            "requests_waiting_for_capacity": gauge(7.0), "preemptions": preemptions}


def _kv_evidence(running: float, max_num_seqs: int | None, preemptions: float = 9.0, kv_max: float = 0.0) -> list:
    inputs = DiagnosisInputs()
    inputs.engine_args = EngineArgs(max_num_seqs=max_num_seqs)
    inputs.metrics_summaries.append({"engines": [_engine(running, preemptions, kv_max)]})
    board = Board()
    _metrics(inputs, board)
    h = board.hypotheses.get("kv_capacity")
    return [e for e in (h.evidence if h else []) if e.label.args.get("metric") == METRIC]


def test_requests_waiting_for_capacity_are_kv_evidence_though_the_samples_read_0_percent():
    assert _kv_evidence(running=0.0, max_num_seqs=None)


def test_not_when_they_wait_for_the_token_budget():
    """Long prompts with the cache under half full also wait "for capacity" (the step's token budget,
    seen in a real-vLLM run): without preemptions or a full cache that is no KV evidence."""
    assert not _kv_evidence(running=8.0, max_num_seqs=None, preemptions=0.0, kv_max=40.0)
    assert _kv_evidence(running=8.0, max_num_seqs=None, preemptions=0.0, kv_max=95.0)


def test_not_when_the_running_requests_fill_max_num_seqs():
    assert not _kv_evidence(running=8.0, max_num_seqs=8)  # then max_num_seqs is the capacity they wait for
    assert _kv_evidence(running=2.0, max_num_seqs=8)


def test_a_real_metrics_dump_under_kv_pressure(fixtures_dir):
    inputs = gather(question="why is TTFT high?", metrics=[str(fixtures_dir / "vllm-cpu-real" / "metrics" / "E_01_during_bench_in6000_c8_kv-pressure.txt")])
    from vllm_advisor.diagnosis.engine import diagnose

    findings = diagnose(inputs).findings
    assert findings[0].cause == "kv_capacity"
    assert any(e.label.args.get("metric") == METRIC for e in findings[0].evidence)


# -- the same call from a report's own running and waiting counts (observations) -------------------
from vllm_advisor.diagnosis.measured import _observations  # noqa: E402
from vllm_advisor.schema.case import CaseFile, Observation  # noqa: E402

LIBRARY = __import__("pathlib").Path(__file__).resolve().parents[1] / "knowledge" / "cases"


def _observed(path) -> Board:
    board = Board()
    _observations(gather(profile=path), board)
    return board


def _running_evidence(board: Board, cause: str) -> list:
    h = board.hypotheses.get(cause)
    return [e for e in (h.evidence if h else []) if e.label.id == "ev.running"]


def test_a_report_running_fewer_than_its_batch_cap_while_others_wait_points_at_the_kv_cache():
    """KTransformers with max_batch_size 6 ran 3 and kept 3 waiting (the thread: its cache held 3)."""
    board = _observed(LIBRARY / "ktransformers-1314-max-batch-6-only-3-running.yaml")
    assert _running_evidence(board, "kv_capacity")
    assert not _running_evidence(board, "max_num_seqs_limit")


def test_a_report_running_at_its_max_num_seqs_while_others_wait_points_at_the_cap():
    board = _observed(LIBRARY / "eugr-spark-360-agent-fleet-queued-prefix-evicted.yaml")  # max_num_seqs 8, 8 running, 4 waiting
    assert _running_evidence(board, "max_num_seqs_limit")
    assert not _running_evidence(board, "kv_capacity")


def _vllm_inputs(running: float, waiting: float, *, input_len: int | None = None, output_len: int | None = None, max_num_seqs: int | None = None) -> DiagnosisInputs:
    inputs = DiagnosisInputs()
    inputs.engine_args = EngineArgs(max_num_seqs=max_num_seqs)
    inputs.input_len, inputs.output_len = input_len, output_len
    inputs.case = CaseFile(observations=[Observation(concurrency=int(running + waiting), num_requests_running=running, num_requests_waiting=waiting)])
    return inputs


def test_vllm_defaults_are_read_as_every_value_a_release_may_default_to():
    """The model or GPU unknown: 256 or 1024 by release. Below both the KV cache; at one of them the
    cap; between them nothing."""
    for running, cause in ((40.0, "kv_capacity"), (256.0, "max_num_seqs_limit"), (1024.0, "max_num_seqs_limit"), (300.0, None)):
        board = Board()
        _observations(_vllm_inputs(running, 10.0), board)
        found = [c for c in ("kv_capacity", "max_num_seqs_limit") if _running_evidence(board, c)]
        assert found == ([cause] if cause else []), running


def test_long_prompts_beside_the_token_budget_explain_the_wait_without_the_kv_cache():
    board = Board()
    _observations(_vllm_inputs(8.0, 7.0, input_len=6000), board)  # 6,000-token prompts, 2,048-token budget
    assert not _running_evidence(board, "kv_capacity")
    board = Board()
    _observations(_vllm_inputs(8.0, 7.0, input_len=300), board)
    assert _running_evidence(board, "kv_capacity")


def test_long_prompts_explain_only_as_many_running_as_the_budget_admits():
    """Little's law: one 8,000-token prompt per four 2,048-token steps, each then running 500 decode
    steps, keeps about 129 requests running. 4 running with 26 waiting is not the budget: the KV
    cache (a reviewer's case: --gpu-memory-utilization 0.5). With 20-token answers about 6 run, and
    4 is the budget's."""
    board = Board()
    _observations(_vllm_inputs(4.0, 26.0, input_len=8000, output_len=500), board)
    assert _running_evidence(board, "kv_capacity")
    board = Board()
    _observations(_vllm_inputs(4.0, 26.0, input_len=8000, output_len=20), board)
    assert not _running_evidence(board, "kv_capacity")


def test_a_served_max_model_len_a_little_above_the_modelled_cache_is_modelled_as_fitting(tmp_path):
    """A reviewer's case: Llama-3.1-8B on an L4 at --max-model-len 36000, measured at 1 and 16 clients.
    The model's cache came to 35,712 tokens, under one request of 36,000, so nothing was predicted
    (the memo printed a dash for every figure). The server ran, so it had room for one: the cache is
    taken to be that, for the deployment and its what-ifs, and the short answer says so."""
    import yaml as _yaml

    from vllm_advisor.answer import attach_sources, write_answer
    from vllm_advisor.diagnosis.engine import diagnose
    from vllm_advisor.diagnosis.inputs import gather

    case = {"question": "Llama-3.1-8B on one L4, 32K-token prompts, 16 clients: TTFT is 40-60 s. Why?",
            "deployment": {"engine": "vllm", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "L4", "num_gpus": 1,
                           "serve_command": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 36000"},
            "workload": {"input_len": 32000, "output_len": 300},
            "observations": [{"concurrency": 1, "ttft_ms": {"mean": 9000}}, {"concurrency": 16, "ttft_ms": {"mean": 48000}}]}
    path = tmp_path / "case.yaml"
    path.write_text(_yaml.safe_dump(case))
    inputs = gather(profile=path)
    assert inputs.served_near_fit == (35_712, 36_000)
    assert inputs.engine.memory.fits and inputs.engine.memory.kv_cache_tokens >= 36_000
    assert len(inputs.predicted) == 2
    diagnosis = diagnose(inputs)
    attach_sources(diagnosis, inputs, kb=False)
    md = write_answer(inputs, diagnosis, short=True).markdown
    assert "taken to hold one request of 36,000 tokens" in md
    assert "not modelled for this deployment" not in md  # the what-ifs start from the same cache
