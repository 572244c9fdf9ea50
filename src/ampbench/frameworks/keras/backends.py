"""Which Keras backend a cell runs on: checked, installed, activated before ``import keras``.

Keras 3 reads ``KERAS_BACKEND`` once, when it is first imported; a process that imported it with one backend
cannot switch. Each Keras cell therefore runs in a process of its own that sets the backend first.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from ampbench.errors import AmpbenchError, suggest
from ampbench.seam import ForkServer

BACKENDS = ("torch", "tensorflow", "jax")
DEFAULT_BACKEND = "torch"
"""The backend a Keras model runs on when the run does not say: PyTorch needs nothing beyond ampbench[keras]."""
INSTALL = {
    "torch": "pip install 'ampbench[keras]'",
    "tensorflow": "pip install 'ampbench[keras]' tensorflow-cpu  (tensorflow[and-cuda] on a GPU)",
    "jax": "pip install 'ampbench[keras]' jax  (jax[cuda12] on a GPU)",
}


SET_IF_UNSET = {"TF_CPP_MIN_LOG_LEVEL": "2"}
"""Set before keras is imported unless the user set it: TensorFlow's start-up chatter would bury the row's output."""


def check_backend(name: str) -> str:
    """``name`` if it is a Keras backend ampbench runs, else a one-line AmpbenchError listing them."""
    if name not in BACKENDS:
        raise AmpbenchError(f"--keras-backend {name!r}: unknown backend.{suggest(name, BACKENDS)} Choose one of "
                            f"{', '.join(BACKENDS)}")
    return name


def missing(name: str) -> str | None:
    """What is missing to run Keras on backend ``name`` (a one-line error naming the install), or None."""
    check_backend(name)
    lacking = [pkg for pkg in ("keras", name) if importlib.util.find_spec(pkg) is None]
    if not lacking:
        return None
    return (f"--keras-backend {name}: {' and '.join(lacking)} {'is' if len(lacking) == 1 else 'are'} not installed; "
            f"install with: {INSTALL[name]}")


def check_installed(name: str) -> None:
    problem = missing(name)
    if problem:
        raise AmpbenchError(problem)


def activate(name: str) -> Any:
    """Import keras on backend ``name`` (set before the import) and return the module."""
    check_installed(name)
    loaded = sys.modules.get("keras")
    if loaded is not None:
        current = loaded.backend.backend()
        if current != name:
            raise AmpbenchError(f"keras was already imported in this process with the {current} backend; a Keras "
                                f"cell on {name} must run in a process of its own")
        return loaded
    os.environ["KERAS_BACKEND"] = name
    for var, value in SET_IF_UNSET.items():
        os.environ.setdefault(var, value)
    import keras  # lazy: keras

    return keras


FORKED_BACKENDS = ("torch", "tensorflow")
"""Backends whose CPU cells are forked from a server that imported keras once (:func:`fork_server`): their import
starts no thread and, with no GPU visible, touches none (checked by the server, tested on both). JAX's cells start
fresh: not tested here."""


def fork_server(cell_module: str, device: str, backend: str | None) -> ForkServer | None:
    """A fork server for the Keras cells of ``backend`` on ``device``: on a CPU, one importing keras on that backend
    with the environment :func:`activate` and the cell's ``device_env`` would set (each cell then pays no import:
    ~3 s of keras and its backend on a CPU); None for a GPU cell -- Keras's torch backend asks CUDA for its devices
    at import, and a fork after CUDA started is undefined -- and for a backend not in :data:`FORKED_BACKENDS`."""
    if device != "cpu" or backend not in FORKED_BACKENDS:
        return None
    env = {"KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": ""}
    for name, value in SET_IF_UNSET.items():
        env[name] = os.environ.get(name, value)
    return ForkServer((cell_module, "keras"), tuple(sorted(env.items())))


def versions(keras: Any) -> dict[str, str]:
    """Keras's version and its backend's (the row's ``keras_version``, ``backend_version``)."""
    backend = keras.backend.backend()
    module = importlib.import_module(backend)
    return {"keras_version": keras.__version__, "backend_version": str(getattr(module, "__version__", "?"))}


# -- the backends' GPUs --------------------------------------------------------------------------------------------
def gpu_available(backend: str) -> bool:
    """Whether ``backend`` (imported) sees a GPU."""
    if backend == "torch":
        import torch  # lazy: torch

        return bool(torch.cuda.is_available())
    if backend == "tensorflow":
        import tensorflow as tf  # lazy: tensorflow

        return bool(tf.config.list_physical_devices("GPU"))
    import jax  # lazy: jax

    return any(d.platform == "gpu" for d in jax.devices())


def set_tf32(backend: str, on: bool) -> dict[str, bool]:
    """Switch TF32 Tensor Core math for float32 matmuls/convolutions on ``backend``, explicitly either way: the
    backends' defaults differ (off on PyTorch's matmuls, on for TensorFlow and JAX), and an fp32 cell must be fp32.
    Returns what is in force."""
    if backend == "torch":
        from ampbench.precision.tf32_flags import set_tf32 as set_torch_tf32  # the fp32_precision API; lazy: torch

        set_torch_tf32(on)
        return {"tf32_matmul": on, "tf32_cudnn": on}
    if backend == "tensorflow":
        import tensorflow as tf  # lazy: tensorflow

        tf.config.experimental.enable_tensor_float_32_execution(on)
        on_now = bool(tf.config.experimental.tensor_float_32_execution_enabled())
        return {"tf32_matmul": on_now, "tf32_cudnn": on_now}
    import jax  # lazy: jax

    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if on else "highest")
    return {"tf32_matmul": on, "tf32_cudnn": on}


def gpu_facts() -> dict[str, Any]:
    """The cell's GPU from NVML, without any framework's CUDA context: name, compute capability, memory, driver ({}
    without NVML). NVML numbers GPUs physically: the cell's is the first of CUDA_VISIBLE_DEVICES."""
    try:
        import pynvml  # lazy: pynvml

        pynvml.nvmlInit()
        first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        h = pynvml.nvmlDeviceGetHandleByIndex(int(first)) if first.isdigit() else pynvml.nvmlDeviceGetHandleByUUID(first)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
        text = [pynvml.nvmlDeviceGetName(h), pynvml.nvmlSystemGetDriverVersion()]
        name, driver = (t.decode() if isinstance(t, bytes) else str(t) for t in text)
        return {"device_name": name, "capability": f"{major}.{minor}",
                "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total), "driver": driver}
    except Exception:
        return {}


def resolve_backend(backend: str | None, keras: bool, otherwise: str) -> str | None:
    """The backend Keras targets run on: --keras-backend (checked) or the default; None when there is no Keras target
    (then --keras-backend is one line ending in ``otherwise``)."""

    if backend is not None:
        check_backend(backend)
        if not keras:
            raise AmpbenchError(f"--keras-backend {backend} applies to Keras models (the keras-* workloads, or a --model "
                                f"returning a keras.Model); {otherwise}")
    return (backend or DEFAULT_BACKEND) if keras else None
