"""Attached files read as a user hands them over: gzipped (probe/files.open_bytes), and /metrics dumps of one server joined.

Gzipped inputs are read as their text: the project's own run folders keep
their server logs, /metrics snapshots and results gzipped, and a reviewer attaching one got "a binary
file" for each. What a file inflates to is bounded like a plain file's size."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from vllm_advisor.errors import InputFileError
from vllm_advisor.probe.files import read_text
from vllm_advisor.probe.serverlog import parse_server_log

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "runs" / "2026-12-06-h100-overload" / "planted-8b-overload"


def test_a_gzipped_server_log_is_read():
    log = parse_server_log(RUN / "server.log.gz")
    assert log.vllm_version == "0.26.0" and log.kv_cache_tokens and log.stats


def test_a_gzipped_text_file_is_read_as_text(tmp_path):
    path = tmp_path / "case.yaml.gz"
    path.write_bytes(gzip.compress("question: why?\n".encode()))
    assert read_text(path) == "question: why?\n"


def test_what_a_file_inflates_to_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_ADVISOR_MAX_INPUT_MB", "1")
    bomb = tmp_path / "bench.json.gz"
    bomb.write_bytes(gzip.compress(b"{" + b" " * (8 * 2**20) + b"}"))  # 8 MiB of spaces in ~8 KiB
    with pytest.raises(InputFileError, match="decompresses past the 1 MiB limit"):
        read_text(bomb)
    log = tmp_path / "server.log.gz"
    log.write_bytes(gzip.compress(b"INFO 12-06 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s\n" * 400_000))
    with pytest.raises(InputFileError, match="decompresses past the 16 MiB limit"):
        parse_server_log(log)


def test_a_broken_gzip_file_is_one_line(tmp_path):
    broken = tmp_path / "server.log.gz"
    broken.write_bytes(gzip.compress(b"INFO hello\n" * 1000)[:40])
    with pytest.raises(InputFileError, match="not a readable gzip file"):
        read_text(broken)


def test_two_dumps_of_one_server_attached_one_by_one_are_one_window():
    """A reviewer's find: a /metrics dump before the benchmark and one after, attached to `ask`, were read as
    two histories since the server started (prefix hit rates 40.8% and 38.4%); `probe metrics` reads them as
    the run's window (5.5%)."""
    from vllm_advisor import Session

    dumps = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "vllm-cpu-real" / "metrics"
    both = Session(kb=False, attachments=[dumps / "A_05a_before_bench_in1024_c16.txt", dumps / "A_05b_after_bench_in1024_c16.txt"]).answer("why?").inputs
    assert [s["num_snapshots"] for s in both.metrics_summaries] == [2]
    assert round(both.metrics_summaries[0]["engines"][0]["prefix_cache_hit_rate_pct"], 1) == 5.5
    one = Session(kb=False, attachments=[dumps / "A_05a_before_bench_in1024_c16.txt"]).answer("why?").inputs
    assert [s["num_snapshots"] for s in one.metrics_summaries] == [1]


def test_dumps_of_different_servers_stay_apart():
    from vllm_advisor import Session

    real = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real-metrics"
    files = [real / "production-stack-issue617_vllm-0.10.0_glm45_excerpt.txt", real / "production-stack-issue318_vllm-v1-early2025_qwen25coder32b_excerpt.txt"]
    inputs = Session(kb=False, attachments=files).answer("why?").inputs
    assert [s["num_snapshots"] for s in inputs.metrics_summaries] == [1, 1]
