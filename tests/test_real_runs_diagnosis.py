"""The diagnosis of real vLLM runs handed over as a user would: benchmark file, /metrics text, server log.

Real data: the H200 vLLM 0.26.0 servers of benchmarks/gpu/runs (issue 18). One ran 64 clients of 16K-token
prompts (requests queued for KV blocks), then 128 clients of 1K, then 4 clients of 4K; another sent 8
prompts of 32K tokens at once. Each point's folder is written as a user of ``vllm bench serve`` would hand
it over (planted_artifacts.py): the point's benchmark file, the /metrics text right after it, the
server's log. Found with them: a /metrics dump saved after several benchmarks counts them all (its
averages are not one run's), a log covers every run, a server at its defaults got "likeliest cause
(8%)" instead of "this is what the model predicts", and "throughput" in a served user's question made
the run offline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vllm_advisor.diagnosis.board import Board
from vllm_advisor.diagnosis.inputs import gather
from vllm_advisor.diagnosis.measured import detect_measured

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "benchmarks" / "gpu" / "runs" / "2026-12-03-h200-vllm0.26" / "llama8b-b8192-kvfull"
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    import planted_artifacts

    out = tmp_path_factory.mktemp("points")
    results, log, snaps = planted_artifacts.load_run(RUN)
    return {p["id"]: planted_artifacts.write_point(results, p, snaps[p["id"]], log, out, planted_artifacts.QUESTION) for p in results["points"]}


def _board(folder: Path) -> tuple[Board, object]:
    inputs = gather(profile=folder / "case.yaml", predict=False)
    board = Board()
    detect_measured(inputs, board)
    return board, inputs


def _labels(board: Board, cause: str) -> set[str]:
    h = board.hypotheses.get(cause)
    return {e.label.id for e in h.evidence} if h else set()


def test_a_later_small_benchmark_is_not_read_as_queued(folders) -> None:
    # the 4-client run (12 requests) after 352 others: its dump's TTFT is 85% queue time, the run's is not
    board, inputs = _board(folders["c4-in4k"])
    notes = [n for n in inputs.skipped if n.code == "metrics_history"]
    assert len(notes) == 1 and notes[0].reason_args["done"] == 12 and notes[0].reason_args["counted"] > 300
    assert "ev.queue_share" not in _labels(board, "queueing")


def test_the_first_benchmark_keeps_its_counters(folders) -> None:
    # the first run's dump counts its 96 requests and the 3 warm-up ones: its own queue time
    board, inputs = _board(folders["c64-in16k"])
    assert not [n for n in inputs.skipped if n.code == "metrics_history"]
    assert "ev.queue_share" in _labels(board, "queueing")


def test_the_note_is_worded_in_chinese(folders, tmp_path) -> None:
    from vllm_advisor.messages import text

    line = text("zh", "input.reason.counters_span", counted=367, done=12)
    assert "367" in line and "12" in line and "queue" not in line


def test_the_server_log_is_read_while_the_benchmark_ran(folders) -> None:
    # the log holds the stats lines of all three runs; the 4-client run lasted 6 s from 22:58:50
    from vllm_advisor.probe.serverlog import parse_server_log

    whole = parse_server_log(folders["c4-in4k"] / "server.log")
    _, inputs = _board(folders["c4-in4k"])
    kept = inputs.server_logs[0].stats
    assert len(whole.stats) == 9 and 1 <= len(kept) <= 2
    assert all(s.timestamp.startswith("12-03 22:5") for s in kept) and not any(s.waiting for s in kept)
    board, _ = _board(folders["c4-in4k"])
    assert "ev.stats_waiting" not in _labels(board, "queueing")


def test_a_log_of_another_clock_is_read_whole(folders, tmp_path) -> None:
    import json
    import shutil

    folder = tmp_path / "shifted"
    shutil.copytree(folders["c64-in16k"], folder)
    bench = json.loads((folder / "bench.json").read_text())
    bench["date"] = "20261203-100000"  # the client's clock 13 hours off the server's
    (folder / "bench.json").write_text(json.dumps(bench))
    _, inputs = _board(folder)
    from vllm_advisor.probe.serverlog import parse_server_log

    assert len(inputs.server_logs[0].stats) == len(parse_server_log(folder / "server.log").stats)


def test_a_server_at_its_defaults_is_told_its_speed_is_what_the_model_predicts(folders) -> None:
    # the 4-client run: every finding weak; the measured throughput and TPOT are close to the model's
    from vllm_advisor.answer.question import question_verdict
    from vllm_advisor.diagnosis.engine import diagnose

    inputs = gather(profile=folders["c4-in4k"] / "case.yaml")
    diagnosis = diagnose(inputs, with_effects=False)
    a = diagnosis.agreement
    assert a is not None and a.load == "c=4" and abs(a.measured_tok_s / a.predicted_tok_s - 1) <= 0.25
    _, said = question_verdict(inputs.question, diagnosis)
    assert said is not None and said.id.startswith("verdict.matches_model")


def test_a_server_out_of_kv_gets_no_such_verdict(folders) -> None:
    # 64 clients of 16K-token prompts: the KV-capacity finding is likely; no "this is what the model predicts"
    from vllm_advisor.answer.question import question_verdict
    from vllm_advisor.diagnosis.engine import diagnose

    inputs = gather(profile=folders["c64-in16k"] / "case.yaml")
    diagnosis = diagnose(inputs, with_effects=False)
    assert diagnosis.findings[0].cause == "kv_capacity" and diagnosis.findings[0].confidence >= 0.5
    _, said = question_verdict(inputs.question, diagnosis)
    assert said is None or not said.id.startswith("verdict.matches_model")


def test_a_served_burst_asking_about_throughput_is_not_read_as_offline(tmp_path) -> None:
    # 8 prompts of 32K tokens sent at once to a served vLLM (budget 2,048): the word "throughput" in
    # the question made it an offline run ("chunked prefill costs offline throughput")
    import planted_artifacts

    from vllm_advisor.diagnosis.config_facts import detect_config

    results, _, _ = planted_artifacts.load_run(RUN.parent / "llama8b-b2048")
    point = next(p for p in results["points"] if p["id"] == "burst8-in32k")
    folder = planted_artifacts.write_point(results, point, None, "", tmp_path, planted_artifacts.QUESTION)
    inputs = gather(profile=folder / "case.yaml", predict=False)
    board = Board()
    detect_config(inputs, board)
    assert "throughput" in inputs.question.lower()
    assert "ev.offline_benchmark" not in _labels(board, "benchmark_methodology")
    assert [r.id for r in board.hypotheses["batched_tokens_limit"].reasons] == ["reason.batched_chunks_ttft"]


def test_one_gpu_rules_out_tensor_parallel_communication(folders, tmp_path) -> None:
    # a single-H200 server: "tensor-parallel communication" stood third at 4% in a dozen of these answers
    import yaml

    from vllm_advisor.diagnosis.engine import diagnose

    inputs = gather(profile=folders["c4-in4k"] / "case.yaml")
    assert inputs.deployment.num_gpus == 1
    assert "tp_comm" not in diagnose(inputs, with_effects=False).causes
    case = yaml.safe_load((folders["c4-in4k"] / "case.yaml").read_text())
    case["deployment"]["num_gpus"] = 2
    case["deployment"]["serve_command"] = case["deployment"]["serve_command"].replace("--tensor-parallel-size 1", "--tensor-parallel-size 2")
    for name in case["attachments"]:
        (tmp_path / name).write_bytes((folders["c4-in4k"] / name).read_bytes())
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(case))
    two = gather(profile=tmp_path / "case.yaml", predict=False)
    board = Board()
    from vllm_advisor.diagnosis.config_facts import detect_config

    detect_config(two, board)
    assert "tp_comm" not in board.excluded


def test_an_open_stream_that_fits_is_not_over_admitted(tmp_path) -> None:
    # a Poisson stream at 6 req/s of 4K-token prompts: vLLM's "maximum concurrency" at max_model_len
    # (21.9x) is below max_num_seqs=256, but the stream never has that many in flight (the simulation
    # of the measured rate ran 58 at most; 205 of this length fit): no "admits more than the KV holds"
    import planted_artifacts

    from vllm_advisor.diagnosis.config_facts import detect_config

    results, _, _ = planted_artifacts.load_run(RUN.parent / "llama8b-b8192")
    point = next(p for p in results["points"] if p["id"] == "poisson6-in4k")
    folder = planted_artifacts.write_point(results, point, None, "", tmp_path, planted_artifacts.QUESTION)
    inputs = gather(profile=folder / "case.yaml")
    board = Board()
    detect_config(inputs, board)
    assert inputs.engine.memory.max_concurrency < 256
    assert "reason.max_num_seqs_over" not in [r.id for h in board.hypotheses.values() for r in h.reasons]


def test_clients_beyond_the_kv_pool_are_over_admitted(folders) -> None:
    # 64 clients of 16K-token prompts on the shrunken KV pool (requests queued for blocks): the rule holds
    from vllm_advisor.diagnosis.config_facts import detect_config

    inputs = gather(profile=folders["c64-in16k"] / "case.yaml")
    board = Board()
    detect_config(inputs, board)
    assert [r.id for r in board.hypotheses["max_num_seqs_limit"].reasons] == ["reason.max_num_seqs_over"]


def test_vllms_own_maximum_concurrency_is_read_from_its_log(folders) -> None:
    # the same run: its server log prints "Maximum concurrency for 40,960 tokens per request: ...x";
    # the rule uses that figure, tagged as measured from the log (a model figure was tagged
    # "reported", and a log without a modelled GPU gave no figure at all)
    from vllm_advisor.diagnosis.config_facts import detect_config

    inputs = gather(profile=folders["c64-in16k"] / "case.yaml")
    logged = next(log.max_concurrency for log in inputs.server_logs if log.max_concurrency)
    board = Board()
    detect_config(inputs, board)
    figures = [e for e in board.hypotheses["max_num_seqs_limit"].evidence if e.label.id == "ev.max_concurrency"]
    assert [(e.kind, e.origin, e.value) for e in figures] == [("measured", "log", round(logged, 2))]
    inputs.server_logs = []
    board = Board()
    detect_config(inputs, board)
    figures = [e for e in board.hypotheses["max_num_seqs_limit"].evidence if e.label.id == "ev.max_concurrency"]
    assert [(e.kind, e.origin) for e in figures] == [("model", "model")]
