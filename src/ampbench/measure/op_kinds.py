"""Which aten ops a step's op count leaves out, shared by the prediction's trace (``predict/trace.py``) and the host
measurement that prices its ops (:mod:`ampbench.measure.host_ops`): both must count the same ops."""

from __future__ import annotations

from typing import Any

ZERO_COST = {"detach", "alias", "_local_scalar_dense", "empty", "empty_like", "new_empty", "new_empty_strided",
             "empty_strided", "lift_fresh", "_record_function_enter_new", "_record_function_exit", "set_",
             "resize_", "_unsafe_view", "view", "_to_copy_noop"}
"""Ops that launch no kernel (allocations, aliases, profiler marks)."""


def is_view(func: Any) -> bool:
    """An op whose every output aliases an input without writing it (``t``, ``view``, ``permute``...): no kernel."""
    schema = func._schema
    return bool(schema.returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def counted(func: Any) -> bool:
    """Whether ``func`` is one of a step's counted ops (it launches a kernel)."""
    name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func)
    return name not in ZERO_COST and not (hasattr(func, "_schema") and is_view(func))
