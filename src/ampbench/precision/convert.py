"""Casting a model to half precision while keeping chosen modules in fp32.

Used by the ``master-*`` recipes (normalisation layers kept fp32, like apex O2) and the ``pure-*``
recipes (nothing kept unless asked). Casting is in place: parameter objects keep their identity,
so an optimizer created before the cast still refers to them.

Dtype boundaries are handled with forward hooks rather than by editing the model:
- the root module casts floating-point inputs to the half dtype and floating-point outputs to fp32
  (the loss is computed in fp32);
- a module kept in fp32 casts its floating-point inputs to fp32 and its outputs back to the dtype
  its first floating input had (the half dtype when it had none, e.g. an embedding), so its
  neighbours see half tensors.
Integer tensors (token ids, labels) pass through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from ampbench.errors import AmpbenchError, suggest

# Normalisation layers whose statistics need fp32 (BatchNorm/InstanceNorm share _NormBase).
NORM_TYPES: tuple[type[nn.Module], ...] = tuple(
    t
    for t in (
        nn.modules.batchnorm._NormBase,
        nn.LayerNorm,
        nn.GroupNorm,
        getattr(nn, "RMSNorm", None),
    )
    if t is not None
)

_HOOKS_ATTR = "_ampbench_cast_hooks"


def cast_floating(obj: Any, dtype: torch.dtype) -> Any:
    """Cast every floating-point tensor inside ``obj`` (tensors, tuples, lists, dicts) to ``dtype``."""
    kind = type(obj)
    if kind is tuple:  # (the cast hooks' args: every forward of a half model goes through here)
        return tuple([cast_floating(o, dtype) for o in obj])
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return kind(*(cast_floating(o, dtype) for o in obj))
    if isinstance(obj, (list, tuple)):
        return kind(cast_floating(o, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: cast_floating(v, dtype) for k, v in obj.items()}
    return obj


def _first_floating_dtype(obj: Any) -> torch.dtype | None:
    if isinstance(obj, torch.Tensor):
        return obj.dtype if obj.is_floating_point() else None
    if isinstance(obj, (list, tuple)):
        items: Iterable[Any] = obj
    elif isinstance(obj, dict):
        items = obj.values()
    else:
        return None
    for o in items:
        d = _first_floating_dtype(o)
        if d is not None:
            return d
    return None


def resolve_keep_fp32(
    model: nn.Module, keep_fp32: Sequence[str | type[nn.Module]], keep_norm: bool
) -> list[tuple[str, nn.Module]]:
    """The outermost modules to keep in fp32: named ones, instances of given types, and norms.

    Raises :class:`AmpbenchError` for a name that is not a submodule of ``model``.
    """
    names = dict(model.named_modules())
    types: list[type[nn.Module]] = list(NORM_TYPES) if keep_norm else []
    wanted: set[str] = set()
    for item in keep_fp32:
        if isinstance(item, type) and issubclass(item, nn.Module):
            types.append(item)
        elif isinstance(item, str):
            if item not in names:
                choices = [n for n in names if n]
                raise AmpbenchError(
                    f"keep_fp32={item!r} is not a submodule of {type(model).__name__}.{suggest(item, choices)} "
                    f"Use qualified names as in model.named_modules(), e.g. {choices[:3]}"
                )
            wanted.add(item)
        else:
            raise AmpbenchError(
                f"keep_fp32 entries must be module names (str) or nn.Module classes, got {item!r}"
            )
    selected = [
        (n, m)
        for n, m in names.items()
        if n and (n in wanted or (types and isinstance(m, tuple(types))))  # the root is never "kept"
    ]
    # Keep only the outermost: a kept module's children are fp32 with it.
    outer: list[tuple[str, nn.Module]] = []
    for n, m in selected:
        if not any(n.startswith(o + ".") for o, _ in outer):
            outer.append((n, m))
    return outer


def _check_tied(model: nn.Module, kept: list[tuple[str, nn.Module]]) -> None:
    """Refuse to keep a module fp32 when one of its parameters is shared (tied) with a module cast to
    half: one tensor cannot be both, and the forward would fail later with a dtype mismatch."""
    kept_ids = {id(sub) for _, m in kept for sub in m.modules()}
    owners: dict[int, list[tuple[str, bool]]] = {}
    for mname, module in model.named_modules(remove_duplicate=False):
        for pname, p in module.named_parameters(recurse=False, remove_duplicate=False):
            owners.setdefault(id(p), []).append((f"{mname}.{pname}" if mname else pname, id(module) in kept_ids))
    for names in owners.values():
        fp32 = [n for n, k in names if k]
        half = [n for n, k in names if not k]
        if fp32 and half:
            modules = sorted({n.rpartition(".")[0] or "(root)" for n in half})
            raise AmpbenchError(
                f"keep_fp32: {fp32[0]} is tied to {half[0]} (one shared tensor), which would be cast to half; "
                f"keep both in fp32 (add {modules} to keep_fp32) or untie the weights"
            )


def _make_pre_hook(dtype: torch.dtype, remember: bool = False) -> Callable[..., Any]:
    """Inputs cast to ``dtype``; ``remember``: the input dtype kept for the module's restore hook."""
    def pre_hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not kwargs and len(args) == 1 and type(args[0]) is torch.Tensor:  # (a norm's one input: most calls)
            x = args[0]
            floating = x.is_floating_point()
            if remember:
                module.__dict__["_ampbench_in_dtype"] = x.dtype if floating else None
            return ((x.to(dtype),) if floating and x.dtype != dtype else args), kwargs
        if remember:  # (in the instance dict directly: nn.Module.__setattr__ costs microseconds)
            module.__dict__["_ampbench_in_dtype"] = _first_floating_dtype((args, kwargs))
        return cast_floating(args, dtype), (cast_floating(kwargs, dtype) if kwargs else kwargs)

    return pre_hook


def _make_restore_hook(half: torch.dtype) -> Callable[..., Any]:
    """Outputs of a module kept fp32 go back to the dtype its input had; with no floating input (an
    embedding's token ids) to the model's half dtype, which its neighbours compute in."""
    def restore(module: nn.Module, args: Any, output: Any) -> Any:
        dtype = module.__dict__.get("_ampbench_in_dtype") or half
        if type(output) is torch.Tensor:  # (a norm's one output: most calls)
            return output.to(dtype) if output.dtype != dtype and output.is_floating_point() else output
        return cast_floating(output, dtype)

    return restore


def _to_fp32_hook(module: nn.Module, args: Any, output: Any) -> Any:
    return cast_floating(output, torch.float32)


def cast_model(
    model: nn.Module,
    dtype: torch.dtype,
    keep_fp32: Sequence[str | type[nn.Module]] = (),
    keep_norm: bool = False,
) -> list[tuple[str, nn.Module]]:
    """Cast ``model`` to ``dtype`` in place, keep the selected modules fp32, install cast hooks.

    Returns the (name, module) pairs kept in fp32.
    """
    if getattr(model, _HOOKS_ATTR, None):
        raise AmpbenchError(
            f"{type(model).__name__} was already converted by ampbench; build a fresh model for another mode"
        )
    kept = resolve_keep_fp32(model, keep_fp32, keep_norm)
    _check_tied(model, kept)
    model.to(dtype)
    handles = [
        model.register_forward_pre_hook(_make_pre_hook(dtype), with_kwargs=True),
        model.register_forward_hook(_to_fp32_hook),
    ]
    for _, module in kept:
        module.float()
        handles.append(module.register_forward_pre_hook(_make_pre_hook(torch.float32, remember=True),
                                                        with_kwargs=True))
        handles.append(module.register_forward_hook(_make_restore_hook(dtype)))
    setattr(model, _HOOKS_ATTR, handles)
    return kept
