"""What a training step needs of a model, checked before the run: a parameter to train, and an optimizer that takes
the gradients it will get. Without this check both failed at the first step of every cell, after the run had started:
a frozen model at autograd's "element 0 of tensors does not require grad", a sparse embedding under Adam at "Adam
does not support sparse gradients". Each is one line now, before any cell."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from ampbench.errors import AmpbenchError
from ampbench.precision.setup_checks import sparse_gradient_modules

SPARSE_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (torch.optim.SGD, torch.optim.SparseAdam,
                                                                torch.optim.Adagrad)
"""torch's optimizers that step sparse gradients (each other one refuses them at its first step)."""


def check_trainable(model: nn.Module, make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer],
                    where: str) -> None:
    """``model`` has a parameter to train and ``make_optimizer`` (the workload's) steps its sparse gradients, if it
    makes any; an AmpbenchError naming what to change otherwise."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise AmpbenchError(f"{where}: the model has no trainable parameter (none requires grad), and a training step "
                            "needs one: unfreeze some")
    sparse = sparse_gradient_modules([model])
    if sparse:
        optimizer = make_optimizer(trainable)
        if not isinstance(optimizer, SPARSE_OPTIMIZERS):
            raise AmpbenchError(
                f"{where}: {sparse[0]} has sparse=True (sparse gradients), which {type(optimizer).__name__} cannot "
                "step: give it sparse=False, or return a Workload whose optimizer steps them (torch.optim.SGD or "
                "Adagrad)")
