"""Writing the default model's ONNX copy for queries, once, and proving it gives torch's vectors.

Runs where torch is loaded anyway: after an ingest that embedded chunks, at the end of ``kb build``,
or when a query had to fall back to torch. The graph is exported with torch's TorchScript exporter
(``torch.onnx.export(..., dynamo=False)``, which needs only the ``onnx`` package) with dynamic batch
and sequence axes, then checked against sentence-transformers on English and Chinese sentences,
a padded batch and a text longer than the 256-word-piece limit. A copy that disagrees (cosine below
:data:`~.onnx_embedder.MIN_COSINE`) is not kept: the manifest records why, and queries stay on torch.

Files, in ``<kb_dir>/models/``: ``<model>.onnx``, ``<model>.tokenizer.json`` (the model's own
tokenizer file) and ``<model>.json`` (the manifest, written last, so a half-written copy is never
trusted).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .embeddings import SentenceTransformerEmbedder
from .errors import OnnxModelUnavailable
from .onnx_embedder import (
    INPUT_NAMES,
    MIN_COSINE,
    OUTPUT_NAME,
    OnnxEmbedder,
    OnnxManifest,
    check_onnx_file,
    cosines,
    file_sha256,
    manifest_path,
    weights_signature,
)

OPSET = 17
#: Compared with torch before the copy is trusted: short and long, English and Chinese (the default
#: model reads most Chinese characters as [UNK], which still has to come out the same).
VERIFY_TEXTS = (
    "How do I check the prefix cache hit rate?",
    "TTFT grows to minutes when 50 users send 32k-token prompts",
    "--max-num-batched-tokens 8192 --enable-chunked-prefill",
    "长输入 并发 显存",
    "为什么首字延迟这么高？KV cache 用满了吗",
    "x",
    "Chunked prefill splits long prompts into pieces that fit the token budget of a step, "
    "so that running decodes keep making progress while a long prompt is being prefilled. " * 12,
)
#: Stored with their torch vectors in the manifest; re-encoded each time the copy is opened.
PROBE_TEXTS = VERIFY_TEXTS[:2] + VERIFY_TEXTS[3:4]

#: Copies verified by this process, by (weights, torch version): another index folder gets a file copy
#: instead of a second export (the tests build many small indexes).
_VERIFIED: dict[tuple[str, str], Path] = {}


@dataclass
class ExportOutcome:
    status: str  # "current" (nothing to do), "exported", "copied", "rejected"
    manifest: OnnxManifest | None
    seconds: float = 0.0


def check_pipeline(location: str | Path, model: Any) -> str | None:
    """Why the model's pipeline is not Transformer + mean Pooling (+ Normalize), or None when it is.

    Read from the model folder's ``modules.json`` and pooling ``config.json``: the ONNX side
    reproduces exactly that pipeline and nothing else."""
    folder = Path(location)
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"no readable modules.json ({exc})"
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return f"pipeline is {' + '.join(kinds)}, not Transformer + Pooling (+ Normalize)"
    pooling_dir = folder / str(modules[1].get("path") or "1_Pooling")
    try:
        pooling = json.loads((pooling_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"no readable pooling config ({exc})"
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
    if modes != {"pooling_mode_mean_tokens"}:
        return f"pooling is {', '.join(sorted(modes)) or 'none'}, not mean"
    if not getattr(model, "max_seq_length", None):
        return "the model has no max_seq_length"
    return None


def _hf_module(model: Any):
    """The Hugging Face encoder inside the sentence-transformers model, returning the last hidden state."""
    import torch

    encoder = model[0].auto_model

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    return LastHiddenState().eval()


def _export_graph(model: Any, target: Path) -> None:
    import torch

    module = _hf_module(model)
    # Two texts of different lengths, so the traced graph has a padded row and a real attention mask.
    features = _tokenize_quietly(model, ["a padded example", "the longer example text of this batch"])
    if "input_ids" not in features:
        raise RuntimeError("cannot tokenize the example batch")
    args = tuple(features[name] if name in features else torch.zeros_like(features["input_ids"]) for name in INPUT_NAMES)
    axes = {name: {0: "batch", 1: "sequence"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer warnings are not the user's business
        torch.onnx.export(
            module,
            args,
            str(target),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def _tokenize_quietly(model: Any, texts: list[str]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sentence-transformers deprecates tokenize() for preprocess()
        preprocess = getattr(model, "preprocess", None)
        return preprocess(texts) if preprocess else model.tokenize(texts)


def _verify(candidate: OnnxEmbedder, model: Any) -> float:
    """Worst cosine between ONNX and torch over the verify texts, one at a time and as one padded batch."""
    import numpy as np

    texts = list(VERIFY_TEXTS)
    reference = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    batch = candidate.encode(texts, batch_size=len(texts))
    single = np.concatenate([candidate.encode([t]) for t in texts])
    values = np.concatenate([cosines(batch, reference), cosines(single, reference)])
    return float(np.min(values))  # NaN when any vector is NaN (np.min propagates it)


def _write_manifest(models_dir: Path, manifest: OnnxManifest) -> None:
    path = manifest_path(models_dir, manifest.model)
    tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
    tmp.write_text(manifest.to_json(), encoding="utf-8")
    os.replace(tmp, path)


def _copy_verified(source_dir: Path, models_dir: Path, name: str, location: str | Path) -> OnnxManifest | None:
    """Another folder's verified copy, copied file by file (the manifest last) and re-checked, or None."""
    try:
        manifest = OnnxManifest.read(manifest_path(source_dir, name))
        check_onnx_file(source_dir / manifest.onnx_file, manifest)
        for file in (manifest.onnx_file, manifest.tokenizer_file):
            tmp = models_dir / f"{file}.{os.getpid()}.tmp"
            shutil.copyfile(source_dir / file, tmp)
            os.replace(tmp, models_dir / file)
        copied = models_dir / manifest.onnx_file
        if file_sha256(copied) != manifest.onnx_sha256:
            return None
        manifest.onnx_mtime_ns = copied.stat().st_mtime_ns
        _write_manifest(models_dir, manifest)
        OnnxEmbedder.open(models_dir, name, location)
    except (OSError, OnnxModelUnavailable):
        return None
    return manifest


def torch_version() -> str:
    """torch's version from its package metadata: known without importing torch (seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def ensure_onnx_copy(embedder: SentenceTransformerEmbedder, models_dir: Path, *, force: bool = False) -> ExportOutcome:
    """Make ``models_dir`` hold a verified ONNX copy of ``embedder``'s sentence-transformers model.

    A copy that is current (manifest of these weights, the file as exported) is kept without loading
    torch. ``force``: re-export anyway (a query found the file damaged). An export rejected
    for these weights with this torch version is not retried."""
    started = time.perf_counter()
    name, location = embedder.name, embedder.location
    weights = weights_signature(location)
    torch_ver = torch_version()
    path = manifest_path(models_dir, name)
    try:
        existing: OnnxManifest | None = OnnxManifest.read(path)
    except OnnxModelUnavailable:
        existing = None
    if existing is not None and existing.model == name and existing.weights == weights:
        if existing.status != "ok" and existing.torch_version == torch_ver:
            return ExportOutcome("rejected", existing)
        if existing.status == "ok" and not force:
            try:
                check_onnx_file(models_dir / existing.onnx_file, existing)
                return ExportOutcome("current", existing)
            except OnnxModelUnavailable:
                pass  # missing or changed: export again

    models_dir.mkdir(parents=True, exist_ok=True)
    key = (weights, torch_ver)
    if key in _VERIFIED and _VERIFIED[key] != models_dir:
        copied = _copy_verified(_VERIFIED[key], models_dir, name, location)
        if copied is not None:
            return ExportOutcome("copied", copied, time.perf_counter() - started)

    model = embedder.model  # loads torch when an ingest has not already
    started = time.perf_counter()  # the export's own time, not the model's loading
    manifest = OnnxManifest(
        model=name,
        status="ok",
        weights=weights,
        torch_version=torch_ver,
        onnx_file=f"{name}.onnx",
        tokenizer_file=f"{name}.tokenizer.json",
        max_seq_length=int(getattr(model, "max_seq_length", 0) or 0),
        dimension=int((getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()),
        opset=OPSET,
        exported_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
    )
    problem = check_pipeline(location, model)
    tmp_onnx = models_dir / f"{manifest.onnx_file}.{os.getpid()}.tmp"  # two processes exporting at once do not mix
    tmp_tok = models_dir / f"{manifest.tokenizer_file}.{os.getpid()}.tmp"
    if problem is None:
        try:
            shutil.copyfile(Path(location) / "tokenizer.json", tmp_tok)
            _export_graph(model, tmp_onnx)
            candidate_manifest = OnnxManifest(**{**manifest.__dict__, "onnx_file": tmp_onnx.name, "tokenizer_file": tmp_tok.name})
            worst = _verify(OnnxEmbedder(models_dir, candidate_manifest), model)
            if not worst >= MIN_COSINE:
                problem = f"ONNX and torch vectors differ (worst cosine {worst:.6f} < {MIN_COSINE})"
            manifest.min_cosine = worst
        except OSError:
            for tmp in (tmp_onnx, tmp_tok):
                tmp.unlink(missing_ok=True)
            raise  # a read-only or full data folder: the caller says so
        except Exception as exc:  # the exporter or onnxruntime failing on this model
            text = str(exc).strip()
            problem = f"export failed ({(text.splitlines()[0] if text else type(exc).__name__)[:200]})"
    if problem is not None:
        for tmp in (tmp_onnx, tmp_tok):
            tmp.unlink(missing_ok=True)
        manifest.status, manifest.reason = "rejected", problem
        _write_manifest(models_dir, manifest)
        return ExportOutcome("rejected", manifest, time.perf_counter() - started)

    manifest.probe_texts = list(PROBE_TEXTS)
    probe = model.encode(list(PROBE_TEXTS), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    manifest.probe_vectors = [[float(x) for x in row] for row in probe]
    os.replace(tmp_onnx, models_dir / manifest.onnx_file)
    os.replace(tmp_tok, models_dir / manifest.tokenizer_file)
    onnx_path = models_dir / manifest.onnx_file
    manifest.onnx_sha256 = file_sha256(onnx_path)
    st = onnx_path.stat()
    manifest.onnx_bytes, manifest.onnx_mtime_ns = st.st_size, st.st_mtime_ns
    manifest.export_seconds = round(time.perf_counter() - started, 2)
    _write_manifest(models_dir, manifest)
    _VERIFIED[key] = models_dir
    return ExportOutcome("exported", manifest, time.perf_counter() - started)
