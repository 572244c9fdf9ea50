"""What a training step needs of a model, checked before the run: a parameter to train, an optimizer that takes the
gradients it will get, and -- under DDP -- whether the loss reaches every trained parameter. Without these, the first
two failed at the first step of every cell, after the run had started (a frozen model at autograd's "element 0 of
tensors does not require grad", a sparse embedding under Adam at "Adam does not support sparse gradients"), and DDP
at its second step ("Expected to have finished reduction in the prior iteration"). The first two are one line now,
before any cell; the third is found on a meta copy and DDP told to look for those parameters."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable

import torch
from torch import nn

from ampbench.distributed.placement import Ddp, Placement
from ampbench.errors import AmpbenchError
from ampbench.precision.setup_checks import sparse_gradient_modules
from ampbench.workloads.base import Workload
from ampbench.workloads.meta_check import meta_copy, meta_like

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


class UnusedParametersWarning(UserWarning):
    """Parameters the loss does not reach, under DDP (:func:`find_unused_under_ddp`): a cell keeps it in its row."""


def unused_parameters(workload: Workload) -> list[str] | None:
    """The trained parameters the loss does not reach (a multi-task model's unused head, a branch its forward skips),
    by name, from a forward, loss and backward of 2 samples on a meta copy of the model (no compute, no memory, the
    model and the random state untouched); None where the copy cannot stand in (a value read, an op with no meta
    kernel): then not known."""
    clone = meta_copy(workload.model)
    if clone is None:
        return None
    try:
        inputs, targets = workload.example_batch(2)
        with torch.enable_grad():
            loss = workload.loss_fn(workload.call_model(clone, meta_like(inputs), prepared=True), meta_like(targets))
            loss.backward()
    except Exception:
        return None
    return [name for name, p in clone.named_parameters() if p.requires_grad and p.grad is None]


def find_unused_under_ddp(workload: Workload, placement: Placement) -> None:
    """Under DDP (``placement``, a :class:`~ampbench.distributed.placement.Ddp`), parameters the loss does not reach
    made every run fail at its second step ("Expected to have finished reduction in the prior iteration"): where the
    model has some, DDP is told to look for them (``find_unused_parameters=True``, which walks the autograd graph every
    step, as DDP's own error advises), and a warning says so; a model whose every parameter is reached keeps DDP's
    default (no walk)."""
    if not isinstance(placement, Ddp):
        return
    unused = unused_parameters(workload)
    if unused:
        placement.find_unused_parameters = True
        warnings.warn(unused_note(unused), UnusedParametersWarning, stacklevel=2)


def unused_note(unused: list[str]) -> str:
    """What DDP is told of the parameters the loss does not reach, and what spares it."""
    shown = ", ".join(unused[:3]) + (f" and {len(unused) - 3} more" if len(unused) > 3 else "")
    return (f"ddp: {len(unused)} trained parameter(s) get no gradient from the loss ({shown}): "
            "DistributedDataParallel(find_unused_parameters=True), which walks the autograd graph each step; freeze "
            "them (requires_grad_(False)) to spare that")
