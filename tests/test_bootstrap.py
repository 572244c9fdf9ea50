"""scripts/bootstrap.sh (what `make` and benchmarks/gpu_session.sh run) on a machine whose python is itself a venv's
that imports torch, as the GPU machine's image is: the new .venv must import torch from it, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the test's python is not a venv's")
def test_bootstrap_from_a_venv_python_reuses_its_torch_offline(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = dict(os.environ, PYTHON=sys.executable, VENV=str(venv), PIP_NO_INDEX="1")  # (no package index: offline)
    r = subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "already importable: reusing it" in r.stdout and "is a venv's python" in r.stdout
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch, ampbench; print(torch.__file__)"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(Path(sys.prefix))  # torch from the parent venv, not installed anew
    assert (venv / "pyvenv.cfg").read_text().count("include-system-site-packages = true") == 1
