"""Hand-measured load points: a case file's ``observations`` or a CSV with the same columns.

People often have no tool output, only figures they wrote down ("40 tok/s per request at
concurrency 1"). They arrive as :class:`~vllm_advisor.schema.Observation` (the case-file layout,
shared/cases/FORMAT.md) and become BenchmarkRuns like any tool's output, with the caveats the
numbers carry:

- ``output_tok_s_per_request`` is per-request speed *as the user computed it*: the formula is
  unknown (tokens / e2e? after the first token?), so it goes in ``request_output_tok_s`` as a
  mean only, with a note;
- server-side figures (KV usage, running/waiting requests, preemptions, GPU utilisation,
  prefix-cache hit rate) are not client measurements and go to ``metadata`` under
  ``server_*`` keys.

CSV columns are the Observation field names; latency columns are written ``ttft_ms.p50`` or
``ttft_ms_p50`` (both accepted), one row per load point, empty cells for unknown figures.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...scalars import parse_scalar
from ...errors import InputFileError
from ...schema import BenchmarkRun, Distribution, LatencyFigures, Observation
from .base import BenchFormat, Detection
from .document import InputDocument
from .fields import distribution

FORMAT_ID = "observations"

LATENCY_FIELDS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
LATENCY_STATS = tuple(LatencyFigures.model_fields)
PLAIN_FIELDS = tuple(name for name in Observation.model_fields if name not in LATENCY_FIELDS)

#: Observation field -> metadata key for figures measured on the server, not by the client.
SERVER_FIELDS = {
    "gpu_util_pct": "server_gpu_util_pct",
    "kv_cache_usage_pct": "server_kv_cache_usage_pct",
    "num_requests_running": "server_num_requests_running",
    "num_requests_waiting": "server_num_requests_waiting",
    "preemptions": "server_preemptions",
    "prefix_cache_hit_rate": "server_prefix_cache_hit_rate",
}


def observations_to_runs(observations: list[Observation], source: str) -> list[BenchmarkRun]:
    """One BenchmarkRun per hand-measured load point, in order."""
    return [_observation_to_run(obs, source, index) for index, obs in enumerate(observations)]


def _observation_to_run(obs: Observation, source: str, index: int) -> BenchmarkRun:
    run = BenchmarkRun(source=source, format=FORMAT_ID, index=index)
    run.offered_concurrency = obs.concurrency
    run.offered_request_rate = obs.request_rate
    run.output_throughput_tok_s = obs.output_tok_s_total
    for name in LATENCY_FIELDS:
        figures: LatencyFigures | None = getattr(obs, name)
        if figures is not None and not figures.is_empty():
            setattr(run, name, distribution("ms", mean=figures.mean, median=figures.p50,
                                            percentiles={50.0: figures.p50, 99.0: figures.p99}))
    if obs.output_tok_s_per_request is not None:
        run.request_output_tok_s = Distribution(unit="tok/s", mean=obs.output_tok_s_per_request)
        run.notes.append(
            "per-request speed as the user computed it: the formula is unknown (with or without "
            "TTFT, which token counts), so compare it with care"
        )
    for name, key in SERVER_FIELDS.items():
        value = getattr(obs, name)
        if value is not None:
            run.metadata[key] = value
    if obs.notes:
        run.metadata["user_notes"] = obs.notes
        run.notes.append(f"user's note: {obs.notes}")
    return run


# ---------------------------------------------------------------------------------------------
# Detection and loading


def _is_case_mapping(document: InputDocument) -> bool:
    data = document.mapping()
    return data is not None and isinstance(data.get("observations"), list) and "benchmarks" not in data


def _normalise_column(column: str) -> str:
    return column.strip().lower()


def _split_column(column: str) -> tuple[str, str | None] | None:
    """``'ttft_ms.p50'`` / ``'ttft_ms_p50'`` -> ``('ttft_ms', 'p50')``; ``'concurrency'`` ->
    ``('concurrency', None)``; unknown columns -> None."""
    name = _normalise_column(column)
    if name in PLAIN_FIELDS:
        return name, None
    for field in LATENCY_FIELDS:
        for sep in (".", "_"):
            prefix = field + sep
            if name.startswith(prefix) and name[len(prefix):] in LATENCY_STATS:
                return field, name[len(prefix):]
    return None


def detect(document: InputDocument) -> Detection:
    if _is_case_mapping(document):
        return Detection.yes()
    if document.syntax == "csv" and document.columns:
        if any(_split_column(c) is not None for c in document.columns):
            return Detection.yes()
        return Detection.no("CSV without observation columns (concurrency, ttft_ms.p50, ...)")
    return Detection.no("no 'observations' list and not a CSV of observations")


def load(document: InputDocument) -> list[BenchmarkRun]:
    if document.syntax == "csv":
        return observations_to_runs(_csv_observations(document), document.source)
    return observations_to_runs(_case_observations(document), document.source)


def _case_observations(document: InputDocument) -> list[Observation]:
    """Through the case-file loader, so a case gets the same validation and messages everywhere.

    Imported lazily: :mod:`vllm_advisor.probe.casefile` pulls in the serve-command parser, which
    the other benchmark formats do not need.
    """
    from ..casefile import case_from_dict

    return list(case_from_dict(document.mapping(), document.source).observations)


def _csv_cell(text: str | None) -> Any:
    return None if text is None else parse_scalar(text, nulls=True)


def _csv_observations(document: InputDocument) -> list[Observation]:
    columns = document.columns or []
    mapping: dict[str, tuple[str, str | None]] = {}
    for column in columns:
        target = _split_column(column)
        if target is None:
            known = ", ".join(PLAIN_FIELDS + tuple(f"{f}.{s}" for f in LATENCY_FIELDS for s in LATENCY_STATS))
            raise InputFileError(
                f"column {column!r} is not an observation field (known: {known})", source=document.source
            )
        mapping[column] = target
    observations = []
    for row_number, row in enumerate(document.data or [], start=2):
        if "" in row and row[""] not in (None, [], [""]):
            raise InputFileError(f"row {row_number} has more cells than the header", source=document.source)
        values: dict[str, Any] = {}
        for column, (name, stat) in mapping.items():
            cell = _csv_cell(row.get(column))
            if cell is None:
                continue
            if name == "notes":
                cell = row[column].strip()  # free text, even when it looks like a number
            if stat is None:
                values[name] = cell
            else:
                values.setdefault(name, {})[stat] = cell
        try:
            observations.append(Observation.model_validate(values))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])
            raise InputFileError(
                f"row {row_number}: {error['msg']} (got {error.get('input')!r})", source=document.source, field=field
            ) from None
    if not observations:
        raise InputFileError("CSV has a header but no rows", source=document.source)
    return observations


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="hand-measured load points: a case file's observations (YAML) or a CSV with the same columns",
    detect=detect,
    load=load,
)
