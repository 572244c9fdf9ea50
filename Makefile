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

# The main job for now: train the MNIST CNN on the real MNIST test set in amp-bf16 (8k train / 2k test).
# (Becomes `ampbench run`, the side-by-side benchmark, once the harness lands.)
run: $(STAMP)
	$(VENV)/bin/ampbench train mnist-cnn --precision amp-bf16 --data-dir ../shared/data/mnist --json out/train-mnist-amp-bf16.json

lint: $(STAMP)
	@if $(PY) -m ruff --version >/dev/null 2>&1; then $(PY) -m ruff check src tests benchmarks; \
	else echo "ruff not installed here: lint skipped"; fi

test: $(STAMP) lint
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache src/*.egg-info
