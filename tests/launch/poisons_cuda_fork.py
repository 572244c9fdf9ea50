"""A module whose import leaves a fork CUDA cannot use, as torch's does once it asked the CUDA runtime anything (its
``pthread_atfork`` handler marks each later child "in bad fork"): here the mark itself, on any torch."""

import torch

torch._C._cuda_isInBadFork = lambda: True  # type: ignore[attr-defined]
