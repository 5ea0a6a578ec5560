#!/bin/bash
# One device call of the end-to-end runs: take the payload pieces this call carried (CARRY_DIR),
# install vLLM into /tmp/site once all pieces of a tarball are there (sha256-checked), then run each
# plan NAME:BUDGET_S with vllm_e2e.py and pack its folder into $OUT/NAME.tar.gz.
# /tmp survives between calls only while the machine stays warm (next call within ~30 s).
# Usage (repo root on the device): bash H/device_step.sh [CARRY_DIR|-] ["plan:budget ..."]
set -u
H=$(cd "$(dirname "$0")" && pwd)
PL=${PL:-/tmp/gpu18pl}; SITE=${SITE:-/tmp/site}; RUN=${RUN:-/tmp/e2e}
mkdir -p $PL $SITE $RUN
[ "${1:--}" != "-" ] && cp "$1"/* $PL/ && echo "carried: $(ls "$1" | tr '\n' ' ')"
echo "pieces on the machine: $(ls $PL | tr '\n' ' ')"
install_part() {  # $1 = site|moe
  local kind=$1 mark=$SITE/.ok-$1
  [ -f $mark ] && { echo "$kind: installed earlier"; return 0; }
  local parts=$(grep -o " $kind\.part\.[0-9]*" $H/payload.sha256 | tr -d ' ')
  for p in $parts; do [ -f $PL/$p ] || { echo "$kind: waiting for $p"; return 1; }; done
  (cd $PL && grep -E " $kind\.part\.[0-9]+$" $H/payload.sha256 | sha256sum -c --quiet) || { echo "$kind: piece checksum FAILED"; return 1; }
  local t=$(date +%s)
  for p in $parts; do cat $PL/$p; done | tar xJf - -C $SITE || { echo "$kind: untar FAILED"; return 1; }
  touch $mark; echo "$kind: installed in $(( $(date +%s) - t ))s"
}
install_part site; install_part moe
export PYTHONPATH=$SITE VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
for spec in ${2:-}; do
  name=${spec%%:*}; budget=${spec##*:}
  [ -f $SITE/.ok-site ] || { echo "no vLLM: cannot run $name"; break; }
  echo "===== $name (budget ${budget}s) $(date -u +%H:%M:%S)"
  timeout $((budget + 20)) python3 $H/vllm_e2e.py --plan $H/plans/$name.json --run-dir $RUN --budget-s $budget > $RUN/$name.console 2>&1
  echo "rc=$?"; grep -v "waiting for /health" $RUN/$name.console | tail -n 25
  if [ -f $RUN/server.pid ]; then pid=$(cat $RUN/server.pid); kill -TERM -- -$pid 2>/dev/null; sleep 3; kill -KILL -- -$pid 2>/dev/null; rm -f $RUN/server.pid; fi
  cp $RUN/$name.console $RUN/$name/console.log 2>/dev/null
  tar czf ${OUT:-/tmp}/$name.tar.gz -C $RUN $name && ls -la ${OUT:-/tmp}/$name.tar.gz
done
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
