"""A model's check forward on the meta device, for a run's cells, whose targets the run checked for real already.

A ``--model`` (or an ``hf:``/``timm:`` adapter) is checked with one forward on 2 samples before it trains
(:mod:`ampbench.workloads.user`): a wrong shape or vocabulary becomes one line instead of a traceback mid-run. ``ampbench
run`` does that check once per target before any cell (:func:`ampbench.bench.runner.validate_inputs`); every cell,
max-batch trial and convergence seed then builds the workload again in its own process, and paid the same fp32 forward
on the host each time -- on the lent H200's host ~7 s for GPT-2 at 1,024 tokens (one thread: a cell built while the one
before measures), on this project's 2-core machine 6.7 s. Inside :func:`checked_by_the_run` the check forward runs on a
copy of the model whose parameters and buffers are on the meta device (shared ones still shared): the shapes, the
calling convention and the output's type and shape are checked as before, in ~0.1 s, and the model itself is left as
it was built (the real forward also stepped a BatchNorm's running statistics in train mode). What only values show
(a token id beyond an embedding) the run's own check saw.

The copy cannot stand in where the forward changes the model's structure (a lazy module's first call makes its
parameters; a module registering a buffer on first use) or where the model reads a value (``.item()``, a
data-dependent shape): :func:`meta_forward` says so (None), and the real forward runs as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

META = torch.device("meta")
_CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("ampbench_checked_by_the_run", default=False)


@contextlib.contextmanager
def checked_by_the_run() -> Iterator[None]:
    """Inside, a module workload's check forward runs on a meta copy (:func:`meta_forward`): for builds of targets the
    run checked for real before its first cell."""
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def on_meta() -> bool:
    """Whether a check forward here may run on a meta copy (inside :func:`checked_by_the_run`)."""
    return _CHECKED.get()


def meta_twins(model: nn.Module) -> dict[int, torch.Tensor]:
    """A meta twin of each of ``model``'s parameters and buffers not on meta already, by the original's ``id``: a
    parameter's a parameter (its ``requires_grad`` kept), one twin for a tensor two modules share -- ``.to("meta")``
    makes one new parameter per module that holds it: an LM head tied to its embedding becomes two."""
    twins: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for t in table.values():
                if t is not None and t.device != META and id(t) not in twins:
                    meta = torch.empty_like(t, device=META)
                    twins[id(t)] = nn.Parameter(meta, requires_grad=t.requires_grad) if isinstance(t, nn.Parameter) \
                        else meta
    return twins


def meta_copy(model: nn.Module) -> nn.Module | None:
    """A copy of ``model`` with every parameter and buffer on the meta device, tied ones still tied (:func:`meta_twins`)
    and the model itself untouched; None where it cannot be copied (a handle, a generator) or has lazy parameters."""
    if any(isinstance(t, nn.parameter.UninitializedTensorMixin) for t in [*model.parameters(), *model.buffers()]):
        return None  # (a lazy module: its first forward makes the parameters the optimizer needs)
    try:
        return copy.deepcopy(model, meta_twins(model))  # (the memo: each tensor's twin in its place)
    except Exception:  # (deepcopy refuses some attributes: a lock, a file, a C handle)
        return None


def structure(model: nn.Module) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every named parameter and buffer's shape and dtype (what a forward must leave as it found)."""
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return {name: (tuple(t.shape), t.dtype) for name, t in tensors}


def meta_like(x: Any) -> Any:
    """Tensors (in tuples, lists and dicts) on the meta device, shapes and dtypes kept: a batch's inputs and targets."""
    if isinstance(x, torch.Tensor):
        return torch.empty_like(x, device=META)
    if isinstance(x, (tuple, list)):
        return type(x)(meta_like(v) for v in x)
    if isinstance(x, dict):
        return {k: meta_like(v) for k, v in x.items()}
    return x


def meta_forward(model: nn.Module, call: Callable[[nn.Module], Any]) -> tuple[Any] | None:
    """``(call(copy),)`` on a meta copy of ``model`` under ``torch.no_grad()`` -- the inputs ``call`` passes on meta
    too --, or None where the copy cannot stand in for the model: it cannot be made, the forward failed on it (a value
    read, an op without a meta kernel: the real forward says whether the model is wrong), or the forward changed its
    structure (a parameter or buffer made, reshaped or retyped on first use)."""
    clone = meta_copy(model)
    if clone is None:
        return None
    before = structure(clone)
    try:
        with torch.no_grad():
            out = call(clone)
    except Exception:
        return None
    if structure(clone) != before:
        return None
    return (out,)


class NotOnMeta(Exception):
    """The meta copy cannot stand in for the model (:func:`meta_forward` said None): the real check forward runs."""
