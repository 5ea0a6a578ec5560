"""Hand-measured load points: Observation objects, case files (real ones from ../shared/cases/dev)
and CSV files with the same columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.errors import InputFileError
from vllm_advisor.probe.bench import detect_format, load_runs, observations_to_runs
from vllm_advisor.schema import LatencyFigures, Observation

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CASES = SHARED / "cases" / "dev"


def test_observation_becomes_a_run():
    obs = Observation(
        concurrency=8,
        output_tok_s_per_request=40.0,
        output_tok_s_total=310.0,
        ttft_ms=LatencyFigures(mean=900.0, p50=850.0, p99=2400.0),
        tpot_ms=LatencyFigures(p99=45.0),
        kv_cache_usage_pct=93.5,
        num_requests_waiting=7,
        preemptions=31,
        prefix_cache_hit_rate=0.4,
        gpu_util_pct=99.0,
        notes="tok/s = tokens / wall time",
    )
    (run,) = observations_to_runs([obs], "case.yaml")
    assert run.format == "observations" and run.source == "case.yaml" and run.index == 0
    assert run.offered_concurrency == 8 and run.offered_request_rate is None
    assert run.output_throughput_tok_s == 310.0
    assert run.request_output_tok_s.mean == 40.0 and run.request_output_tok_s.median is None
    assert any("formula is unknown" in note for note in run.notes)
    assert run.ttft_ms.mean == 900.0 and run.ttft_ms.median == 850.0 and run.ttft_ms.pct(99) == 2400.0
    assert run.tpot_ms.mean is None and run.tpot_ms.pct(99) == 45.0
    assert run.itl_ms is None and run.e2e_ms is None
    assert run.metadata == {
        "server_kv_cache_usage_pct": 93.5,
        "server_num_requests_waiting": 7.0,
        "server_preemptions": 31.0,
        "server_prefix_cache_hit_rate": 0.4,
        "server_gpu_util_pct": 99.0,
        "user_notes": "tok/s = tokens / wall time",
    }
    assert run.completed is None and run.duration_s is None  # nothing invented


def test_real_case_file_observations():
    path = CASES / "vllm-6494-ngram-spec-slower.yaml"
    assert detect_format(path) == "observations"
    runs = load_runs(path)
    assert [r.ttft_ms.mean for r in runs] == [62.98, 66.48]
    assert [r.tpot_ms.mean for r in runs] == [14.46, 21.71]
    assert [r.e2e_ms.mean for r in runs] == [1567, 1360]
    assert "485.5 tok/s" in runs[0].metadata["user_notes"]


def test_real_case_file_per_request_speed():
    runs = load_runs(CASES / "club3090-356-tp2-no-p2p.yaml")
    assert [r.request_output_tok_s.mean for r in runs] == [50, 60]
    assert all(r.offered_concurrency == 1 for r in runs)
    assert all(any("formula is unknown" in n for n in r.notes) for r in runs)


def test_case_file_errors_come_from_the_case_loader(tmp_path):
    path = tmp_path / "case.yaml"
    path.write_text("observations:\n  - concurrency: lots\n", encoding="utf-8")
    with pytest.raises(InputFileError) as err:
        load_runs(path)
    assert "observations[0].concurrency" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("sep", [".", "_"])
def test_csv_observations_with_both_column_spellings(tmp_path, sep):
    path = tmp_path / "measured.csv"
    path.write_text(
        f"concurrency,request_rate,output_tok_s_total,ttft_ms{sep}p50,ttft_ms{sep}p99,tpot_ms{sep}mean,"
        "kv_cache_usage_pct,notes\n"
        "1,,45.5,120,180,21.9,3.1,warm cache\n"
        "16,,610,900,2400,26.4,88,\n"
        "32,,700,,,,,42\n",
        encoding="utf-8",
    )
    assert detect_format(path) == "observations"
    runs = load_runs(path)
    assert [r.offered_concurrency for r in runs] == [1, 16, 32]
    assert [r.output_throughput_tok_s for r in runs] == [45.5, 610, 700]
    assert [r.ttft_ms.median for r in runs[:2]] == [120, 900]
    assert [r.ttft_ms.pct(99) for r in runs[:2]] == [180, 2400]
    assert [r.tpot_ms.mean for r in runs[:2]] == [21.9, 26.4]
    assert runs[2].ttft_ms is None and runs[2].tpot_ms is None  # empty cells stay unknown
    assert runs[2].metadata["user_notes"] == "42"
    assert runs[0].metadata["server_kv_cache_usage_pct"] == 3.1
    assert runs[0].metadata["user_notes"] == "warm cache" and "user_notes" not in runs[1].metadata
    assert all(r.offered_request_rate is None for r in runs)


def test_csv_unknown_column_is_named(tmp_path):
    path = tmp_path / "measured.csv"
    path.write_text("concurrency,ttft_p50\n1,100\n", encoding="utf-8")
    with pytest.raises(InputFileError) as err:
        load_runs(path)
    assert "column 'ttft_p50' is not an observation field" in str(err.value)


def test_csv_bad_value_names_row_and_field(tmp_path):
    path = tmp_path / "measured.csv"
    path.write_text("concurrency,ttft_ms.p50\n1,100\n2,fast\n", encoding="utf-8")
    with pytest.raises(InputFileError) as err:
        load_runs(path)
    message = str(err.value)
    assert "row 3" in message and "ttft_ms.p50" in message and "'fast'" in message and "\n" not in message
