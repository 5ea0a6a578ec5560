#!/bin/bash
# One user-style run on the lent H100 (2026-12-07): a vLLM 0.26.0 server of the Llama-3.1-8B shape
# (dummy weights) with one planted cause, --max-num-seqs 8, driven by vLLM's own `vllm bench serve`.
# Needs vLLM installed under /tmp/site by benchmarks/gpu/device_step.sh (site pieces 00-02).
# Writes to $OUT/planted-8b-seqs8-benchserve/: the bench result JSON (vLLM's format, default name),
# metrics_before.txt, metrics_after.txt, server.log.gz, bench_client.log, bench_help.txt, commands.txt,
# env.txt. Usage (repo root on the device): bash benchmarks/gpu/runs/2026-12-07-h100-benchserve/benchserve_step.sh
set -u
D=${OUT:-/tmp/out}/planted-8b-seqs8-benchserve; mkdir -p "$D"
RUN=/tmp/bs; mkdir -p $RUN
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_HOST_IP=127.0.0.1
[ -f /tmp/site/.ok-site ] || { echo "no vLLM under /tmp/site"; exit 1; }
MODEL_DIR=/tmp/models/Llama-3.1-8B-Instruct
NAME=meta-llama/Llama-3.1-8B-Instruct
PORT=8000
# the model directory: exact config.json of the catalog's Llama-3.1-8B, byte-level BPE tokenizer (vllm_e2e.py)
python3 -c "import sys; sys.path.insert(0, 'benchmarks/gpu'); import vllm_e2e; vllm_e2e.make_model('$MODEL_DIR', 'llama31-8b')" || exit 1
ls -la $MODEL_DIR
vllm() { python3 -m vllm.entrypoints.cli.main "$@"; }
SERVE="vllm serve $MODEL_DIR --served-model-name $NAME --load-format dummy --max-model-len 8192 --max-num-seqs 8 --port $PORT"
BENCH="vllm bench serve --backend vllm --base-url http://127.0.0.1:$PORT --model $NAME --tokenizer $MODEL_DIR \
--dataset-name random --random-input-len 2048 --random-output-len 256 --num-prompts 128 --max-concurrency 32 \
--ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
--save-result --save-detailed --result-dir $D"
{ echo "# vllm = python3 -m vllm.entrypoints.cli.main (PYTHONPATH=/tmp/site), env: VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1"
  echo "$SERVE > server.log 2>&1 &"
  echo "curl -s localhost:$PORT/metrics > metrics_before.txt"
  echo "$BENCH"
  echo "curl -s localhost:$PORT/metrics > metrics_after.txt"; } > $D/commands.txt
{ nvidia-smi; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv; python3 -V; } > $D/env.txt 2>&1
cd $RUN
echo "serve start $(date -u +%T)"
setsid python3 -m vllm.entrypoints.cli.main serve $MODEL_DIR --served-model-name $NAME --load-format dummy \
  --max-model-len 8192 --max-num-seqs 8 --port $PORT > $RUN/server.log 2>&1 < /dev/null &
SPID=$!
(python3 -m vllm.entrypoints.cli.main bench serve --help > $D/bench_help.txt 2>&1 &)
getm() { curl -s localhost:$PORT/metrics 2>/dev/null || python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics').read().decode(),end='')"; }
ok=0
for i in $(seq 1 330); do
  if curl -sf localhost:$PORT/health >/dev/null 2>&1 || python3 -c "import urllib.request;urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2)" 2>/dev/null; then ok=1; break; fi
  kill -0 $SPID 2>/dev/null || { echo "SERVER DIED"; break; }
  sleep 1
done
echo "healthy=$ok after ${i}s $(date -u +%T)"
if [ $ok = 1 ]; then
  getm > $D/metrics_before.txt
  echo "bench start $(date -u +%T)"
  timeout 300 python3 -m vllm.entrypoints.cli.main bench serve --backend vllm --base-url http://127.0.0.1:$PORT \
    --model $NAME --tokenizer $MODEL_DIR --dataset-name random --random-input-len 2048 --random-output-len 256 \
    --num-prompts 128 --max-concurrency 32 --ignore-eos --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $D > $D/bench_client.log 2>&1
  echo "bench rc=$? $(date -u +%T)"
  getm > $D/metrics_after.txt
  sleep 1
  tail -n 60 $D/bench_client.log
fi
kill -TERM -- -$SPID 2>/dev/null; sleep 3; kill -KILL -- -$SPID 2>/dev/null
grep -E "GPU KV cache size|Maximum concurrency|Available KV|non-default args|version|ERROR" $RUN/server.log | head -20
gzip -9 -n -c $RUN/server.log > $D/server.log.gz
ls -la $D
