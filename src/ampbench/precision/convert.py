"""Casting a model to half precision while keeping chosen modules in fp32.

Used by the ``master-*`` recipes (normalisation layers kept fp32, like apex O2) and the ``pure-*``
recipes (nothing kept unless asked). Casting is in place: parameter objects keep their identity,
so an optimizer created before the cast still refers to them.

Dtype boundaries are handled at the modules, not by editing the model's code:
- the root module casts floating-point inputs to the half dtype and floating-point outputs to fp32
  (the loss is computed in fp32): two forward hooks;
- a module kept in fp32 casts its floating-point inputs to fp32 and its outputs back to the dtype
  its first floating input had (the half dtype when it had none, e.g. an embedding), so its
  neighbours see half tensors. Its class becomes a subclass of its own (same name, ``isinstance`` holds) whose
  ``forward`` casts around the original -- how FSDP2's ``fully_shard`` changes a module's class -- rather than two
  hooks: hooks put every call of the module on ``Module._call_impl``'s slow path, ~2 us a norm a step on a CPU
  host, a cost per step of every norm a master-* model keeps (a ResNet-50 keeps 53). The user's own hooks on a kept
  module see what its neighbours see: half inputs and outputs. A module whose instance has its own ``forward`` (set
  on the instance) or whose class cannot be changed keeps the two hooks.
- a kept BatchNorm (1d/2d/3d) takes its half input as it is: the CUDA and CPU BatchNorm kernels take a half input
  with fp32 weight, bias and running statistics, compute the statistics and the affine in fp32 and write a half
  output (what autocast's amp-* modes run, and the fp32-BatchNorm recipe of apex O2 relies on). Casting the input up
  and the output back cost two passes over every activation of a convnet and the norm itself on fp32 bytes: ResNet-50
  master-bf16 ran 30 % slower than amp-bf16 on an H200 that way. Same results within half-precision rounding (a
  test holds it against the cast path); SyncBatchNorm keeps the casts.
Integer tensors (token ids, labels) pass through untouched.
"""

from __future__ import annotations

import copyreg
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


def with_tied(model: nn.Module, keep: Sequence[str]) -> list[str]:
    """``keep`` (module names) and every module whose parameters are tied to a kept one's, to a fixed point: what
    ``keep_fp32`` must name to keep ``keep`` in fp32 (one shared tensor cannot be fp32 for one module and half for
    another: :func:`cast_model` refuses that). A search over keep sets (diagnose's policy check, its fixes) asks
    for any subset of a model's modules: a tied LM head without its embedding failed the whole diagnosis."""
    out = list(dict.fromkeys(keep))
    modules = dict(model.named_modules(remove_duplicate=False))
    owners: dict[int, list[str]] = {}  # a parameter -> the modules holding it directly
    for mname, module in modules.items():
        for _, p in module.named_parameters(recurse=False, remove_duplicate=False):
            owners.setdefault(id(p), []).append(mname)
    while True:
        kept = {id(sub) for name in out if name in modules for sub in modules[name].modules()}
        more = [o for names in owners.values() if any(id(modules[n]) in kept for n in names)
                for o in names if o and id(modules[o]) not in kept]
        if not more:
            return out
        out += list(dict.fromkeys(more))


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


def _inputs_to(dtype: torch.dtype, args: tuple[Any, ...], kwargs: dict[str, Any],
               first: bool) -> tuple[tuple[Any, ...], dict[str, Any], torch.dtype | None]:
    """A call's floating inputs cast to ``dtype``, and (``first``) the dtype its first floating input had."""
    if not kwargs and len(args) == 1 and type(args[0]) is torch.Tensor:  # (a norm's one input: most calls)
        x = args[0]
        if not x.is_floating_point():
            return args, kwargs, None
        return ((x.to(dtype),) if x.dtype != dtype else args), kwargs, x.dtype
    had = _first_floating_dtype((args, kwargs)) if first else None
    return cast_floating(args, dtype), (cast_floating(kwargs, dtype) if kwargs else kwargs), had


def _output_to(output: Any, dtype: torch.dtype) -> Any:
    if type(output) is torch.Tensor:  # (a norm's one output: most calls)
        return output.to(dtype) if output.dtype != dtype and output.is_floating_point() else output
    return cast_floating(output, dtype)


def _make_pre_hook(dtype: torch.dtype, remember: bool = False) -> Callable[..., Any]:
    """Inputs cast to ``dtype``; ``remember``: the input dtype kept for the module's restore hook."""
    def pre_hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs, had = _inputs_to(dtype, args, kwargs, remember)
        if remember:  # (in the instance dict directly: nn.Module.__setattr__ costs microseconds)
            module.__dict__["_ampbench_in_dtype"] = had
        return args, kwargs

    return pre_hook


def _make_restore_hook(half: torch.dtype) -> Callable[..., Any]:
    """Outputs of a module kept fp32 go back to the dtype its input had; with no floating input (an
    embedding's token ids) to the model's half dtype, which its neighbours compute in."""
    def restore(module: nn.Module, args: Any, output: Any) -> Any:
        return _output_to(output, module.__dict__.get("_ampbench_in_dtype") or half)

    return restore


def _to_fp32_hook(module: nn.Module, args: Any, output: Any) -> Any:
    return cast_floating(output, torch.float32)


_KEPT_CLASSES: dict[tuple[type[nn.Module], torch.dtype], type[nn.Module]] = {}
"""(a class, the model's half dtype) -> its subclass computing in fp32 (made once, shared by every such module)."""


def kept_fp32_class(cls: type[nn.Module], half: torch.dtype) -> type[nn.Module]:
    """``cls`` whose forward takes its floating inputs in fp32 and gives its outputs back in the dtype its first
    floating input had (``half`` when none had one) -- the two cast hooks' work, inside ``forward``."""
    made = _KEPT_CLASSES.get((cls, half))
    if made is not None:
        return made
    base_forward = cls.forward
    fp32 = torch.float32
    half_input = takes_half_input(cls)

    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:  # (the two hooks' work, in one call)
        if not kwargs and len(args) == 1 and type(args[0]) is torch.Tensor and args[0].is_floating_point():
            x = args[0]  # (a norm's one input, most calls: no argument walk, no re-spread call -- ~1.5 us a norm)
            dtype = x.dtype
            if half_input:  # (BatchNorm: fp32 statistics and affine from the half input, a half output)
                return base_forward(self, x)
            return _output_to(base_forward(self, x if dtype == fp32 else x.to(fp32)), dtype)
        args, kwargs, had = _inputs_to(fp32, args, kwargs, True)
        return _output_to(base_forward(self, *args, **kwargs), had or half)

    made = type(cls.__name__, (cls,), {
        "forward": forward, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        "__reduce_ex__": _reduce_kept, "_ampbench_kept_fp32": (cls, half), "_ampbench_half_input": half_input,
        "__doc__": f"{cls.__qualname__} kept in fp32 in a {half} model (ampbench.precision.convert)",
    })
    _KEPT_CLASSES[(cls, half)] = made
    return made


def takes_half_input(cls: type[nn.Module]) -> bool:
    """A kept module of this class computes in fp32 from its half input, no cast: BatchNorm 1d/2d/3d (its kernels
    read a half input with fp32 parameters and statistics), not SyncBatchNorm."""
    return issubclass(cls, nn.modules.batchnorm._BatchNorm) and not issubclass(cls, nn.SyncBatchNorm)


def computes_in_fp32(module: nn.Module) -> bool:
    """``module`` was kept in fp32 by :func:`cast_model` through its class and casts half inputs to fp32 inside its
    forward (a forward hook sees the half input; its kernels see fp32). False for a kept BatchNorm, which takes its
    half input as it is (its kernels see half)."""
    kept = type(module)  # (also a subclass of the kept class, e.g. FSDP2's)
    return getattr(kept, "_ampbench_kept_fp32", None) is not None and not getattr(kept, "_ampbench_half_input", False)


def _reduce_kept(self: nn.Module, protocol: Any) -> Any:
    """Pickling and ``copy.deepcopy`` rebuild a kept module with its kept class (its name is its base's: pickled by
    name, it would come back without the casts)."""
    reduced = object.__reduce_ex__(self, protocol)
    kept = type(self).__dict__.get("_ampbench_kept_fp32")
    if kept is None or not isinstance(reduced, tuple) or reduced[0] is not copyreg.__newobj__:
        return reduced  # (a subclass made of it, e.g. by FSDP2: its own way)
    return (_new_kept, kept, *reduced[2:])


def _new_kept(cls: type[nn.Module], half: torch.dtype) -> nn.Module:
    made = kept_fp32_class(cls, half)
    return made.__new__(made)


def _keep_fp32(module: nn.Module, half: torch.dtype) -> list[Any]:
    """Make ``module`` compute in fp32 between half neighbours: its class changed (:func:`kept_fp32_class`), or,
    where that cannot be (a forward set on the instance, a class that refuses), the two cast hooks (their handles)."""
    module.float()
    if "forward" not in module.__dict__:
        try:
            module.__class__ = kept_fp32_class(type(module), half)
            return []
        except TypeError:  # (e.g. a class with __slots__ of its own)
            pass
    return [module.register_forward_pre_hook(_make_pre_hook(torch.float32, remember=True), with_kwargs=True),
            module.register_forward_hook(_make_restore_hook(half))]


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
        handles += _keep_fp32(module, dtype)
    setattr(model, _HOOKS_ATTR, handles)
    return kept
