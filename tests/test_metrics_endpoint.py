"""scrape / watch / load_metrics_source against a real local HTTP server serving real vLLM dumps.

Every test talks HTTP over a socket (http.server on 127.0.0.1, port 0); nothing in httpx is mocked.
Timeouts are short (0.3-0.5 s) so the slow-server cases stay fast.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vllm_advisor.errors import EndpointError, UsageError
from vllm_advisor.probe.metrics import (
    TOKEN_ENV,
    compute_window,
    load_metrics_file,
    load_metrics_source,
    metrics_url,
    scrape,
    summarize_window,
    watch,
)

CPU = "vllm-cpu-real/metrics"
PROM = "text/plain; version=0.0.4; charset=utf-8"

# A route answers (status, content type, body) for the request and how many times its path was hit.
Route = Callable[[BaseHTTPRequestHandler, int], tuple[int, str, bytes]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # client timeouts/TLS refusals are expected
        pass


@contextmanager
def serve(routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, Counter, list]]:
    """Run a real HTTP(S) server on a free local port; yield (base URL, hits per path, request headers)."""
    hits: Counter = Counter()
    headers_seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            hits[self.path] += 1
            headers_seen.append(dict(self.headers))
            route = routes.get(self.path)
            status, ctype, body = route(self, hits[self.path]) if route else (404, "text/plain", b"not found")
            if status == 0:  # the route already wrote its answer
                return
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}", hits, headers_seen
    finally:
        server.shutdown()
        server.server_close()


def _dump(fixtures: Path, name: str) -> bytes:
    return (fixtures / CPU / name).read_bytes()


def _static(body: bytes, ctype: str = PROM, status: int = 200) -> Route:
    return lambda handler, n: (status, ctype, body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAST = {"timeout": 0.5, "backoff": 0.01}


# ---------------------------------------------------------------------------------------------
# scrape


def test_scrape_real_dump_from_base_url(fixtures_dir: Path) -> None:
    with serve({"/metrics": _static(_dump(fixtures_dir, "E_01_during_bench_in6000_c8_kv-pressure.txt"))}) as (base, hits, headers):
        before = time.time()
        snap = scrape(base, **FAST)  # no /metrics in the URL: appended
        assert hits["/metrics"] == 1
        assert "text/plain" in headers[0]["Accept"]
        assert "Authorization" not in headers[0]
        again = scrape(base + "/v1", **FAST)  # the OpenAI base URL people paste
        assert hits["/metrics"] == 2
    assert snap.source == f"{base}/metrics"
    assert before <= snap.timestamp <= time.time()
    fam = snap.family("vllm:num_requests_waiting")
    assert fam.samples[0].value == 7.0
    assert again.family("vllm:kv_cache_usage_perc").samples[0].value == pytest.approx(0.5052631578947369)


def test_metrics_url_forms() -> None:
    assert metrics_url("http://h:8000") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000/") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000/v1/") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000/metrics") == "http://h:8000/metrics"
    assert metrics_url("https://gw/llama") == "https://gw/llama/metrics"
    with pytest.raises(EndpointError, match="not an http"):
        metrics_url("ftp://h/metrics")


def test_http_500_after_retries(fixtures_dir: Path) -> None:
    with serve({"/metrics": _static(b"boom", "text/plain", 500)}) as (base, hits, _):
        with pytest.raises(EndpointError) as exc:
            scrape(base, retries=2, **FAST)
        assert hits["/metrics"] == 3
    assert str(exc.value) == f"{base}/metrics: HTTP 500 (tried 3 times)"


def test_flaky_server_succeeds_on_retry(fixtures_dir: Path) -> None:
    body = _dump(fixtures_dir, "A_03b_after_bench_in1024_c1.txt")

    def flaky(handler, n):
        return (503, "text/plain", b"restarting") if n == 1 else (200, PROM, body)

    with serve({"/metrics": flaky}) as (base, hits, _):
        snap = scrape(base, retries=1, **FAST)
        assert hits["/metrics"] == 2
    assert snap.family("vllm:generation_tokens").samples[0].value == 11296.0


def test_html_json_empty_and_non_vllm_answers(fixtures_dir: Path) -> None:
    html = b"<!DOCTYPE html><html><body>Sign in</body></html>"
    non_vllm = b"\n".join(l for l in _dump(fixtures_dir, "A_00_fresh_no_requests.txt").splitlines() if b"vllm:" not in l)
    routes = {
        "/html/metrics": _static(html, "text/html"),
        "/html-as-text/metrics": _static(html, "text/plain"),
        "/json/metrics": _static(b'{"object": "list", "data": []}', "application/json"),
        "/empty/metrics": _static(b""),
        "/node/metrics": _static(non_vllm),
        "/prose/metrics": _static(b"hello\nworld\n"),
    }
    with serve(routes) as (base, hits, _):
        for path, pattern in [
            ("/html", "returned an HTML page"),
            ("/html-as-text", "returned an HTML page"),
            ("/json", "returned JSON"),
            ("/empty", "returned an empty body"),
            ("/node", r"not a vLLM /metrics endpoint: \d+ Prometheus metric families, none named vllm:\*"),
            ("/prose", r"no Prometheus metrics found \(2 lines"),
        ]:
            with pytest.raises(EndpointError, match=pattern) as exc:
                scrape(base + path, **FAST)
            assert "\n" not in str(exc.value)
            assert hits[f"{path}/metrics"] == 1  # a wrong answer is not retried


def test_slow_server_times_out(fixtures_dir: Path) -> None:
    body = _dump(fixtures_dir, "A_00_fresh_no_requests.txt")

    def slow(handler, n):
        time.sleep(1.5)
        return 200, PROM, body

    with serve({"/metrics": slow}) as (base, hits, _):
        t0 = time.monotonic()
        with pytest.raises(EndpointError) as exc:
            scrape(base, timeout=0.3, retries=1, backoff=0.01)
        elapsed = time.monotonic() - t0
    assert str(exc.value) == f"{base}/metrics: timed out after 0.3 s (tried 2 times)"
    assert elapsed < 1.4


def test_trickling_body_hits_the_total_timeout(fixtures_dir: Path) -> None:
    """Each read arrives within the per-read timeout, but the whole answer takes too long."""
    body = _dump(fixtures_dir, "A_00_fresh_no_requests.txt")

    def trickle(handler, n):
        handler.send_response(200)
        handler.send_header("Content-Type", PROM)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        step = len(body) // 8 + 1
        try:
            for i in range(0, len(body), step):
                handler.wfile.write(body[i : i + step])
                handler.wfile.flush()
                time.sleep(0.15)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return 0, "", b""

    with serve({"/metrics": trickle}) as (base, _, _h):
        with pytest.raises(EndpointError, match=r"timed out after 0.4 s"):
            scrape(base, timeout=0.4, retries=0)


def test_connection_refused() -> None:
    port = _free_port()
    with pytest.raises(EndpointError) as exc:
        scrape(f"http://127.0.0.1:{port}", retries=1, **FAST)
    assert str(exc.value) == (
        f"http://127.0.0.1:{port}/metrics: connection refused at 127.0.0.1:{port} "
        "(is the server running on that port?) (tried 2 times)"
    )


def test_bearer_token(fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = _dump(fixtures_dir, "E_02_after_bench_in6000_c8.txt")
    secret = "s3cret-token-value"

    def guarded(handler, n):
        if handler.headers.get("Authorization") != f"Bearer {secret}":
            return 401, "text/plain", b"unauthorized"
        return 200, PROM, body

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with serve({"/metrics": guarded}) as (base, hits, _):
        snap = scrape(base, bearer_token=secret, **FAST)
        assert snap.family("vllm:num_preemptions").samples[0].value == 31.0

        with pytest.raises(EndpointError, match=rf"HTTP 401: the endpoint needs a bearer token \(set {TOKEN_ENV}\)"):
            scrape(base, **FAST)

        with pytest.raises(EndpointError, match="HTTP 401: the bearer token was rejected") as exc:
            scrape(base, bearer_token="wrong-" + secret, **FAST)
        assert secret not in str(exc.value)

        monkeypatch.setenv(TOKEN_ENV, secret)
        assert scrape(base, **FAST).family("vllm:num_preemptions").samples[0].value == 31.0

        # credentials in the URL never reach a message either
        with pytest.raises(EndpointError) as exc:
            scrape(base.replace("http://", "http://user:hunter2@") + "/nope?token=abc", bearer_token="x", **FAST)
        assert "hunter2" not in str(exc.value) and "abc" not in str(exc.value)
        assert "HTTP 404" in str(exc.value)


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_verification_options(fixtures_dir: Path, self_signed: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = self_signed
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    body = _dump(fixtures_dir, "A_03b_after_bench_in1024_c1.txt")
    with serve({"/metrics": _static(body)}, tls=ctx) as (base, _, _h):
        assert base.startswith("https://")
        with pytest.raises(EndpointError, match="TLS certificate verification failed"):
            scrape(base, retries=2, **FAST)
        assert scrape(base, verify=str(cert), **FAST).family("vllm:generation_tokens").samples[0].value == 11296.0
        assert scrape(base, verify=False, **FAST).family("vllm:generation_tokens").samples[0].value == 11296.0
    with pytest.raises(EndpointError, match="CA bundle not found"):
        scrape("https://127.0.0.1:1", verify=str(tmp_path / "missing.pem"), **FAST)
    not_pem = tmp_path / "bundle.pem"
    not_pem.write_text("not a certificate")
    with pytest.raises(EndpointError, match="CA bundle is not a PEM certificate file"):
        scrape("https://127.0.0.1:1", verify=str(not_pem), **FAST)


def test_load_metrics_source_scrapes_urls(fixtures_dir: Path) -> None:
    with serve({"/metrics": _static(_dump(fixtures_dir, "E_02_after_bench_in6000_c8.txt"))}) as (base, hits, _):
        [snap] = load_metrics_source(base, timestamp=1.0, **FAST)  # timestamp is for files; ignored here
        assert hits["/metrics"] == 1
    assert snap.timestamp != 1.0
    assert snap.family("vllm:num_preemptions").samples[0].value == 31.0


# ---------------------------------------------------------------------------------------------
# watch


def _sequence(bodies: list[bytes]) -> Route:
    """The n-th request gets the n-th body (the last one repeats)."""
    return lambda handler, n: (200, PROM, bodies[min(n, len(bodies)) - 1])


def test_watch_writes_jsonl_and_windows_a_real_run(fixtures_dir: Path, tmp_path: Path) -> None:
    """A server whose /metrics moves from 'before' to 'after' the in1024 c1 bench run."""
    bodies = [_dump(fixtures_dir, "A_03a_before_bench_in1024_c1.txt")] * 2 + [_dump(fixtures_dir, "A_03b_after_bench_in1024_c1.txt")]
    out = tmp_path / "watch" / "snaps.jsonl"
    seen: list[int] = []
    with serve({"/metrics": _sequence(bodies)}) as (base, hits, _):
        snaps = watch(base, duration=0.4, interval=0.1, out_path=out, on_sample=lambda s, i: seen.append(i), **FAST)
        assert hits["/metrics"] == len(snaps)
    assert 3 <= len(snaps) <= 5
    assert seen == list(range(len(snaps)))
    assert all(b.timestamp > a.timestamp for a, b in zip(snaps, snaps[1:]))
    lines = out.read_text().splitlines()
    assert len(lines) == len(snaps)

    loaded = load_metrics_file(out)
    assert [s.timestamp for s in loaded] == [s.timestamp for s in snaps]
    window = compute_window(loaded)
    assert window.num_snapshots == len(snaps)
    # the samples' own span: 3 samples 0.1 s apart when a slow scrape (a loaded machine) skipped the last slots
    assert (len(snaps) - 1) * 0.1 * 0.9 < window.duration_s < 1.0
    [engine] = summarize_window(window)["engines"]
    assert engine["generation_tokens"] == 2048.0
    assert engine["generation_tokens_per_s"] == pytest.approx(2048.0 / window.duration_s)


def test_watch_survives_a_failing_scrape(fixtures_dir: Path) -> None:
    body = _dump(fixtures_dir, "E_02_after_bench_in6000_c8.txt")

    def second_fails(handler, n):
        return (500, "text/plain", b"oops") if n == 2 else (200, PROM, body)

    # slots 0.5 s apart: at 0.2 s a loaded machine (a fresh clone's suite beside other work) took longer
    # than the whole 0.4 s watch over its first scrape, and the watch ended after one sample
    with serve({"/metrics": second_fails}) as (base, hits, _):
        snaps = watch(base, duration=1.0, interval=0.5, out_path=None, retries=0, timeout=0.5)
        assert hits["/metrics"] == 3
    assert len(snaps) == 2
    assert snaps[1].notes == ["sample at +0.5 s failed: HTTP 500"]


def test_watch_all_failing_raises() -> None:
    port = _free_port()
    with pytest.raises(EndpointError, match=r"all 3 scrapes failed; last: connection refused"):
        watch(f"http://127.0.0.1:{port}", duration=0.1, interval=0.05, retries=0, timeout=0.3)


def test_watch_ctrl_c_keeps_what_was_sampled(fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "snaps.jsonl"

    def interrupt_on_second(snap, index):
        if index == 1:
            raise KeyboardInterrupt

    with serve({"/metrics": _static(_dump(fixtures_dir, "A_00_fresh_no_requests.txt"))}) as (base, _, _h):
        snaps = watch(base, duration=10, interval=0.05, out_path=out, on_sample=interrupt_on_second, **FAST)
    assert len(snaps) == 2
    assert snaps[-1].notes == ["watch interrupted after 2 sample(s)"]
    assert len(load_metrics_file(out)) == 2


def test_watch_arguments() -> None:
    with pytest.raises(UsageError):
        watch("http://127.0.0.1:1", duration=1, interval=0)
    with pytest.raises(UsageError):
        watch("http://127.0.0.1:1", duration=-1, interval=1)


def test_jsonl_with_cut_last_line_and_bad_middle_line(fixtures_dir: Path, tmp_path: Path) -> None:
    with serve({"/metrics": _static(_dump(fixtures_dir, "A_00_fresh_no_requests.txt"))}) as (base, _, _h):
        out = tmp_path / "snaps.jsonl"
        # 1 s for 3 scrapes 0.05 s apart: 0.1 s gave only 2 on a loaded 2-core machine (scrapes queue).
        watch(base, duration=1.0, interval=0.05, out_path=out, **FAST)
    lines = out.read_text().splitlines()[:3]
    assert len(lines) == 3
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:2] + [lines[2][: len(lines[2]) // 2]]))
    snaps = load_metrics_file(cut)
    assert len(snaps) == 2
    assert snaps[-1].notes[-1] == f"{cut}: line 3 is cut off (interrupted write?) and was skipped"

    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], '{"source": 5}', lines[1]]))
    with pytest.raises(Exception, match=r"line 2: not a metrics snapshot \(source: Input should be a valid string\)"):
        load_metrics_file(bad)
