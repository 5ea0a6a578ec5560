"""fetch_prometheus / `probe prom` against a REAL Prometheus scraping two exporters of real vLLM dumps.

Two loopback exporters (http.server threads) serve real ``/metrics`` dumps of vLLM 0.32.0 from
../shared/fixtures/vllm-cpu-real/metrics, moving to the next dump every two scrapes, so Prometheus
(Debian's package, scraping every second) records changing counters, gauges and histograms:

* instance "a" (server A): before (A_07a) and after (A_07b) the in6000 c8 bench, during the next one
  (A_08: 8 running, KV 4.7 %), then a restart (A_00: fresh server) and 3 smoke requests (A_01): a
  counter reset;
* instance "e" (server E, KV pressure): before (E_00, twice), during (E_01: 1 running, 7 waiting,
  KV 50.5 %) and after (E_02: 31 preemptions); E_01 is served while "a" serves A_08, so the fleet
  has 9 requests running at once and a summed KV usage would read 55 %.

Expected figures are computed from the dump files themselves; fleet gauges are checked against
Prometheus' own ``sum()``/``max()`` over the same steps. Error cases use the real Prometheus (bad
selector regex, selector matching nothing), a closed port and real fake non-Prometheus HTTP servers.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from real_services.prometheus_server import PrometheusServer, prometheus_version, require_prometheus
from vllm_advisor.cli.main import cli
from vllm_advisor.errors import EndpointError, UsageError
from vllm_advisor.probe.metrics import parse_metrics_text, summarize_window
from vllm_advisor.probe.metrics.prometheus import (
    PROMETHEUS_TOKEN_ENV,
    PrometheusFleet,
    _matrix,
    choose_step,
    fetch_prometheus,
    fleet_from_matrix,
    fleet_windows,
    parse_duration,
    parse_selector,
)
from vllm_advisor.probe.metrics.fleet import (
    INSTANCE_LABELS,
    TARGET_LABELS,
    RangeSeries,
    TypeResolver,
    build_snapshots,
    instance_text,
    sum_fleet,
)
from vllm_advisor.probe.metrics.window import compute_window, histogram_quantile
from vllm_advisor.schema import MetricsSnapshot, MetricsWindow

CPU = "vllm-cpu-real/metrics"
A_SEQUENCE = [
    "A_07a_before_bench_in6000_c8.txt",
    "A_07b_after_bench_in6000_c8.txt",
    "A_08_during_bench_in6000_c8.txt",  # scraped during the next in6000 c8 run (counters above A_07b's)
    "A_00_fresh_no_requests.txt",  # the server restarted: every counter back to 0
    "A_01_after_3_smoke_requests.txt",
]
E_SEQUENCE = [
    "E_00_before_bench_in6000_c8.txt",
    "E_00_before_bench_in6000_c8.txt",  # held once more so that E_01 is served while "a" serves A_08
    "E_01_during_bench_in6000_c8_kv-pressure.txt",
    "E_02_after_bench_in6000_c8.txt",
]
SCRAPES_PER_DUMP = 2
STEP_S = 0.5  # finer than the 1 s scrape interval, so every dump served for two scrapes is on the grid
PROM_TEXT = "text/plain; version=0.0.4; charset=utf-8"


# ---------------------------------------------------------------------------------------------
# exporters and the Prometheus that scrapes them


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # clients that time out are expected
        pass


@dataclass
class SequenceExporter:
    """Serves ``dumps`` in order at /metrics, each for ``per_dump`` scrapes, then the last one forever."""

    dumps: list[bytes]
    per_dump: int = SCRAPES_PER_DUMP
    served: list[int] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def target(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    def finished(self, hold: int = 2) -> bool:
        """The last dump has been scraped ``hold`` times."""
        return len(self.served) >= self.per_dump * (len(self.dumps) - 1) + hold

    def start(self) -> SequenceExporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                index = min(len(exporter.served) // exporter.per_dump, len(exporter.dumps) - 1)
                exporter.served.append(index)
                body = exporter.dumps[index]
                self.send_response(200)
                self.send_header("Content-Type", PROM_TEXT)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass
class Scenario:
    prom: PrometheusServer
    a: SequenceExporter
    e: SequenceExporter
    t0: float
    t1: float
    version: str
    fleet: PrometheusFleet

    @property
    def since_s(self) -> float:
        return self.t1 - self.t0


def _read(fixtures: Path, name: str) -> bytes:
    return (fixtures / CPU / name).read_bytes()


@pytest.fixture(scope="module")
def scenario(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    binary = require_prometheus()
    a = SequenceExporter([_read(fixtures_dir, n) for n in A_SEQUENCE]).start()
    e = SequenceExporter([_read(fixtures_dir, n) for n in E_SEQUENCE]).start()
    prom = PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets=[a.target, e.target], binary=binary)
    t0 = time.time() - 1.0
    try:
        with prom:
            deadline = time.monotonic() + 40
            while not (a.finished() and e.finished()):
                if time.monotonic() > deadline:
                    pytest.fail(f"exporters not scraped through in 40 s (a {len(a.served)}, e {len(e.served)}): {prom.log_tail()}")
                time.sleep(0.2)
            time.sleep(0.3)  # the last scrape's samples are appended right after the answer
            t1 = time.time()
            fleet = fetch_prometheus(prom.url, since_s=t1 - t0, end=t1, step_s=STEP_S, selector='{job="vllm"}')
            yield Scenario(prom, a, e, t0, t1, prometheus_version(binary), fleet)
    finally:
        a.stop()
        e.stop()


# ---------------------------------------------------------------------------------------------
# expected figures, straight from the dumps


def _snap(fixtures: Path, name: str) -> MetricsSnapshot:
    return parse_metrics_text(_read(fixtures, name).decode(), source=name)


def _total(snap: MetricsSnapshot, family: str) -> float:
    fam = snap.family(family)
    assert fam is not None, family
    return sum(s.value for s in fam.samples if not s.name.endswith("_created"))


def _gauge(snap: MetricsSnapshot, family: str) -> float:
    fam = snap.family(family)
    assert fam is not None and len(fam.samples) == 1, family
    return fam.samples[0].value


def _increase(values: list[float]) -> float:
    """What a counter grew by over consecutive readings, a drop meaning a restart from 0."""
    return sum(v - p if v >= p else v for p, v in zip(values, values[1:]))


def _hist(snap: MetricsSnapshot, family: str) -> dict[str, float]:
    fam = snap.family(family)
    assert fam is not None
    return {s.labels["le"]: s.value for s in fam.samples if s.name.endswith("_bucket")}


def _instance(fleet: PrometheusFleet, exporter: SequenceExporter) -> MetricsWindow:
    found = [i for i in fleet.instances if i.instance == exporter.target]
    assert len(found) == 1, [i.instance for i in fleet.instances]
    return found[0].window


def _engine(window: MetricsWindow) -> dict:
    engines = summarize_window(window)["engines"]
    assert len(engines) == 1
    return engines[0]


def _one(window: MetricsWindow, family: str):
    found = window.find(family)
    assert len(found) == 1, (family, found)
    return found[0]


# ---------------------------------------------------------------------------------------------
# the fleet


def test_every_dump_was_scraped_in_order(scenario: Scenario) -> None:
    for exporter, n in ((scenario.a, len(A_SEQUENCE)), (scenario.e, len(E_SEQUENCE))):
        assert sorted(set(exporter.served)) == list(range(n))
        assert exporter.served == sorted(exporter.served)
    assert scenario.version.startswith("prometheus, version ")


def test_query_is_what_was_asked(scenario: Scenario) -> None:
    q = scenario.fleet.query
    assert q.url == scenario.prom.url
    assert q.query == '{__name__=~"vllm:.+", job="vllm"}'
    assert q.step_s == STEP_S
    assert q.end == pytest.approx(scenario.t1)
    assert q.start == pytest.approx(scenario.t0)
    assert q.points_per_series == int(scenario.since_s / STEP_S) + 1
    assert q.types_from == "metadata"
    # 72 vllm: families in these dumps, as series: one per (name, labels); both instances export all of them
    per_instance = {i.instance: i.num_series for i in scenario.fleet.instances}
    assert set(per_instance) == {scenario.a.target, scenario.e.target}
    assert q.num_series == sum(per_instance.values())
    assert all(i.job == "vllm" for i in scenario.fleet.instances)


def test_per_instance_request_counts_equal_the_dumps(scenario: Scenario, fixtures_dir: Path) -> None:
    a_snaps = [_snap(fixtures_dir, n) for n in A_SEQUENCE]
    e_snaps = [_snap(fixtures_dir, n) for n in E_SEQUENCE]
    a_expected = _increase([_total(s, "vllm:request_success") for s in a_snaps])
    e_expected = _increase([_total(s, "vllm:request_success") for s in e_snaps])
    assert (a_expected, e_expected) == (32 + 3, 32)  # 291-259 before the restart, 3 smoke requests after
    # A_08 comes after A_07b: every counter of "a" only grows until the restart
    for family in ("vllm:generation_tokens", "vllm:prompt_tokens", "vllm:request_success"):
        values = [_total(s, family) for s in a_snaps]
        assert values[:3] == sorted(values[:3]) and values[3] < values[2], family

    a_eng = _engine(_instance(scenario.fleet, scenario.a))
    e_eng = _engine(_instance(scenario.fleet, scenario.e))
    assert a_eng["requests_finished_total"] == a_expected
    assert e_eng["requests_finished_total"] == e_expected
    for eng, snaps in ((a_eng, a_snaps), (e_eng, e_snaps)):
        assert eng["model_name"] == "tiny-qwen2"
        assert eng["prompt_tokens"] == _increase([_total(s, "vllm:prompt_tokens") for s in snaps])
        assert eng["generation_tokens"] == _increase([_total(s, "vllm:generation_tokens") for s in snaps])
        assert eng["e2e_latency_s"]["count"] == eng["requests_finished_total"]


def test_counter_reset_is_handled_and_said(scenario: Scenario) -> None:
    a = _instance(scenario.fleet, scenario.a)
    assert any("reset during the window" in n for n in a.notes), a.notes
    e = _instance(scenario.fleet, scenario.e)
    assert not any("reset" in n for n in e.notes), e.notes
    assert any("series reset on 1 instance(s)" in n and scenario.a.target in n for n in scenario.fleet.fleet.notes)


def test_kv_pressure_instance_shows_waiting_and_preemptions(scenario: Scenario, fixtures_dir: Path) -> None:
    e = _engine(_instance(scenario.fleet, scenario.e))
    during = _snap(fixtures_dir, E_SEQUENCE[2])
    assert e["requests_waiting"]["max"] == _gauge(during, "vllm:num_requests_waiting") == 7
    assert e["requests_running"]["max"] == 1
    assert e["kv_cache_usage_pct"]["max"] == pytest.approx(100 * _gauge(during, "vllm:kv_cache_usage_perc"))
    assert e["kv_cache_usage_pct"]["max"] == pytest.approx(50.526, rel=1e-4)
    before, after = _snap(fixtures_dir, E_SEQUENCE[0]), _snap(fixtures_dir, E_SEQUENCE[-1])
    assert e["preemptions"] == _total(after, "vllm:num_preemptions") - _total(before, "vllm:num_preemptions") == 31
    # the other instance ran its bench without waiting or preempting
    a = _engine(_instance(scenario.fleet, scenario.a))
    assert a["requests_running"]["max"] == 8
    assert a["requests_waiting"]["max"] == 0
    assert a["preemptions"] == 0
    assert a["kv_cache_usage_pct"]["max"] == pytest.approx(4.651, rel=1e-3)


def test_fleet_counters_are_the_sum_of_the_instances(scenario: Scenario) -> None:
    fleet = _engine(scenario.fleet.fleet)
    a = _engine(_instance(scenario.fleet, scenario.a))
    e = _engine(_instance(scenario.fleet, scenario.e))
    assert fleet["requests_finished_total"] == a["requests_finished_total"] + e["requests_finished_total"] == 67
    assert fleet["requests_finished"] == {"stop": 0, "length": 67, "abort": 0, "error": 0, "repetition": 0}
    for key in ("prompt_tokens", "generation_tokens", "preemptions"):
        assert fleet[key] == a[key] + e[key], key
    assert fleet["preemptions"] == 31
    # no target labels left in the summed series; model and engine stay
    for s in scenario.fleet.fleet.series:
        assert not {"instance", "job"} & s.labels.keys(), s
    assert _one(scenario.fleet.fleet, "vllm:num_requests_running").labels == {"engine": "0", "model_name": "tiny-qwen2"}


def test_fleet_histograms_are_summed_buckets(scenario: Scenario, fixtures_dir: Path) -> None:
    family = "vllm:e2e_request_latency_seconds"
    expected: dict[str, float] = {}
    for names in (A_SEQUENCE, E_SEQUENCE):
        buckets = [_hist(_snap(fixtures_dir, n), family) for n in names]
        for le in buckets[0]:
            expected[le] = expected.get(le, 0.0) + _increase([b[le] for b in buckets])
    uppers = np.array([float(le) for le in expected])
    cumulative = np.array(list(expected.values()))
    got = _one(scenario.fleet.fleet, family)
    assert got.count == expected["+Inf"] == 67
    for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert got.quantiles[label] == pytest.approx(histogram_quantile(q, uppers, cumulative)), label
    a_count = _one(_instance(scenario.fleet, scenario.a), family).count
    e_count = _one(_instance(scenario.fleet, scenario.e), family).count
    assert got.count == a_count + e_count
    assert got.sum == pytest.approx(
        _one(_instance(scenario.fleet, scenario.a), family).sum + _one(_instance(scenario.fleet, scenario.e), family).sum
    )


def _promql_values(prom: PrometheusServer, query: str, fleet: PrometheusFleet) -> list[float]:
    q = fleet.query
    data = prom.api("/api/v1/query_range", query=query, start=f"{q.start:.3f}", end=f"{q.end:.3f}", step=f"{q.step_s:g}")
    assert len(data["result"]) == 1, data
    return [float(v) for _, v in data["result"][0]["values"]]


def test_fleet_gauges_match_prometheus_sum_and_max(scenario: Scenario) -> None:
    """Request counts add up across instances; the KV fraction is the max, never the sum."""
    fleet = scenario.fleet.fleet
    running = _promql_values(scenario.prom, 'sum(vllm:num_requests_running{job="vllm"})', scenario.fleet)
    got = _one(fleet, "vllm:num_requests_running")
    assert (got.min, got.max, got.last) == (min(running), max(running), running[-1])
    assert got.mean == pytest.approx(float(np.mean(running)))
    assert got.max == 9  # A_08's 8 plus E_01's 1: both "during" dumps are third in their sequence

    waiting = _promql_values(scenario.prom, 'sum(vllm:num_requests_waiting{job="vllm"})', scenario.fleet)
    assert _one(fleet, "vllm:num_requests_waiting").max == max(waiting) == 7

    kv_max = _promql_values(scenario.prom, 'max(vllm:kv_cache_usage_perc{job="vllm"})', scenario.fleet)
    kv_sum = _promql_values(scenario.prom, 'sum(vllm:kv_cache_usage_perc{job="vllm"})', scenario.fleet)
    kv = _one(fleet, "vllm:kv_cache_usage_perc")
    assert kv.max == pytest.approx(max(kv_max)) == pytest.approx(0.5052631578947369)
    assert kv.mean == pytest.approx(float(np.mean(kv_max)))
    assert max(kv_sum) == pytest.approx(0.5052631578947369 + 0.04651446709803442)  # what a sum would read
    assert _engine(fleet)["kv_cache_usage_pct"]["max"] == pytest.approx(50.526, rel=1e-4)
    assert any("max over instances" in n and "vllm:kv_cache_usage_perc" in n for n in fleet.notes)
    assert any("gauges summed" in n and "vllm:num_requests_waiting" in n for n in fleet.notes)


def test_fleet_windows_puts_the_summed_window_first(scenario: Scenario) -> None:
    windows = fleet_windows(scenario.fleet)
    assert windows[0] is scenario.fleet.fleet
    assert "fleet of 2 instance(s)" in windows[0].source
    assert {w.source for w in windows[1:]} == {i.window.source for i in scenario.fleet.instances}
    assert len(windows) == 3


def _range_series(job_instance: tuple[str, str], snaps: dict[int, MetricsSnapshot]) -> list[RangeSeries]:
    """What a query_range answer holds for one instance whose scrapes landed at the given steps."""
    out: dict[tuple, RangeSeries] = {}
    for index, snap in snaps.items():
        for fam in snap.families.values():
            if not fam.name.startswith("vllm:"):
                continue
            for sample in fam.samples:
                labels = {**sample.labels, "job": job_instance[0], "instance": job_instance[1]}
                key = (sample.name, tuple(sorted(labels.items())))
                out.setdefault(key, RangeSeries(sample.name, labels, {})).values[index] = sample.value
    return list(out.values())


def test_fleet_sum_with_late_and_gappy_instances_equals_the_instances(fixtures_dir: Path) -> None:
    """Deterministic steps (no Prometheus): "a" is scraped from step 0 but misses step 3, "e" is first
    scraped at step 2, mid-bench (6 requests already done), and misses steps 3 and 4. The fleet must add
    only what each instance's own window counts: not e's totals before step 2, no drop at a's gap."""
    a = {0: "A_07a_before_bench_in6000_c8.txt", 1: "A_07b_after_bench_in6000_c8.txt", 2: "A_08_during_bench_in6000_c8.txt",
         4: "A_00_fresh_no_requests.txt", 5: "A_01_after_3_smoke_requests.txt"}
    e = {2: "E_01_during_bench_in6000_c8_kv-pressure.txt", 5: "E_02_after_bench_in6000_c8.txt"}
    series = _range_series(("vllm", "a:8000"), {i: _snap(fixtures_dir, n) for i, n in a.items()})
    series += _range_series(("vllm", "e:8000"), {i: _snap(fixtures_dir, n) for i, n in e.items()})
    resolver = TypeResolver.for_series(series, {})
    stamps = [1000.0 + 15 * i for i in range(6)]
    windows = {}
    for key in (("vllm", "a:8000"), ("vllm", "e:8000")):
        own = [s for s in series if (s.labels["job"], s.labels["instance"]) == key]
        snaps, _ = build_snapshots(own, resolver, stamps, key[1], INSTANCE_LABELS)
        windows[key[1]] = compute_window(snaps)
    summed = sum_fleet(series, resolver, len(stamps))
    fleet_snaps, _ = build_snapshots(summed.series, resolver, stamps, "fleet", TARGET_LABELS)
    fleet = compute_window(fleet_snaps)

    f, wa, we = _engine(fleet), _engine(windows["a:8000"]), _engine(windows["e:8000"])
    assert (wa["requests_finished_total"], we["requests_finished_total"]) == (35, 32 - 6)
    assert f["requests_finished_total"] == 61
    for key in ("prompt_tokens", "generation_tokens", "preemptions"):
        assert f[key] == wa[key] + we[key], key
    assert f["ttft_s"]["count"] == wa["ttft_s"]["count"] + we["ttft_s"]["count"]
    assert f["preemptions"] == 31 - 6
    assert any("2 instance(s) had steps without samples" in n for n in summed.notes)
    assert any("reset on 1 instance(s) (a:8000" in n for n in summed.notes)
    # gauges: step 2 has A_08 (8 running) and E_01 (1 running, 7 waiting); step 3 has no instance, so the
    # fleet snapshot there holds only the carried-forward counters
    assert _one(fleet, "vllm:num_requests_running").max == 9
    assert _one(fleet, "vllm:num_requests_waiting").max == 7
    assert "vllm:num_requests_running" not in fleet_snaps[3].families
    assert "vllm:prompt_tokens" in fleet_snaps[3].families


# ---------------------------------------------------------------------------------------------
# the windows are computed straight from the series (no per-step snapshots): identical to the snapshot path


def _snapshot_path(
    series: list[RangeSeries], resolver: TypeResolver, stamps: list[float], shown: str
) -> tuple[dict[tuple[str, str], MetricsWindow], MetricsWindow]:
    """The windows as fetch_prometheus computed them before: build_snapshots, then compute_window, then the
    notes each window gets (build notes, steps present; the fleet's summing notes are checked elsewhere)."""
    grouped: dict[tuple[str, str], list[RangeSeries]] = {}
    for s in series:
        grouped.setdefault((s.labels.get("job", ""), s.labels.get("instance", "")), []).append(s)
    instances = {}
    for key, own in grouped.items():
        snaps, notes = build_snapshots(own, resolver, stamps, f"{shown} · {instance_text(key)}", INSTANCE_LABELS)
        window = compute_window(snaps)
        window.notes.extend(notes)
        if len(snaps) < len(stamps):
            window.notes.append(f"samples at {len(snaps)} of {len(stamps)} steps (instance down or not yet scraped at the others)")
        instances[key] = window
    summed = sum_fleet(series, resolver, len(stamps))
    snaps, notes = build_snapshots(summed.series, resolver, stamps, f"{shown} · fleet of {len(grouped)} instance(s), summed", TARGET_LABELS)
    fleet = compute_window(snaps)
    fleet.notes.extend(notes)
    fleet.notes.extend(summed.notes)
    return instances, fleet


def _assert_same_windows(fleet: PrometheusFleet, instances: dict[tuple[str, str], MetricsWindow], summed: MetricsWindow) -> None:
    assert {(i.job, i.instance) for i in fleet.instances} == set(instances)
    for got in fleet.instances:
        assert got.window == instances[(got.job, got.instance)], got.instance
    # the fleet window adds the summing rule and a note on running/waiting totals after the same notes
    assert fleet.fleet.notes[: len(summed.notes)] == summed.notes
    assert fleet.fleet.model_copy(update={"notes": summed.notes, "instances": 1}) == summed
    assert fleet.fleet.instances == len(instances)


def _as_matrix(series: list[RangeSeries], stamps: list[float]) -> dict:
    """The ``data`` of a query_range answer holding these series, values written as Prometheus writes them."""
    return {
        "resultType": "matrix",
        "result": [
            {"metric": {"__name__": s.name, **s.labels}, "values": [[stamps[i], repr(v)] for i, v in sorted(s.values.items())]}
            for s in series
        ],
    }


def test_fleet_from_matrix_equals_the_snapshot_path_on_real_dumps(fixtures_dir: Path, shared_dir: Path) -> None:
    """Three instances of real dumps on a 6-step grid: "a" restarts and misses step 3, "e" joins at step 2 and
    misses 3 and 4, "old" is an early-V1 server (vllm:gpu_cache_usage_perc, a legacy name) at steps 0 and 5.
    Every window must equal what build_snapshots + compute_window give, notes and series order included."""
    a = {0: "A_07a_before_bench_in6000_c8.txt", 1: "A_07b_after_bench_in6000_c8.txt", 2: "A_08_during_bench_in6000_c8.txt",
         4: "A_00_fresh_no_requests.txt", 5: "A_01_after_3_smoke_requests.txt"}
    e = {2: "E_01_during_bench_in6000_c8_kv-pressure.txt", 5: "E_02_after_bench_in6000_c8.txt"}
    old_text = (shared_dir / "fixtures/real-metrics/production-stack-issue318_vllm-v1-early2025_qwen25coder32b_excerpt.txt").read_text()
    old = parse_metrics_text(old_text, source="issue318")
    series = _range_series(("vllm", "a:8000"), {i: _snap(fixtures_dir, n) for i, n in a.items()})
    series += _range_series(("vllm", "e:8000"), {i: _snap(fixtures_dir, n) for i, n in e.items()})
    series += _range_series(("vllm", "old:8000"), {0: old, 5: old})
    stamps = [1000.0 + 15 * i for i in range(6)]
    url = "http://prometheus.test:9090"
    metadata = {}  # types inferred from the names, as with a Prometheus that has no metadata for them

    fleet = fleet_from_matrix(_as_matrix(series, stamps), metadata, url=url, start=stamps[0], end=stamps[-1], step=15.0)
    instances, summed = _snapshot_path(series, TypeResolver.for_series(series, metadata), stamps, url)
    _assert_same_windows(fleet, instances, summed)

    assert fleet.query.points_per_series == 6 and fleet.query.num_series == len(series)
    assert fleet.query.types_from == "inferred"
    by_instance = {i.instance: i.window for i in fleet.instances}
    assert _engine(by_instance["a:8000"])["requests_finished_total"] == 35  # 32 before the restart, 3 after
    assert _engine(by_instance["e:8000"])["requests_finished_total"] == 32 - 6
    assert any("reset during the window" in n for n in by_instance["a:8000"].notes)
    assert "samples at 5 of 6 steps" in by_instance["a:8000"].notes[-1]
    assert any("vllm:gpu_cache_usage_perc -> vllm:kv_cache_usage_perc" in n for n in by_instance["old:8000"].notes)
    assert _one(by_instance["old:8000"], "vllm:kv_cache_usage_perc").labels == {"model_name": "Qwen/Qwen2.5-Coder-32B-Instruct"}
    # the fleet: a's 35 + e's 26 finished requests (old exports no request counters); one engine per model
    engines = {eng["model_name"]: eng for eng in summarize_window(fleet.fleet)["engines"]}
    assert engines["tiny-qwen2"]["requests_finished_total"] == 61
    assert engines["tiny-qwen2"]["preemptions"] == 31 - 6
    assert any("ignored deprecated vllm:gpu_cache_usage_perc" in n for n in fleet.fleet.notes)


def test_fetch_prometheus_equals_the_snapshot_path(scenario: Scenario) -> None:
    """The windows of the real Prometheus answer (two instances, a restart) are those the snapshot path gives
    for the same query_range answer."""
    q = scenario.fleet.query
    data = scenario.prom.api("/api/v1/query_range", query=q.query, start=f"{q.start:.3f}", end=f"{q.end:.3f}", step=f"{q.step_s:g}")
    raw = scenario.prom.api("/api/v1/metadata")
    metadata = {name: entries[0]["type"] for name, entries in raw.items() if name.startswith("vllm:")}
    series = _matrix(data, "test", q.start, q.step_s, q.points_per_series)
    stamps = [q.start + i * q.step_s for i in range(q.points_per_series)]
    instances, summed = _snapshot_path(series, TypeResolver.for_series(series, metadata), stamps, q.url)
    _assert_same_windows(scenario.fleet, instances, summed)
    assert _engine(summed)["requests_finished_total"] == 67


def test_fleet_from_matrix_rejects_what_is_not_a_matrix() -> None:
    common = {"url": "http://prometheus.test:9090", "start": 1000.0, "end": 1090.0, "step": 15.0}
    with pytest.raises(EndpointError) as exc:
        fleet_from_matrix({"resultType": "matrix", "result": []}, {}, **common)
    assert _one_line(exc) == "http://prometheus.test:9090/api/v1/query_range: the matrix holds no vllm series"
    with pytest.raises(EndpointError) as exc:
        fleet_from_matrix({"resultType": "vector", "result": []}, {}, **common)
    assert "answered resultType 'vector', expected a matrix" in _one_line(exc)


def test_selector_narrows_to_one_instance(scenario: Scenario) -> None:
    one = fetch_prometheus(
        scenario.prom.url,
        since_s=scenario.since_s,
        end=scenario.t1,
        step_s=STEP_S,
        selector=f'job="vllm", instance="{scenario.e.target}"',
    )
    assert [i.instance for i in one.instances] == [scenario.e.target]
    assert fleet_windows(one) == [one.fleet]
    assert _engine(one.fleet)["preemptions"] == 31
    assert _engine(one.fleet)["requests_finished_total"] == 32


def test_types_inferred_without_metadata_give_the_same_windows(scenario: Scenario) -> None:
    bare = fetch_prometheus(scenario.prom.url, since_s=scenario.since_s, end=scenario.t1, step_s=STEP_S, metadata=False)
    assert bare.query.types_from == "inferred"
    assert any("inferred from the names" in n for n in bare.notes)
    # vllm:iteration_tokens_total is a histogram whose name ends in _total: the _bucket series decide
    for fleet in (bare, scenario.fleet):
        assert _one(fleet.fleet, "vllm:iteration_tokens_total").type == "histogram"
        assert _engine(fleet.fleet)["requests_finished_total"] == 67
    assert _engine(bare.fleet)["ttft_s"] == _engine(scenario.fleet.fleet)["ttft_s"]


def test_step_is_raised_to_stay_under_the_points_limit(scenario: Scenario) -> None:
    long = fetch_prometheus(scenario.prom.url, since_s=2 * 86400, end=scenario.t1, step_s=1)
    assert long.query.step_s == pytest.approx(15.71)
    assert long.query.points_per_series <= 11_000
    assert any("step raised from 1 s to 15.71 s" in n for n in long.notes)
    assert {i.instance for i in long.instances} == {scenario.a.target, scenario.e.target}


def test_cli_json_and_tables(scenario: Scenario) -> None:
    since = f"{math.ceil(time.time() - scenario.t0) + 1}s"
    runner = CliRunner()
    out = runner.invoke(cli, ["probe", "prom", scenario.prom.url, "--since", since, "--step", "0.5s", "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["query"]["query"] == '{__name__=~"vllm:.+"}'
    assert len(doc["instances"]) == 2
    fleet = MetricsWindow.model_validate(doc["fleet"])
    assert _engine(fleet)["requests_finished_total"] == 67

    text = runner.invoke(cli, ["probe", "prom", scenario.prom.url, "--since", since, "--selector", '{job="vllm"}'], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    assert "fleet (summed)" in text.output
    assert scenario.a.target in text.output and scenario.e.target in text.output
    assert "fleet of 2 instance(s), summed" in text.output


# ---------------------------------------------------------------------------------------------
# errors: one line each, naming the URL


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_unreachable_server_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(EndpointError) as exc:
        fetch_prometheus(f"http://127.0.0.1:{port}", since_s=60, timeout=2)
    message = _one_line(exc)
    assert message.startswith(f"http://127.0.0.1:{port}/api/v1/query_range: connection refused at 127.0.0.1:{port}")
    assert exc.value.exit_code == 4


def test_selector_matching_nothing_names_what_exists(scenario: Scenario) -> None:
    with pytest.raises(EndpointError) as exc:
        fetch_prometheus(scenario.prom.url, since_s=scenario.since_s, end=scenario.t1, selector='{job="vllm-prod"}')
    message = _one_line(exc)
    assert 'selector {job="vllm-prod"} matched no vllm:* series' in message
    assert 'job "vllm"' in message
    assert scenario.a.target in message and scenario.e.target in message


def test_time_range_without_vllm_series(scenario: Scenario) -> None:
    with pytest.raises(EndpointError) as exc:
        fetch_prometheus(scenario.prom.url, since_s=600, end=scenario.t0 - 3600)
    assert "Prometheus holds no vllm:* series between" in _one_line(exc)


def test_prometheus_status_error_is_one_line(scenario: Scenario) -> None:
    with pytest.raises(EndpointError) as exc:
        fetch_prometheus(scenario.prom.url, since_s=60, selector='job=~"("')  # RE2 rejects the regexp
    message = _one_line(exc)
    assert message.startswith(f"{scenario.prom.url}/api/v1/query_range: Prometheus answered status 'error' (bad_data)")
    assert "error parsing regexp" in message


@pytest.mark.parametrize(
    "selector",
    ['{job=vllm}', 'vllm:num_requests_running{job="x"}', 'job="a" instance="b"', '{job="unterminated}'],
)
def test_malformed_selector_is_a_usage_error(selector: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_selector(selector)
    assert selector in _one_line(exc)
    assert exc.value.exit_code == 2


def test_selector_forms() -> None:
    assert parse_selector('{job="vllm"}') == ['job="vllm"']
    assert parse_selector(' job = "vllm" , pod=~"vllm-.*", ') == ['job="vllm"', 'pod=~"vllm-.*"']
    assert parse_selector("{namespace!='dev'}") == ["namespace!='dev'"]
    assert parse_selector('{name="a,b\\"c"}') == ['name="a,b\\"c"']
    assert parse_selector("{}") == [] and parse_selector(None) == []


def test_durations() -> None:
    assert [parse_duration(t) for t in ("90s", "30m", "1h", "2d", "1h30m", "500ms", "15")] == [
        90, 1800, 3600, 172800, 5400, 0.5, 15
    ]
    for bad in ("", "1x", "h", "0s", "-5", "1 h"):
        with pytest.raises(UsageError):
            parse_duration(bad)
    assert choose_step(3600, None) == 30 and choose_step(30, None) == 1
    notes: list[str] = []
    assert choose_step(86400, 1, notes) == pytest.approx(7.855) and "11,000" in notes[0]


Responder = Callable[[BaseHTTPRequestHandler], tuple[int, str, bytes]]


@contextmanager
def fake_http(respond: Responder) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A real HTTP server on a free loopback port answering every GET with ``respond(handler)``."""
    headers_seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            headers_seen.append(dict(self.headers))
            status, ctype, body = respond(self)
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args) -> None:
            pass

    server = _QuietServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", headers_seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "ctype", "body", "expected"),
    [
        (200, "text/html", b"<!DOCTYPE html><html><body>Grafana login</body></html>", "answered an HTML page, not JSON"),
        (200, PROM_TEXT, b"# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n", "answered Prometheus text (a /metrics page), not JSON"),
        (200, "application/json", b'{"object": "list", "data": []}', "answered JSON without a 'status' field"),
        (200, "application/json", b'{"status":"success","data":{"resultType":"vector","result":[]}}', "answered resultType 'vector', expected a matrix"),
        (200, "application/json", b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"vllm:x"},"values":[["a"]]}]}}', "values that are not [time, \"number\"] pairs"),
        (502, "text/html", b"<html>Bad Gateway</html>", "HTTP 502 with an HTML page"),
        (404, "text/plain", b"404 page not found", "HTTP 404: no Prometheus HTTP API at this URL"),
    ],
)
def test_garbage_answers_are_one_line(status: int, ctype: str, body: bytes, expected: str) -> None:
    with fake_http(lambda handler: (status, ctype, body)) as (url, _):
        with pytest.raises(EndpointError) as exc:
            fetch_prometheus(url, since_s=60, timeout=2)
    message = _one_line(exc)
    assert message.startswith(f"{url}/api/v1/query_range: ")
    assert expected in message


def test_slow_server_times_out() -> None:
    def slow(handler: BaseHTTPRequestHandler) -> tuple[int, str, bytes]:
        time.sleep(1.5)
        return 200, "application/json", b"{}"

    with fake_http(slow) as (url, _):
        started = time.monotonic()
        with pytest.raises(EndpointError) as exc:
            fetch_prometheus(url, since_s=60, timeout=0.3)
        assert time.monotonic() - started < 1.4
    assert _one_line(exc).endswith("timed out after 0.3 s")


def test_bearer_token_from_env_is_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-prom-token"
    monkeypatch.setenv(PROMETHEUS_TOKEN_ENV, secret)
    reject = b'{"status":"error","errorType":"unauthorized","error":"bad token"}'
    with fake_http(lambda handler: (401, "application/json", reject)) as (url, headers):
        with pytest.raises(EndpointError) as exc:
            fetch_prometheus(url, since_s=60, timeout=2)
    assert headers[0]["Authorization"] == f"Bearer {secret}"
    message = _one_line(exc)
    assert secret not in message
    assert "Prometheus answered status 'error' (unauthorized): bad token" in message

    monkeypatch.delenv(PROMETHEUS_TOKEN_ENV)
    with fake_http(lambda handler: (401, "text/plain", b"Unauthorized")) as (url, headers):
        with pytest.raises(EndpointError) as exc:
            fetch_prometheus(url, since_s=60, timeout=2)
    assert "Authorization" not in headers[0]
    assert f"Prometheus needs a bearer token (set {PROMETHEUS_TOKEN_ENV})" in _one_line(exc)


def test_cli_errors_are_one_line_with_exit_codes() -> None:
    runner = CliRunner()
    bad = runner.invoke(cli, ["probe", "prom", "http://127.0.0.1:9", "--selector", "{job=vllm}"])
    assert bad.exit_code == 2
    bad_since = runner.invoke(cli, ["probe", "prom", "http://127.0.0.1:9", "--since", "forever"])
    assert bad_since.exit_code == 2
    assert "not a duration: 'forever'" in bad_since.output
