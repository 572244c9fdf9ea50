"""What a meta kernel returned, remembered: the same op on tensors of the same shapes, strides and dtypes (and the same
other arguments) returns a new tensor of the shape, strides and dtype it returned before, without running the kernel
again.

Why our own: a meta tensor holds no values, so an op's meta output is a function of its arguments' metadata alone --
but torch runs most meta kernels as Python references (``torch._refs``/``torch._prims``: type promotion, broadcasting,
stride propagation), ~60 % of a traced step's time, and a step runs the same ops on the same shapes again and again
(every block of a transformer or a ResNet stage; the traced step after its warm-up step). torch's own dispatch cache
does this only inside ``FakeTensorMode`` (``torch._subclasses.fake_tensor``), which the trace does not use: it traces
plain meta tensors (:mod:`ampbench.predict.trace`).

An output is remembered only where rebuilding it is exact: an op that writes none of its arguments and returns no
alias of one (its schema says so), on plain strided meta tensors, whose outputs are plain tensors of their own storage
(not a view, offset 0, the storage of exactly the bytes ``empty_strided`` gives). An in-place op (``add_``, an
optimizer's ``lerp_``/``addcdiv_``, ``_foreach_mul_``; not one that changes its tensor's shape, as ``resize_`` or
``t_``) returns the tensor it wrote, whose metadata the meta kernel only checks: where the first call on some metadata
left every tensor it writes as it was, the same call again returns that tensor (or nothing) at once. Anything else --
tensor subclasses (torchao's float8 tensors, DTensor), views, ``out=`` variants, an op that raised -- runs the kernel
every time.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

_PLAIN = (torch.Tensor, nn.Parameter)
_SCALARS = (bool, int, float, complex, str, torch.dtype, torch.device, torch.memory_format, torch.layout)
_MEMOS: dict[Any, dict[Any, Any]] = {}
"""One memo per meta-kernel regime (a trace's CUDA kernel choices override some meta kernels: convolution's layout)."""
MAX_ENTRIES = 20_000
"""A memo past this many entries starts again (a long-lived process predicting many models): ~2 KB each (the
real-scale suite's nine models in their modes made 2,713 entries, 5.5 MB)."""


class _Uncacheable(Exception):
    pass


FRESH, IN_PLACE = "fresh", "in place"
_SELF, _NOTHING = "returns its first argument", "returns nothing"
"""What an in-place op's call returned (remembered: the call on those metadata left every tensor it writes as it was)."""


@functools.cache
def _schema_facts(func: Any) -> tuple[str | None, tuple[int, ...]]:
    """(:func:`_op_kind`, the positions of the arguments ``func`` writes), read from its schema once."""
    schema = getattr(func, "_schema", None)
    if not isinstance(func, torch._ops.OpOverload) or schema is None or (
            {torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output, torch.Tag.inplace_view} & set(func.tags)):
        return None, ()
    written = tuple(i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write)
    if not schema.is_mutable and schema.returns and all(r.alias_info is None for r in schema.returns):
        return FRESH, written
    if (torch.Tag.inplace in func.tags and written and written[0] == 0
            and all(not schema.arguments[i].kwarg_only for i in written)
            and (not schema.returns or (len(schema.returns) == 1 and schema.returns[0].alias_info is not None))):
        return IN_PLACE, written
    return None, written


def _op_kind(func: Any) -> str | None:
    """FRESH: an op that writes no argument and returns new tensors; IN_PLACE: one that writes its first arguments
    (positional) and returns the first or nothing, without changing a shape (no ``inplace_view``); None: neither (its
    kernel runs every time)."""
    return _schema_facts(func)[0]


def _key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        if type(x) not in _PLAIN or x.device.type != "meta" or x.layout != torch.strided:
            raise _Uncacheable
        return (x.shape, x.stride(), x.dtype, x.storage_offset())
    if isinstance(x, (list, tuple)):
        return (type(x), *map(_key, x))
    if x is None or isinstance(x, _SCALARS):
        return (type(x), x)  # (the type too: 1, 1.0 and True promote differently)
    raise _Uncacheable


def _new(shape: torch.Size, stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


def _entry(out: Any, args: Any, kwargs: Any) -> Any:
    """How to make ``out`` again (None where a rebuilt one would differ from it in anything the trace reads)."""
    many = isinstance(out, (tuple, list))
    outs = out if many else (out,)
    taken = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
    made = []
    for t in outs:
        if t is None:
            made.append(None)
            continue
        if type(t) is not torch.Tensor or t.device.type != "meta" or t.layout != torch.strided or t.requires_grad \
                or t._is_view() or t.storage_offset() != 0:
            return None
        storage = t.untyped_storage()
        if storage._cdata in taken:
            return None
        taken.add(storage._cdata)
        entry = (t.shape, t.stride(), t.dtype)
        if _new(*entry).untyped_storage().nbytes() != storage.nbytes():
            return None
        made.append(entry)
    return (type(out) if many else None, tuple(made))


def _rebuild(entry: Any) -> Any:
    kind, made = entry
    outs = [None if e is None else _new(*e) for e in made]
    return kind(outs) if kind is not None else outs[0]


class MetaMemo(TorchDispatchMode):
    """``with MetaMemo(regime): ...`` -- meta ops below any mode entered after it answered from the memo of
    ``regime`` (what decides the meta kernels beside the arguments: a trace's kernel choices)."""

    def __init__(self, regime: Any) -> None:
        super().__init__()
        self.memo = _MEMOS.setdefault(regime, {})
        self.hits = self.misses = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        kind, writes = _schema_facts(func)
        if kind is None:
            return func(*args, **kwargs)
        try:
            key = (func, _key(args), _key(tuple(kwargs.items())), torch.get_default_dtype())
        except _Uncacheable:
            return func(*args, **kwargs)
        entry = self.memo.get(key)
        if entry is not None:
            self.hits += 1
            if kind is IN_PLACE:
                return args[0] if entry is _SELF else None
            return _rebuild(entry)
        self.misses += 1
        if kind is IN_PLACE:
            if writes[-1] >= len(args):  # (a written tensor given by keyword: not followed)
                return func(*args, **kwargs)
            written = [args[i] for i in writes]
            before = _metadata(written)
            out = func(*args, **kwargs)
            entry = _SELF if out is args[0] else _NOTHING if out is None else None
            if entry is not None and _metadata(written) != before:
                entry = None
        else:
            out = func(*args, **kwargs)
            entry = _entry(out, args, kwargs)
        if entry is not None:
            if len(self.memo) >= MAX_ENTRIES:
                self.memo.clear()
            self.memo[key] = entry
        return out


def _metadata(tensors: list[Any]) -> list[Any]:
    """What an in-place op must leave as it was: each written tensor's metadata and storage."""
    return [(t.shape, t.stride(), t.dtype, t.storage_offset(), t.untyped_storage()._cdata, t.untyped_storage().nbytes())
            for t in tree_flatten(tensors)[0] if isinstance(t, torch.Tensor)]
