"""What ``MixedPrecision.setup`` checks of the models and optimizers it is given, and the hooks it leaves on them:
Adam's eps that rounds to 0 in half, weights loaded into the model after setup taken into the fp32 masters."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from ampbench.errors import AmpbenchError, MisuseError
from ampbench.precision.master_weights import MasterWeights

SETUP_ATTR = "_ampbench_precision"
"""The attribute a set-up model carries (the MixedPrecision's repr): a second setup of it is refused."""


def as_list(obj: Any, kind: type, what: str) -> list[Any]:
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not items:
        raise AmpbenchError(f"setup() got an empty list of {what}s")
    for it in items:
        if not isinstance(it, kind):
            raise AmpbenchError(f"setup() expects {what}(s) of type {kind.__name__}, got {type(it).__name__}")
    return items


def models_and_optimizers(model: Any, optimizer: Any) -> tuple[list[nn.Module], list[torch.optim.Optimizer]]:
    """The models and optimizers ``setup`` was given (one or lists), checked: not set up before, and every optimizer
    holding the models' parameters only."""
    models = as_list(model, nn.Module, "model")
    optimizers = as_list(optimizer, torch.optim.Optimizer, "optimizer")
    for m in models:
        if getattr(m, SETUP_ATTR, None) is not None:
            raise MisuseError(
                f"{type(m).__name__} was already set up by {getattr(m, SETUP_ATTR)!r}; "
                "build a fresh model (and optimizer) for another MixedPrecision"
            )
    model_params = {id(p) for m in models for p in m.parameters()}
    for i, opt in enumerate(optimizers):
        held = [p for g in opt.param_groups for p in g["params"]]
        foreign = [p for p in held if id(p) not in model_params]
        if not held or foreign:
            raise MisuseError(
                f"optimizer {i} ({type(opt).__name__}) holds {len(foreign) if held else 0} of {len(held)} "
                "parameters that are not the model's. Create the optimizer from model.parameters() "
                "and pass that model to setup()"
            )
    return models, optimizers


def sparse_gradient_modules(models: list[nn.Module]) -> list[str]:
    """The embeddings of ``models`` that make sparse gradients (``sparse=True``, trained), by name."""
    return [f"{type(m).__name__} {name or '(root)'!r}" for model in models for name, m in model.named_modules()
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse and m.weight.requires_grad]


def refuse_sparse_gradients_with_masters(models: list[nn.Module], name: str) -> None:
    """Master weights keep a dense fp32 gradient per parameter, which a sparse gradient cannot be copied into
    (``copy_() between dense and sparse Tensors is not implemented`` at the first step): refused at setup, with what
    works instead."""
    sparse = sparse_gradient_modules(models)
    if sparse:
        raise AmpbenchError(f"{name} keeps dense fp32 master gradients; {sparse[0]} has sparse=True (sparse "
                            "gradients): give it sparse=False, or use an amp-* mode (autocast keeps the weights, and "
                            "their sparse gradients, as they are)")


class HalfEpsWarning(UserWarning):
    """An optimizer's eps that is 0 in the half dtype its state is kept in (:func:`warn_eps_underflow`): diagnose
    verifies the master-* fix it names (``ampbench.diagnose.setup_findings``)."""


def warn_eps_underflow(optimizer: torch.optim.Optimizer) -> None:
    """Adam's default eps (1e-8) rounds to 0 in fp16: the update divides by sqrt(v)=0 -> inf."""
    for group in optimizer.param_groups:
        eps = group.get("eps")
        if not isinstance(eps, float) or eps <= 0:
            continue
        for dtype in {p.dtype for p in group["params"] if p.dtype in (torch.float16, torch.bfloat16)}:
            if torch.tensor(eps, dtype=dtype).item() == 0.0:
                warnings.warn(
                    f"{type(optimizer).__name__} eps={eps:g} is 0 in {str(dtype).removeprefix('torch.')}: "
                    "the optimizer state is half here (no master weights), so updates can become inf. "
                    "Use a larger eps (e.g. 1e-4) or a master-* mode",
                    HalfEpsWarning,
                    stacklevel=3,
                )


def watch_loads(model: nn.Module, masters: list[MasterWeights]) -> None:
    """load_state_dict hooks on the modules owning master-tracked parameters: the pre-hook hands the
    checkpoint's full-precision tensors to the masters, the post-hook syncs them at once."""
    tracked = {id(p): ms for ms in masters for p in ms.model_params}

    def pre(module: nn.Module, state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
        for name, p in module._parameters.items():
            ms = tracked.get(id(p)) if p is not None else None
            t = state_dict.get(prefix + name) if ms is not None else None
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.element_size() > p.element_size():
                ms.pending[id(p)] = t  # type: ignore[union-attr]

    def post(module: nn.Module, incompatible: Any) -> None:
        for name, p in module._parameters.items():
            if p is not None and id(p) not in tracked and p.is_floating_point() and name in owned.get(id(module), ()):
                raise MisuseError(
                    f"load_state_dict(assign=True) replaced {type(module).__name__}.{name}, a parameter the "
                    "optimizer's fp32 master weights belong to; load before setup(), or without assign=True"
                )
        for ms in masters:
            ms.sync_from_model()

    owned: dict[int, set[str]] = {}
    for module in model.modules():
        names = {n for n, p in module._parameters.items() if p is not None and id(p) in tracked}
        if names:
            owned[id(module)] = names
            if hasattr(module, "register_load_state_dict_pre_hook"):
                module.register_load_state_dict_pre_hook(pre)
            else:  # torch < 2.5 has it under its private name only
                module._register_load_state_dict_pre_hook(pre, with_module=True)
            module.register_load_state_dict_post_hook(post)
