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
(not a view, offset 0, the storage of exactly the bytes ``empty_strided`` gives). Anything else -- tensor subclasses
(torchao's float8 tensors, DTensor), views, in-place ops, an op that raised -- runs the kernel every time.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

_PLAIN = (torch.Tensor, nn.Parameter)
_SCALARS = (bool, int, float, complex, str, torch.dtype, torch.device, torch.memory_format, torch.layout)
_MEMOS: dict[Any, dict[Any, Any]] = {}
"""One memo per meta-kernel regime (a trace's CUDA kernel choices override some meta kernels: convolution's layout)."""
MAX_ENTRIES = 200_000
"""A memo past this many outputs starts again (a long-lived process predicting many models)."""


class _Uncacheable(Exception):
    pass


_cacheable: dict[Any, bool] = {}


def _op_cacheable(func: Any) -> bool:
    ok = _cacheable.get(func)
    if ok is None:
        schema = getattr(func, "_schema", None)
        ok = _cacheable[func] = (
            isinstance(func, torch._ops.OpOverload) and schema is not None and not schema.is_mutable
            and bool(schema.returns) and all(r.alias_info is None for r in schema.returns)
            and torch.Tag.dynamic_output_shape not in func.tags and torch.Tag.data_dependent_output not in func.tags)
    return ok


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


def _storages(tree: Any, into: set[int]) -> None:
    if isinstance(tree, torch.Tensor):
        into.add(tree.untyped_storage()._cdata)
    elif isinstance(tree, (list, tuple)):
        for x in tree:
            _storages(x, into)
    elif isinstance(tree, dict):
        for x in tree.values():
            _storages(x, into)


def _new(shape: torch.Size, stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


def _entry(out: Any, args: Any, kwargs: Any) -> Any:
    """How to make ``out`` again (None where a rebuilt one would differ from it in anything the trace reads)."""
    many = isinstance(out, (tuple, list))
    outs = out if many else (out,)
    taken: set[int] = set()
    _storages((args, kwargs), taken)
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
        if not _op_cacheable(func):
            return func(*args, **kwargs)
        try:
            key = (func, _key(args), _key(tuple(kwargs.items())), torch.get_default_dtype())
        except _Uncacheable:
            return func(*args, **kwargs)
        entry = self.memo.get(key)
        if entry is not None:
            self.hits += 1
            return _rebuild(entry)
        self.misses += 1
        out = func(*args, **kwargs)
        entry = _entry(out, args, kwargs)
        if entry is not None:
            if len(self.memo) >= MAX_ENTRIES:
                self.memo.clear()
            self.memo[key] = entry
        return out
