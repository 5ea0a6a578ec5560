"""HTTP with a total deadline and a body cap, for every call the advisor makes to a server.

Why: httpx's timeouts are per read. A server that sends keep-alive pings, drips a byte a second or
streams without end never trips them, and a body of a gigabyte is read whole into memory. The
transport here wraps httpx's own: every response body is streamed through a counter that stops at
``max_bytes`` and at the deadline (checked on every chunk, so pings and drips count), the status
line and headers are waited for no longer than the deadline either (a server may drip those too),
and each request's socket timeouts are cut to the time left. A read that gets no byte at all is ended by
that socket timeout. :func:`call_with_deadline` adds the last piece for calls made through other
libraries (the OpenAI client): the call runs in a worker thread that the caller stops waiting
for at the deadline, and Ctrl-C reaches the caller at once.

The errors raised are httpx's own classes (``ReadTimeout``, ``ReadError``), so every caller's
existing handling of a timeout or a broken connection applies unchanged.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
import time
from typing import Any, Callable, Iterator, TypeVar

import httpx

T = TypeVar("T")

#: Largest answer body read from any endpoint (/v1/models, /tokenize, a completion stream, an LLM
#: answer). Real ones are kilobytes; a streamed answer of 4,000 tokens is ~1 MB of SSE chunks.
#: VLLM_ADVISOR_MAX_HTTP_MB overrides.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: How long a caller that stopped waiting gives the worker to end once its connection is closed.
ABANDON_JOIN_S = 1.0


def max_body_bytes() -> int:
    raw = os.environ.get("VLLM_ADVISOR_MAX_HTTP_MB")
    try:
        return int(float(raw) * 1024 * 1024) if raw else DEFAULT_MAX_BODY_BYTES
    except (ValueError, OverflowError):
        return DEFAULT_MAX_BODY_BYTES


class AnswerTooLarge(httpx.ReadError):
    """The body passed the size cap."""


class AnswerTooSlow(httpx.ReadTimeout):
    """The whole answer took longer than its deadline (pings, a drip, an endless stream)."""


def _cap_timeouts(request: httpx.Request, left: float) -> None:
    """Every socket wait of this request at most the time left (never 0: that means 'no wait')."""
    timeouts = dict(request.extensions.get("timeout") or {})
    for key in ("connect", "read", "write", "pool"):
        value = timeouts.get(key)
        timeouts[key] = max(0.05, left if value is None else min(value, left))
    request.extensions["timeout"] = timeouts


class _Budget:
    def __init__(self, request: httpx.Request, deadline: float, max_bytes: int) -> None:
        self.request, self.deadline, self.max_bytes, self.size = request, deadline, max_bytes, 0

    def check(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise AnswerTooLarge(f"answer over {self.max_bytes / 2**20:g} MiB; stopped reading", request=self.request)
        if time.monotonic() > self.deadline:
            raise AnswerTooSlow("answer not complete within its deadline", request=self.request)


class _CappedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, budget: _Budget) -> None:
        self.inner, self.budget = inner, budget

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.budget.check(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _CappedAsyncStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, budget: _Budget) -> None:
        self.inner, self.budget = inner, budget

    async def __aiter__(self):
        async for chunk in self.inner:
            self.budget.check(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Deadlines:
    """A fixed deadline (``deadline_at``, time.monotonic) shared by every request of one answer, or
    ``per_request_s`` from each request's start, or both (the earlier wins)."""

    def __init__(self, deadline_at: float | None, per_request_s: float | None, max_bytes: int | None) -> None:
        if deadline_at is None and per_request_s is None:
            raise ValueError("a bounded transport needs a deadline")
        self.deadline_at, self.per_request_s = deadline_at, per_request_s
        self.max_bytes = max_bytes if max_bytes is not None else max_body_bytes()

    def start(self, request: httpx.Request) -> _Budget:
        now = time.monotonic()
        deadline = min(d for d in (self.deadline_at, None if self.per_request_s is None else now + self.per_request_s) if d is not None)
        if now >= deadline:
            raise AnswerTooSlow("no time left for this request", request=request)
        _cap_timeouts(request, deadline - now)
        return _Budget(request, deadline, self.max_bytes)


class BoundedTransport(httpx.BaseTransport):
    def __init__(self, *, deadline_at: float | None = None, per_request_s: float | None = None, max_bytes: int | None = None, **kwargs: Any) -> None:
        self.limits = _Deadlines(deadline_at, per_request_s, max_bytes)
        self.kwargs = kwargs
        self.inner = httpx.HTTPTransport(**kwargs)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        budget = self.limits.start(request)
        # the status line and headers under the same deadline: a server that drips its headers a byte
        # a second never trips a socket timeout, and httpx returns only once they are complete
        inner = self.inner
        try:
            response = call_with_deadline(lambda: inner.handle_request(request), budget.deadline - time.monotonic(), on_abandon=inner.close)
        except AnswerTooSlow:
            self.inner = httpx.HTTPTransport(**self.kwargs)  # the abandoned one is closed: later requests get a fresh pool
            raise AnswerTooSlow("answer headers not complete within the deadline", request=request) from None
        response.stream = _CappedStream(response.stream, budget)  # type: ignore[arg-type]
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncBoundedTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, deadline_at: float | None = None, per_request_s: float | None = None, max_bytes: int | None = None, **kwargs: Any) -> None:
        self.limits = _Deadlines(deadline_at, per_request_s, max_bytes)
        self.inner = httpx.AsyncHTTPTransport(**kwargs)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import asyncio

        budget = self.limits.start(request)
        try:  # the headers under the deadline too (see BoundedTransport)
            response = await asyncio.wait_for(self.inner.handle_async_request(request), max(0.05, budget.deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise AnswerTooSlow("answer headers not complete within the deadline", request=request) from None
        response.stream = _CappedAsyncStream(response.stream, budget)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


_TRANSPORT_KEYS = ("verify", "cert", "http1", "http2", "limits", "trust_env", "retries")


def bounded_client(*, deadline_at: float | None = None, per_request_s: float | None = None, max_bytes: int | None = None, **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` whose every answer is bounded (see module doc); other keyword arguments
    go to the client (``headers``, ``timeout``, ``follow_redirects``) or its transport (``verify``, ``limits``)."""
    transport_kwargs = {k: kwargs.pop(k) for k in _TRANSPORT_KEYS if k in kwargs}
    transport = BoundedTransport(deadline_at=deadline_at, per_request_s=per_request_s, max_bytes=max_bytes, **transport_kwargs)
    return httpx.Client(transport=transport, **kwargs)


def bounded_async_client(*, deadline_at: float | None = None, per_request_s: float | None = None, max_bytes: int | None = None, **kwargs: Any) -> httpx.AsyncClient:
    transport_kwargs = {k: kwargs.pop(k) for k in _TRANSPORT_KEYS if k in kwargs}
    transport = AsyncBoundedTransport(deadline_at=deadline_at, per_request_s=per_request_s, max_bytes=max_bytes, **transport_kwargs)
    return httpx.AsyncClient(transport=transport, **kwargs)


_WORKERS: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()


@atexit.register
def _let_workers_end() -> None:
    """At exit, give workers that were given up on (their sockets closed) up to 2 s to end."""
    end = time.monotonic() + 2 * ABANDON_JOIN_S
    for worker in list(_WORKERS):
        worker.join(max(0.0, end - time.monotonic()))


#: How often a caller waiting on a worker wakes to look at ``check`` and at pending signals: a Ctrl-C
#: the kernel hands to the worker thread rather than the main one is still acted on this soon.
POLL_S = 0.1


def call_with_deadline(fn: Callable[[], T], seconds: float, *, on_abandon: Callable[[], None] | None = None,
                       check: Callable[[], None] | None = None) -> T:
    """``fn()`` in a daemon worker thread; the caller waits at most ``seconds`` and then raises
    :class:`AnswerTooSlow` (``on_abandon`` runs first: close the client so the worker's socket
    ends). Ctrl-C interrupts the wait at once, and so does ``check`` raising (a chat's cancel button):
    the caller waits in slices of :data:`POLL_S`, gives the worker up and re-raises."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as raised
            box["error"] = exc

    def abandon() -> None:
        # close the worker's connection and give it a moment to end: a daemon thread still running
        # library code (Rust JSON parsers, say) when the interpreter exits can abort the process
        if on_abandon:
            try:
                on_abandon()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        worker.join(ABANDON_JOIN_S)

    worker = threading.Thread(target=work, name="advisor-http", daemon=True)
    worker.start()
    _WORKERS.add(worker)
    end = time.monotonic() + max(0.0, seconds)
    try:
        while worker.is_alive():
            left = end - time.monotonic()
            if left <= 0:
                break
            worker.join(min(POLL_S, left))
            if check is not None and worker.is_alive():
                check()
    except BaseException:  # Ctrl-C, or check() saying the caller gave up
        abandon()
        raise
    if worker.is_alive():
        abandon()
        raise AnswerTooSlow(f"no complete answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


async def in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``await`` a blocking call made in a daemon thread. Unlike ``asyncio.to_thread`` the thread is
    not the loop's default executor, which ``asyncio.run`` waits for on exit: a Ctrl-C while a
    server holds the call ends the command at once instead of after the server's deadline."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome: tuple[Callable[[Any], None], Any] = (future.set_exception, exc)
        else:
            outcome = (future.set_result, result)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop closed meanwhile (the command was interrupted)
            pass

    threading.Thread(target=work, name="advisor-http", daemon=True).start()
    return await future
