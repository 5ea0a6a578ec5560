"""Data catalogs of the performance model: model architectures and GPU datasheets.

Numbers live in ``models.yaml`` and ``gpus.yaml`` with a source URL per entry; the modules here
only load, validate and derive (parameter counts, KV bytes per token, FLOPs, memory in bytes).
``kernels-h200.yaml`` holds the step model's kernel parameters measured on an H200 (written by
``benchmarks/gpu/fit_efficiency.py``, loaded by ``vllm_advisor.perf.efficiency``).
"""

from ._names import UnknownCatalogEntry
from .gpus import GpuSpec, get_gpu, list_gpus
from .models import ModelSpec, VisionTowerSpec, get_model, list_models

__all__ = [
    "GpuSpec",
    "ModelSpec",
    "UnknownCatalogEntry",
    "VisionTowerSpec",
    "get_gpu",
    "get_model",
    "list_gpus",
    "list_models",
]
