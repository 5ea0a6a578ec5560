"""`vllm bench serve` console output ('Serving Benchmark Result' blocks).

Real inputs: every client log of ../shared/fixtures/vllm-cpu-real/logs (globbed, so a new log is
covered), each checked figure by figure against the --save-result JSON of the same run (found by
the `result_filename=` of its Namespace line). Other spellings (older vLLM, SGLang, pasted with a
prefix) and broken blocks are built from those real logs in tmp_path.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from vllm_advisor.errors import AdvisorError, InputFileError, UnknownFormatError
from vllm_advisor.probe.bench import detect_format, load_runs
from vllm_advisor.probe.bench import vllm_bench_text
from vllm_advisor.probe.bench.document import read_document

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CPU_REAL = SHARED / "fixtures" / "vllm-cpu-real"
LOGS = CPU_REAL / "logs"
RESULTS = CPU_REAL / "results"
CLIENT_LOGS = sorted(LOGS.glob("client_*.log"))
OTHER_LOGS = sorted(
    list(LOGS.glob("pip_install_*.log"))
    + list(LOGS.glob("server_*.log"))
    + list((SHARED / "fixtures" / "real-logs").glob("*"))
)
C8_LOG = LOGS / "client_A_bench_in6000_c8.log"
BANNER = "============ Serving Benchmark Result ============"
STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
FIELD = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "e2e_ms"}


def _name(path: Path) -> str:
    return path.name


def _twin(log: Path) -> Path | None:
    """The --save-result JSON of the run that printed ``log`` (its Namespace's result_filename)."""
    match = re.search(r"result_filename='([^']+)'", log.read_text(encoding="utf-8"))
    if match is None:
        return None
    found = list(RESULTS.rglob(match.group(1)))
    return found[0] if len(found) == 1 else None


TWINS = [(log, _twin(log)) for log in CLIENT_LOGS if _twin(log) is not None]


def _within_rounding(printed: float, exact: float) -> bool:
    """Printed with 2 decimals: within 0.005 absolute, or 0.01 % for big figures."""
    return abs(printed - exact) <= 0.005 + 1e-9 or abs(printed - exact) <= 1e-4 * abs(exact)


def _stat(run, metric: str, stat: str) -> float | None:
    dist = getattr(run, FIELD[metric])
    if dist is None:
        return None
    if stat == "mean":
        return dist.mean
    if stat == "median":
        return dist.median
    if stat == "std":
        return dist.std
    return dist.percentiles.get(stat)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def _block(path: Path) -> list[str]:
    """The real block of a one-run log, banner to closing line."""
    lines = _lines(path)
    start = next(i for i, line in enumerate(lines) if BANNER in line)
    end = next(i for i in range(start + 1, len(lines)) if set(lines[i].strip()) == {"="})
    return lines[start : end + 1]


def _write(tmp_path: Path, lines: list[str], name: str = "bench.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _error(path: Path, kind: type[AdvisorError] = InputFileError) -> str:
    with pytest.raises(AdvisorError) as caught:
        load_runs(path)
    assert isinstance(caught.value, kind), type(caught.value)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


def _figures(run) -> dict:
    """A run's loaded figures, without where it came from."""
    data = run.model_dump()
    for key in ("source", "index"):
        data.pop(key)
    data["metadata"].pop("block_lines")
    return data


# ---------------------------------------------------------------------------------------------
# Real logs


def test_the_globs_find_the_logs():
    assert len(CLIENT_LOGS) >= 12, CLIENT_LOGS
    assert len(TWINS) >= 12, [log.name for log in CLIENT_LOGS if _twin(log) is None]
    assert len(OTHER_LOGS) >= 8, OTHER_LOGS


@pytest.mark.parametrize("log", CLIENT_LOGS, ids=_name)
def test_every_client_log_is_read(log: Path):
    assert detect_format(log) == "vllm-bench-text"
    runs = load_runs(log)
    assert len(runs) == log.read_text(encoding="utf-8").count("Serving Benchmark Result") >= 1
    for index, run in enumerate(runs):
        assert run.format == "vllm-bench-text" and run.index == index and run.source == str(log)
        assert vllm_bench_text.ROUNDING_NOTE in run.notes
        assert run.model == "tiny-qwen2" and run.backend == "openai" and run.endpoint == "/v1/completions"
        assert run.completed is not None and run.duration_s is not None and run.ttft_ms is not None
        assert run.offered_concurrency is not None and math.isinf(run.offered_request_rate)
        assert not run.has_per_request_data and run.checks == []


@pytest.mark.parametrize("log, twin", TWINS, ids=lambda v: v.name)
def test_client_log_matches_its_json_twin(log: Path, twin: Path):
    run = load_runs(log)[0]
    raw = json.loads(twin.read_text(encoding="utf-8"))
    assert str(run.metadata["seed"]) == re.search(r"seed(\d+)\.json$", twin.name).group(1)

    # Counts and setup: exact.
    assert (run.completed, run.failed) == (raw["completed"], raw["failed"])
    assert (run.total_input_tokens, run.total_output_tokens) == (raw["total_input_tokens"], raw["total_output_tokens"])
    assert run.offered_concurrency == raw["max_concurrency"]
    assert raw["request_rate"] == "inf" and math.isinf(run.offered_request_rate)
    assert run.num_prompts == raw["num_prompts"] and run.model == raw["model_id"] and run.backend == raw["backend"]
    assert run.metadata["tokenizer_id"] == raw["tokenizer_id"] and run.metadata["burstiness"] == raw["burstiness"]
    for key in ("machine", "vllm", "model"):  # --metadata pairs, top-level keys in the JSON
        assert run.metadata[key] == raw[key]
    assert run.metadata["max_concurrent_requests"] == raw["max_concurrent_requests"]
    assert run.request_goodput_req_s is None and raw["request_goodput"] is None

    # Printed figures: equal within the 2-decimal rounding.
    for ours, theirs in [
        (run.duration_s, raw["duration"]),
        (run.request_throughput_req_s, raw["request_throughput"]),
        (run.output_throughput_tok_s, raw["output_throughput"]),
        (run.total_throughput_tok_s, raw["total_token_throughput"]),
        (run.metadata["max_output_tokens_per_s"], raw["max_output_tokens_per_s"]),
    ]:
        assert _within_rounding(ours, theirs), (ours, theirs)
    stated = {key: value for key, value in raw.items() if STAT_KEY.match(key)}
    assert len(stated) >= 20
    for key, value in stated.items():
        stat, metric = STAT_KEY.match(key).groups()
        if stat == "std":  # vLLM does not print std
            assert _stat(run, metric, stat) is None
            continue
        ours = _stat(run, metric, stat)
        assert ours is not None and _within_rounding(ours, value), (key, ours, value)

    # Nothing invented: every statistic the run holds is a figure of the JSON.
    for metric, field_name in FIELD.items():
        dist = getattr(run, field_name)
        held = {"mean": dist.mean, "median": dist.median, **dist.percentiles}
        for stat, value in held.items():
            if value is not None:
                assert _within_rounding(value, raw[f"{stat}_{metric}_ms"]), (metric, stat)
    assert run.metadata["random_input_len"] == int(re.search(r"_in(\d+)_", twin.name).group(1))
    assert run.metadata["random_output_len"] == 64


def test_c8_long_prompt_log_in_detail():
    run = load_runs(C8_LOG)[0]
    assert run.ttft_ms.mean == pytest.approx(921.58, abs=1e-9)
    assert run.ttft_ms.median == pytest.approx(544.18, abs=1e-9)
    assert run.ttft_ms.pct(90) == pytest.approx(2080.43, abs=1e-9)
    assert run.tpot_ms.pct(99) == pytest.approx(44.34, abs=1e-9)
    assert run.itl_ms.pct(90) == pytest.approx(111.35, abs=1e-9)
    assert run.e2e_ms.pct(99) == pytest.approx(4972.79, abs=1e-9)
    assert run.duration_s == pytest.approx(12.04) and run.total_throughput_tok_s == pytest.approx(16120.62)
    assert run.streaming is True and run.achieved_concurrency is None
    assert run.metadata["seed"] == 105 and run.metadata["result_filename"] == "bench_in6000_out64_c8_n32_seed105.json"
    assert run.metadata["max_output_tokens_per_s"] == 435.0 and run.metadata["block_lines"] == [15, 51]
    assert any("over-counts real concurrency" in note for note in run.notes)
    assert run.load_label == "c=8"


@pytest.mark.parametrize("log", OTHER_LOGS, ids=_name)
def test_non_benchmark_logs_are_not_claimed(log: Path):
    with pytest.raises(UnknownFormatError) as caught:
        detect_format(log)
    assert "vllm-bench-text (no '=== Serving Benchmark Result ===' banner)" in str(caught.value)


def test_json_results_are_left_to_the_json_loader():
    for path in sorted(RESULTS.rglob("*.json")):
        verdict = vllm_bench_text.detect(read_document(path))
        assert not verdict.matched and verdict.reason == "JSON, not console output"
        assert detect_format(path) == "vllm-bench"


# ---------------------------------------------------------------------------------------------
# Several runs in one log


def test_a_sweep_in_one_file_gives_one_run_per_block(tmp_path):
    logs = [LOGS / f"client_A_bench_in1024_c{c}.log" for c in (1, 4, 16)]
    path = _write(tmp_path, [line for log in logs for line in _lines(log)], "sweep.log")
    runs = load_runs(path)
    assert [run.index for run in runs] == [0, 1, 2]
    assert [run.offered_concurrency for run in runs] == [1, 4, 16]
    assert [run.metadata["seed"] for run in runs] == [101, 102, 103]  # each run's own Namespace line
    for run, log in zip(runs, logs):
        assert _figures(run) == _figures(load_runs(log)[0])
    assert not any("same --seed" in note for run in runs for note in run.notes)


def test_the_same_seed_twice_in_one_log_is_noted(tmp_path):
    path = _write(tmp_path, _lines(C8_LOG) + _lines(C8_LOG), "twice.log")
    first, second = load_runs(path)
    assert not any("same --seed" in note for note in first.notes)
    assert any("same --seed 105 and dataset as run 1" in note for note in second.notes)


def test_a_namespace_is_not_borrowed_from_an_earlier_run(tmp_path):
    path = _write(tmp_path, _lines(C8_LOG) + _block(LOGS / "client_A_bench_in1024_c4.log"), "two.log")
    first, second = load_runs(path)
    assert first.num_prompts == 32 and first.metadata["seed"] == 105
    assert second.num_prompts is None and "seed" not in second.metadata and second.model is None
    assert second.offered_concurrency == 4  # printed inside its own block


# ---------------------------------------------------------------------------------------------
# What the log does not say stays unknown


def test_a_pasted_block_alone_invents_nothing(tmp_path):
    run = load_runs(_write(tmp_path, _block(C8_LOG), "pasted.txt"))[0]
    assert run.num_prompts is None and run.model is None and run.backend is None
    assert run.offered_request_rate is None  # the block prints the rate only when finite
    assert any("offered request rate unknown" in note for note in run.notes)
    assert run.offered_concurrency == 8 and run.completed == 32
    assert "seed" not in run.metadata and "random_input_len" not in run.metadata
    assert run.ttft_ms.mean == pytest.approx(921.58)


def test_a_cut_namespace_line_is_skipped_with_a_note(tmp_path):
    lines = _lines(C8_LOG)
    number = next(i for i, line in enumerate(lines) if line.startswith("Namespace("))
    lines[number] = lines[number][:400]
    run = load_runs(_write(tmp_path, lines))[0]
    assert any(f"Namespace(...) line {number + 1} is cut off" in note for note in run.notes)
    assert run.num_prompts is None and "seed" not in run.metadata
    assert math.isinf(run.offered_request_rate) and run.offered_concurrency == 8  # from the printed lines


# ---------------------------------------------------------------------------------------------
# Other spellings


def _rewrite(lines: list[str], drop: tuple[str, ...] = (), rename: dict[str, str] | None = None) -> list[str]:
    out = []
    for line in lines:
        if any(line.startswith(prefix) for prefix in drop):
            continue
        for old, new in (rename or {}).items():
            if line.startswith(old):
                line = new + line[len(old):]
        out.append(line)
    return out


def test_older_benchmark_serving_spelling(tmp_path):
    """benchmark_serving.py of early 2025 and before: no Failed requests, no Peak lines, no
    concurrency inside the block, 'Total Token throughput', P99 only, E2EL not selected."""
    block = _block(C8_LOG)
    e2el_start = next(i for i, line in enumerate(block) if "End-to-end Latency" in line)
    block = block[:e2el_start] + block[-1:]
    block = _rewrite(
        block,
        drop=("Failed requests:", "Maximum request concurrency:", "Peak ", "P50 ", "P90 "),
        rename={"Total token throughput (tok/s):": "Total Token throughput (tok/s):"},
    )
    block.insert(8, "Input token throughput (tok/s):          15950.48  ")  # v0.4 era
    pre = ["Traffic request rate: inf", "Burstiness factor: 1.0 (Poisson process)", "Maximum request concurrency: 8"]
    run = load_runs(_write(tmp_path, pre + block))[0]
    assert run.failed is None and run.e2e_ms is None
    assert run.total_throughput_tok_s == pytest.approx(16120.62)
    assert run.metadata["input_throughput"] == pytest.approx(15950.48)
    assert run.offered_concurrency == 8 and math.isinf(run.offered_request_rate)
    assert run.ttft_ms.percentiles == {"p99": 2423.96} and run.ttft_ms.median == pytest.approx(544.18)
    assert "max_concurrent_requests" not in run.metadata
    assert not any("over-counts" in note for note in run.notes)


def test_finite_rate_goodput_std_and_fractional_percentiles(tmp_path):
    block = _block(C8_LOG)
    at = next(i for i, line in enumerate(block) if line.startswith("Benchmark duration"))
    block[at:at] = ["Request rate configured (RPS):           1.50      "]
    at = next(i for i, line in enumerate(block) if line.startswith("Output token throughput"))
    block[at:at] = ["Request goodput (req/s):                 2.10      "]
    at = next(i for i, line in enumerate(block) if line.startswith("P99 TTFT"))
    block[at + 1 : at + 1] = [f"{'P99.9 TTFT (ms):':<40} 2500.25   ", f"{'Std TTFT (ms):':<40} 662.49    "]
    run = load_runs(_write(tmp_path, block))[0]
    assert run.offered_request_rate == pytest.approx(1.5) and run.request_goodput_req_s == pytest.approx(2.1)
    assert run.ttft_ms.percentiles["p99.9"] == pytest.approx(2500.25) and run.ttft_ms.std == pytest.approx(662.49)
    assert not any("offered request rate unknown" in note for note in run.notes)


@pytest.mark.parametrize(
    "prefix",
    ["# ", "    ", "> ", "2026-12-02T13:14:36.123456Z stdout F "],
    ids=["shell-comment", "markdown-indent", "quote", "container-timestamps"],
)
def test_blocks_pasted_with_a_prefix(tmp_path, prefix):
    lines = _lines(C8_LOG)
    banner = next(i for i, line in enumerate(lines) if BANNER in line)
    stamp = iter(range(10, 99))
    prefixed = [
        (prefix.replace("36.123456", f"{next(stamp)}.{next(stamp)}") + line) if i >= banner and line else line
        for i, line in enumerate(lines)
    ]
    run = load_runs(_write(tmp_path, prefixed))[0]
    assert _figures(run) == _figures(load_runs(C8_LOG)[0])


def test_progress_bar_rewrites_with_carriage_returns(tmp_path):
    lines = _lines(C8_LOG)
    banner = next(i for i, line in enumerate(lines) if BANNER in line)
    bars = " 97%|█████████▋| 31/32 [00:11<00:00]\r100%|██████████| 32/32 [00:12<00:00]\r"
    lines[banner] = bars + lines[banner]
    path = tmp_path / "crlf.log"
    path.write_bytes("\r\n".join(lines).encode("utf-8"))
    run = load_runs(path)[0]
    assert _figures(run) == _figures(load_runs(C8_LOG)[0])
    assert run.metadata["block_lines"] == [15, 51]


def test_sglang_bench_serving_block(tmp_path):
    """SGLang prints the same banner (its bench_serving.py print statements), read with the same meanings."""
    rows = [
        ("Backend:", "sglang-oai"), ("Traffic request rate:", "inf"), ("Max request concurrency:", "not set"),
        ("Successful requests:", "100"), ("Benchmark duration (s):", "314.67"), ("Total input tokens:", "50561"),
        ("Total generated tokens:", "52444"), ("Total generated tokens (retokenized):", "52184"),
        ("Request throughput (req/s):", "0.32"), ("Input token throughput (tok/s):", "160.68"),
        ("Output token throughput (tok/s):", "166.66"), ("Total token throughput (tok/s):", "327.34"),
        ("Concurrency:", "59.47"),
    ]
    lines = [BANNER] + [f"{label:<40} {value:<10}" for label, value in rows]
    lines += ["{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"), f"{'Mean E2E Latency (ms):':<40} 187147.93 ",
              f"{'P99 E2E Latency (ms):':<40} 313782.80 ", "{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"),
              f"{'Mean TTFT (ms):':<40} 57118.81  ", "=" * 50]
    run = load_runs(_write(tmp_path, lines, "sglang.txt"))[0]
    assert run.backend == "sglang-oai" and math.isinf(run.offered_request_rate) and run.offered_concurrency is None
    assert run.e2e_ms.mean == pytest.approx(187147.93) and run.e2e_ms.pct(99) == pytest.approx(313782.80)
    assert run.achieved_concurrency == pytest.approx(59.47) and run.total_throughput_tok_s == pytest.approx(327.34)
    assert run.metadata["unrecognised_lines"] == {"Total generated tokens (retokenized)": "52184"}
    assert any("not known to this loader" in note for note in run.notes)


def test_speculative_decoding_and_probe_sections(tmp_path):
    """Sections vllm/benchmarks/serve.py prints with --probe-request-rate and a spec-decode server."""
    block = _block(C8_LOG)
    extra = [
        "{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"),
        f"{'Probe requests completed:':<40} {12:<10}", f"{'Probe requests failed:':<40} {0:<10}",
        f"{'Median probe E2EL (ms):':<40} {41.5:<10.2f}", f"{'Max probe E2EL (ms):':<40} {90.25:<10.2f}",
        "{s:{c}^{n}}".format(s="Speculative Decoding", n=50, c="-"),
        f"{'Acceptance rate (%):':<40} {61.25:<10.2f}", f"{'Acceptance length:':<40} {2.84:<10.2f}",
        f"{'Drafts:':<40} {700:<10}", f"{'Draft tokens:':<40} {2100:<10}", f"{'Accepted tokens:':<40} {1286:<10}",
        "Per-position acceptance (%):", f"{'  Position 0:':<40} {80.0:<10.2f}", f"{'  Position 1:':<40} {62.5:<10.2f}",
    ]
    run = load_runs(_write(tmp_path, block[:-1] + extra + block[-1:]))[0]
    meta = run.metadata
    assert (meta["probe_completed"], meta["probe_failed"]) == (12, 0)
    assert meta["probe_median_e2el_ms"] == pytest.approx(41.5) and meta["probe_max_e2el_ms"] == pytest.approx(90.25)
    assert meta["spec_decode_acceptance_rate"] == pytest.approx(61.25) and meta["spec_decode_num_drafts"] == 700
    assert meta["spec_decode_per_position_acceptance_rates"] == pytest.approx([0.8, 0.625])
    assert "unrecognised_lines" not in meta


# ---------------------------------------------------------------------------------------------
# Broken blocks: one line naming the line


def test_block_cut_at_the_end_of_the_file(tmp_path):
    lines = _lines(C8_LOG)
    cut = next(i for i, line in enumerate(lines) if line.startswith("Mean TPOT"))
    message = _error(_write(tmp_path, lines[: cut + 1]))
    assert f"line {cut + 1}: the result block that starts at line 15 ends here" in message and "truncated" in message


def test_block_cut_and_followed_by_other_text(tmp_path):
    lines = _lines(C8_LOG)
    cut = next(i for i, line in enumerate(lines) if line.startswith("P90 ITL"))
    message = _error(_write(tmp_path, lines[:cut] + ["```", "Any idea why TTFT is so high?"]))
    assert f"line {cut + 1}: unexpected '```' inside the result block that starts at line 15" in message


def test_block_cut_by_an_empty_line(tmp_path):
    lines = _lines(C8_LOG)
    cut = next(i for i, line in enumerate(lines) if line.startswith("Mean ITL"))
    message = _error(_write(tmp_path, lines[:cut] + ["", "later output"]))
    assert f"line {cut + 1}: the result block that starts at line 15 stops at an empty line" in message


def test_block_cut_by_the_next_block(tmp_path):
    lines = _lines(C8_LOG)
    cut = next(i for i, line in enumerate(lines) if line.startswith("Mean ITL"))
    message = _error(_write(tmp_path, lines[:cut] + _block(C8_LOG)))
    assert f"line {cut + 1}: a new result block starts before the block of line 15 was closed" in message


def test_a_figure_cut_mid_line(tmp_path):
    lines = _lines(C8_LOG)
    cut = next(i for i, line in enumerate(lines) if line.startswith("Mean E2EL"))
    message = _error(_write(tmp_path, lines[:cut] + ["Mean E2EL (ms):"]))
    assert f"line {cut + 1}: 'Mean E2EL (ms)' has no value" in message


def test_a_figure_that_is_not_a_number(tmp_path):
    lines = [line.replace("32        ", "lots") if line.startswith("Successful") else line for line in _lines(C8_LOG)]
    message = _error(_write(tmp_path, lines))
    assert "line 16: 'Successful requests': expected a whole number, got 'lots'" in message
    lines = [line.replace("12.04", "12,04") if line.startswith("Benchmark") else line for line in _lines(C8_LOG)]
    assert "line 19: 'Benchmark duration (s)': expected a number, got '12,04'" in _error(_write(tmp_path, lines))


def test_a_figure_printed_twice(tmp_path):
    lines = _lines(C8_LOG)
    at = next(i for i, line in enumerate(lines) if line.startswith("Mean TTFT"))
    lines.insert(at + 1, lines[at])
    assert f"line {at + 2}: 'Mean TTFT (ms)' is printed twice" in _error(_write(tmp_path, lines))


def test_an_empty_block(tmp_path):
    message = _error(_write(tmp_path, ["text before", BANNER, "=" * 50]))
    assert "line 3: the result block that starts at line 2 holds no figures" in message


def test_a_bad_traffic_line_before_the_block(tmp_path):
    lines = [line.replace("Traffic request rate: inf", "Traffic request rate: fast") for line in _lines(C8_LOG)]
    message = _error(_write(tmp_path, lines))
    assert "line 8: 'Traffic request rate: fast': expected a rate in req/s or 'inf', got 'fast'" in message
