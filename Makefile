# `make run` and `make test` work on a fresh machine: each sets up .venv first if needed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ampbench-installed

.PHONY: run test lint setup clean

$(STAMP): pyproject.toml scripts/bootstrap.sh
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/bootstrap.sh
	@touch $(STAMP)

setup: $(STAMP)

# Each target first writes the bytecode of what its processes import (compileall: only what changed since), which the
# interpreter does not where PYTHONDONTWRITEBYTECODE is set (this project's machines set it): every process -- a run's
# parent, its fork server, each torchrun rank, each test's child -- compiled ampbench's ~200 modules from source again,
# ~1 s of CPU each (2-core AMD EPYC: one tiny `ampbench run` cell 5.5 -> 4.5 s of CPU; tests/bench/test_run_cli.py 53 -> 44 s).
COMPILE = $(PY) -m compileall -q -j 0

# The main job: the device probe (half-precision hardware, peak, GEMM speed per dtype), then the default
# benchmark suite of the best device here (CUDA if present, else CPU), every precision it supports side by
# side; rows go to out/results.db and out/run.json. The probe lets the advice say what faster matmuls
# alone would give each model (expected_speedup_vs_fp32).
run: $(STAMP)
	@$(COMPILE) src
	$(VENV)/bin/ampbench hw --db out/results.db
	$(VENV)/bin/ampbench run --db out/results.db --json out/run.json

lint: $(STAMP)
	@if $(PY) -m ruff --version >/dev/null 2>&1; then $(PY) -m ruff check src tests benchmarks predict_checks; \
	else echo "ruff not installed here: lint skipped"; fi

# The CPU-kernel-sensitive tests (every workload x mode forward/backward, the engine contract, kernel fallbacks,
# the oracle tests) run twice: natively, then as an AVX2-only CPU runs them (oneDNN and ATen capped at AVX2: no
# AVX-512, bf16/fp16 emulated, no oneDNN bf16 LSTM), so a fresh clone passes on every CPU we have seen.
# Two pytest workers where pytest-xdist is installed (dev installs it; most tests wait on child processes importing
# torch, so two workers take ~2/3 of the time even on 2 cores); one process elsewhere (the GPU machine's image).
# One intra-op thread per process (OMP_NUM_THREADS=1, unless set): two workers whose torch each spins two OpenMP
# threads, plus the child processes they start, oversubscribe 2 cores -- measured 145 s -> 105 s on three test files.
# The tests assert behaviour and numerics, never a timing, so the thread count changes no result.
WORKERS ?= 2
test: $(STAMP) lint
	@$(COMPILE) src tests predict_checks benchmarks
	COLUMNS=80 OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest -q --durations=12 $$($(PY) -c "import xdist" 2>/dev/null && echo "-n $(WORKERS) --dist worksteal")
	ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 $(PY) -m pytest -q -m isa

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
