"""Result files written by ``vllm-advisor probe bench``: vllm bench serve's JSON keys per load
point (read by the vllm-bench loader, so every figure is recomputed and checked the same way),
plus a ``vllm_advisor`` block with the sweep's settings and the server's ``/metrics`` window."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...errors import InputFileError
from ...schema import BenchmarkRun, MetricsWindow
from .base import BenchFormat, Detection
from .document import InputDocument
from .vllm_bench import load_result

FORMAT_ID = "vllm-advisor-bench"
TOOL_ID = "vllm-advisor probe bench"


def _block(obj: dict[str, Any]) -> dict[str, Any] | None:
    block = obj.get("vllm_advisor")
    return block if isinstance(block, dict) and block.get("tool") == TOOL_ID else None


def detect(document: InputDocument) -> Detection:
    objects = document.json_objects()
    if not objects:
        return Detection.no("not a JSON object or JSON Lines of objects")
    if not all(_block(obj) is not None for obj in objects):
        return Detection.no(f"no 'vllm_advisor' block written by {TOOL_ID}")
    return Detection.yes()


def run_from_object(obj: dict[str, Any], *, source: str, index: int = 0, where: str | None = None) -> BenchmarkRun:
    block = _block(obj) or {}
    run = load_result({k: v for k, v in obj.items() if k != "vllm_advisor"}, source=source, index=index, where=where)
    run.format = FORMAT_ID
    run.endpoint = "/v1/chat/completions" if block.get("endpoint") == "chat" else "/v1/completions"
    run.streaming = True
    settings = {k: block.get(k) for k in ("seed", "input_len", "output_len", "shared_prefix_len", "ignore_eos", "prompts_exact", "interrupted")}
    run.metadata["probe_bench"] = settings
    run.tool_version = block.get("version")
    run.notes.extend(str(n) for n in block.get("notes") or [])
    if block.get("prompts_exact") is False:
        run.notes.append("prompt lengths are not exact (see notes): input lengths are the server's usage counts")
    server = block.get("server") or {}
    if server.get("window") is not None:
        try:
            run.server_metrics = MetricsWindow.model_validate(server["window"])
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputFileError(
                f"vllm_advisor.server.window is not a metrics window ({'.'.join(map(str, first['loc']))}: {first['msg']})",
                source=where or source,
            ) from None
        run.metadata["server_timeline"] = server.get("timeline") or []
    elif block.get("server") is not None:
        run.notes.append(f"/metrics was sampled {server.get('samples', 0)} time(s): too few for a server view of this load point")
    return run


def load(document: InputDocument) -> list[BenchmarkRun]:
    objects = document.json_objects() or []
    many = len(objects) > 1
    return [
        run_from_object(obj, source=document.source, index=i,
                        where=f"{document.source} (run {i + 1} of {len(objects)})" if many else document.source)
        for i, obj in enumerate(objects)
    ]


FORMAT = BenchFormat(
    id=FORMAT_ID,
    description="vllm-advisor probe bench results (vllm bench serve keys per load point, plus the server's /metrics window)",
    detect=detect,
    load=load,
)
