"""GET a vLLM ``/metrics`` endpoint and turn the answer into a snapshot, or one clear error line.

WHY this much care for one GET: the endpoint is often behind a proxy or gateway that answers with
a login page, a 502 while the pod restarts, or nothing at all; people paste the OpenAI base URL
(``http://host:8000/v1``) instead of the metrics URL. Each of those becomes an
:class:`~vllm_advisor.errors.EndpointError` that says what happened, after retrying the failures
that are worth retrying (connect errors, timeouts, 5xx) with exponential backoff.
The bearer token is sent in a header only; messages show the URL without credentials or query.
"""

from __future__ import annotations

import os
import ssl
import time
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit, urlunsplit

import httpx

from ...errors import EndpointError
from ...schema.metrics import MetricsSnapshot
from .parse import parse_metrics_text

#: environment variable holding the bearer token when none is passed explicitly
TOKEN_ENV = "VLLM_ADVISOR_METRICS_TOKEN"
#: ask for the classic text format: prometheus_client answers OpenMetrics if asked, which the
#: text parser reads differently (``_total`` counters, ``# EOF``)
_ACCEPT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"


def metrics_url(url: str) -> str:
    """The ``/metrics`` URL for what the user typed: a base URL gets ``/metrics`` appended, and an
    OpenAI base URL ending in ``/v1`` is replaced (vLLM serves ``/metrics`` at the root)."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise EndpointError("not an http(s) URL (expected e.g. http://localhost:8000/metrics)", source=display_url(url))
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    if not path.endswith("/metrics"):
        path = f"{path}/metrics"
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, parts.query, ""))


def display_url(url: str) -> str:
    """The URL as it may appear in messages: no user:password, no query string (either can hold secrets)."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", "")) if parts.scheme else url.split("?")[0]
    except ValueError:
        return "<unparsable URL>"


def make_client(*, timeout: float = 10, verify: bool | str = True) -> httpx.Client:
    """An httpx client with the timeout and TLS settings (``verify``: True, False or a CA bundle path).
    Each request, headers included, ends within ``timeout`` (``probe/http.py``): a server that drips
    its headers a byte a second never trips httpx's per-read timeouts. The body is capped where it is
    read (:func:`read_bounded`, whose error says the answer is no /metrics page); the transport's own
    cap sits above it, so that it only backs it up and never speaks first."""
    from ..http import bounded_client, max_body_bytes

    return bounded_client(per_request_s=timeout, max_bytes=2 * max_body_bytes(), timeout=timeout, verify=_tls_setting(verify), follow_redirects=True)


def scrape(
    url: str,
    *,
    timeout: float = 10,
    retries: int = 2,
    backoff: float = 0.5,
    bearer_token: str | None = None,
    verify: bool | str = True,
    client: httpx.Client | None = None,
) -> MetricsSnapshot:
    """One GET of ``/metrics`` -> snapshot (timestamp = time of the answer), or :class:`EndpointError`."""
    target = metrics_url(url)
    shown = display_url(target)
    token = bearer_token if bearer_token is not None else (os.environ.get(TOKEN_ENV) or None)
    headers = {"Accept": _ACCEPT}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    own_client = client is None
    http = make_client(timeout=timeout, verify=verify) if own_client else client
    try:
        body, content_type, answered_at = _get_with_retries(http, target, shown, headers, timeout, retries, backoff, bool(token))
    finally:
        if own_client:
            http.close()

    text = _check_body(body, content_type, shown)
    snapshot = parse_metrics_text(text, source=shown, timestamp=answered_at)
    require_vllm_metrics(snapshot, shown, EndpointError)
    return snapshot


def require_vllm_metrics(snapshot: MetricsSnapshot, source: str, error: type[Exception]) -> None:
    """Refuse a body with no Prometheus families, or with families but none from vLLM."""
    if not snapshot.families:
        extra = f" ({snapshot.skipped_lines} lines, none in the Prometheus text format)" if snapshot.skipped_lines else ""
        raise error(f"no Prometheus metrics found{extra}", source=source)
    if not any(name.startswith("vllm:") for name in snapshot.families):
        raise error(
            f"not a vLLM /metrics endpoint: {len(snapshot.families)} Prometheus metric families, none named vllm:* "
            "(vLLM exports none when started with --disable-log-stats)",
            source=source,
        )


def _get_with_retries(
    http: httpx.Client,
    target: str,
    shown: str,
    headers: dict[str, str],
    timeout: float,
    retries: int,
    backoff: float,
    sent_token: bool,
) -> tuple[bytes, str, float]:
    attempts = max(0, int(retries)) + 1
    failure = "no attempt made"
    for attempt in range(attempts):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            status, content_type, body = _get_once(http, target, headers, timeout)
        except _TotalTimeout:
            failure = f"timed out after {timeout:g} s"
            continue
        except httpx.TimeoutException:
            failure = f"timed out after {timeout:g} s"
            continue
        except httpx.ConnectError as exc:
            if _is_tls_failure(exc):
                raise EndpointError(
                    "TLS certificate verification failed (pass a CA bundle with verify=PATH, or verify=False "
                    "for a self-signed test server)",
                    source=shown,
                ) from None
            failure = _connect_failure(exc, target)
            continue
        except httpx.TransportError as exc:
            failure = f"connection failed ({type(exc).__name__})"
            continue
        except httpx.TooManyRedirects:
            raise EndpointError("redirected too many times (a redirect loop?)", source=shown) from None
        except _TooLarge as exc:
            raise EndpointError(str(exc), source=shown) from None
        if status >= 500:
            failure = f"HTTP {status}"
            continue
        if status in (401, 403):
            hint = (
                "the bearer token was rejected"
                if sent_token
                else f"the endpoint needs a bearer token (set {TOKEN_ENV})"
            )
            raise EndpointError(f"HTTP {status}: {hint}", source=shown)
        if status == 404:
            raise EndpointError("HTTP 404: no metrics at this URL (vLLM serves them at /metrics)", source=shown)
        if status >= 400:
            raise EndpointError(f"HTTP {status}", source=shown)
        return body, content_type, time.time()
    tries = f" (tried {attempts} times)" if attempts > 1 else ""
    raise EndpointError(f"{failure}{tries}", source=shown)


class _TotalTimeout(Exception):
    """The body kept trickling in past the timeout (httpx's timeouts are per read, not per request)."""


class _TooLarge(Exception):
    pass


def _get_once(http: httpx.Client, target: str, headers: dict[str, str], timeout: float) -> tuple[int, str, bytes]:
    from ..http import max_body_bytes

    deadline = time.monotonic() + timeout
    limit = max_body_bytes()
    with http.stream("GET", target, headers=headers, timeout=timeout) as response:
        if response.status_code >= 400:
            return response.status_code, response.headers.get("content-type", ""), b""
        body = read_bounded(response, deadline, limit, too_large=lambda: _TooLarge(f"answer is over {limit / 2**20:g} MiB; not a /metrics page (VLLM_ADVISOR_MAX_HTTP_MB raises the limit)"),
                            too_slow=_TotalTimeout)
        return response.status_code, response.headers.get("content-type", ""), body


def read_bounded(response: httpx.Response, deadline: float, limit: int, *,
                 too_large: Callable[[], Exception], too_slow: Callable[[], Exception]) -> bytes:
    """A streamed body, refused past ``limit`` bytes or past ``deadline`` (``time.monotonic``): a
    per-read timeout alone lets a server that trickles bytes hold the caller forever."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise too_large()
        if time.monotonic() > deadline:
            raise too_slow()
    return b"".join(chunks)


def _check_body(body: bytes, content_type: str, shown: str) -> str:
    text = body.decode(_charset(content_type), errors="replace")
    head = text.lstrip()[:200].lower()
    if not head:
        raise EndpointError("returned an empty body, not Prometheus text", source=shown)
    if "text/html" in content_type.lower() or head.startswith(("<!doctype html", "<html", "<head", "<body")):
        raise EndpointError(
            "returned an HTML page, not Prometheus text (a proxy or login page? check the port and path)",
            source=shown,
        )
    if "application/json" in content_type.lower() or head.startswith(("{", "[")):
        raise EndpointError("returned JSON, not Prometheus text (is this the OpenAI API port/path?)", source=shown)
    return text


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            try:
                "".encode(value.strip('"'))
                return value.strip('"')
            except LookupError:
                break
    return "utf-8"


def _connect_failure(exc: httpx.ConnectError, target: str) -> str:
    text = str(exc).lower()
    parts = urlsplit(target)
    where = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    if "refused" in text or "errno 111" in text or "errno 61" in text:
        return f"connection refused at {where} (is the server running on that port?)"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return f"cannot resolve host {parts.hostname}"
    if "unreachable" in text:
        return f"network unreachable for {where}"
    return f"cannot connect to {where}"


def _is_tls_failure(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _tls_setting(verify: bool | str) -> bool | ssl.SSLContext:
    """httpx wants an SSLContext for a CA bundle; build it here so a bad path is one clear line."""
    if isinstance(verify, bool):
        return verify
    path = Path(verify)
    if not path.is_file():
        raise EndpointError("CA bundle not found", source=str(verify))
    try:
        return ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise EndpointError(f"CA bundle is not a PEM certificate file ({type(exc).__name__})", source=str(verify)) from None
