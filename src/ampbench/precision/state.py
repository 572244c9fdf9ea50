"""Global torch math-mode state (TF32 flags), set within a scope and restored afterwards.

PyTorch has two APIs for TF32: the legacy booleans (``torch.backends.cuda.matmul.allow_tf32``,
``torch.backends.cudnn.allow_tf32``) and, since 2.9, ``fp32_precision`` strings. Recent versions
raise when code reads one after the other was set, so we detect which one the process is using and
stay with it: ampbench never breaks a caller's later read of the flags.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch

# Environment variables that force TF32 regardless of the flags (NVIDIA's libraries and PyTorch).
TF32_OVERRIDE_ENV = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")


def _has_new_api() -> bool:
    return hasattr(torch.backends.cuda.matmul, "fp32_precision") and hasattr(
        getattr(torch.backends.cudnn, "conv", None), "fp32_precision"
    )


def _legacy_readable() -> bool:
    try:
        _ = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    except RuntimeError:  # the process set the new API: legacy reads are refused
        return False
    return True


@dataclass(frozen=True)
class TF32Flags:
    """TF32 settings in force: matmul (cuBLAS) and convolution (cuDNN)."""

    matmul: bool
    cudnn: bool
    api: str  # "legacy" or "fp32_precision"

    def as_dict(self) -> dict[str, object]:
        env = {k: os.environ[k] for k in TF32_OVERRIDE_ENV if k in os.environ}
        return {"matmul": self.matmul, "cudnn": self.cudnn, "api": self.api, "override_env": env}


def _new_api_objects() -> tuple[object, object]:
    return torch.backends.cuda.matmul, torch.backends.cudnn.conv


def read_tf32() -> TF32Flags:
    """The TF32 flags currently in force (does not change anything)."""
    if _legacy_readable() or not _has_new_api():
        return TF32Flags(
            bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32), "legacy"
        )
    matmul, conv = _new_api_objects()
    return TF32Flags(matmul.fp32_precision == "tf32", conv.fp32_precision == "tf32", "fp32_precision")


@contextlib.contextmanager
def tf32_scope(enabled: bool) -> Iterator[None]:
    """Allow (or forbid) TF32 for fp32 matmul and cuDNN conv inside the block; restore after."""
    if _legacy_readable() or not _has_new_api():
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
        return
    matmul, conv = _new_api_objects()
    saved_new = (matmul.fp32_precision, conv.fp32_precision)
    matmul.fp32_precision = conv.fp32_precision = "tf32" if enabled else "ieee"
    try:
        yield
    finally:
        matmul.fp32_precision, conv.fp32_precision = saved_new
