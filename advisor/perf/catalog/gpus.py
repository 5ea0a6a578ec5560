"""GPU datasheet figures: memory, memory bandwidth, tensor-core throughput and interconnect.

The numbers live in ``gpus.yaml`` with the vendor page they come from. Memory is stored two ways
because they differ: the marketed capacity ("80 GB") and, where known, the total the driver
reports (``nvidia-smi`` memory.total in MiB), which is what vLLM multiplies by
``gpu_memory_utilization``. ``memory_bytes`` uses the reported figure when the catalog has it.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from ._names import UnknownCatalogEntry, normalise, unknown

#: libyaml's safe loader when PyYAML has it (about 10x faster on these packaged files), else PyYAML's.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MiB = 1024**2
GiB = 1024**3

#: Per-direction bandwidth of a x16 PCIe link by generation, GB/s (128b/130b encoding, rounded
#: as vendors quote them: Gen4 x16 "64 GB/s bidirectional", Gen5 x16 "128 GB/s bidirectional").
PCIE_X16_GBS_PER_DIRECTION = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}


class GpuSpec(BaseModel):
    """One accelerator model. Bandwidths in GB/s (10^9 bytes/s), throughput in dense TFLOP/s
    (10^12, without structured sparsity), memory in bytes / GiB as named."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    aliases: list[str] = Field(default_factory=list)
    assumed_aliases: list[str] = Field(default_factory=list, description="ambiguous names resolved here with a note")
    vendor: Literal["nvidia", "amd"]
    architecture: str
    compute_capability: str | None = Field(None, description="CUDA sm version, e.g. '9.0'")
    form_factor: Literal["sxm", "pcie", "oam", "soc"]

    memory_marketed_gb: float = Field(gt=0, description="capacity as the datasheet states it ('80 GB')")
    memory_type: str
    memory_reported_mib: int | None = Field(None, gt=0, description="nvidia-smi memory.total, MiB")
    mem_bandwidth_gbs: float = Field(gt=0, description="peak DRAM bandwidth, GB/s")

    bf16_dense_tflops: float | None = Field(None, gt=0, description="tensor cores, FP32 accumulate")
    fp8_dense_tflops: float | None = Field(None, gt=0, description="None: no FP8 tensor cores")
    fp4_dense_tflops: float | None = Field(None, gt=0)

    interconnect: Literal["nvlink", "pcie", "infinity_fabric", "network"]
    interconnect_bw_gbs: float = Field(gt=0, description="GPU-to-GPU, per direction, per GPU, GB/s")
    nvlink_bridge_bw_gbs: float | None = Field(None, gt=0, description="optional 2-card bridge, per direction, GB/s")
    pcie_gen: int | None = Field(None, ge=3, le=6)
    p2p_supported: bool = Field(description="peer-to-peer copies between cards without bouncing through host memory")
    tdp_w: float = Field(gt=0)

    source: list[str] = Field(default_factory=list)
    verified: bool = False
    verified_via: str | None = None
    notes: str = ""
    note: str | None = Field(None, description="how this entry was found, when a name had to be assumed")

    @model_validator(mode="after")
    def _consistent(self) -> GpuSpec:
        if self.interconnect == "pcie":
            if self.pcie_gen is None:
                raise ValueError("a PCIe-connected GPU needs pcie_gen")
            if self.interconnect_bw_gbs != PCIE_X16_GBS_PER_DIRECTION[self.pcie_gen]:
                raise ValueError("interconnect_bw_gbs of a PCIe card must equal its x16 link bandwidth")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def memory_bytes(self) -> int:
        """Device memory the driver reports; the marketed figure read as GiB when no report is on
        file (NVIDIA's "GB" on these datasheets is binary: an RTX 4090's 24 GB reports 24564 MiB)."""
        if self.memory_reported_mib:
            return self.memory_reported_mib * MiB
        return int(self.memory_marketed_gb * GiB)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GiB

    @property
    def bf16_tflops(self) -> float | None:
        """Dense BF16 TFLOP/s (short name; None where the vendor publishes no figure)."""
        return self.bf16_dense_tflops

    @property
    def fp8_tflops(self) -> float | None:
        """Dense FP8 TFLOP/s; None without FP8 tensor cores."""
        return self.fp8_dense_tflops

    @property
    def pcie_bw_gbs(self) -> float | None:
        """Host link bandwidth per direction, GB/s (x16)."""
        return PCIE_X16_GBS_PER_DIRECTION[self.pcie_gen] if self.pcie_gen else None


@functools.cache
def _catalog() -> dict[str, GpuSpec]:
    text = resources.files(__package__).joinpath("gpus.yaml").read_text(encoding="utf-8")
    specs = [GpuSpec(**entry) for entry in yaml.load(text, Loader=_YAML_LOADER)]
    return {spec.name: spec for spec in specs}


@functools.cache
def _index() -> tuple[dict[str, str], dict[str, str]]:
    """(exact key -> name, assumed key -> name). Keys also drop a leading 'nvidia-'/'amd-' and
    spaces-vs-dashes, so "NVIDIA H800", "h800" and "H800" meet."""
    exact: dict[str, str] = {}
    assumed: dict[str, str] = {}
    for spec in _catalog().values():
        for alias in [spec.name, *spec.aliases]:
            for key in _variants(alias):
                if exact.setdefault(key, spec.name) != spec.name:
                    raise ValueError(f"gpus.yaml: '{alias}' names both {exact[key]} and {spec.name}")
    for spec in _catalog().values():
        for alias in spec.assumed_aliases:
            for key in _variants(alias):
                if key in exact or assumed.setdefault(key, spec.name) != spec.name:
                    raise ValueError(f"gpus.yaml: assumed alias '{alias}' is ambiguous")
    return exact, assumed


def _variants(name: str) -> list[str]:
    key = normalise(name)
    keys = [key]
    for prefix in ("nvidia-geforce-", "geforce-", "nvidia-", "amd-instinct-", "amd-"):
        if key.startswith(prefix):
            keys.append(key[len(prefix) :])
    return keys


def list_gpus() -> list[GpuSpec]:
    """Every catalog entry, sorted by name."""
    return [spec for _, spec in sorted(_catalog().items())]


def get_gpu(name: str) -> GpuSpec:
    """A GPU by catalog name or alias (case-insensitive; "NVIDIA H800", "h800", "A100-SXM4-80GB",
    "4090"...). An ambiguous name ("A100") resolves with a ``note`` saying what was assumed.

    Raises :class:`UnknownCatalogEntry` (one line, close matches listed) for an unknown name.
    """
    exact, assumed = _index()
    for key in _variants(name):
        if key in exact:
            return _catalog()[exact[key]]
    for key in _variants(name):
        if key in assumed:
            spec = _catalog()[assumed[key]]
            return spec.model_copy(update={"note": f"'{name.strip()}' does not name one catalog entry; assumed {spec.name} ({spec.notes})"})
    spec = _with_memory_size(name)
    if spec is not None:
        return spec
    raise unknown("gpu", name.strip(), {**exact, **assumed}, "see `list_gpus()` for the catalog")


_MEMORY_SIZE = re.compile(r"[-\s_]*(\d{1,3})\s*g(?:b|ib)?$", re.IGNORECASE)


def _with_memory_size(name: str) -> GpuSpec | None:
    """A name with its memory size written loosely: "A100-PCIe-80G" is "A100-PCIe-80GB"; "RTX 4090
    24G" or "L40S-48G" is the card named before the size, when the catalog's card has that much
    memory (within 10%: "48G" may mean GB or GiB). Another size resolves nothing."""
    m = _MEMORY_SIZE.search(name.strip())
    if m is None:
        return None
    exact, _ = _index()
    for key in _variants(name.strip()[: m.start(1)] + m.group(1) + "GB"):
        if key in exact:
            return _catalog()[exact[key]]
    base = name.strip()[: m.start()]
    for key in _variants(base) if base else []:
        if key in exact:
            spec = _catalog()[exact[key]]
            size = int(m.group(1))
            if any(abs(spec.memory_bytes / unit - size) <= 0.1 * size for unit in (1e9, 2**30)):
                return spec
    return None


__all__ = ["GpuSpec", "PCIE_X16_GBS_PER_DIRECTION", "UnknownCatalogEntry", "get_gpu", "list_gpus"]
