"""Global torch math-mode state (TF32 flags), set within a scope and restored afterwards.

PyTorch has two APIs for TF32: the legacy booleans (``torch.backends.cuda.matmul.allow_tf32``,
``torch.backends.cudnn.allow_tf32``) and, since 2.9, ``fp32_precision`` strings. The legacy setters are deprecated
there (they warn on CUDA builds), and a legacy *read* after the new API was used raises ("you have used a mix of
the legacy and new APIs"), while the new strings stay readable whatever set them (a legacy write shows in them).
So where the new API exists it is the one read and written -- matmul, cuDNN convolutions and cuDNN RNNs together,
so the three never disagree -- and the values found on entry are restored on exit; torch < 2.9 gets the booleans.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

import torch

# Environment variables that force TF32 regardless of the flags (NVIDIA's libraries and PyTorch).
TF32_OVERRIDE_ENV = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")


@functools.cache
def _has_new_api() -> bool:
    return hasattr(torch.backends.cuda.matmul, "fp32_precision") and hasattr(
        getattr(torch.backends.cudnn, "conv", None), "fp32_precision"
    )


@dataclass(frozen=True)
class TF32Flags:
    """TF32 settings in force: matmul (cuBLAS) and convolution (cuDNN)."""

    matmul: bool
    cudnn: bool
    api: str  # "legacy" or "fp32_precision"

    def as_dict(self) -> dict[str, object]:
        env = {k: os.environ[k] for k in TF32_OVERRIDE_ENV if k in os.environ}
        return {"matmul": self.matmul, "cudnn": self.cudnn, "api": self.api, "override_env": env}


@functools.cache
def _new_api_objects() -> tuple[object, ...]:
    return torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn


def read_tf32() -> TF32Flags:
    """The TF32 flags currently in force (does not change anything)."""
    if not _has_new_api():
        return TF32Flags(
            bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32), "legacy"
        )
    matmul, conv, _ = _new_api_objects()
    # "none" defers to the parent setting, whose default is ieee for matmul (tf32 for cuDNN: its default is on)
    return TF32Flags(matmul.fp32_precision == "tf32", conv.fp32_precision == "tf32", "fp32_precision")


def set_tf32(enabled: bool) -> None:
    """Allow (or forbid) TF32 for fp32 matmul and cuDNN from now on (a process of its own: a Keras cell)."""
    if not _has_new_api():
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        return
    for obj in _new_api_objects():
        obj.fp32_precision = "tf32" if enabled else "ieee"  # type: ignore[attr-defined]


class tf32_scope:
    """Allow (or forbid) TF32 for fp32 matmul and cuDNN conv inside the block; restore after. Nothing is written
    where the flags already say so (a training step enters it twice: its cost is in every step)."""

    __slots__ = ("_saved", "enabled")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._saved: tuple[Any, ...] | None = None

    def __enter__(self) -> None:
        if not _has_new_api():
            saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            if saved != (self.enabled, self.enabled):
                self._saved = saved
                set_tf32(self.enabled)
            return
        want = "tf32" if self.enabled else "ieee"
        objects = _new_api_objects()
        saved = tuple(o.fp32_precision for o in objects)  # type: ignore[attr-defined]
        if saved != (want, want, want):
            self._saved = saved
            for o in objects:
                o.fp32_precision = want  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        saved, self._saved = self._saved, None
        if saved is None:
            return
        if not _has_new_api():
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
            return
        for o, v in zip(_new_api_objects(), saved):
            o.fp32_precision = v  # type: ignore[attr-defined]
