"""Bad benchmark files give exactly one clear line (an AdvisorError subclass) naming the file and,
where there is one, the field."""

from __future__ import annotations

import json
import pathlib
import time
from pathlib import Path

import pytest

from vllm_advisor.errors import AdvisorError, InputFileError, UnknownFormatError
from vllm_advisor.probe.bench import FORMATS, detect_format, load_runs

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REAL_VLLM = SHARED / "fixtures/real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json"
REAL_GUIDELLM = SHARED / "fixtures/real-bench/guidellm/guidellm-bench_qwen3-4b-thinking_tp4_fp8_concurrent4_benchmarks.json"


def _error(path: Path, kind: type[AdvisorError] = InputFileError) -> str:
    with pytest.raises(AdvisorError) as caught:
        load_runs(path)
    assert isinstance(caught.value, kind), type(caught.value)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


def _vllm_with(tmp_path: Path, **changes) -> Path:
    data = json.loads(REAL_VLLM.read_text())
    data.update(changes)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_truncated_json(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(REAL_VLLM.read_text()[:50_000], encoding="utf-8")
    message = _error(path)
    assert "not valid JSON" in message and "truncated" in message and "line 1 column" in message


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    assert "file is empty" in _error(path)


def test_whitespace_only_file(tmp_path):
    path = tmp_path / "blank.json"
    path.write_text("\n   \n", encoding="utf-8")
    assert "only whitespace" in _error(path)


def test_missing_file(tmp_path):
    assert "no such file" in _error(tmp_path / "nope.json")


def test_duration_of_the_wrong_type(tmp_path):
    message = _error(_vllm_with(tmp_path, duration="abc"))
    assert "field 'duration': expected a number, got the string 'abc'" in message


def test_ttfts_not_a_list(tmp_path):
    message = _error(_vllm_with(tmp_path, ttfts="0.1,0.2"))
    assert "field 'ttfts': expected a list, got the string" in message


def test_ttfts_with_a_bad_element(tmp_path):
    ttfts = json.loads(REAL_VLLM.read_text())["ttfts"]
    ttfts[7] = "slow"
    assert "field 'ttfts': expected numbers, element 7 is the string 'slow'" in _error(_vllm_with(tmp_path, ttfts=ttfts))
    ttfts[7] = None
    assert "field 'ttfts': expected numbers, element 7 is null" in _error(_vllm_with(tmp_path, ttfts=ttfts))


def test_itls_with_bad_entries(tmp_path):
    itls = json.loads(REAL_VLLM.read_text())["itls"]
    broken = list(itls)
    broken[3] = 0.02
    assert "field 'itls': expected a list of lists, element 3 is float" in _error(_vllm_with(tmp_path, itls=broken))
    broken = [list(x) for x in itls]
    broken[5][2] = "x"
    assert "field 'itls': expected numbers, element [5][2] is the string 'x'" in _error(_vllm_with(tmp_path, itls=broken))


def test_arrays_of_different_lengths(tmp_path):
    output_lens = json.loads(REAL_VLLM.read_text())["output_lens"][:-1]
    message = _error(_vllm_with(tmp_path, output_lens=output_lens))
    assert "field 'output_lens': has 199 entries but 'ttfts' has 200" in message


def test_nested_field_of_the_wrong_type_is_named(tmp_path):
    data = json.loads(REAL_GUIDELLM.read_text())
    data["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["mean"] = [1, 2]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    message = _error(path)
    assert "field 'benchmarks[0].metrics.time_to_first_token_ms.successful.mean': expected a number" in message


def test_binary_file(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    assert "binary file" in _error(path)


def test_file_over_the_size_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_ADVISOR_MAX_INPUT_MB", "0.5")
    message = _error(REAL_VLLM)
    assert "over the 0.5 MiB limit" in message and "VLLM_ADVISOR_MAX_INPUT_MB" in message


def test_huge_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.write(b'{"duration": 1, "completed": 1, "ttfts": [')
        fh.truncate(500 * 1024 * 1024)  # sparse: 500 MB on paper, nothing on disk
    monkeypatch.delenv("VLLM_ADVISOR_MAX_INPUT_MB", raising=False)

    def no_reading(*args, **kwargs):
        raise AssertionError("the file was read")

    monkeypatch.setattr(pathlib.Path, "read_bytes", no_reading)
    monkeypatch.setattr(pathlib.Path, "read_text", no_reading)
    start = time.perf_counter()
    message = _error(path)
    assert time.perf_counter() - start < 1.0
    assert "file is 500 MiB, over the 400 MiB limit" in message


def test_unknown_json_shape_lists_every_format_tried(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"accuracy": 0.91, "model": "x"}), encoding="utf-8")
    message = _error(path, UnknownFormatError)
    assert "not a known benchmark result (json); tried:" in message
    for fmt in FORMATS:
        assert f"{fmt.id} (" in message
    assert "no 'duration'/'completed' keys" in message and "no 'benchmarks' list" in message
    with pytest.raises(UnknownFormatError):
        detect_format(path)


@pytest.mark.parametrize(
    "name, text, syntax",
    [
        ("notes.txt", "the server felt slow yesterday\n", "text"),
        ("conf.yaml", "model: x\nmax_num_seqs: 8\n", "yaml"),
        ("table.csv", "a,b\n1,2\n", "csv"),
        ("list.json", "[1, 2, 3]", "json"),
    ],
)
def test_other_unknown_files(tmp_path, name, text, syntax):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    message = _error(path, UnknownFormatError)
    assert f"({syntax}); tried: vllm-advisor-bench (" in message and "; vllm-bench (" in message and "observations (" in message


def test_json_lines_with_a_broken_line(tmp_path):
    good = json.dumps({"duration": 1.0, "completed": 1})
    path = tmp_path / "runs.jsonl"
    path.write_text(good + "\n" + good + "\n" + good[:20] + "\n", encoding="utf-8")
    message = _error(path)
    assert "JSON Lines: line 3 is not valid JSON" in message and "truncated" in message


def test_one_bad_run_in_json_lines_is_located(tmp_path):
    lines = [json.dumps({"duration": 1.0, "completed": 1}), json.dumps({"duration": "x", "completed": 1})]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "(run 2 of 2): field 'duration'" in _error(path)


def test_genai_perf_metric_with_an_impossible_unit(tmp_path):
    data = json.loads((SHARED / "fixtures/real-bench/genai-perf/k8s-dev_vllm_gpt-oss-20b_c1_profile_export_genai_perf.json").read_text())
    data["request_latency"]["unit"] = "tokens"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert "field 'request_latency': unit 'tokens' cannot be read as ms" in _error(path)
