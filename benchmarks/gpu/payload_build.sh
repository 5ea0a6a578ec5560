#!/bin/bash
# Build the vLLM 0.26.0 payload that vllm_e2e.py runs on the lent H200 (Python 3.12, torch
# 2.11.0+cu130 there, no network), on this CPU box, from PyPI wheels. Adapted from the recipe in
# ../shared/gpu-vllm (2026-12-03). Output, outside the repository (never committed):
#   $W/vllm-wheels/*.whl                        the 37 wheels
#   $W/payload/vllm-0.26.0-site.tar.xz          pip --target tree, trimmed (~77 MiB)
#   $W/payload/vllm-0.26.0-extra-moe.tar.xz     vllm/_moe_C_stable_libtorch.abi3.so (~39 MiB; MoE models)
# Then: bash benchmarks/gpu/make_chunks.sh REPO_ROOT   (cuts it into the folders each call carries).
# ~6 min on the 2-core box (xz -9e is most of it).
set -euo pipefail
W=${W:-/tmp/gpu18w}
PY312=${PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
mkdir -p "$W/vllm-wheels" "$W/payload"
[ -x "$W/venv312/bin/pip" ] || { "$PY312" -m venv "$W/venv312"; "$W/venv312/bin/pip" install -q -U pip; }
PIP="$W/venv312/bin/pip"
# vllm 0.26.0 pins torch==2.11.0 (the device's); the rest are the runtime deps `vllm serve` imports
# for a text model on Hopper that the device image lacks (checked against KINDS.md's package list).
SPECS="vllm==0.26.0 annotated_types==0.8.0 apache_tvm_ffi==0.1.10 astor==0.8.1 blake3==1.0.9
cachetools==7.2.0 cbor2==6.1.3 depyf==0.20.0 dill==0.4.1 fastapi==0.136.3 httpcore2==2.13.1
httpx2==2.13.1 ijson==3.5.1 jiter==0.16.0 jmespath==1.1.0 llguidance==1.7.6
model_hosting_container_standards==0.1.16 msgspec==0.21.1 openai==3.22.1 openai_harmony==0.0.8
partial_json_parser==0.2.1.1.post7 prometheus_fastapi_instrumentator==8.1.0 pybase64==1.4.3
pydantic==2.13.4 pydantic_core==2.46.4 python_json_logger==4.2.0 python_multipart==0.0.32
pyzmq==27.1.0 setproctitle==1.3.7 sniffio==1.3.1 starlette==1.7.0 truststore==0.10.4
typing_extensions==4.16.0 typing_inspection==0.4.4 uvicorn==0.54.0 watchfiles==1.2.0 xgrammar==0.2.7"
PLAT="--platform manylinux2014_x86_64 --platform manylinux1_x86_64"
for n in 2_35 2_34 2_31 2_28 2_27 2_26 2_24 2_17 2_12 2_5; do PLAT="$PLAT --platform manylinux_${n}_x86_64"; done
for s in $SPECS; do
  "$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d "$W/vllm-wheels" "$s"
done
T="$W/site-build"; rm -rf "$T"; mkdir -p "$T"
"$PIP" install -q --no-index --no-deps --no-compile --no-cache-dir --target "$T" "$W"/vllm-wheels/*.whl
# Dropped: FA2 (Hopper runs FA3), the MoE kernels (separate extra), the Rust frontend, DeepGEMM (FP8),
# Blackwell kernels, console scripts, bytecode.
( cd "$T" && rm -rf bin vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/_moe_C_stable_libtorch.abi3.so \
    vllm/vllm-rs vllm/third_party/deep_gemm vllm/third_party/fmha_sm100 &&
  find . -name __pycache__ -type d -prune -exec rm -rf {} + &&
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-12-01 00:00:00' -cf "$W/payload/vllm-0.26.0-site.tar" . )
E="$W/extra-build"; rm -rf "$E"; mkdir -p "$E"
unzip -q -o "$W"/vllm-wheels/vllm-0.26.0-*.whl 'vllm/_moe_C_stable_libtorch.abi3.so' -d "$E"
( cd "$E" && tar --owner=0 --group=0 --numeric-owner --mtime='2026-12-01 00:00:00' -cf "$W/payload/vllm-0.26.0-extra-moe.tar" vllm )
rm -f "$W"/payload/*.tar.xz
xz -9e -T1 "$W/payload/vllm-0.26.0-site.tar"
xz -9e -T1 "$W/payload/vllm-0.26.0-extra-moe.tar"
ls -l "$W/payload"
