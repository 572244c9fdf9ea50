"""The first operation that made a NaN or an Inf out of finite inputs, and the line of code that called it.

The forward hooks of :mod:`ampbench.diagnose.nonfinite` name the first *module* whose output is not finite; when that
module is the model itself (or any module whose own ``forward`` computes between its children, ``h * h`` or a
softmax of an overflowed logit), the finding said "the forward of (model)" and no more. Here the failing step's
forward (and loss) runs once more, on the same batch and weights (a non-finite step is skipped, so the weights are
those the step saw), under a ``TorchFunctionMode`` that checks each call's result: the first whose floating inputs
were all finite and whose result is not is where the value was made -- ``torch.Tensor.__mul__`` at ``model.py:9``,
with its dtype and the finite range that overflowed.

A call that makes an infinity on purpose from finite inputs is named first all the same (a mask added at
``finfo(float16).min`` overflowing to -inf); one that does so from a non-finite Python scalar (``masked_fill(mask,
float("-inf"))``) is not: its argument was not finite.

A ``TorchFunctionMode`` (not a dispatch mode) on purpose: its handler runs with the mode popped, so it sees the calls
the user's code and ``torch.nn.functional`` make (``F.softmax``, ``h * h``) -- the level a fix is written at --
not the aten ops inside them; and a Python stack to read the user's line from.
"""

from __future__ import annotations

import linecache
import math
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_TORCH_DIR = os.path.dirname(torch.__file__)
_THIS = os.path.abspath(__file__)


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """The tensors in a call's arguments or a module's output (nested lists, tuples and dicts)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in tensors_in(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in tensors_in(o)]
    return []


def has_nonfinite(ts: list[torch.Tensor]) -> bool:
    """Any NaN or Inf in the floating tensors of ``ts``."""
    return any(t.is_floating_point() and t.numel() and not bool(torch.isfinite(t.detach()).all()) for t in ts)


def value_range(ts: list[torch.Tensor]) -> dict[str, Any]:
    """min/max of the finite values and counts of NaN / Inf, over floating tensors."""
    fl = [t.detach() for t in ts if t.is_floating_point() and t.numel()]
    if not fl:
        return {"finite_min": None, "finite_max": None, "nan": 0, "inf": 0, "dtype": None}
    nan = sum(int(torch.isnan(t).sum()) for t in fl)
    inf = sum(int(torch.isinf(t).sum()) for t in fl)
    finite = [t[torch.isfinite(t)].float() for t in fl]
    finite = [t for t in finite if t.numel()]
    return {"finite_min": min(float(t.min()) for t in finite) if finite else None,
            "finite_max": max(float(t.max()) for t in finite) if finite else None,
            "nan": nan, "inf": inf, "dtype": str(fl[0].dtype).removeprefix("torch.")}


def _span(ts: list[torch.Tensor]) -> dict[str, Any]:
    """:func:`value_range` and the largest finite |x| (what overflowed)."""
    r = value_range(ts)
    ends = [abs(v) for v in (r["finite_min"], r["finite_max"]) if v is not None]
    return {**r, "max_abs": max(ends) if ends else None}


def _scalars_finite(obj: Any) -> bool:
    """No Python float among the arguments is inf or NaN: ``masked_fill(mask, float("-inf"))`` or ``torch.full(...,
    -inf)`` make an infinity on purpose (attention masks), from an argument that is not finite."""
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, (list, tuple)):
        return all(_scalars_finite(o) for o in obj)
    if isinstance(obj, dict):
        return all(_scalars_finite(o) for o in obj.values())
    return True


def _span(ts: list[torch.Tensor]) -> dict[str, Any]:
    """dtype, largest finite |x|, NaN and Inf counts over ``ts``."""
    finite = [t.detach()[torch.isfinite(t.detach())].float().abs() for t in ts]
    finite = [t for t in finite if t.numel()]
    return {"dtype": str(ts[0].dtype).removeprefix("torch.") if ts else None,
            "max_abs": max(float(t.max()) for t in finite) if finite else None,
            "nan": sum(int(torch.isnan(t.detach()).sum()) for t in ts),
            "inf": sum(int(torch.isinf(t.detach()).sum()) for t in ts)}


def _name(func: Any) -> str:
    """``torch.Tensor.__mul__``, ``torch.nn.functional.softmax``, ``torch.exp``."""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    if qual.startswith(("Tensor.", "TensorBase.")) or module.startswith("torch._tensor"):
        return "torch.Tensor." + qual.split(".", 1)[-1]
    if qual.startswith("_VariableFunctionsClass."):  # (torch.exp, torch.softmax: bound to that class in torch._C)
        return "torch." + qual.split(".", 1)[1]
    if module.startswith("torch._C._nn"):
        module = "torch.nn.functional"
    return f"{module}.{qual}" if module and not module.startswith("torch._C") else f"torch.{qual}"


def _caller() -> dict[str, Any] | None:
    """The innermost frame outside torch (and this module): the line that made the call -- the user's model, a
    library's (transformers'), or ampbench's own (a built-in workload, the precision engine's casts) -- with its
    function by qualified name where Python has one: ``Big.forward``."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        path = os.path.abspath(code.co_filename)
        if not path.startswith(_TORCH_DIR) and path != _THIS and not code.co_filename.startswith("<"):
            return {"file": code.co_filename, "line": frame.f_lineno,
                    "function": getattr(code, "co_qualname", code.co_name),
                    "code": (linecache.getline(code.co_filename, frame.f_lineno) or "").strip()}
        frame = frame.f_back  # type: ignore[assignment]
    return None


class FirstNonFinite(TorchFunctionMode):
    """Records the first call whose floating inputs were finite and whose result is not (``found``)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, Any] | None = None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.found is None:
            outs = tensors_in(out)
            if has_nonfinite(outs):
                ins = tensors_in((args, kwargs))
                if not has_nonfinite(ins) and _scalars_finite((args, kwargs)):
                    floating = any(t.is_floating_point() and t.numel() for t in ins)
                    self.found = {"op": _name(func), "inputs": _span(ins) if floating else None, "output": _span(outs),
                                  "where": _caller()}
        return out


def first_nonfinite_op(forward: Callable[[], Any]) -> dict[str, Any] | None:
    """Run ``forward`` (no gradients) under :class:`FirstNonFinite`; the first call that made a NaN/Inf of finite
    inputs, or None (the step did not reproduce it -- dropout drew another mask -- or no call of the user's code or
    ``torch.nn.functional`` made it)."""
    mode = FirstNonFinite()
    try:
        with torch.no_grad(), mode:
            forward()
    except Exception:  # (a forward that raises on its NaN -- an assert in the model -- still named its first call)
        pass
    return mode.found


def describe(op: dict[str, Any]) -> str:
    """``torch.Tensor.__mul__ at nan.py:9 in Big.forward (h * h): float16 inputs up to |x| 8.94e+03 made 16 Inf
    (float16's largest is 65504)``."""
    where = op.get("where")
    at = (f" at {os.path.basename(where['file'])}:{where['line']} in {where['function']}"
          + (f" ({where['code'].strip()})" if where.get("code") else "")) if where else ""
    ins, out = op.get("inputs"), op["output"]
    made = ", ".join(f"{n} {k}" for k, n in (("NaN", out["nan"]), ("Inf", out["inf"])) if n)
    text = f"{op['op']}{at}: "
    if ins and ins.get("max_abs") is not None:
        text += f"{ins['dtype']} inputs up to |x| {ins['max_abs']:.3g} made {made}"
    else:
        text += f"made {made}"
    dtype = getattr(torch, out["dtype"] or "", None)
    if out["inf"] and isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        text += f" ({out['dtype']}'s largest is {torch.finfo(dtype).max:.5g})"
    return text
