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
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv --system-site-packages "$VENV"
    # When $PYTHON is itself a venv's interpreter (the GPU machine's image), `venv --system-site-packages` gives the
    # new venv the *base* interpreter's site-packages (pyvenv.cfg's home is the base), not that venv's, where torch
    # is. A .pth file in the new venv adds the parent's site directories (site.addsitedir: their own .pth files too),
    # after its own, so what is installed here still comes first.
    "$PYTHON" - "$VENV" <<'PY'
import subprocess, sys, sysconfig
from pathlib import Path

if sys.prefix != sys.base_prefix:
    parent = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    child = subprocess.check_output([str(Path(sys.argv[1]) / "bin" / "python"), "-c",
                                     "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in parent)
    (Path(child) / "_ampbench_parent_venv.pth").write_text(lines)
    print(f"bootstrap: {sys.executable} is a venv's python: its site-packages ({', '.join(parent)}) added to the new venv")
PY
  fi
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
