"""A fleet's vLLM metrics from the Prometheus that scrapes it: one window per instance and one summed.

WHY: with many vLLM instances nobody scrapes each ``/metrics`` by hand; Prometheus already holds every
instance's history. One ``GET /api/v1/query_range`` for the ``vllm:*`` series over the last ``since_s``
seconds gives the same samples a ``watch`` would have taken, for every instance at once, so they are
read step by step the way :func:`~.window.compute_window` reads snapshots (see :mod:`.fleet`) and
summarised by the same window math. :func:`fleet_from_matrix` does that for an answer already in hand.

Counter resets are found per step: a drop, or a change of the ``*_created`` time vLLM exports next to
each counter and histogram, so a restart between two steps is caught even when the counter has climbed
back above its previous value by the next step.

Family types (counter, gauge, histogram) come from ``/api/v1/metadata``; when Prometheus has no metadata
for a name (a target that is gone, a Prometheus-compatible store without the endpoint) the type is
inferred from the name, and the notes say which was used.

Every failure of the server (refused, timeout, not JSON, ``status: error``, not a matrix, no vllm
series) is an :class:`~vllm_advisor.errors.EndpointError` of one line naming the URL; a malformed
selector or duration is a :class:`~vllm_advisor.errors.UsageError`. The bearer token goes in a header
only and is never part of a message.
"""

from __future__ import annotations

import math
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
from pydantic import BaseModel, ConfigDict, Field

from ...errors import EndpointError, UsageError
from ...schema.metrics import MetricsWindow
from .fleet import (
    INSTANCE_LABELS,
    TARGET_LABELS,
    InstanceKey,
    RangeSeries,
    TypeResolver,
    instance_of,
    instance_text,
    step_values,
    sum_fleet,
)
from .scrape import _connect_failure, _is_tls_failure, display_url, make_client, read_bounded
from .window import window_from_steps

#: environment variable holding a bearer token for Prometheus when none is passed explicitly
PROMETHEUS_TOKEN_ENV = "VLLM_ADVISOR_PROMETHEUS_TOKEN"
#: Prometheus refuses a range query with more points than this per series ("exceeded maximum resolution")
MAX_POINTS_PER_SERIES = 11_000
#: the automatic step divides the range into about this many steps
AUTO_STEPS = 120
#: the series the advisor reads
VLLM_NAME_MATCHER = '__name__=~"vllm:.+"'


class PrometheusQuery(BaseModel):
    """What was asked of Prometheus, so a reader can run the same query."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="the Prometheus base URL (no credentials, no query string)")
    query: str = Field(description="the PromQL expression sent to /api/v1/query_range")
    selector: str | None = Field(None, description="the user's label matchers, as given")
    start: float = Field(description="unix seconds")
    end: float = Field(description="unix seconds")
    since_s: float = Field(description="seconds covered: end - start")
    step_s: float = Field(description="seconds between evaluation timestamps")
    points_per_series: int
    num_series: int = Field(0, description="series in the answer")
    types_from: Literal["metadata", "inferred", "mixed"] = Field(
        "metadata", description="where family types came from: Prometheus metadata, name suffixes, or both"
    )


class InstanceWindow(BaseModel):
    """One scraped vLLM instance (Prometheus ``job`` + ``instance``) over the queried range."""

    model_config = ConfigDict(extra="forbid")

    job: str
    instance: str
    num_series: int
    window: MetricsWindow


class PrometheusFleet(BaseModel):
    """Per-instance windows, the fleet summed into one window, and how they were obtained."""

    model_config = ConfigDict(extra="forbid")

    query: PrometheusQuery
    instances: list[InstanceWindow] = Field(default_factory=list)
    fleet: MetricsWindow = Field(description="all instances added up (see vllm_advisor.probe.metrics.fleet)")
    notes: list[str] = Field(default_factory=list)


def fleet_windows(fleet: PrometheusFleet) -> list[MetricsWindow]:
    """The windows a diagnosis should read: the summed fleet first, then each instance (so one hot
    instance is not averaged away). With one instance the summed window is that instance: only it."""
    if len(fleet.instances) <= 1:
        return [fleet.fleet]
    return [fleet.fleet, *(i.window for i in fleet.instances)]


def fetch_prometheus(
    url: str,
    *,
    since_s: float,
    selector: str | None = None,
    step_s: float | None = None,
    end: float | None = None,
    timeout: float = 10.0,
    bearer_token: str | None = None,
    verify: bool | str = True,
    metadata: bool = True,
) -> PrometheusFleet:
    """Query ``vllm:*`` series over ``[end - since_s, end]`` and summarise them per instance and summed.

    ``selector``: label matchers such as ``{job="vllm"}`` or ``job="vllm",namespace="prod"`` (merged into
    the query). ``step_s``: seconds between points (default ``since_s / 120``, at least 1 s; raised when
    Prometheus' 11,000-points limit would be exceeded). ``end``: unix seconds (default now).
    ``bearer_token``: default from ``$VLLM_ADVISOR_PROMETHEUS_TOKEN``. ``metadata=False`` skips
    ``/api/v1/metadata`` and infers every type from the names.
    """
    base = prometheus_base_url(url)
    shown = display_url(base)
    matchers = parse_selector(selector)
    query = "{" + ", ".join([VLLM_NAME_MATCHER, *matchers]) + "}"
    notes: list[str] = []
    end_t = time.time() if end is None else float(end)
    if not math.isfinite(end_t):
        raise UsageError(f"end must be a unix time in seconds, got {end}")
    end_t = round(end_t, 3)  # Prometheus works in milliseconds; the step grid below must match its own
    since = _positive_seconds(since_s, "since")
    step = choose_step(since, step_s, notes)
    start_t = round(end_t - since, 3)
    num_points = int(math.floor(since / step + 1e-9)) + 1

    token = bearer_token if bearer_token is not None else (os.environ.get(PROMETHEUS_TOKEN_ENV) or None)
    api = _Api(base, shown, token, timeout, verify)
    try:
        data, warnings = api.get(
            "/api/v1/query_range", {"query": query, "start": _ts(start_t), "end": _ts(end_t), "step": _ts(step)}
        )
        series = _matrix(data, api.shown("/api/v1/query_range"), start_t, step, num_points)
        if not series:
            raise EndpointError(_no_series_message(api, selector, start_t, end_t), source=api.shown("/api/v1/query_range"))
        meta = api.metadata(notes) if metadata else {}
    finally:
        api.close()
    notes.extend(f"Prometheus warning: {w}" for w in warnings)
    return _fleet_from_series(
        series, meta, shown=shown, query=query, selector=selector, start=start_t, end=end_t, since=since,
        step=step, num_points=num_points, metadata_asked=metadata, notes=notes,
    )


def fleet_from_matrix(
    data: Any,
    metadata: dict[str, str],
    *,
    url: str,
    start: float,
    end: float,
    step: float,
    query: str = "{" + VLLM_NAME_MATCHER + "}",
    selector: str | None = None,
) -> PrometheusFleet:
    """The fleet from a ``query_range`` answer already in hand: ``data`` is the answer's ``data`` object
    (``{"resultType": "matrix", "result": [...]}``), ``metadata`` family name -> type as
    ``/api/v1/metadata`` gives it ({} infers every type from the names).

    WHY separate from :func:`fetch_prometheus`: the conversion (matrix -> per-step values -> windows) is the
    costly part for a large fleet and is timed and tested without a server; ``fetch_prometheus`` runs
    exactly this after its two GETs. ``start``/``end``/``step`` are the query's (unix seconds).
    """
    shown = display_url(url)
    since = _positive_seconds(round(end - start, 3), "end - start")
    step = _positive_seconds(step, "step")
    num_points = int(math.floor(since / step + 1e-9)) + 1
    series = _matrix(data, shown + "/api/v1/query_range", start, step, num_points)
    if not series:
        raise EndpointError("the matrix holds no vllm series", source=shown + "/api/v1/query_range")
    return _fleet_from_series(
        series, metadata, shown=shown, query=query, selector=selector, start=start, end=end, since=since,
        step=step, num_points=num_points, metadata_asked=True, notes=[],
    )


def _fleet_from_series(
    series: list[RangeSeries],
    meta: dict[str, str],
    *,
    shown: str,
    query: str,
    selector: str | None,
    start: float,
    end: float,
    since: float,
    step: float,
    num_points: int,
    metadata_asked: bool,
    notes: list[str],
) -> PrometheusFleet:
    resolver = TypeResolver.for_series(series, meta)
    for s in series:
        resolver.kind(s.name)
    types_from = _types_note(resolver, metadata_asked, bool(meta), notes)
    timestamps = [start + i * step for i in range(num_points)]

    instances = _instance_windows(series, resolver, timestamps, shown)
    fleet_window = _fleet_window(series, resolver, timestamps, shown, len(instances))
    info = PrometheusQuery(
        url=shown,
        query=query,
        selector=selector,
        start=start,
        end=end,
        since_s=since,
        step_s=step,
        points_per_series=num_points,
        num_series=len(series),
        types_from=types_from,
    )
    return PrometheusFleet(query=info, instances=instances, fleet=fleet_window, notes=notes)


# --------------------------------------------------------------------------------------------
# arguments


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


def parse_duration(text: str | float | int) -> float:
    """Seconds in a duration written like Prometheus does (``90s``, ``30m``, ``1h30m``, ``2d``) or a plain
    number of seconds. Raises :class:`UsageError` for anything else or for zero."""
    if isinstance(text, (int, float)):
        return _positive_seconds(float(text), "duration")
    raw = str(text).strip().lower()
    try:
        return _positive_seconds(float(raw), "duration")
    except ValueError:
        pass
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(raw):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not raw or pos != len(raw):
        raise UsageError(f"not a duration: {text!r} (write e.g. 90s, 30m, 1h, 2d or 1h30m)")
    return _positive_seconds(total, "duration")


def _positive_seconds(value: float, what: str) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{what} must be a positive number of seconds, got {value:g}")
    return value


def choose_step(since_s: float, step_s: float | None, notes: list[str] | None = None) -> float:
    """The step: as given, or ``since_s / 120`` (at least 1 s); raised to the smallest step Prometheus
    accepts when the range would need more than 11,000 points per series (with a note saying so)."""
    step = max(1.0, since_s / AUTO_STEPS) if step_s is None else _positive_seconds(step_s, "step")
    step = max(0.001, round(step, 3))  # Prometheus reads the step in milliseconds
    smallest = since_s / MAX_POINTS_PER_SERIES
    if step < smallest:
        raised = math.ceil(smallest * 1000) / 1000
        if notes is not None:
            notes.append(
                f"step raised from {step:g} s to {raised:g} s: Prometheus answers at most "
                f"{MAX_POINTS_PER_SERIES:,} points per series"
            )
        step = raised
    return step


_MATCHER = re.compile(
    r"""\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)\s*"""
)


def parse_selector(selector: str | None) -> list[str]:
    """Label matchers of a selector (``{job="vllm"}``, ``job="vllm", pod=~"vllm-.*"``) in PromQL form.

    Only label matchers: the query itself selects the ``vllm:*`` names. Raises :class:`UsageError`
    (one line quoting the selector) for anything that is not a list of ``label op "value"``.
    """
    if selector is None:
        return []
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    elif "{" in text or "}" in text:
        raise UsageError(
            f"selector {selector!r}: give label matchers only, e.g. '{{job=\"vllm\"}}' "
            "(the query already selects the vllm:* series)"
        )
    matchers: list[str] = []
    pos = 0
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise UsageError(
                f"selector {selector!r}: cannot read {text[pos:pos + 30]!r}; "
                "write label matchers like job=\"vllm\" or pod=~\"vllm-.*\", separated by commas"
            )
        matchers.append(f"{m.group(1)}{m.group(2)}{m.group(3)}")
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise UsageError(f"selector {selector!r}: expected ',' between matchers at {text[pos:pos + 30]!r}")
            pos += 1
    return matchers


def prometheus_base_url(url: str) -> str:
    """The server's base URL from what the user typed: the UI's ``/graph`` or an ``/api/v1/...`` path is
    cut off, a path prefix (``/prometheus`` behind a proxy) is kept."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise EndpointError(
            "not an http(s) URL (expected the Prometheus server, e.g. http://localhost:9090)", source=display_url(url)
        )
    path = parts.path.rstrip("/")
    if "/api/v1" in path:
        path = path[: path.index("/api/v1")]
    for page in ("/graph", "/targets", "/-/ready", "/-/healthy"):
        if path.endswith(page):
            path = path[: -len(page)]
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, "", ""))


def _ts(t: float) -> str:
    return f"{t:.3f}"


# --------------------------------------------------------------------------------------------
# HTTP


class _Api:
    """GETs against one Prometheus with one client; each failure becomes one EndpointError line."""

    def __init__(self, base: str, shown_base: str, token: str | None, timeout: float, verify: bool | str) -> None:
        self.base = base
        self.shown_base = shown_base
        self.timeout = float(timeout)
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.sent_token = bool(token)
        self.client = make_client(timeout=self.timeout, verify=verify)

    def close(self) -> None:
        self.client.close()

    def shown(self, path: str) -> str:
        return self.shown_base + path

    def get(self, path: str, params: dict[str, Any]) -> tuple[Any, list[str]]:
        """``data`` and ``warnings`` of a successful API answer."""
        shown = self.shown(path)
        status, body = self._fetch(self.base + path, params, shown)
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            what = _describe_body(body)
            if status >= 400:
                raise EndpointError(_http_failure(status, self.sent_token, what), source=shown) from None
            raise EndpointError(
                f"answered {what}, not JSON: not the Prometheus HTTP API (check the URL and port)", source=shown
            ) from None
        if not isinstance(doc, dict) or "status" not in doc:
            if status >= 400:
                raise EndpointError(_http_failure(status, self.sent_token, "a JSON body"), source=shown)
            raise EndpointError(
                "answered JSON without a 'status' field: not the Prometheus HTTP API (check the URL and port)",
                source=shown,
            )
        if doc.get("status") != "success":
            kind = doc.get("errorType") or "error"
            message = " ".join(str(doc.get("error") or "no error message").split())
            raise EndpointError(f"Prometheus answered status {doc.get('status')!r} ({kind}): {message}", source=shown)
        if status >= 400:
            raise EndpointError(_http_failure(status, self.sent_token, "a success body"), source=shown)
        warnings = doc.get("warnings") or []
        return doc.get("data"), [" ".join(str(w).split()) for w in warnings]

    def metadata(self, notes: list[str]) -> dict[str, str]:
        """Family name -> type from ``/api/v1/metadata`` (vllm: names only); {} with a note on failure."""
        try:
            data, _ = self.get("/api/v1/metadata", {})
        except EndpointError as exc:
            notes.append(f"no metric metadata ({exc.message}); types inferred from the names")
            return {}
        if not isinstance(data, dict):
            notes.append("metric metadata is not a name -> entries map; types inferred from the names")
            return {}
        out: dict[str, str] = {}
        conflicting: list[str] = []
        for name, entries in data.items():
            if not (isinstance(name, str) and name.startswith("vllm:") and isinstance(entries, list)):
                continue
            types = list(dict.fromkeys(e.get("type") for e in entries if isinstance(e, dict) and e.get("type")))
            if types:
                out[name] = types[0]
            if len(types) > 1:
                conflicting.append(f"{name} ({'/'.join(map(str, types))})")
        if conflicting:
            notes.append(
                f"targets disagree on the type of {', '.join(conflicting[:3])}"
                f"{' ...' if len(conflicting) > 3 else ''}; the first was used"
            )
        return out

    def _fetch(self, url: str, params: dict[str, Any], shown: str) -> tuple[int, bytes]:
        from ..http import max_body_bytes

        deadline = time.monotonic() + self.timeout
        # 4x the cap of one answer elsewhere (128 MiB by default): a 20-instance fleet over 2 hours is
        # 17 MB; a query that matches far more is narrowed, not parsed into gigabytes of objects
        limit = 4 * max_body_bytes()
        try:
            with self.client.stream("GET", url, params=params, headers=self.headers) as response:
                body = read_bounded(
                    response, deadline, limit,
                    too_large=lambda: EndpointError(
                        f"answer is over {limit / 2**20:g} MiB; narrow the selector or shorten --since "
                        "(VLLM_ADVISOR_MAX_HTTP_MB raises the limit: 4x its value)",
                        source=shown,
                    ),
                    too_slow=lambda: httpx.ReadTimeout("total time exceeded"),
                )
                return response.status_code, body
        except httpx.TimeoutException:
            raise EndpointError(f"timed out after {self.timeout:g} s", source=shown) from None
        except httpx.ConnectError as exc:
            if _is_tls_failure(exc):
                raise EndpointError(
                    "TLS certificate verification failed (pass a CA bundle, or verify=False for a test server)",
                    source=shown,
                ) from None
            raise EndpointError(_connect_failure(exc, url).replace("the server", "Prometheus"), source=shown) from None
        except httpx.TransportError as exc:
            raise EndpointError(f"connection failed ({type(exc).__name__})", source=shown) from None
        except httpx.HTTPError as exc:  # a redirect loop, an invalid URL
            raise EndpointError(f"request failed ({type(exc).__name__})", source=shown) from None


def _http_failure(status: int, sent_token: bool, what: str) -> str:
    if status in (401, 403):
        hint = "the bearer token was rejected" if sent_token else f"Prometheus needs a bearer token (set {PROMETHEUS_TOKEN_ENV})"
        return f"HTTP {status}: {hint}"
    if status == 404:
        return "HTTP 404: no Prometheus HTTP API at this URL (give the server's base URL, e.g. http://host:9090)"
    return f"HTTP {status} with {what}"


def _describe_body(body: bytes) -> str:
    head = body.lstrip()[:200].lower()
    if not head:
        return "an empty body"
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "an HTML page"
    if head.startswith(b"# help") or head.startswith(b"# type"):
        return "Prometheus text (a /metrics page)"
    return f"{len(body):,} bytes of something else"


def _matrix(data: Any, shown: str, start: float, step: float, num_points: int) -> list[RangeSeries]:
    """The answer's series with their values placed on the step grid (index 0 = start)."""
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise EndpointError(f"answered resultType {got!r}, expected a matrix (is this Prometheus' query_range?)", source=shown)
    out: list[RangeSeries] = []
    for n, entry in enumerate(data["result"]):
        metric = entry.get("metric") if isinstance(entry, dict) else None
        values = entry.get("values") if isinstance(entry, dict) else None
        if not isinstance(metric, dict) or not isinstance(metric.get("__name__"), str):
            raise EndpointError(f"series {n} of the matrix has no metric name", source=shown)
        if values is None and isinstance(entry.get("histograms"), list):
            continue  # native histograms: vLLM exports classic ones; nothing here reads these
        if not isinstance(values, list):
            raise EndpointError(f"series {n} ({metric['__name__']}) of the matrix has no values list", source=shown)
        by_index: dict[int, float] = {}
        try:
            for t, v in values:
                i = int(round((float(t) - start) / step))
                if 0 <= i < num_points:
                    by_index[i] = float(v)
        except (TypeError, ValueError):
            raise EndpointError(
                f"series {n} ({metric['__name__']}) of the matrix has values that are not [time, \"number\"] pairs",
                source=shown,
            ) from None
        labels = {str(k): str(v) for k, v in metric.items() if k != "__name__"}
        out.append(RangeSeries(name=metric["__name__"], labels=labels, values=by_index))
    return out


def _no_series_message(api: _Api, selector: str | None, start: float, end: float) -> str:
    """Say the selector matched nothing, and which jobs/instances do have vllm:* series (two cheap lookups)."""
    span = f"between {_iso(start)} and {_iso(end)}"
    found: dict[str, list[str]] = {}
    for label in INSTANCE_LABELS:
        try:
            data, _ = api.get(
                f"/api/v1/label/{label}/values",
                {"match[]": "{" + VLLM_NAME_MATCHER + "}", "start": _ts(start), "end": _ts(end)},
            )
        except EndpointError:
            return f"no vllm:* series matched {selector or 'the query'} {span}"
        found[label] = [str(v) for v in data] if isinstance(data, list) else []
    if not found["job"] and not found["instance"]:
        return (
            f"Prometheus holds no vllm:* series {span} (is it scraping the vLLM servers' /metrics? "
            "see its /targets page; vLLM started with --disable-log-stats exports none)"
        )
    return (
        f"selector {selector or '(none)'} matched no vllm:* series {span}; vllm:* series exist for "
        f"job {_short(found['job'])}, instance {_short(found['instance'])}"
    )


def _short(values: list[str], limit: int = 5) -> str:
    quoted = ", ".join(f'"{v}"' for v in values[:limit]) or "(none)"
    return quoted + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------------------------
# windows


def _types_note(resolver: TypeResolver, asked: bool, had_metadata: bool, notes: list[str]) -> str:
    from_meta = sorted(resolver.from_metadata)
    inferred = sorted(resolver.inferred)
    if not inferred:
        notes.append(f"family types of {len(from_meta)} families from Prometheus metadata (/api/v1/metadata)")
        return "metadata"
    why = "metadata not asked for" if not asked else ("Prometheus returned no vllm: metadata" if not had_metadata else "no metadata for them")
    listed = ", ".join(inferred[:5]) + (" ..." if len(inferred) > 5 else "")
    notes.append(
        f"family types inferred from the names (_bucket/_sum/_count with le -> histogram, _total -> counter) "
        f"for {len(inferred)} families ({why}): {listed}"
        + (f"; {len(from_meta)} from Prometheus metadata" if from_meta else "")
    )
    return "mixed" if from_meta else "inferred"


def _instance_windows(
    series: list[RangeSeries], resolver: TypeResolver, timestamps: list[float], shown: str
) -> list[InstanceWindow]:
    grouped: dict[InstanceKey, list[RangeSeries]] = {}
    for s in series:
        grouped.setdefault(instance_of(s.labels), []).append(s)
    out: list[InstanceWindow] = []
    for key in sorted(grouped):
        job, instance = key
        source = f"{shown} · {instance_text(key)}"
        steps, stamps, notes = step_values(grouped[key], resolver, timestamps, INSTANCE_LABELS)
        window = window_from_steps(steps, [source] * len(steps), stamps)
        window.notes.extend(notes)
        present = len(steps)
        if present < len(timestamps):
            window.notes.append(f"samples at {present} of {len(timestamps)} steps (instance down or not yet scraped at the others)")
        out.append(InstanceWindow(job=job, instance=instance, num_series=len(grouped[key]), window=window))
    return out


def _fleet_window(
    series: list[RangeSeries], resolver: TypeResolver, timestamps: list[float], shown: str, num_instances: int
) -> MetricsWindow:
    summed = sum_fleet(series, resolver, len(timestamps))
    source = f"{shown} · fleet of {num_instances} instance(s), summed"
    steps, stamps, notes = step_values(summed.series, resolver, timestamps, TARGET_LABELS)
    window = window_from_steps(steps, [source] * len(steps), stamps)
    window.instances = max(1, num_instances)
    window.notes.extend(notes)
    window.notes.extend(summed.notes)
    rule = (
        f"fleet of {num_instances} instance(s): counters and histogram buckets summed (each instance's resets "
        "undone first)"
    )
    if summed.summed_gauges:
        rule += f"; gauges summed: {', '.join(summed.summed_gauges)}"
    if summed.max_gauges:
        shown_max = summed.max_gauges[:6]
        rule += (
            f"; gauges taken as the max over instances (fractions, states and info are not additive): "
            f"{', '.join(shown_max)}{' ...' if len(summed.max_gauges) > 6 else ''}"
        )
    window.notes.append(rule)
    if num_instances > 1 and "vllm:num_requests_running" in summed.summed_gauges:
        window.notes.append(
            f"requests running/waiting are fleet totals over {num_instances} instances: compare them with "
            "per-instance limits (max_num_seqs) times the number of instances"
        )
    return window
