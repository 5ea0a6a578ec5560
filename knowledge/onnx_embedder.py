"""Query-time embedding with the default model's ONNX copy: no torch, no transformers.

Importing sentence-transformers (torch, transformers) takes about 4 s, which used to be most of the
time from starting ``vllm-advisor kb search`` (or ``ask``, which searches the index) to its first
answer. A query needs one forward pass of a 22M-parameter model; onnxruntime and the ``tokenizers``
library do that after importing in well under a second.

The copy is written by :mod:`.onnx_export` next to the index (``<kb_dir>/models/``) and described by a
manifest. Opening it checks that the manifest belongs to the model on disk, that the file is the one
exported (size and modification time; its SHA-256 when the time differs, e.g. after a copy: 0.08 s
that a normal query does not pay), that onnxruntime can load the graph, and that a few probe
sentences still give the vectors torch gave them at export time; anything else raises
:class:`OnnxModelUnavailable` and the caller falls back to torch.

The pipeline is sentence-transformers' for all-MiniLM-L6-v2 (its ``modules.json``: Transformer,
mean Pooling, Normalize): BERT word pieces truncated to 256 and padded to the longest text of the
batch, the last hidden state averaged over the attention mask, then scaled to unit length.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import OnnxModelUnavailable

if TYPE_CHECKING:
    import numpy as np

MANIFEST_SCHEMA = 1
#: ONNX and torch vectors of the same text must agree at least this well (cosine). Measured:
#: 0.9999999 on English and Chinese sentences, docs pages and a 3,000-character text.
MIN_COSINE = 0.9999
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"


def manifest_path(models_dir: Path, name: str) -> Path:
    return models_dir / f"{name}.json"


def weights_signature(location: str | Path) -> str:
    """Identifies the weights an export was made from, cheaply (a stat, no hashing of 90 MB).

    A reinstalled or upgraded model package changes it, and the copy is then re-exported."""
    for weights in ("model.safetensors", "pytorch_model.bin"):
        path = Path(location) / weights
        if path.is_file():
            st = path.stat()
            return f"{weights}:{st.st_size}:{st.st_mtime_ns}"
    return "unknown"


@dataclass
class OnnxManifest:
    """What was exported, from what, and the probe vectors that prove a copy still works."""

    model: str
    status: str  # "ok", or "rejected" when the export disagreed with torch (then ``reason`` says how)
    weights: str  # weights_signature of the source model
    torch_version: str
    onnx_file: str = ""
    tokenizer_file: str = ""
    onnx_bytes: int = 0
    onnx_sha256: str = ""
    onnx_mtime_ns: int = 0  # when equal to the file's, the hash is not recomputed
    max_seq_length: int = 256
    dimension: int = 0
    opset: int = 0
    min_cosine: float = 0.0  # the worst agreement with torch measured at export time
    export_seconds: float = 0.0  # export and verification, with the torch model already loaded
    reason: str = ""
    probe_texts: list[str] = field(default_factory=list)
    probe_vectors: list[list[float]] = field(default_factory=list)  # torch's vectors of probe_texts
    exported_at: str = ""
    schema: int = MANIFEST_SCHEMA

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def read(cls, path: Path) -> "OnnxManifest":
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise OnnxModelUnavailable("no ONNX copy of the model yet", source=str(path.parent)) from None
        except (OSError, ValueError) as exc:
            raise OnnxModelUnavailable(f"unreadable manifest ({exc})", source=str(path)) from None
        if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
            raise OnnxModelUnavailable("manifest of another format", source=str(path))
        known = set(cls.__dataclass_fields__)
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise OnnxModelUnavailable(f"incomplete manifest ({exc})", source=str(path)) from None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def check_onnx_file(path: Path, manifest: OnnxManifest) -> None:
    """The exported file, unchanged: same size, and same modification time or else same SHA-256."""
    try:
        st = path.stat()
    except OSError:
        raise OnnxModelUnavailable("the ONNX file is missing", source=str(path)) from None
    if st.st_size != manifest.onnx_bytes:
        raise OnnxModelUnavailable(f"the ONNX file has {st.st_size} bytes, the manifest says {manifest.onnx_bytes}", source=str(path))
    if st.st_mtime_ns != manifest.onnx_mtime_ns and file_sha256(path) != manifest.onnx_sha256:
        raise OnnxModelUnavailable("the ONNX file changed since it was exported (SHA-256 differs)", source=str(path))


def mean_pool_normalize(hidden: "np.ndarray", attention_mask: "np.ndarray") -> "np.ndarray":
    """sentence-transformers' Pooling (mean over real tokens) then Normalize (unit L2 length)."""
    import numpy as np

    mask = attention_mask[..., None].astype(np.float32)
    summed = (hidden * mask).sum(axis=1)
    counts = np.clip(mask.sum(axis=1), 1e-9, None)  # torch.clamp(min=1e-9) in Pooling
    pooled = summed / counts
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)  # F.normalize's eps
    return (pooled / norms).astype(np.float32)


def cosines(a: "np.ndarray", b: "np.ndarray") -> "np.ndarray":
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


class OnnxEmbedder:
    """The default model through onnxruntime: same vectors as torch, a fraction of the start-up time.

    ``threads``: onnxruntime's intra-op threads. One is the default because a query is one short
    text: on the 2-core development machine, with other processes busy, extra threads mostly wait
    for each other (the same finding as for torch, see ``SINGLE_THREAD_MAX_TEXTS``)."""

    backend = "onnx"

    def __init__(self, models_dir: Path, manifest: OnnxManifest, *, threads: int = 1) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.name = manifest.model
        self.manifest = manifest
        self.location = str(models_dir / manifest.onnx_file)
        self.texts_encoded = 0
        try:
            self._tokenizer = Tokenizer.from_file(str(models_dir / manifest.tokenizer_file))
        except Exception as exc:  # a missing or garbled tokenizer.json
            raise OnnxModelUnavailable(f"tokenizer unreadable ({_first_line(exc)})", source=str(models_dir / manifest.tokenizer_file)) from None
        # What sentence-transformers asks of the Hugging Face tokenizer: truncate to the model's
        # max_seq_length, pad to the longest text of the batch (tokenizer.json itself says 128, fixed).
        self._tokenizer.enable_truncation(max_length=manifest.max_seq_length)
        self._tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: a bad file is reported by us, in one line
        try:
            self._session = ort.InferenceSession(self.location, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for a broken graph
            raise OnnxModelUnavailable(f"onnxruntime cannot load it ({_first_line(exc)})", source=self.location) from None
        self._inputs = {i.name for i in self._session.get_inputs()}

    @classmethod
    def open(cls, models_dir: Path, name: str, source_location: str | Path, *, threads: int = 1) -> "OnnxEmbedder":
        """The verified copy of ``name`` in ``models_dir``, or :class:`OnnxModelUnavailable` saying why not.

        ``source_location``: the folder of the model the index was built with; a copy exported from
        other weights is stale."""
        manifest = OnnxManifest.read(manifest_path(models_dir, name))
        if manifest.model != name:
            raise OnnxModelUnavailable(f"the copy is of '{manifest.model}', not '{name}'", source=str(models_dir))
        if manifest.weights != weights_signature(source_location):
            raise OnnxModelUnavailable("the copy was exported from other weights", source=str(models_dir))
        if manifest.status != "ok":
            # Export was tried with these weights and disagreed with torch: do not try on every query.
            raise OnnxModelUnavailable(f"export rejected ({manifest.reason})", source=str(models_dir), exportable=False)
        check_onnx_file(models_dir / manifest.onnx_file, manifest)
        embedder = cls(models_dir, manifest, threads=threads)
        embedder.check_probe()
        return embedder

    def check_probe(self) -> float:
        """Encode the probe sentences and compare with torch's vectors from export time (one batch,
        a few milliseconds): catches weights damaged in a way that still loads."""
        import numpy as np

        if not self.manifest.probe_texts or len(self.manifest.probe_texts) != len(self.manifest.probe_vectors):
            raise OnnxModelUnavailable("the manifest has no probe vectors", source=self.location)
        try:
            got = self._run(self.manifest.probe_texts)
        except Exception as exc:
            raise OnnxModelUnavailable(f"the model fails on the probe sentences ({_first_line(exc)})", source=self.location) from None
        worst = float(np.min(cosines(got, np.asarray(self.manifest.probe_vectors, dtype=np.float32))))
        if not worst >= MIN_COSINE:  # NaN (garbage weights) fails too
            raise OnnxModelUnavailable(f"its vectors no longer match torch's (cosine {worst:.6f} < {MIN_COSINE})", source=self.location)
        return worst

    def tokenize(self, texts: list[str]) -> dict[str, "np.ndarray"]:
        import numpy as np

        encodings = self._tokenizer.encode_batch(list(texts))
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }

    def _run(self, texts: list[str]) -> "np.ndarray":
        features = self.tokenize(texts)
        hidden = self._session.run([OUTPUT_NAME], {k: v for k, v in features.items() if k in self._inputs})[0]
        return mean_pool_normalize(hidden, features["attention_mask"])

    @property
    def dimension(self) -> int:
        return int(self.manifest.dimension)

    def encode(self, texts: list[str], *, batch_size: int = 64) -> "np.ndarray":
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Batches sorted by length, as sentence-transformers does, so short texts are not padded to long ones.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), max(1, batch_size)):
            idx = order[start : start + batch_size]
            out[idx] = self._run([texts[i] for i in idx])
        self.texts_encoded += len(texts)
        return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
