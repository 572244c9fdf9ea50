#!/usr/bin/env bash
# Create .venv and install ampbench into it.
# - Where the system python already imports torch (the GPU machine, which has no network), the venv
#   sees the system site-packages and ampbench is installed without touching dependencies.
# - Elsewhere torch is pinned to the CPU build first (an unpinned torch pulls GBs of CUDA wheels),
#   then ampbench and its dev tools are installed.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_CPU_VERSION=${TORCH_CPU_VERSION:-2.13.0}
export PIP_DISABLE_PIP_VERSION_CHECK=1

if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  echo "bootstrap: torch $("$PYTHON" -c 'import torch; print(torch.__version__)') already importable: reusing it"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
else
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    echo "bootstrap: installing torch==$TORCH_CPU_VERSION (CPU build)"
    "$VENV/bin/python" -m pip install -q "torch==$TORCH_CPU_VERSION"
  fi
  "$VENV/bin/python" -m pip install -q -e ".[dev]"
fi
"$VENV/bin/python" -c "import torch, ampbench; print(f'bootstrap: ampbench {ampbench.__version__}, torch {torch.__version__}')"
