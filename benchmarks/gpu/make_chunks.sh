#!/bin/bash
# Cut the vLLM payload (built by payload_build.sh) into the folders one device call carries each,
# and stage the harness next to them, all under the repository's ignored .gpu18x/:
#   .gpu18x/p1  site.part.00 site.part.01            (call 1: pieces only)
#   .gpu18x/p2  site.part.02 moe.part.00             (call 2: vLLM complete, dense runs)
#   .gpu18x/p3  moe.part.01 ...                      (call 3: MoE kernels complete)
#   .gpu18x/h   vllm_e2e.py device_step.sh plans/ payload.sha256   (carried by every call)
# Usage: bash benchmarks/gpu/make_chunks.sh REPO_ROOT_THAT_TRAVELS   (env: W=payload dir, CHUNK_MB=26)
set -euo pipefail
W=${W:-/tmp/gpu18w}; MB=${CHUNK_MB:-26}; R=${1:?repo root}
SRC=$(cd "$(dirname "$0")" && pwd)
S=$W/payload/vllm-0.26.0-site.tar.xz; X=$W/payload/vllm-0.26.0-extra-moe.tar.xz
mkdir -p "$R/.git/info"
grep -qxF '/.gpu18x/' "$R/.git/info/exclude" 2>/dev/null || echo '/.gpu18x/' >> "$R/.git/info/exclude"
rm -rf "$R/.gpu18x"; mkdir -p "$R/.gpu18x/h" "$R/.gpu18x/cut"
split -b "${MB}M" -d -a 2 "$S" "$R/.gpu18x/cut/site.part."
split -b "${MB}M" -d -a 2 "$X" "$R/.gpu18x/cut/moe.part."
( cd "$R/.gpu18x/cut" && sha256sum site.part.* moe.part.* ) > "$R/.gpu18x/h/payload.sha256"
files=($(cd "$R/.gpu18x/cut" && ls site.part.* ; cd "$R/.gpu18x/cut" && ls moe.part.*))
# two pieces per call while they fit, the rest in the third
mkdir -p "$R/.gpu18x/p1" "$R/.gpu18x/p2" "$R/.gpu18x/p3"
i=0; for f in "${files[@]}"; do d=p$(( i < 2 ? 1 : (i < 4 ? 2 : 3) )); mv "$R/.gpu18x/cut/$f" "$R/.gpu18x/$d/"; i=$((i+1)); done
rmdir "$R/.gpu18x/cut"
cp "$SRC/vllm_e2e.py" "$SRC/device_step.sh" "$R/.gpu18x/h/"; cp -r "$SRC/plans" "$R/.gpu18x/h/"
cat "$R/.gpu18x/h/payload.sha256"; du -sh "$R"/.gpu18x/*
tree_b=$(cd "$R" && git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | awk 'END{print $1}')
echo "working tree that travels: $((tree_b / 1048576)) MiB (+ the carried folders above; limit 64 MiB a call)"
