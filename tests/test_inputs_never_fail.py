"""Issue 15 §1: one input that cannot be used never costs the whole answer.

The case library (knowledge/cases/, filled by other helpers while this test exists), the dev cases
and the repository's examples are globbed when the test runs: every one must give an answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from vllm_advisor.cli.main import cli
from vllm_advisor.diagnosis.inputs import gather

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CASE_FOLDERS = [SHARED / "cases" / "dev", REPO / "examples", REPO / "knowledge" / "cases"]
CASES = sorted(p for folder in CASE_FOLDERS if folder.is_dir() for p in folder.glob("*.yaml"))
DEV = SHARED / "cases" / "dev"


def _ask(*args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(cli, ["ask", *args, "--json", "--no-log"])
    out = result.stdout
    data = json.loads(out) if result.exit_code == 0 else {}
    return result.exit_code, data, result.stderr if hasattr(result, "stderr") else result.output


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_case_file_gets_an_answer(case: Path, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_ADVISOR_HOME", str(tmp_path))
    code, data, err = _ask("--profile", str(case))
    assert code == 0, err
    assert data["answer"].strip()


def test_case_folders_are_found() -> None:
    assert len([c for c in CASES if c.parent == DEV]) >= 12


def _write_case(tmp_path: Path, source: Path, edit) -> Path:
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / source.name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_foreign_serve_command_in_a_case_is_mapped(tmp_path) -> None:
    def edit(d):
        d["deployment"]["serve_command"] = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct "
                                            "--quantization awq --chunked-prefill-size 2048 --mem-fraction-static 0.9 --enable-mixed-chunk")
    case = _write_case(tmp_path, DEV / "sglang-922-16k-ttft-a6000.yaml", edit)
    inputs = gather(profile=case)
    assert inputs.deployment.engine == "sglang"
    assert inputs.engine_args.max_num_batched_tokens == 2048 and inputs.engine_args.gpu_memory_utilization == 0.9
    note = next(n for n in inputs.skipped if n.code == "serve_cmd_engine")
    assert "--chunked-prefill-size -> --max-num-batched-tokens" in note.detail and "--enable-mixed-chunk" in note.detail
    assert inputs.engine is not None  # the model still ran


def test_foreign_flags_in_a_profile_are_mapped_with_a_note(tmp_path) -> None:
    def edit(d):
        d["deployment"]["serve_command"] = None
        d["deployment"]["engine"] = "sglang"
        d["deployment"]["flags"] = {"chunked_prefill_size": 1024, "max_running_requests": 8, "schedule_policy": "lpm", "max_prefill_tokens": "oops"}
    case = _write_case(tmp_path, DEV / "sglang-922-16k-ttft-a6000.yaml", edit)
    inputs = gather(profile=case)
    assert (inputs.engine_args.max_num_batched_tokens, inputs.engine_args.max_num_seqs) == (1024, 8)
    note = next(n for n in inputs.skipped if n.code == "serve_cmd_engine")
    assert note.source == "deployment.flags"
    assert "--max-running-requests -> --max-num-seqs" in note.detail and "--schedule-policy" in note.detail


def test_foreign_flags_note_is_worded_in_the_askers_language(tmp_path) -> None:
    """The note is typed (engine, rewrites, flags kept aside, approximations): a Chinese answer says
    it in Chinese around the flags, an English one in English."""
    from vllm_advisor.diagnosis.engine import diagnosis_notes
    from vllm_advisor.messages import render

    def edit(d):
        d["deployment"]["serve_command"] = None
        d["deployment"]["engine"] = "sglang"
        d["deployment"]["flags"] = {"mem_fraction_static": 0.85, "schedule_policy": "lpm"}
    case = _write_case(tmp_path, DEV / "sglang-922-16k-ttft-a6000.yaml", edit)
    inputs = gather(profile=case)
    for language, words in (("zh", ("参数已按对应的 vLLM 参数读取", "近似")), ("en", ("flags read as vLLM's", "approximate"))):
        lines = [render(m, language) for m in diagnosis_notes(inputs)]
        mapped = next(line for line in lines if "--mem-fraction-static -> --gpu-memory-utilization" in line)
        assert words[0] in mapped and "--schedule-policy" in mapped
        assert any(words[1] in line and "--gpu-memory-utilization" in line for line in lines)
        if language == "zh":
            assert "flags read" not in " ".join(lines) and "approximate" not in " ".join(lines)


def test_bad_fields_are_left_out_with_a_note(tmp_path) -> None:
    def edit(d):
        d["workload"]["concurrency"] = "lots"
        d["deployment"]["flags"] = {"max_num_seqs": "many", "enable_prefix_caching": True}
        d["deployment"]["gpu"] = "NoSuchGPU-9000"
        d["deployment"]["model"] = "Llama-3.1-70B-Instruct"
        d["observations"][0]["ttft_ms"] = {"mean": [1, 2]}
        d["mystery_key"] = 1
    case = _write_case(tmp_path, DEV / "vllm-3096-ttft-queue-rate.yaml", edit)
    inputs = gather(profile=case)
    fields = {(n.code, n.field) for n in inputs.skipped}
    assert ("profile_field_dropped", "workload.concurrency") in fields
    assert ("profile_field_dropped", "mystery_key") in fields
    assert ("profile_field_dropped", "observations[0].ttft_ms.mean") in fields
    assert ("flag_dropped", "deployment.flags.max_num_seqs") in fields
    assert inputs.engine_args.enable_prefix_caching is True
    code, data, err = _ask("--profile", str(case))
    assert code == 0, err
    assert any("NoSuchGPU-9000" in n for n in data["notes"])  # an unknown GPU is a note, not a failure
    assert any("workload.concurrency" in n for n in data["notes"])


def test_unreadable_attachments_are_skipped(tmp_path, fixtures_dir) -> None:
    bench = next((fixtures_dir / "real-bench" / "vllm-bench").glob("*.json"))
    (tmp_path / "cmd.txt").write_text("vllm bench serve --model m --dataset-name random\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    case = DEV / "vllm-3096-ttft-queue-rate.yaml"
    code, data, err = _ask("--profile", str(case), "--attach", str(bench), "--attach", str(tmp_path / "cmd.txt"),
                           "--attach", str(tmp_path / "blob.bin"), "--attach", str(tmp_path / "missing.json"))
    assert code == 0, err
    notes = "\n".join(data["notes"])
    for name in ("cmd.txt skipped", "blob.bin skipped", "missing.json skipped"):
        assert name in notes


def test_why_a_file_was_skipped_is_worded_in_the_askers_language(tmp_path, fixtures_dir) -> None:
    """The reader's reason is typed (input.reason.*): a Chinese answer says in Chinese why each file
    was skipped (English only inside code spans), an English one keeps the reader's own line."""
    import re

    from vllm_advisor.diagnosis.engine import diagnosis_notes
    from vllm_advisor.messages import render

    (tmp_path / "cmd.txt").write_text("vllm bench serve --model m --dataset-name random\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "folder").mkdir()
    files = [tmp_path / name for name in ("cmd.txt", "blob.bin", "empty.json", "missing.json", "folder")]
    inputs = gather(question="为什么这么慢？", attachments=files)
    reasons = {Path(n.source).name: n.reason for n in inputs.skipped}
    assert reasons == {"cmd.txt": "unknown_kind", "blob.bin": "binary_attachment", "empty.json": "empty",
                       "missing.json": "missing", "folder": "folder_empty"}
    zh = [render(m, "zh") for m in diagnosis_notes(inputs)]
    en = [render(m, "en") for m in diagnosis_notes(inputs)]
    for note in inputs.skipped:
        line = next(x for x in zh if note.source in x)
        words = re.sub(r"`[^`]*`", "", line.replace(note.source, ""))
        assert not re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", words), line  # no English phrase outside code
        assert f"{note.source} skipped: {note.detail}" in en
    assert any("文件不存在" in x for x in zh) and any("文件为空" in x for x in zh)


def test_every_reason_a_reader_gives_has_words_in_every_language() -> None:
    """Reasons are message ids: each one the code names (and each class default) is in the catalogs."""
    import ast

    from vllm_advisor import errors
    from vllm_advisor.messages import LANGUAGES, catalog

    def reasons(path: Path) -> set[str]:
        """reason="..." given to an error or an InputNote, or typed_note's reason (not, say, a metric's label)."""
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
                if name.endswith("Error") or name == "InputNote":
                    out |= {k.value.value for k in node.keywords if k.arg == "reason" and isinstance(k.value, ast.Constant)}
                if name == "typed_note" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    out.add(node.args[1].value)
        return out

    named = set().union(*(reasons(f) for f in Path(errors.__file__).parent.rglob("*.py")))
    named |= {cls.default_reason for cls in (errors.AdvisorError, errors.InputFileError, errors.UnknownFormatError, errors.EndpointError)}
    assert len(named) >= 20
    for language in LANGUAGES:
        missing = {r for r in named if f"input.reason.{r}" not in catalog(language)}
        assert not missing, (language, missing)


def test_attach_a_run_folder_lists_what_it_skipped(tmp_path, fixtures_dir) -> None:
    folder = fixtures_dir / "real-bench" / "vllm-bench"
    inputs = gather(question="why is TTFT high?", attachments=[folder])
    assert inputs.measured, "the folder's benchmark files were read"
    skipped = [n for n in inputs.skipped if n.code == "folder_skipped"]
    assert any(n.source.endswith("PROVENANCE.md") for n in skipped)
    assert all(n.detail for n in skipped)


def test_foreign_serve_command_flag_and_engine_note() -> None:
    code, data, err = _ask("why is TTFT 15 s?", "--serve-cmd", "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct "
                           "--num-shard 2 --max-batch-prefill-tokens 4096 --max-batch-total-tokens 100000", "--gpu", "A100-80G")
    assert code == 0, err
    assert any("TGI flags read as vLLM's" in n and "--max-batch-total-tokens" in n for n in data["notes"])
    assert any("engine TGI" in n for n in data["notes"])  # the engine by the name people write
    assert data["engine"] == "tgi"
    assert [s["code"] for s in data["skipped"]] == ["serve_cmd_engine"]


def test_probe_load_stays_strict(tmp_path) -> None:
    (tmp_path / "cmd.txt").write_text("vllm bench serve --model m\n")
    result = CliRunner().invoke(cli, ["probe", "load", str(tmp_path / "cmd.txt")])
    assert result.exit_code == 3


def test_trtllm_and_lmdeploy_commands_are_read_not_skipped() -> None:
    """A TensorRT-LLM user's batch cap of 8 at 64 clients is the telling fact: the command is read
    (as vLLM's closest configuration), and a Chinese question's note names the flag, not English prose."""
    code, data, err = _ask("Why is throughput low at 64 concurrent requests?", "--serve-cmd",
                           "trtllm-serve meta-llama/Llama-3.1-8B-Instruct --max_batch_size 8 --max_num_tokens 2048 --backend pytorch", "--gpu", "H100")
    assert code == 0, err
    assert data["engine"] == "tensorrt-llm" and [s["code"] for s in data["skipped"]] == ["serve_cmd_engine"]
    assert any("TensorRT-LLM flags read as vLLM's" in n and "--max-batch-size -> --max-num-seqs" in n for n in data["notes"])
    result = CliRunner().invoke(cli, ["ask", "lmdeploy 并发上不去，为什么？", "--serve-cmd", "lmdeploy serve api_server internlm/internlm2-chat-7b --max-batch-size 4",
                                      "--gpu", "A100-80G", "--no-log"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "LMDeploy" in x)
    assert line.startswith("- --serve-cmd：") and "--max-batch-size -> --max-num-seqs" in line


def test_impossible_figures_in_real_files_end_in_a_line_or_a_note_never_exit_70(tmp_path, fixtures_dir) -> None:
    """A reviewer's finds, on real files edited: a gauge reading +Inf (ZeroDivisionError in the KV
    admission rule), a negative count (accepted and shown by the strict `probe load`), a request rate
    of -1e308 (the memo's plot axis raised)."""
    dump = (fixtures_dir / "vllm-cpu-real/metrics/A_05b_after_bench_in1024_c16.txt").read_text()
    inf = tmp_path / "inf.txt"
    edits = {'vllm:num_requests_running{engine="0",model_name="tiny-qwen2"} 0.0': 'vllm:num_requests_running{engine="0",model_name="tiny-qwen2"} +Inf',
             'vllm:num_requests_waiting{engine="0",model_name="tiny-qwen2"} 0.0': 'vllm:num_requests_waiting{engine="0",model_name="tiny-qwen2"} 3.0',
             'vllm:kv_cache_usage_perc{engine="0",model_name="tiny-qwen2"} 0.0': 'vllm:kv_cache_usage_perc{engine="0",model_name="tiny-qwen2"} 0.5'}
    for old, new in edits.items():
        assert old in dump
        dump = dump.replace(old, new)
    inf.write_text(dump)
    assert "+Inf" in inf.read_text()
    result = CliRunner().invoke(cli, ["ask", "why is it slow?", "--attach", str(inf), "--no-log", "--json"])
    assert result.exit_code == 0, result.output

    bench = json.loads((fixtures_dir / "real-bench/vllm-bench/llm-k8s_llama33-70b_tp8_qps04_vllm083_detailed.json").read_text())
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps({**bench, "completed": -5}))
    result = CliRunner().invoke(cli, ["probe", "load", str(negative)])
    assert result.exit_code == 3 and "'completed'" in result.output and "-5" in result.output
    inputs = gather(question="why is it slow?", attachments=[negative])
    # ask reads the rest of the file: the impossible count is left out and named (session 33)
    assert [(n.code, n.reason_args.get("fields")) for n in inputs.skipped] == [("partly_read", "completed")] and inputs.measured

    rate = tmp_path / "rate.json"
    rate.write_text(json.dumps({**bench, "request_rate": -1e308}))
    result = CliRunner().invoke(cli, ["memo", "--attach", str(rate), "-o", str(tmp_path / "memo.md"), "--no-log"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "memo.md").exists()


def test_utf16_files_with_their_byte_order_mark_are_read(tmp_path, fixtures_dir) -> None:
    """Windows PowerShell 5 redirects output as UTF-16: such a case file, log or /metrics dump was
    refused as "a binary file" (a reviewer's find). Read, they give what their UTF-8 originals give."""
    from vllm_advisor.probe.metrics import load_metrics_file
    from vllm_advisor.probe.serverlog import parse_server_log

    log = fixtures_dir / "real-logs/guidellm-bench_gpt-oss-20b_tp4_vllm-server.log"
    dump = fixtures_dir / "vllm-cpu-real/metrics/A_05b_after_bench_in1024_c16.txt"
    case = Path(__file__).resolve().parents[1] / "examples/seed-qwen32b-h800-long-input.yaml"
    copies = {}
    for src in (log, dump, case):
        copies[src] = tmp_path / src.name
        copies[src].write_bytes(src.read_text(encoding="utf-8").encode("utf-16"))  # with its BOM
        assert copies[src].read_bytes()[:2] == b"\xff\xfe"
    assert parse_server_log(copies[log]).kv_cache_tokens == parse_server_log(log).kv_cache_tokens == 1_479_680
    assert load_metrics_file(copies[dump])[0].families.keys() == load_metrics_file(dump)[0].families.keys()
    inputs = gather(profile=copies[case], attachments=[copies[log], copies[dump]], predict=False)
    assert not inputs.skipped and inputs.server_logs and inputs.metrics_summaries
    assert inputs.case is not None and inputs.case.question
    broken = tmp_path / "broken.json"  # a byte-order mark, then a lone surrogate: not UTF-16, said so
    broken.write_bytes(b"\xff\xfe" + '{"a": 1}'.encode("utf-16-le") + b"\x00\xd8")
    [note] = gather(question="为什么慢？", attachments=[broken]).skipped
    assert note.reason == "not_utf16" and "UTF-16" in note.detail


def test_a_metrics_endpoint_that_fails_is_set_aside_and_the_answer_comes_from_the_rest(tmp_path) -> None:
    """A wrong port in --metrics cost the whole answer (exit 4; a reviewer's most likely find): the URL
    is now one set-aside note, shown without its user:password or query string, in the asker's language."""
    from vllm_advisor.diagnosis.engine import diagnosis_notes
    from vllm_advisor.messages import render

    url = "http://alice:PW12@127.0.0.1:9/metrics?token=TK99"
    case = Path(__file__).resolve().parents[1] / "examples/seed-qwen32b-h800-long-input.yaml"
    inputs = gather(profile=case, metrics=[url], scrape_kwargs={"retries": 0, "timeout": 1}, predict=False)
    [note] = inputs.skipped
    assert note.source == "http://127.0.0.1:9/metrics" and note.reason == "endpoint_unusable" and "refused" in note.detail
    zh = " ".join(render(m, "zh") for m in diagnosis_notes(inputs))
    assert "没能从这个地址取得可用的数据" in zh and "PW12" not in zh and "TK99" not in zh
    result = CliRunner().invoke(cli, ["ask", "--profile", str(case), "--metrics", url, "--no-log", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["findings"] and [s["source"] for s in data["skipped"]] == ["http://127.0.0.1:9/metrics"]
    assert "PW12" not in result.output and "TK99" not in result.output
