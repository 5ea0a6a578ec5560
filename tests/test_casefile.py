"""load_case / save_case / resolve_attachments on the 12 developer cases and on broken files."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

import pytest

from vllm_advisor.errors import InputFileError
from vllm_advisor.probe.casefile import case_to_yaml, load_case, resolve_attachments, save_case
from vllm_advisor.probe.serve_cmd import engine_args_for, parse_serve_command
from vllm_advisor.schema import CaseFile

DEV_CASES = sorted((Path(__file__).resolve().parents[1].parent / "shared/cases/dev").glob("*.yaml"))


def test_dev_set_is_complete() -> None:
    assert len(DEV_CASES) == 12


@pytest.mark.parametrize("path", DEV_CASES, ids=lambda p: p.stem)
def test_dev_case_loads_and_round_trips(path: Path, tmp_path: Path) -> None:
    case = load_case(path)
    assert case.source == str(path)
    assert case.question
    assert case.deployment.engine in ("vllm", "sglang")
    copy = tmp_path / path.name
    save_case(case, copy)
    again = load_case(copy)
    assert again.source == str(copy)
    assert again.model_dump() == case.model_dump()  # source is excluded from dumps
    assert case_to_yaml(again) == copy.read_text(encoding="utf-8")  # saving is stable
    if case.deployment.serve_command:
        parsed = parse_serve_command(case.deployment.serve_command)
        assert parsed.model == case.deployment.model


def test_case_6494_values() -> None:
    case = load_case(_dev("vllm-6494-ngram-spec-slower"))
    assert case.deployment.vllm_version == "0.5.0"
    assert case.deployment.gpu == "A100" and case.deployment.num_gpus == 1
    baseline, spec = case.observations
    assert baseline.ttft_ms.mean == pytest.approx(62.98)
    assert baseline.tpot_ms.mean == pytest.approx(14.46)
    assert baseline.e2e_ms.mean == pytest.approx(1567)
    assert spec.tpot_ms.mean == pytest.approx(21.71)
    args = engine_args_for(case.deployment)
    assert args.gpu_memory_utilization == 0.5
    assert args.enable_prefix_caching is True
    assert args.speculative_config["num_speculative_tokens"] == 8


def test_case_club3090_and_miaai_values() -> None:
    club = load_case(_dev("club3090-356-tp2-no-p2p"))
    assert club.deployment.flags["NCCL_P2P_DISABLE"] == 1
    assert club.deployment.interconnect == "pcie"
    assert [o.output_tok_s_per_request for o in club.observations] == [50, 60]
    miaai = load_case(_dev("miaai-122-hybrid-kv-fixed-cost"))
    assert miaai.deployment.flags["speculative_config"] == "DFlash2 draft, k=7, draft TP2"
    assert miaai.observations[0].kv_cache_usage_pct == pytest.approx(25.5)
    assert miaai.observations[1].preemptions == 165
    sglang = load_case(_dev("sglang-922-16k-ttft-a6000"))
    assert sglang.deployment.engine == "sglang"
    assert sglang.workload.input_len == 16000
    assert sglang.observations[0].ttft_ms.mean == 15000


def _dev(case_id: str) -> Path:
    (path,) = [p for p in DEV_CASES if p.stem == case_id]
    return path


# --- saving ----------------------------------------------------------------------------------


def test_save_keeps_format_order_unicode_and_inf(tmp_path: Path) -> None:
    case = CaseFile.model_validate(
        {
            "attachments": ["bench.json"],
            "observations": [{"notes": "首字延迟很高", "ttft_ms": {"p99": 900.5, "mean": 300}}],
            "question": "为什么首字延迟这么高？",
            "workload": {"request_rate": math.inf, "input_len": 63000},
            "deployment": {"flags": {"kv_transfer_config": {"kv_role": "kv_both"}, "x": None}, "engine": "vllm"},
        }
    )
    path = tmp_path / "case.yaml"
    save_case(case, path)
    text = path.read_text(encoding="utf-8")
    assert "为什么首字延迟这么高" in text  # allow_unicode, not \u escapes
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith((" ", "-"))]
    assert keys == ["question", "deployment", "workload", "observations", "attachments"]
    assert text.index("mean:") < text.index("p99:")
    assert text.index("input_len:") < text.index("request_rate:")
    again = load_case(path)
    assert again.workload.request_rate == math.inf
    assert again.deployment.flags == {"kv_transfer_config": {"kv_role": "kv_both"}, "x": None}
    assert again.model_dump() == case.model_dump()


def test_save_is_atomic_and_keeps_permissions(tmp_path: Path) -> None:
    path = tmp_path / "case.yaml"
    path.write_text("question: old\n", encoding="utf-8")
    os.chmod(path, 0o640)
    save_case(CaseFile(question="new"), path)
    assert load_case(path).question == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.yaml"]  # no temp file left behind
    with pytest.raises(InputFileError, match="directory does not exist"):
        save_case(CaseFile(), tmp_path / "missing" / "case.yaml")


# --- attachments -----------------------------------------------------------------------------


def test_resolve_attachments(tmp_path: Path, fixtures_dir: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "bench.json").write_text("{}", encoding="utf-8")
    server_log = fixtures_dir / "real-logs/guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"
    case_path = tmp_path / "case.yaml"
    case_path.write_text(f"attachments:\n- runs/bench.json\n- {server_log}\n", encoding="utf-8")
    case = load_case(case_path)
    assert resolve_attachments(case) == [tmp_path / "runs" / "bench.json", server_log]

    case_path.write_text("attachments:\n- runs/bench.json\n- runs/missing.log\n", encoding="utf-8")
    with pytest.raises(InputFileError) as err:
        resolve_attachments(load_case(case_path))
    assert str(err.value).startswith(f"{case_path}: field 'attachments[1]': attachment 'runs/missing.log' not found")
    assert resolve_attachments(load_case(case_path), must_exist=False)[1] == tmp_path / "runs" / "missing.log"


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "file is empty"),
        (b"\x00\x01\x02\x03" * 300, "is a binary file"),
        (b"# only a comment\n", "holds no YAML data"),
        (b"question: 'unclosed\nworkload: {}\n", "YAML syntax error at line"),
        (b"deployment:\n  gpu: H100\n   num_gpus: 2\n", "YAML syntax error at line 3"),
        (b"- question: a\n- question: b\n", "expected a mapping of case fields (question:, deployment:, ...) at the top level, got a list"),
        (b"42\n", "at the top level, got a int"),
        (
            b"observations:\n- concurrency: 1\n- ttft_ms: {mean: fast}\n",
            "field 'observations[1].ttft_ms.mean': expected a number, got 'fast'",
        ),
        (b"observations:\n- concurrency: 1.5\n", "field 'observations[0].concurrency': expected a whole number, got 1.5"),
        (b"deployment:\n  vllm_version: 0.10\n", "field 'deployment.vllm_version': expected text, got 0.1 (put it in quotes"),
        (b"observations: {concurrency: 1}\n", "field 'observations': expected a list"),
        (
            b"question: q\nobservation:\n- concurrency: 1\n",
            "field 'observation': unknown key (allowed here: question, deployment, workload, observations, attachments, report)",
        ),
        (b"workload:\n  prompt_len: 100\n", "field 'workload.prompt_len': unknown key (allowed here: input_len, output_len"),
        (
            b"observations:\n- ttft_ms: {mean: x}\n  tpot_ms: {mean: y}\n",
            "expected a number, got 'x' (and 1 more problem)",
        ),
        (
            b"deployment:\n  serve_command: vllm serve m --max-num-seqs abc\n",
            "field 'deployment.serve_command': flag --max-num-seqs: expected an integer, got 'abc'",
        ),
        (b"deployment:\n  flags: {max_num_seqs: lots}\n", "field 'deployment.flags': flag --max-num-seqs: expected an integer"),
    ],
)
def test_bad_case_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "case.yaml"
    path.write_bytes(content)
    with pytest.raises(InputFileError) as err:
        load_case(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ")
    assert message in text
    assert "\n" not in text


def test_missing_case_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        load_case(tmp_path / "nope.yaml")


def test_null_blocks_mean_unknown(tmp_path: Path) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(
        "question: q\ndeployment:\n  engine: vllm\n  gpu: null\n  flags: null\nworkload: null\n"
        "observations:\n- concurrency: 4\n  ttft_ms: null\n  tpot_ms: {mean: 12.5, p99: null}\nattachments: null\n",
        encoding="utf-8",
    )
    case = load_case(path)
    assert case.deployment.flags == {} and case.workload.input_len is None and case.attachments == []
    assert case.observations[0].ttft_ms is None
    assert case.observations[0].tpot_ms.mean == 12.5 and case.observations[0].tpot_ms.p99 is None
    save_case(case, path)
    assert "null" not in path.read_text(encoding="utf-8")
    assert load_case(path).model_dump() == case.model_dump()


def test_a_case_file_over_its_limit_is_one_error_line(tmp_path: Path, monkeypatch) -> None:
    """A case file is kilobytes; 4 MB of load points took 14 s and 700 MB in ask before the limit."""
    monkeypatch.delenv("VLLM_ADVISOR_MAX_INPUT_MB", raising=False)
    path = tmp_path / "huge.yaml"
    path.write_text('question: "q"\nobservations:\n' + "".join(f"  - concurrency: {i + 1}\n" for i in range(60_000)))
    with pytest.raises(InputFileError) as exc:
        load_case(path)
    assert exc.value.reason == "too_large" and "huge.yaml" in exc.value.one_line()
    monkeypatch.setenv("VLLM_ADVISOR_MAX_INPUT_MB", "10")  # the user's own limit still decides
    assert len(load_case(path).observations) == 60_000


def test_only_the_first_load_points_of_a_long_sweep_are_read(tmp_path: Path) -> None:
    from vllm_advisor.diagnosis.inputs import MAX_OBSERVATIONS, gather

    path = tmp_path / "sweep.yaml"
    path.write_text('question: "why?"\nobservations:\n' + "".join(f"  - concurrency: {i + 1}\n    ttft_ms: {{mean: 100}}\n" for i in range(MAX_OBSERVATIONS + 40)))
    inputs = gather(profile=path, predict=False)
    assert len(inputs.case.observations) == MAX_OBSERVATIONS
    (note,) = [n for n in inputs.skipped if n.field == "observations"]
    assert note.reason == "observations_cut" and note.reason_args["count"] == MAX_OBSERVATIONS + 40
