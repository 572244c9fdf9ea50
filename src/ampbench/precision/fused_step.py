"""A fused Adam/AdamW/SGD step taken the way ``optimizer.step()`` takes it, without its per-step Python.

Why our own: on a small model a training step is host time (on a GPU the device waits for Python to launch its
kernels), and ``torch.optim.AdamW(fused=True).step()`` spends ~40 µs of a CPU host's time on Python around its one
kernel (the profiler's ``record_function``, the hook walk, the grad-mode decorator, ``_init_group``'s loop over every
parameter, grouping the tensors by device and dtype, moving ``found_inf``) -- more than the whole budget issue 44 gives
the engine. The kernel does the work; the lists it takes only change when the optimizer's state or param groups do.
So :class:`FusedStep` makes them once and, each step, issues the very ops torch's ``_fused_adam``/``_fused_sgd`` issue
(Adam: the step counts' ``_foreach_add_``, ``torch._fused_adam_``/``torch._fused_adamw_`` with the group's
hyper-parameters read that step, and with a ``found_inf`` flag the counts' ``_foreach_sub_``; SGD: ``torch._fused_sgd_``
on the momentum buffers): the same kernels on the same tensors, so the same bits (``tests/precision/
test_fused_step.py`` holds that against ``optimizer.step()`` on a twin).

It steps only where that is exactly what ``optimizer.step()`` would do, and otherwise says so (returns False) and the
caller calls ``optimizer.step()``: an optimizer of exactly :class:`torch.optim.Adam`, :class:`torch.optim.AdamW` or
:class:`torch.optim.SGD` (a subclass may override anything), every group ``fused=True`` and neither ``capturable``
nor ``differentiable``, numbers (not tensors) for its hyper-parameters, no step hooks but the engine's own guard
(global or the optimizer's), no profiler running (its trace keeps torch's ``Optimizer.step#AdamW.step`` label), no
``torch.compile`` tracing, no CUDA graph capture, the instance's ``step`` untouched or wrapped only by an LR scheduler
(whose ``_opt_called`` mark we set, as its wrapper does), and every parameter holding its state (Adam's moments and
count, SGD's momentum buffer: the first step makes them through ``optimizer.step()``) with a gradient this step.
The lists are remade when the optimizer's ``state`` is replaced (``load_state_dict``), a parameter gets its state, a
state tensor is replaced (state moved to another device by hand), or a param group's parameter list changes
(``add_param_group``): each step compares every state value's identity with the lists' (~40 ns a value here).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.optim import optimizer as _torch_optimizer

_set_grad_enabled = torch._C._set_grad_enabled
_profiler_enabled = torch._C._autograd._profiler_enabled
_is_compiling = torch.compiler.is_compiling
_NUMBER = (float, int)


class _Bucket:
    """One param group's parameters of one device and dtype, with their state tensors (one kernel call)."""

    __slots__ = ("device", "params", "states")

    def __init__(self, params: list[torch.Tensor], state: Any, keys: tuple[str, ...]) -> None:
        self.params = params
        self.states = [[state[p][k] for p in params] for k in keys]
        """Per state key, the parameters' tensors (Adam: exp_avg, exp_avg_sq, step[, max_exp_avg_sq]; SGD: the
        momentum buffers, or none without momentum)."""
        self.device = params[0].device


class _Kind:
    """What one optimizer class keeps and how its fused kernel is called."""

    numbers: tuple[str, ...] = ()
    """The group's hyper-parameters the kernel takes as numbers (a tensor: torch's step)."""

    def keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        raise NotImplementedError

    def ready(self, optimizer: torch.optim.Optimizer) -> bool:
        """torch's step has run the checks it runs once (Adam: when it makes a parameter's state)."""
        return True

    def call(self, group: dict[str, Any], b: _Bucket, grads: list[torch.Tensor], found: torch.Tensor | None) -> None:
        raise NotImplementedError


class _Adam(_Kind):
    numbers = ("lr", "eps", "weight_decay")

    def __init__(self, decoupled: bool) -> None:
        self.decoupled = decoupled
        """AdamW (torch < 2.6: its own class without the group key)."""

    def keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq", "step") + (("max_exp_avg_sq",) if group["amsgrad"] else ())

    def call(self, group: dict[str, Any], b: _Bucket, grads: list[torch.Tensor], found: torch.Tensor | None) -> None:
        kernel = torch._fused_adamw_ if group.get("decoupled_weight_decay", self.decoupled) else torch._fused_adam_
        beta1, beta2 = group["betas"]
        exp_avgs, exp_avg_sqs, steps, *maxes = b.states
        torch._foreach_add_(steps, 1)
        kernel(b.params, grads, exp_avgs, exp_avg_sqs, maxes[0] if maxes else [], steps,
               amsgrad=group["amsgrad"], lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"],
               eps=group["eps"], maximize=group["maximize"], grad_scale=None, found_inf=found)
        if found is not None:
            torch._foreach_sub_(steps, [found] * len(steps))


class _SGD(_Kind):
    numbers = ("lr", "momentum", "dampening", "weight_decay")

    def keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def ready(self, optimizer: torch.optim.Optimizer) -> bool:
        # (SGD checks its parameters' device and dtype for the fused kernel at its first step, then marks it done)
        return getattr(optimizer, "_need_device_dtype_check_for_fused", True) is False

    def call(self, group: dict[str, Any], b: _Bucket, grads: list[torch.Tensor], found: torch.Tensor | None) -> None:
        torch._fused_sgd_(b.params, grads, b.states[0] if b.states else [], weight_decay=group["weight_decay"],
                          momentum=group["momentum"], lr=group["lr"], dampening=group["dampening"],
                          nesterov=group["nesterov"], maximize=group["maximize"], is_first_step=False,
                          grad_scale=None, found_inf=found)


DIRECT: tuple[type[torch.optim.Optimizer], ...] = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)
"""The optimizer classes stepped directly when fused (exactly these: a subclass may override anything)."""


def _kind(optimizer: torch.optim.Optimizer) -> _Kind | None:
    cls = type(optimizer)
    if cls not in DIRECT:
        return None
    return _SGD() if cls is torch.optim.SGD else _Adam(decoupled=cls is torch.optim.AdamW)


class _Plan:
    """What the lists were made from (checked each step) and the lists."""

    __slots__ = ("groups", "held", "on_cuda", "signature", "state", "values", "without_state")

    def __init__(self, optimizer: torch.optim.Optimizer, kind: _Kind, signature: list[int]) -> None:
        self.state = state = optimizer.state
        self.signature = signature
        self.held = len(state)
        """Parameters with state when the lists were made (a first step of a new parameter adds one)."""
        self.values = _values(state)
        """Every state value when the lists were made: one replaced (``state[k] = v.to(device)``, a whole
        parameter's state swapped) remakes them."""
        self.groups: list[tuple[dict[str, Any], tuple[str, ...], list[_Bucket]]] = []
        self.without_state: list[torch.Tensor] = []
        """Parameters without their state (no gradient yet): a step where one has a gradient goes to torch."""
        for group in optimizer.param_groups:
            keys = kind.keys(group)
            by: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
            for p in group["params"]:
                s = state.get(p, {})
                if all(k in s for k in keys):
                    by.setdefault((p.device, p.dtype), []).append(p)
                else:
                    self.without_state.append(p)
            self.groups.append((group, keys, [_Bucket(params, state, keys) for params in by.values()]))
        self.on_cuda = any(b.device.type == "cuda" for _, _, buckets in self.groups for b in buckets)


def _values(state: dict[Any, dict[str, Any]]) -> list[Any]:
    return [v for s in state.values() for v in s.values()]


def _same(a: list[Any], b: list[Any]) -> bool:
    """The same objects, in order (``==`` would compare tensors by value)."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _signature(optimizer: torch.optim.Optimizer) -> list[int]:
    return [id(g["params"]) ^ len(g["params"]) for g in optimizer.param_groups]


class FusedStep:
    """``step(found_inf)`` for one optimizer: True when it took the step as ``optimizer.step()`` would have (with
    ``found_inf``, a 0-dim float32 flag, skipping it inside the kernel when 1), False when it did nothing and the
    caller must call ``optimizer.step()`` (see the module's docstring for when)."""

    __slots__ = ("_kind", "_plan", "optimizer")

    def __init__(self, optimizer: torch.optim.Optimizer, enabled: bool = True) -> None:
        """``enabled=False``: never step (``MixedPrecision(direct_step=False)``)."""
        self.optimizer = optimizer
        self._kind = _kind(optimizer) if enabled else None
        self._plan: _Plan | None = None

    def step(self, found_inf: torch.Tensor | None) -> bool:
        kind = self._kind
        if kind is None:
            return False
        opt = self.optimizer
        own_step = opt.__dict__.get("step")
        if own_step is not None and not getattr(own_step, "_wrapped_by_lr_sched", False):
            return False
        if (_profiler_enabled() or _torch_optimizer._global_optimizer_pre_hooks
                or _torch_optimizer._global_optimizer_post_hooks or opt._optimizer_step_post_hooks):
            return False
        for hook in opt._optimizer_step_pre_hooks.values():
            if not getattr(hook, "ampbench_step_guard", False):
                return False
        plan = self._plan
        if plan is None and not kind.ready(opt):
            return False
        if (plan is None or plan.state is not opt.state or plan.held != len(opt.state)
                or plan.signature != _signature(opt) or not _same(plan.values, _values(opt.state))):
            plan = self._plan = _Plan(opt, kind, _signature(opt))
        for p in plan.without_state:
            if p.grad is not None:
                return False
        calls = []
        for group, keys, buckets in plan.groups:
            if group["fused"] is not True or group.get("capturable") or group["differentiable"]:
                return False
            for name in kind.numbers:
                if group[name].__class__ not in _NUMBER:
                    return False
            if kind.keys(group) != keys:  # (amsgrad or momentum switched on since: the lists lack its state)
                return False
            if "betas" in group and any(b.__class__ not in _NUMBER for b in group["betas"]):
                return False
            for b in buckets:
                grads = [g for p in b.params if (g := p.grad) is not None]
                if len(grads) != len(b.params):
                    return False
                calls.append((group, b, grads))
        if plan.on_cuda and torch.cuda.is_current_stream_capturing():
            return False
        if _is_compiling():
            return False
        if own_step is not None:
            opt._opt_called = True  # type: ignore[attr-defined]  (what the LR scheduler's wrapper of step() marks)
        prev = torch.is_grad_enabled()
        _set_grad_enabled(False)
        try:
            for group, b, grads in calls:
                found = found_inf
                if found is not None and found.device != b.device:
                    found = found.to(b.device, non_blocking=True)
                kind.call(group, b, grads, found)
        finally:
            _set_grad_enabled(prev)
        return True
