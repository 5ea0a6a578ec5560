"""parse_metrics_text / load_metrics_file on real vLLM /metrics dumps (V0, early V1, 0.10, 0.32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_advisor.errors import AdvisorError, InputFileError, UnknownFormatError
from vllm_advisor.probe.metrics import (
    canonical_name,
    compute_window,
    load_metrics_file,
    load_metrics_source,
    parse_metrics_text,
    summarize_window,
)

REAL = "real-metrics"
CPU = "vllm-cpu-real/metrics"


def _dumps(fixtures: Path) -> list[Path]:
    files = sorted((fixtures / REAL).glob("*.txt")) + sorted((fixtures / CPU).glob("[AEF]_*.txt"))
    assert len(files) == 5 + 19
    return files


def _sample(snap, family: str, **labels: str) -> float:
    fam = snap.family(family)
    assert fam is not None, f"{family} missing"
    found = [s for s in fam.samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, found
    return found[0].value


def test_every_real_dump_parses(fixtures_dir: Path) -> None:
    for path in _dumps(fixtures_dir):
        [snap] = load_metrics_file(path)
        assert snap.source == str(path)
        assert snap.timestamp is None
        assert any(name.startswith("vllm:") for name in snap.families), path


def test_vllm_032_dump_values(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(fixtures_dir / CPU / "E_01_during_bench_in6000_c8_kv-pressure.txt", timestamp=123.0)
    assert snap.timestamp == 123.0
    assert snap.skipped_lines == 0 and snap.notes == []
    eng = {"engine": "0", "model_name": "tiny-qwen2"}
    assert _sample(snap, "vllm:num_requests_running", **eng) == 1.0
    assert _sample(snap, "vllm:num_requests_waiting", **eng) == 7.0
    assert _sample(snap, "vllm:num_requests_waiting_by_reason", reason="capacity") == 7.0
    assert _sample(snap, "vllm:kv_cache_usage_perc", **eng) == pytest.approx(0.5052631578947369)
    assert _sample(snap, "vllm:num_preemptions", **eng) == 6.0
    ttft = snap.family("vllm:time_to_first_token_seconds")
    assert ttft.type == "histogram"
    assert len([s for s in ttft.samples if s.name.endswith("_bucket")]) == 23  # 22 bounds + +Inf
    # counters are stored under the family name without _total, samples keep the exported name
    gen = snap.family("vllm:generation_tokens")
    assert gen.type == "counter" and gen.samples[0].name == "vllm:generation_tokens_total"
    assert {"engine": "0", "model_name": "tiny-qwen2"} in snap.engines()


def test_docs_example_skips_ellipsis_lines(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(fixtures_dir / REAL / "vllm-docs-design-metrics_example_llama31-8b.txt")
    assert snap.skipped_lines == 3
    assert "skipped 3 line(s)" in snap.notes[0] and "line 4: '...'" in snap.notes[0]
    model = "meta-llama/Llama-3.1-8B-Instruct"
    assert _sample(snap, "vllm:num_requests_running", model_name=model) == 8.0
    assert _sample(snap, "vllm:generation_tokens", model_name=model) == 27453.0
    assert _sample(snap, "vllm:request_success", finished_reason="length") == 131.0
    assert len(snap.family("vllm:time_to_first_token_seconds").samples) == 9


def test_early_v1_legacy_names_are_canonicalised(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(
        fixtures_dir / REAL / "production-stack-issue318_vllm-v1-early2025_qwen25coder32b_excerpt.txt"
    )
    kv = snap.family("vllm:kv_cache_usage_perc")
    assert kv.original_name == "vllm:gpu_cache_usage_perc"
    assert kv.samples[0].labels == {"model_name": "Qwen/Qwen2.5-Coder-32B-Instruct"}
    assert kv.samples[0].name == "vllm:gpu_cache_usage_perc"  # the exported sample name is kept
    queries = snap.family("vllm:prefix_cache_queries")
    assert queries.original_name == "vllm:gpu_prefix_cache_queries" and queries.type == "counter"
    assert queries.samples == []  # the excerpt ends right after the TYPE line
    assert "vllm:gpu_cache_usage_perc" not in snap.families
    assert _sample(snap, "process_start_time_seconds") == pytest.approx(1.74262400557e9)
    assert any("legacy metric name" in n for n in snap.notes)


def test_v0_help_type_only_excerpt(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(fixtures_dir / REAL / "functionary-pr263_vllm-v0-0.5.x_help-type-only_excerpt.txt")
    assert all(not f.samples for f in snap.families.values())
    assert snap.family("vllm:kv_cache_usage_perc").original_name == "vllm:gpu_cache_usage_perc"
    assert snap.family("vllm:num_requests_swapped").type == "gauge"  # removed in V1, kept as is
    assert snap.family("vllm:num_requests_running").help == "Number of requests currently running on GPU."
    # '# HELP vllm:num_preemptions_total' without a TYPE line: a counter by its name
    assert snap.family("vllm:num_preemptions").type == "counter"


def test_v010_transition_excerpt(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(fixtures_dir / REAL / "production-stack-issue617_vllm-0.10.0_glm45_excerpt.txt")
    hits = snap.family("vllm:prefix_cache_hits")
    assert hits.original_name == "vllm:gpu_prefix_cache_hits"
    assert hits.samples[0].labels == {"engine": "0", "model_name": "zai-org/GLM-4.5"}
    assert snap.family("vllm:prefix_cache_queries").original_name == "vllm:prefix_cache_queries"
    assert _sample(snap, "vllm:prefix_cache_queries") == 32.0
    assert _sample(snap, "vllm:kv_cache_usage_perc") == pytest.approx(9.75010481363281e-06)
    created = snap.family("vllm:prefix_cache_queries_created")
    assert created.original_name == "vllm:gpu_prefix_cache_queries_created"


def test_untyped_histogram_excerpt_gets_its_type_back(fixtures_dir: Path) -> None:
    [snap] = load_metrics_file(
        fixtures_dir / REAL / "vllm-pr22227_v1-multi-engine_qwen3-8b_decode-histogram_excerpt.txt"
    )
    fam = snap.family("vllm:request_decode_time_seconds")
    assert fam.type == "histogram" and len(fam.samples) == 13
    assert snap.engines() == [{"engine": "1", "model_name": "/home/jovyan/qwen3-8b"}]
    # no _count in the excerpt, but the +Inf bucket is there: one request, decode between 0 and 15 s
    [series] = compute_window([snap]).find("vllm:request_decode_time_seconds", engine="1")
    assert series.count == 1.0
    assert series.quantiles["p50"] == pytest.approx(7.5)
    assert series.quantile_bounds["p50"] == (0.0, 15.0)


def _with_legacy_duplicates(text: str) -> str:
    """The 0.10 transition exported old and new names side by side; rebuild that from a real dump by
    adding a deprecated copy of the prefix-cache and KV families with different values."""
    extra = []
    for line in text.splitlines():
        if line.startswith("vllm:prefix_cache_hits_total{"):
            extra += [
                "# HELP vllm:gpu_prefix_cache_hits_total GPU prefix cache hits. DEPRECATED: Use vllm:prefix_cache_hits instead.",
                "# TYPE vllm:gpu_prefix_cache_hits_total counter",
                line.replace("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total").rsplit(" ", 1)[0]
                + " 999999.0",
            ]
        if line.startswith("vllm:kv_cache_usage_perc{"):
            extra += [
                "# TYPE vllm:gpu_cache_usage_perc gauge",
                line.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc").rsplit(" ", 1)[0] + " 0.99",
            ]
    return "\n".join(extra) + "\n" + text  # old names first, as 0.10 listed them


def test_old_and_new_names_together_count_once(fixtures_dir: Path) -> None:
    before = (fixtures_dir / CPU / "A_03a_before_bench_in1024_c1.txt").read_text()
    after = (fixtures_dir / CPU / "A_03b_after_bench_in1024_c1.txt").read_text()
    a = parse_metrics_text(_with_legacy_duplicates(before), "a", timestamp=0.0)
    b = parse_metrics_text(_with_legacy_duplicates(after), "b", timestamp=10.0)
    hits = b.family("vllm:prefix_cache_hits")
    assert hits.original_name == "vllm:prefix_cache_hits"
    assert [s.value for s in hits.samples] == [184448.0]
    assert _sample(b, "vllm:kv_cache_usage_perc") == 0.0
    assert "vllm:gpu_prefix_cache_hits" not in b.families
    assert any("ignored deprecated vllm:gpu_prefix_cache_hits" in n for n in b.notes)
    window = compute_window([a, b])
    [kv] = [s for s in window.series if s.family == "vllm:kv_cache_usage_perc"]
    assert kv.max == 0.0  # the current name's reading, not the deprecated duplicate's 0.99
    [engine] = summarize_window(window)["engines"]
    assert engine["prefix_cache_hits_tokens"] == 0.0
    assert engine["prefix_cache_queries_tokens"] == 32771.0
    # both snapshots idle (before and after the benchmark) while the counters show its work: the
    # summary leaves the gauges unknown rather than reporting 0% as the run's KV usage
    assert engine["gauges_missed_load"] and engine["kv_cache_usage_pct"]["max"] is None


def test_junk_and_cut_lines_are_skipped_and_counted(fixtures_dir: Path) -> None:
    clean_text = (fixtures_dir / CPU / "A_03b_after_bench_in1024_c1.txt").read_text()
    clean = parse_metrics_text(clean_text, "clean")
    lines = clean_text.splitlines()
    junk = [
        "```",
        "...",
        'vllm:num_requests_running{engine="0",model_na',  # cut inside the labels
        "vllm:generation_tokens_total 12abc",  # not a number
        'vllm:odd_metric{a="1",a="2"} 1.0',  # passes the pre-filter; the parser refuses it
        "# TYPE vllm:broken",  # TYPE without a type
        "Some prose pasted from a chat",
    ]
    dirty = "\n".join(lines[:40] + junk + lines[40:]) + "\nvllm:num_requests_waiting{engine=\"0\",mo"
    snap = parse_metrics_text(dirty, "dirty")
    assert snap.skipped_lines == len(junk) + 1
    assert snap.notes[0].startswith(f"skipped {len(junk) + 1} line(s)")
    assert "line 41: '```'" in snap.notes[0]
    assert set(snap.families) == set(clean.families)
    for name, fam in clean.families.items():
        assert [(s.name, s.labels, s.value) for s in snap.families[name].samples] == [
            (s.name, s.labels, s.value) for s in fam.samples
        ], name


def test_two_engines_and_two_models_stay_separate(fixtures_dir: Path) -> None:
    """Data-parallel / multi-model dump rebuilt from two real dumps: engine 0 serves model tiny-qwen2
    with E_02's counters, engine 1 serves model other with A_03b's."""

    def relabel(text: str, engine: str, model: str) -> str:
        return text.replace('engine="0"', f'engine="{engine}"').replace('model_name="tiny-qwen2"', f'model_name="{model}"')

    e02 = (fixtures_dir / CPU / "E_02_after_bench_in6000_c8.txt").read_text()
    e00 = (fixtures_dir / CPU / "E_00_before_bench_in6000_c8.txt").read_text()
    a03a = (fixtures_dir / CPU / "A_03a_before_bench_in1024_c1.txt").read_text()
    a03b = (fixtures_dir / CPU / "A_03b_after_bench_in1024_c1.txt").read_text()
    first = parse_metrics_text(e00 + relabel(a03a, "1", "other"), "dp", timestamp=0.0)
    last = parse_metrics_text(e02 + relabel(a03b, "1", "other"), "dp", timestamp=16.0)
    full = [e for e in last.engines() if len(e) == 2]
    assert sorted(full, key=lambda e: e["engine"]) == [
        {"engine": "0", "model_name": "tiny-qwen2"},
        {"engine": "1", "model_name": "other"},
    ]
    window = compute_window([first, last])
    [g0] = window.find("vllm:generation_tokens", engine="0")
    [g1] = window.find("vllm:generation_tokens", engine="1")
    assert (g0.delta, g1.delta) == (2048.0, 2048.0)
    assert window.find("vllm:num_preemptions", engine="0")[0].delta == 31.0
    assert window.find("vllm:num_preemptions", engine="1")[0].delta == 0.0
    engines = summarize_window(window)["engines"]
    assert [(e["model_name"], e["engine"]) for e in engines] == [("other", "1"), ("tiny-qwen2", "0")]
    assert engines[0]["prompt_tokens"] == 32771.0 and engines[1]["prompt_tokens"] == 192002.0


def test_canonical_names() -> None:
    assert canonical_name("vllm:gpu_cache_usage_perc") == "vllm:kv_cache_usage_perc"
    assert canonical_name("vllm:time_per_output_token_seconds") == "vllm:inter_token_latency_seconds"
    assert canonical_name("vllm:gpu_prefix_cache_queries") == "vllm:prefix_cache_queries"
    assert canonical_name("vllm:gpu_prefix_cache_hits_created") == "vllm:prefix_cache_hits_created"
    assert canonical_name("vllm:kv_cache_usage_perc") == "vllm:kv_cache_usage_perc"
    assert canonical_name("vllm:num_requests_swapped") == "vllm:num_requests_swapped"


def test_v0_time_per_output_token_histogram_is_read_as_itl() -> None:
    # V0 exposition of the per-token histogram (names and buckets as vLLM 0.5 exported them)
    text = "\n".join(
        [
            "# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds.",
            "# TYPE vllm:time_per_output_token_seconds histogram",
            'vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="m"} 10.0',
            'vllm:time_per_output_token_seconds_bucket{le="0.025",model_name="m"} 30.0',
            'vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 40.0',
            'vllm:time_per_output_token_seconds_count{model_name="m"} 40.0',
            'vllm:time_per_output_token_seconds_sum{model_name="m"} 0.9',
        ]
    )
    snap = parse_metrics_text(text, "v0")
    [series] = compute_window([snap]).find("vllm:inter_token_latency_seconds", model_name="m")
    assert series.count == 40.0 and series.avg == pytest.approx(0.9 / 40)
    assert series.quantiles["p50"] == pytest.approx(0.01 + 0.015 * (20 - 10) / 20)
    assert series.quantiles["p99"] == 0.025  # rank in the +Inf bucket -> highest finite bound


# ---------------------------------------------------------------------------------------------
# files that are not metrics


def test_other_real_files_are_refused_in_one_line(fixtures_dir: Path) -> None:
    cpu = fixtures_dir / "vllm-cpu-real"
    with pytest.raises(UnknownFormatError, match="neither Prometheus text"):
        load_metrics_file(cpu / "metrics" / "completion_stream.txt")  # an SSE stream
    with pytest.raises(UnknownFormatError):
        load_metrics_file(cpu / "metrics" / "metric_families.txt")  # "name type" list
    with pytest.raises(InputFileError, match=r"line 1: not a metrics snapshot"):
        load_metrics_file(cpu / "metrics" / "v1_models.json")
    with pytest.raises(UnknownFormatError):
        load_metrics_file(cpu / "README.md")


def test_prometheus_dump_without_vllm_metrics(fixtures_dir: Path, tmp_path: Path) -> None:
    text = (fixtures_dir / CPU / "A_00_fresh_no_requests.txt").read_text()
    only_process = "\n".join(l for l in text.splitlines() if "vllm:" not in l)
    path = tmp_path / "node.txt"
    path.write_text(only_process)
    with pytest.raises(InputFileError, match=r"none named vllm:\*") as exc:
        load_metrics_file(path)
    assert "\n" not in str(exc.value)


def test_missing_binary_and_host_port(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        load_metrics_file(tmp_path / "nope.txt")
    binary = tmp_path / "dump.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(InputFileError, match="binary"):
        load_metrics_file(binary)
    with pytest.raises(AdvisorError, match="for an endpoint write http://localhost:8000"):
        load_metrics_source("localhost:8000")


def test_load_metrics_source_reads_a_file(fixtures_dir: Path) -> None:
    path = fixtures_dir / CPU / "E_02_after_bench_in6000_c8.txt"
    [snap] = load_metrics_source(str(path), timestamp=5.0, timeout=1)
    assert snap.timestamp == 5.0
    assert _sample(snap, "vllm:num_preemptions") == 31.0


def test_text_written_by_prometheus_client_with_awkward_label_values() -> None:
    """vLLM exports with prometheus_client; label values can hold quotes, braces, commas and
    backslashes (served model names are free text). The pre-filter must keep such lines."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    gen = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=registry)
    kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage.", labels, registry=registry)
    ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT.", labels, buckets=[0.02, 0.04, 0.1], registry=registry)
    model = 'team "a"/llama{8b},v2 \\ # not a comment'
    for engine, tokens in (("0", 2048), ("1", 512)):
        gen.labels(model, engine).inc(tokens)
        kv.labels(model, engine).set(0.25)
        for v in (0.01, 0.03, 0.03, 0.05):
            ttft.labels(model, engine).observe(v)

    snap = parse_metrics_text(generate_latest(registry).decode(), "lib")
    assert snap.skipped_lines == 0, snap.notes
    window = compute_window([snap])
    assert window.find("vllm:generation_tokens", engine="0", model_name=model)[0].delta == 2048.0
    assert window.find("vllm:generation_tokens", engine="1", model_name=model)[0].delta == 512.0
    [h] = window.find("vllm:time_to_first_token_seconds", engine="1")
    assert h.count == 4.0 and h.quantiles["p50"] == pytest.approx(0.02 + 0.02 * 1 / 2)
    assert [e["model_name"] for e in summarize_window(window)["engines"]] == [model, model]
