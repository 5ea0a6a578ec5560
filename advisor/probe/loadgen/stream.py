"""One streamed request to an OpenAI-compatible server, timed the way ``vllm bench serve`` times it.

Timing rules (``vllm/benchmarks/lib/endpoint_request_func.py``, v0.32): the clock starts just
before the request is sent; TTFT is the arrival of the first chunk that carries a generated token;
every later token chunk adds one inter-token gap; the request ends at its last token chunk (the
trailing usage chunk carries no token and does not count). Token counts come from the server's
``usage`` (``stream_options.include_usage``), so they are the engine's own counts.

One deliberate difference for ``/v1/chat/completions``: vllm bench starts TTFT at the first chunk
of any kind, including the role-only chunk; here a chunk counts once it carries text, because
other servers send the role chunk before any generation has happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from .spec import Endpoint


@dataclass
class RequestRecord:
    """What the client saw of one request. Times in seconds, relative to ``time.perf_counter``."""

    index: int
    sent_at: float = 0.0
    ttft_s: float = 0.0
    itls_s: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    token_chunks: int = 0
    finish_reason: str | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.token_chunks > 0


def request_body(endpoint: Endpoint, model: str, prompt: str, output_len: int, ignore_eos: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": output_len,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM extension: generate exactly max_tokens
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def endpoint_path(endpoint: Endpoint) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


def _carries_token(endpoint: Endpoint, choice: dict[str, Any]) -> bool:
    """Completions: every chunk with a choice is one engine step's token (its text may be empty for
    a special token), as vllm bench counts it. Chat: only chunks with content or reasoning text."""
    if endpoint != "chat":
        return True
    delta = choice.get("delta") or {}
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))


async def send_request(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    endpoint: Endpoint,
    index: int,
    *,
    headers: dict[str, str] | None = None,
) -> RequestRecord:
    """Send one streaming request; failures are recorded on the record, never raised."""
    record = RequestRecord(index=index)
    start = time.perf_counter()
    record.sent_at = start
    last = start
    try:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                record.error = f"HTTP {response.status_code}: {_error_message(text)}"
                return record
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators and ': ping' comments
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                now = time.perf_counter()
                data = orjson.loads(payload)
                if not isinstance(data, dict):
                    record.error = "the stream carried a chunk that is not a JSON object"
                    break
                if data.get("error"):
                    record.error = f"stream error: {_error_message(orjson.dumps(data['error']).decode())}"
                    break
                choices = data.get("choices") or []
                if choices:
                    choice = choices[0]
                    record.finish_reason = choice.get("finish_reason") or record.finish_reason
                    if _carries_token(endpoint, choice):
                        if record.token_chunks == 0:
                            record.ttft_s = now - start
                        else:
                            record.itls_s.append(now - last)
                        record.token_chunks += 1
                        last = now
                usage = data.get("usage")
                if isinstance(usage, dict):
                    record.output_tokens = _count(usage.get("completion_tokens"), record.output_tokens)
                    record.prompt_tokens = _count(usage.get("prompt_tokens"), record.prompt_tokens)
    except httpx.TimeoutException:
        record.error = f"timed out after {time.perf_counter() - start:.1f} s"
    except httpx.HTTPError as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    except orjson.JSONDecodeError:
        record.error = "the stream carried a chunk that is not JSON"
    except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a chunk of an unexpected shape
        record.error = f"the stream carried a chunk of an unexpected shape ({type(exc).__name__}: {exc})"
    if not record.error and record.token_chunks == 0:
        record.error = "the stream ended without a single token"
    record.latency_s = last - start
    if record.output_tokens is None and record.ok:
        record.output_tokens = record.token_chunks  # no usage report: one token per chunk (vLLM streams one per step)
    return record


def _count(value: Any, previous: int | None) -> int | None:
    """A token count from a usage report; anything but a plausible integer keeps what was known
    (a malformed report must not turn into a crash or a figure of -3 or 1e30 tokens)."""
    if type(value) is int and 0 <= value < 100_000_000:
        return value
    return previous


def _error_message(text: str) -> str:
    """The server's own message from an OpenAI-style error body, else the body's start."""
    try:
        data = orjson.loads(text)
        if isinstance(data, dict):
            inner = data.get("error", data)
            if isinstance(inner, dict) and inner.get("message"):
                return " ".join(str(inner["message"]).split())[:300]
            if isinstance(inner, str):
                return inner[:300]
    except orjson.JSONDecodeError:
        pass
    return " ".join(text.split())[:300]
