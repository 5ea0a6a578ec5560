"""A loopback HTTP server that answers badly on purpose: the 15 endpoint faults of issue 19.

Every path is ``/f/<fault>/...``; the rest of the path says which endpoint the client thinks it is
talking to (``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``, ``/tokenize``,
``/detokenize``, ``/metrics``). Paths a fault does not concern answer correctly, so each fault hits
the call it is meant for. Endless answers stop when the client goes away or the server is closed.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = (
    "endless_models",  # /v1/models streams a model list that never ends
    "huge_body",  # a 1 GB body, sent as fast as the client reads
    "slow_drip",  # headers, then one byte every 0.3 s, forever
    "pings",  # streams that carry only SSE keep-alive comments (": ping"), forever
    "stall",  # reads the request and never answers
    "endless_stream",  # a completion stream of valid token chunks that never ends
    "bad_tokenize",  # /tokenize answers a JSON list, then tokens that are not integers
    "bad_usage",  # usage reports of the wrong type and absurd size
    "http500",  # every call answers HTTP 500
    "html",  # every call answers a login page
    "bad_json",  # truncated JSON bodies and non-JSON stream chunks
    "reset",  # the connection is closed without an answer
    "redirect_loop",  # 302 to itself
    "huge_label",  # /metrics with a 10 MB label value
    "wrong_shape",  # JSON of the wrong shape: {"data": "x"}, choices that are not lists
    "header_drip",  # the status line, then header lines one byte every 0.3 s, never ended
)

METRICS = """# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
"""


def _chunk(text: str, usage: dict | None = None, chat: bool = False) -> bytes:
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    body = {"id": "x", "object": "chat.completion.chunk" if chat else "text_completion", "model": "m", "choices": [choice]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "FaultServer"

    def log_message(self, *args) -> None:  # quiet
        pass

    # -- helpers ----------------------------------------------------------------------------
    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def _send(self, status: int, body: bytes, ctype: str = "application/json", extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _start_stream(self, ctype: str = "text/event-stream", length: int | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        if length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _forever(self, piece: bytes, pause: float) -> None:
        while not self.server.closing.is_set():
            self._write_chunk(piece)
            if pause:
                time.sleep(pause)

    # -- routing ----------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        parts = self.path.split("/", 3)  # '', 'f', fault, rest
        fault, rest = (parts[2], "/" + (parts[3] if len(parts) > 3 else "")) if len(parts) > 2 and parts[1] == "f" else ("none", self.path)
        body = self._body() if method == "POST" else {}
        try:
            self._answer(fault, rest.split("?")[0], body)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            pass

    def _answer(self, fault: str, path: str, body: dict) -> None:
        chat = path.endswith("/chat/completions")
        if fault == "stall":
            self.server.closing.wait(120)
            return
        if fault == "reset":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault == "http500":
            return self._send(500, b'{"error": {"message": "boom"}}')
        if fault == "html":
            return self._send(200, b"<!doctype html><html><body>Please log in</body></html>", "text/html")
        if fault == "redirect_loop":
            return self._send(302, b"", extra={"Location": f"/f/{fault}{path}"})
        if fault == "huge_body":
            self._start_stream("application/json", length=1024**3)
            zeros = b" " * 65536
            while not self.server.closing.is_set():
                self.wfile.write(zeros)
            return
        if fault == "header_drip":  # httpx returns a response only once its headers end: they never do
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            while not self.server.closing.is_set():
                for byte in b"X-Pad: a\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.3)
            return
        if fault == "slow_drip":
            self._start_stream("application/json" if not path.endswith("completions") else "text/event-stream")
            return self._forever(b" ", 0.3)
        if path.endswith("/models"):
            if fault == "endless_models":
                self._start_stream("application/json")
                self._write_chunk(b'{"object": "list", "data": [')
                return self._forever(b'{"id": "m", "object": "model"},' * 200, 0.0)
            if fault == "bad_json":
                return self._send(200, b'{"object": "list", "data": [{"id": "m"')
            if fault == "wrong_shape":
                return self._send(200, b'{"data": "m"}')
            return self._send(200, b'{"object": "list", "data": [{"id": "m", "object": "model"}]}')
        if path.endswith("/metrics"):
            if fault == "pings":
                self._start_stream("text/plain")
                return self._forever(b"# ping\n", 0.2)
            if fault == "huge_label":
                label = "x" * 10_000_000
                return self._send(200, (METRICS + f'vllm:num_requests_running{{model_name="{label}"}} 1\n').encode(), "text/plain")
            if fault == "bad_json":
                return self._send(200, b'{"families": [', "application/json")
            return self._send(200, METRICS.encode(), "text/plain; version=0.0.4")
        if path.endswith("/tokenize"):
            if fault == "bad_tokenize":
                self.server.tokenize_calls += 1
                return self._send(200, b"[1, 2, 3]" if self.server.tokenize_calls % 2 else b'{"tokens": ["a", "b"], "count": "2"}')
            text = body.get("prompt") or json.dumps(body.get("messages"))
            tokens = list(range(max(1, len(str(text)) // 4)))
            return self._send(200, json.dumps({"tokens": tokens, "count": len(tokens)}).encode())
        if path.endswith("/detokenize"):
            return self._send(200, json.dumps({"prompt": "w " * len(body.get("tokens") or [])}).encode())
        if path.endswith("completions"):
            if fault == "bad_json" and not body.get("stream"):
                return self._send(200, b'{"choices": [')
            if fault == "wrong_shape" and not body.get("stream"):
                return self._send(200, b'{"choices": 5}')
            self._start_stream()
            if fault == "pings":
                return self._forever(b": ping\n\n", 0.2)
            if fault == "endless_stream":
                return self._forever(_chunk("tok ", chat=chat), 0.01)
            if fault == "bad_json":
                self._write_chunk(b"data: {not json\n\n")
            elif fault == "wrong_shape":
                self._write_chunk(b'data: {"choices": 5}\n\n')
            else:
                for i in range(4):
                    self._write_chunk(_chunk(f"t{i} ", chat=chat))
                usage = {"completion_tokens": 4, "prompt_tokens": 10}
                if fault == "bad_usage":
                    usage = {"completion_tokens": "lots", "prompt_tokens": -5} if self.server.usage_calls % 2 else {"completion_tokens": 10**30, "prompt_tokens": [1]}
                    self.server.usage_calls += 1
                self._write_chunk(_chunk("", usage=usage, chat=chat))
                self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")
            return
        return self._send(404, b'{"error": "not found"}')


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.closing = threading.Event()
        self.tokenize_calls = 0
        self.usage_calls = 0
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def url(self, fault: str) -> str:
        return f"{self.root}/f/{fault}"

    def __enter__(self) -> "FaultServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.shutdown()
        self.server_close()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen_interruptible(args, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` whose child takes Ctrl-C as it would from a terminal. A shell that runs the
    suite in the background (``make test &``, a runner without job control) starts it with SIGINT
    ignored; children inherit that, and Python then never raises KeyboardInterrupt, so a Ctrl-C test
    would fail on how it was launched rather than on the command under test."""
    return subprocess.Popen(args, preexec_fn=_default_sigint, **kwargs)


def interrupt_and_wait(child, timeout: float = 30) -> tuple[str, str]:
    """Send Ctrl-C (SIGINT) to a child started with ``PYTHONFAULTHANDLER=1`` and wait for it. When it
    does not end in time, SIGABRT makes Python's fault handler print every thread's stack, and the
    test fails with that stack: a Ctrl-C that is lost says where the command was waiting."""
    child.send_signal(signal.SIGINT)
    try:
        return child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGABRT)
        _, err = child.communicate(timeout=30)
        raise AssertionError(f"Ctrl-C was not honoured within {timeout:g} s; the child's threads:\n{err[-6000:]}") from None
