"""How a Keras cell gets its process: on a CPU, forked from a server that imported keras on the cell's backend (its
environment set first, as the cell would set it); on a GPU, or on a backend not tried here, a fresh interpreter."""

from __future__ import annotations

import importlib.util
import os

import pytest

from ampbench import seam
from ampbench.bench.jobs import launcher
from ampbench.cells import CellSpec
from ampbench.launch import ChildProcess, Forked, Job


def _spec(device: str, backend: str) -> CellSpec:
    return CellSpec.of(device=device, workload="keras-conv-dummy", preset="tiny", precision="fp32", batch_size=None,
                       keras_backend=backend)


def test_a_gpu_cell_or_a_jax_cell_starts_fresh_and_a_torch_cell_is_always_forked() -> None:
    assert isinstance(launcher(_spec("cuda", "torch"), 60), ChildProcess)
    assert isinstance(launcher(_spec("cuda:1", "tensorflow"), 60), ChildProcess)
    assert isinstance(launcher(_spec("cpu", "jax"), 60), ChildProcess)
    torch_cell = CellSpec.of(device="cuda", workload="tabular-mlp", preset="tiny", precision="fp32", batch_size=None)
    served = launcher(torch_cell, 60)
    assert isinstance(served, Forked) and served.env == ()


def test_a_cpu_cell_s_server_is_set_up_as_the_cell_sets_itself_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # (the user's value wins, as in activate())
    forked = launcher(_spec("cpu", "tensorflow"), 60)
    assert isinstance(forked, Forked)
    assert dict(forked.env) == {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "0"}
    assert forked.preload[-2:] == (seam.get("keras").cell_module, "keras")


@pytest.mark.parametrize("backend", [
    pytest.param(b, marks=pytest.mark.skipif(importlib.util.find_spec(b) is None or importlib.util.find_spec("keras") is None,
                                             reason=f"keras or {b} not installed")) for b in ("torch", "tensorflow")])
def test_cpu_cells_are_children_of_one_server_that_imported_keras_on_their_backend(backend: str) -> None:
    spec = _spec("cpu", backend)
    a = launcher(spec, 120).run(Job("tests.frameworks.keras.seen:seen"))
    b = launcher(spec, 120).run(Job("tests.frameworks.keras.seen:seen"))
    assert a["keras"] and a["backend"] == backend and a["visible"] == ""
    assert a["torch"] == (backend == "torch")  # (a TensorFlow cell's process never imports torch)
    assert a["server"] == b["server"] != os.getpid()
