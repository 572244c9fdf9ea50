"""Memory of a Keras cell, read from the backend's own tracker on a GPU and from RSS growth on a CPU.

GPU: PyTorch's CUDA allocator peaks (reset first), TensorFlow's ``get_memory_info`` peak (reset first) and JAX's
``memory_stats()['peak_bytes_in_use']`` (JAX cannot reset it: the cell's process is fresh and the peak is taken
after a one-layer warm-up, so what it holds is the cell's). CPU: the process's RSS high-water mark over the
baseline taken before the model is built (so the weights count), as PyTorch cells on CPU are measured; labelled
``memory_source``.
"""

from __future__ import annotations

from typing import Any

from ampbench.measure.host import RssPeak


class KerasPeak:
    """Peak memory from :meth:`start` on, on ``backend`` (imported), GPU or CPU."""

    def __init__(self, backend: str, gpu: bool) -> None:
        self.backend, self.gpu = backend, gpu
        self._host = RssPeak()
        self._jax_base = 0

    @property
    def source(self) -> str:
        if not self.gpu:
            return "cpu rss growth"
        return {"torch": "torch.cuda max_memory_allocated", "tensorflow": "tf get_memory_info peak",
                "jax": "jax memory_stats peak_bytes_in_use"}[self.backend]

    def start(self, base_rss: int | None = None) -> None:
        if not self.gpu:
            self._host.start(base_rss)
        elif self.backend == "torch":
            import torch  # lazy: torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        elif self.backend == "tensorflow":
            import tensorflow as tf  # lazy: tensorflow

            tf.config.experimental.reset_memory_stats("GPU:0")
        else:
            self._jax_base = _jax_stats().get("bytes_in_use", 0)

    def peak(self) -> int:
        """Bytes at the peak (CPU: growth over the baseline)."""
        if not self.gpu:
            return self._host.growth()
        if self.backend == "torch":
            import torch  # lazy: torch

            torch.cuda.synchronize()
            return int(torch.cuda.max_memory_allocated())
        if self.backend == "tensorflow":
            import tensorflow as tf  # lazy: tensorflow

            return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
        return int(_jax_stats().get("peak_bytes_in_use", 0))


def _jax_stats() -> dict[str, Any]:
    import jax  # lazy: jax

    gpu = next(d for d in jax.devices() if d.platform == "gpu")
    return dict(gpu.memory_stats() or {})


def variable_bytes(variables: Any) -> int:
    """Bytes the variables hold, each in its own dtype (float32 under mixed_*, half under float16/bfloat16)."""
    import numpy as np  # lazy: numpy

    return sum(int(np.prod(v.shape)) * (2 if str(v.dtype) == "bfloat16" else np.dtype(str(v.dtype)).itemsize)
               for v in variables)  # (numpy has no bfloat16 dtype of its own)


def is_oom(e: BaseException) -> bool:
    """An out-of-memory on any backend (torch OutOfMemoryError, TF ResourceExhaustedError, XLA RESOURCE_EXHAUSTED)."""
    text = f"{type(e).__name__} {e}".lower()
    return any(s in text for s in ("out of memory", "outofmemory", "resourceexhausted", "resource_exhausted",
                                   "oom when allocating"))
