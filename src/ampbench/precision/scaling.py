"""Loss scaling: none, static, dynamic, and dynamic with hysteresis.

``torch.amp.GradScaler`` does the tensor work (scaling the loss, unscaling gradients while checking
for inf/NaN); the optimizer skips an overflowing step. What GradScaler lacks we add here, on the scale
update only:
- hysteresis: tolerate N overflowing steps before backing off (as Megatron-LM's DynamicGradScaler);
- a maximum scale (default 2^24) and a minimum-scale floor that raises
  :class:`~ampbench.errors.TrainingDivergedError` instead of letting the scale decay to zero;
- static scaling that still skips non-finite steps, and the same check without scaling (``none`` with
  ``check_finite``, the default: a bf16 or fp32 step with inf/NaN gradients is skipped, not applied);
- counters (steps, skipped steps), kept on the device with the scale.

No host sync in a step (cf. GradScaler's docs, where ``step`` reads ``found_inf`` unless the optimizer is fused):
the inf/NaN flag, the skipped-step count, the dynamic scale, its growth count, the hysteresis left and the step the
scale fell below its floor all stay on the device (:class:`_DeviceState`, a handful of one-element tensors updated by
GradScaler's own ``torch._amp_update_scale_`` plus a cap and a floor) and are read only when someone asks (``scale``,
``skipped_steps``, ``state_dict``, a :class:`~ampbench.precision.engine.StepRecord`). An optimizer that takes
``found_inf`` (torch's fused Adam, AdamW, SGD, Adagrad: :func:`steps_on_device`) skips an overflowing step inside its
own kernel: such a step makes no host read, and a collapsed scale is told every ``DIVERGENCE_CHECK_EVERY`` steps (or
when :meth:`LossScaler.check_divergence` is called). Any other optimizer needs the host to decide whether to call its
``step()``: one read per step, which also tells a divergence at once -- build it with ``fused=True`` to drop it.
``none`` with ``check_finite=False`` never checks; with the check (the default) it costs one fused pass over the
gradients (``torch._amp_foreach_non_finite_check_and_unscale_``, GradScaler's own kernel, at scale 1). Without a scale
to manage we call that kernel directly rather than through GradScaler, whose per-step bookkeeping costs ~0.1 ms of
Python (measured on CPU: 140 µs for the fused check of a 1M-parameter model, 450 µs through GradScaler with a 190 µs
optimizer step).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, NamedTuple

import torch
import torch.distributed as dist
from torch.amp import GradScaler
from torch.amp.grad_scaler import OptState

from ampbench.errors import AmpbenchError, ParameterError, TrainingDivergedError
from ampbench.precision.fused_step import FusedStep

ScaleKind = Literal["none", "static", "dynamic"]
_KINDS = ("none", "static", "dynamic")


@dataclass(frozen=True)
class LossScaleConfig:
    """How the loss is scaled. Defaults follow torch.amp.GradScaler."""

    kind: ScaleKind = "dynamic"
    """``none`` (no scaling, no overflow check), ``static`` (fixed scale) or ``dynamic``."""
    init_scale: float = 2.0**16
    """Starting scale (the fixed scale for ``static``)."""
    growth_factor: float = 2.0
    """Multiply the scale by this after ``growth_interval`` clean steps."""
    backoff_factor: float = 0.5
    """Multiply the scale by this when a step overflows (after hysteresis is used up)."""
    growth_interval: int = 2000
    """Clean steps in a row before the scale grows."""
    min_scale: float = 1.0
    """Floor: backing off below it raises TrainingDivergedError (DeepSpeed's min_loss_scale)."""
    max_scale: float = 2.0**24
    """Ceiling: the scale never grows past it."""
    hysteresis: int = 1
    """Overflowing steps tolerated before backing off (1 = back off at once, as GradScaler)."""

    def __post_init__(self) -> None:
        where = f"Passed {self!r}."
        if self.kind not in _KINDS:
            raise AmpbenchError(f"{where} kind must be one of {', '.join(_KINDS)}")
        if not (math.isfinite(self.init_scale) and self.init_scale > 0):
            raise AmpbenchError(f"{where} init_scale must be a finite number > 0")
        if self.growth_factor <= 1.0:
            raise AmpbenchError(f"{where} growth_factor must be > 1")
        if not 0.0 < self.backoff_factor < 1.0:
            raise AmpbenchError(f"{where} backoff_factor must be in (0, 1)")
        if self.growth_interval < 1 or self.hysteresis < 1:
            raise AmpbenchError(f"{where} growth_interval and hysteresis must be >= 1")
        if not 0 < self.min_scale <= self.max_scale:
            raise AmpbenchError(f"{where} need 0 < min_scale <= max_scale")
        if self.kind == "dynamic" and not self.min_scale <= self.init_scale <= self.max_scale:
            raise AmpbenchError(f"{where} init_scale must lie in [min_scale, max_scale]")

    @classmethod
    def parse(cls, spec: LossScaleConfig | str | float | int | None, default: str = "dynamic") -> LossScaleConfig:
        """Build a config from what users write.

        ``None`` -> the recipe's default; ``"none"``; ``"dynamic"``; ``"hysteresis"`` (dynamic,
        hysteresis 2) or ``"hysteresis:N"``; ``"static:1024"`` or a number -> static at that value.
        """
        if isinstance(spec, LossScaleConfig):
            return spec
        if spec is None:
            spec = default
        if isinstance(spec, bool):
            raise ParameterError("loss_scale", spec, "ambiguous: use 'none', 'dynamic' or a number")
        if isinstance(spec, (int, float)):
            if not (math.isfinite(spec) and spec > 0):
                raise ParameterError("loss_scale", spec, "a static scale is a finite number > 0")
            return cls(kind="static", init_scale=float(spec))
        if isinstance(spec, str):
            text = spec.strip().lower()
            head, _, arg = text.partition(":")
            try:
                if head == "none" and not arg:
                    return cls(kind="none", init_scale=1.0)
                if head == "dynamic" and not arg:
                    return cls(kind="dynamic")
                if head == "hysteresis":
                    return cls(kind="dynamic", hysteresis=int(arg) if arg else 2)
                if head == "static":
                    return cls(kind="static", init_scale=float(arg) if arg else 2.0**16)
                return cls(kind="static", init_scale=float(text))
            except ValueError:
                pass
        # (a ParameterError: the command line says it with its flag, --loss-scale)
        raise ParameterError("loss_scale", spec, "not valid; use 'none', 'dynamic', 'hysteresis[:N]', 'static:VALUE' "
                             "(VALUE > 0), a number (static scale) or a LossScaleConfig")


class _Scaler(GradScaler):
    """GradScaler with the inverse scale taken in one fp32 op (``scale.reciprocal()``, as GradScaler itself does on
    MPS) instead of a round trip through fp64 (``.double().reciprocal().float()``): two casts fewer a step, each an aten
    dispatch that costs a GPU machine's host ~25 us (``benchmarks/results/h200/host_overhead.json``). The same value
    for the powers of two a dynamic scale takes (an exact reciprocal either way); for any other scale IEEE fp32
    division is correctly rounded, where the fp64 path rounds twice. The rest is GradScaler's ``unscale_``."""

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        assert self._scale is not None  # (set by the first scale(), which _check_scale_growth_tracker asserts)
        found_inf = torch.full((), 0.0, dtype=torch.float32, device=self._scale.device)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, self._scale.reciprocal(), found_inf,
                                                                       False)
        optimizer_state["stage"] = OptState.UNSCALED


class _HalfGradScaler(_Scaler):
    """GradScaler that also unscales fp16 gradients.

    GradScaler refuses fp16 grads because unscaling in fp16 can lose precision; pure-fp16 has no
    fp32 copy to unscale into, so for that mode (and only when the user asks for loss scaling) we
    accept it; pure-bf16's gradients on CUDA, which GradScaler's kernel cannot take, go through
    :func:`check_and_unscale_`. Overrides a private method, present with this signature since torch 1.6.
    """

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):  # type: ignore[override]
        # GradScaler's own, less its fp16 refusal and with bf16 on CUDA checked (check_and_unscale_): its grouping by
        # device and dtype, sparse gradients coalesced and their values unscaled
        by: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = defaultdict(list)
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.is_sparse and p.grad.dtype is torch.float16:  # (as GradScaler: scaled duplicates
                        p.grad = p.grad.coalesce()  # summed before they are checked)
                    g = p.grad._values() if p.grad.is_sparse else p.grad
                    by[(g.device, g.dtype)].append(g)
            found: dict[torch.device, torch.Tensor] = {}
            for (device, _), grads in by.items():
                if device not in found:
                    found[device] = found_inf.to(device, non_blocking=True)
                check_and_unscale_(grads, found[device], inv_scale.to(device, non_blocking=True))
        return found


class _FiniteCheck:
    """The inf/NaN check of one optimizer's gradients without a loss scale: GradScaler's fused kernel
    (``torch._amp_foreach_non_finite_check_and_unscale_``) at inv_scale 1.0 (multiplying by 1 changes nothing), one
    call per device and dtype, as GradScaler groups them. The grouping of the optimizer's parameters is made once and
    remade only when its param groups change (``add_param_group``): a step lists the gradients in one comprehension
    per group, no other Python work per parameter. No host sync here (reading the flag is the sync)."""

    def __init__(self) -> None:
        self._signature: Any = None
        self._groups: list[tuple[torch.device, list[torch.Tensor], bool]] = []
        self._ones: dict[torch.device, torch.Tensor] = {}
        self._only: tuple[torch.device, list[torch.Tensor], torch.Tensor] | None = None
        """The usual optimizer's one device and dtype (not sharded): its device, parameters and the 1.0 there."""

    def _regroup(self, optimizer: torch.optim.Optimizer) -> None:
        by: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                by.setdefault((p.device, p.dtype), []).append(p)
        # (a DTensor parameter -- FSDP2 -- has DTensor gradients: this rank's shard is checked, the flags agreed later)
        self._groups = [(device, params, any(hasattr(p, "to_local") for p in params))
                        for (device, _), params in by.items()]
        for device, _, _ in self._groups:
            self._ones.setdefault(device, torch.ones((), dtype=torch.float32, device=device))
        only = self._groups[0] if len(self._groups) == 1 and not self._groups[0][2] else None
        self._only = None if only is None else (only[0], only[1], self._ones[only[0]])

    def __call__(self, optimizer: torch.optim.Optimizer,
                 new_flag: Callable[[torch.device], torch.Tensor]) -> dict[torch.device, torch.Tensor]:
        """Per device, a flag (a zeroed 0-dim float32 tensor from ``new_flag``) set to 1 if any gradient the optimizer
        holds there has an inf/NaN."""
        groups = optimizer.param_groups
        if len(groups) == 1:  # (the usual optimizer: its one group's list and length, no list made)
            params = groups[0]["params"]
            signature: Any = id(params) ^ len(params)
        else:
            signature = [id(g["params"]) ^ len(g["params"]) for g in groups]
        if signature != self._signature:
            self._regroup(optimizer)
            self._signature = signature
        if self._only is not None:  # one device and dtype: a step's whole check is this
            device, params, one = self._only
            grads = [g for p in params if (g := p.grad) is not None]
            if not grads:
                return {}
            flag = new_flag(device)
            self._check(grads, flag, one)
            return {device: flag}
        found: dict[torch.device, torch.Tensor] = {}
        for device, params, sharded in self._groups:
            grads = [g for p in params if (g := p.grad) is not None]
            if not grads:
                continue
            if sharded:
                grads = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
            flag = found.get(device)
            if flag is None:
                flag = found[device] = new_flag(device)
            self._check(grads, flag, self._ones[device])
        return found

    @staticmethod
    def _check(grads: list[torch.Tensor], flag: torch.Tensor, one: torch.Tensor) -> None:
        if not kernel_takes(grads[0]):
            _check_without_kernel(grads, flag, None)
            return
        try:
            torch._amp_foreach_non_finite_check_and_unscale_(grads, flag, one)
        except NotImplementedError:  # sparse gradients (nn.Embedding(sparse=True)): their values are checked
            if not any(g.is_sparse for g in grads):
                raise
            grads = [g.coalesce()._values() if g.is_sparse else g for g in grads]
            torch._amp_foreach_non_finite_check_and_unscale_(grads, flag, one)


_KERNEL_DTYPES: dict[str, tuple[torch.dtype, ...]] = {"cuda": (torch.float32, torch.float64, torch.float16)}
"""The dtypes GradScaler's kernel (``torch._amp_foreach_non_finite_check_and_unscale_``) takes, per device type where it
does not take them all: CUDA's is dispatched over floating types and half (``AmpKernels.cu``), so pure-bf16's bf16
gradients raise there ("not implemented for 'BFloat16'", seen on an H200); the CPU's takes bf16 too."""


def kernel_takes(grad: torch.Tensor) -> bool:
    """Whether GradScaler's kernel takes gradients of ``grad``'s device type and dtype."""
    return grad.dtype in _KERNEL_DTYPES.get(grad.device.type, (grad.dtype,))


def check_and_unscale_(grads: list[torch.Tensor], found_inf: torch.Tensor, inv_scale: torch.Tensor | None) -> None:
    """GradScaler's check-and-unscale for gradients of one device and dtype, whatever the dtype: its own kernel where it
    takes them (:data:`_KERNEL_DTYPES`), else (bf16 on CUDA) ``grads *= inv_scale`` (skipped for None: no scale) and
    ``found_inf`` set to 1 if the gradients' L1 norm, accumulated in fp32, is not finite -- an inf or a NaN among them,
    or magnitudes summing past fp32's 3.4e38, far past where Adam's squared gradients already overflow (1.8e19). A
    foreach reduction and five one-element ops (the fewest found: each costs the host a dispatch); no host sync."""
    if kernel_takes(grads[0]):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf,
                                                         inv_scale if inv_scale is not None else found_inf.new_ones(()))
    else:
        _check_without_kernel(grads, found_inf, inv_scale)


def _check_without_kernel(grads: list[torch.Tensor], found_inf: torch.Tensor, inv_scale: torch.Tensor | None) -> None:
    if inv_scale is not None:
        torch._foreach_mul_(grads, inv_scale)
    total = torch.stack(torch._foreach_norm(grads, 1, dtype=torch.float32)).sum()
    found_inf.add_(total.mul(0)).nan_to_num_(nan=1.0)  # finite: + 0; inf or NaN: NaN, then 1 (set, never cleared)


def _collective_device(process_group: Any) -> torch.device:
    backend = dist.get_backend(process_group)
    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


_NEVER = 2**62
"""``diverged_at`` while the scale has not fallen below its floor (a step index no run reaches)."""

DIVERGENCE_CHECK_EVERY = 100
"""Steps between reads of the divergence flag where nothing else reads the device (fused optimizers): a run whose
scale fell below its floor raises :class:`TrainingDivergedError` at most this many steps later, naming the step."""


def unstarted_momentum(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The parameters whose momentum buffer torch's fused SGD makes at this step (a gradient, momentum, no buffer yet).

    Why the engine looks: that first step makes each buffer with ``torch.empty_like`` and, when its ``found_inf`` is 1
    (the usual overflow of fp16's first steps at a scale of 2^16), the kernel skips the whole update -- the buffers
    keep whatever memory they were given, and every later step adds to it (torch 2.11-2.13). On CUDA the caching
    allocator hands back freed blocks, inf/NaN gradients among them: the weights turn NaN and every later step
    overflows until the scale falls below its floor ("training diverged" -- the lent H200's ResNet-50 in amp-fp16 and
    master-fp16, 2026-11-27, where amp-bf16 and pure-fp16, which never overflowed, trained). A step torch's own
    GradScaler skips on the host never makes them; :meth:`LossScaler.step` makes the fused step match it."""
    if not isinstance(optimizer, torch.optim.SGD):
        return []
    state = optimizer.state
    return [p for group in optimizer.param_groups if group.get("fused") and group["momentum"] != 0
            for p in group["params"] if p.grad is not None and "momentum_buffer" not in state.get(p, ())]


def steps_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """The optimizer takes ``found_inf``/``grad_scale`` and skips an inf/NaN step inside its own kernel (torch's
    fused Adam, AdamW, SGD, Adagrad): no host read decides the skip."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


class _DeviceState(NamedTuple):
    """One optimizer's scaling state on the device, replaced (never written in place) at every step, so a
    :class:`StepRecord` can hold the tensors of its own step and read them later. (A named tuple: made every step,
    it costs a fraction of a frozen dataclass's ``__init__``.)"""

    found: torch.Tensor
    """1.0 when the last step's gradients held inf/NaN (the step was skipped), else 0.0."""
    skipped: torch.Tensor | _Skipped
    """Steps skipped so far (float32: exact to 2^24 steps); without a scale, summed from the flags when read."""
    scale: torch.Tensor | None = None
    """The dynamic scale (float32); None for a fixed one (read from the config)."""
    growth: torch.Tensor | None = None
    """Clean steps in a row (int32; GradScaler's growth tracker)."""
    hysteresis: torch.Tensor | None = None
    """Overflows still tolerated before backing off (int32)."""
    diverged_at: torch.Tensor | None = None
    """First step whose back-off fell below min_scale (int64; _NEVER while none has)."""


FLAG_BLOCK = 128
"""Steps whose inf/NaN flags a :class:`_FlagBlock` makes at once."""


class _FlagBlock:
    """The inf/NaN flags of ``FLAG_BLOCK`` steps of the check without a scale, made at once -- one zeroed buffer and
    its one-element views (``torch.zeros`` + ``unbind``: two ops a block, where a flag made every step costs an op a
    step) -- and the steps skipped before them. The skipped count is summed from the buffer when read
    (:class:`_Skipped`), not added up every step: on the device the check then costs a step its kernel alone (and
    the optimizer's own handling of ``found_inf``). A flag is written once, by its step's check (and the ranks'
    agreement): a :class:`StepRecord` holding it reads that step's value whenever it is read."""

    __slots__ = ("base", "buffer", "device", "flags", "used")

    def __init__(self, base: torch.Tensor) -> None:
        self.base = base
        """Steps skipped before this block (0-dim float32, on the flags' device)."""
        self.device = base.device
        self.buffer = torch.zeros(FLAG_BLOCK, dtype=torch.float32, device=base.device)
        self.flags = self.buffer.unbind()
        self.used = 0


class _Skipped:
    """Steps skipped so far at flag ``index`` of ``block``, that step's included: summed when read."""

    __slots__ = ("block", "index")

    def __init__(self, block: _FlagBlock, index: int) -> None:
        self.block, self.index = block, index

    def tensor(self) -> torch.Tensor:
        return self.block.base + self.block.buffer[: self.index + 1].sum()


def skipped_tensor(skipped: torch.Tensor | _Skipped) -> torch.Tensor:
    """A skipped-steps count as a tensor (summed now where it is kept as flags)."""
    return skipped.tensor() if isinstance(skipped, _Skipped) else skipped


class LossScaler:
    """One optimizer's loss scaler (one per optimizer, as apex's ``num_losses``).

    Its state lives on the device (:class:`_DeviceState`) and is read on the host only when asked: ``scale``,
    ``skipped_steps``, ``last_skipped``, ``state_dict()``. With an optimizer that steps on the device
    (:func:`steps_on_device`) a step makes no host read at all; with any other optimizer it makes one (whether to
    call ``optimizer.step()``), which also tells a divergence at once."""

    def __init__(self, config: LossScaleConfig, device_type: str, half_grads: bool = False,
                 check_finite: bool = True, process_group: Any = None, distributed: bool = False,
                 direct_step: bool = True) -> None:
        """``distributed``: the gradients are sharded over ``process_group`` (FSDP): the found-inf flags are
        all-reduced (MAX) on the device before any decision, so every rank skips, keeps and rescales alike."""
        self.config = config
        self._distributed = distributed
        self._process_group = process_group
        self.check_finite = check_finite or config.kind != "none"
        """Whether steps with inf/NaN gradients are skipped (always when the loss is scaled)."""
        self.steps = 0
        """step() calls (a host count: no read)."""
        self.host_reads = 0
        """Host reads of device state the steps made (0 per step with an optimizer that steps on the device)."""
        self.direct_steps = 0
        """Steps taken by the optimizer's kernel without ``optimizer.step()`` (:mod:`ampbench.precision.fused_step`)."""
        self._device_type = device_type
        self._half_grads = half_grads
        self._found: dict[torch.device, torch.Tensor] = {}
        """kind none: per device, whether the last unscale_ saw inf/NaN (filled by the finite check)."""
        self._check_nonfinite = _FiniteCheck()
        self._block: _FlagBlock | None = None
        """kind none: the flags of this and the coming steps."""
        self._step_flag: torch.Tensor | None = None
        """kind none: the flag the check of this step was given (None before it)."""
        self._host = {"scale": config.init_scale if config.kind != "none" else 1.0, "skipped_steps": 0,
                      "growth_tracker": 0, "hysteresis_left": config.hysteresis}
        """The state before the first step (and after a load): the device state starts from it."""
        self._state: _DeviceState | None = None
        self._grad_scaler = self._make_grad_scaler()
        self._direct_step = direct_step
        self._momentum_started: torch.optim.Optimizer | None = None
        """The fused SGD whose momentum buffers exist (checked, and its first step kept): looked at no more."""
        self._fused: FusedStep | None = None
        """The optimizer's fused Adam/AdamW/SGD step without ``optimizer.step()``'s Python (made at the first step)."""

    def _make_grad_scaler(self) -> GradScaler | None:
        if self.config.kind == "none":
            return None
        cls = _HalfGradScaler if self._half_grads else _Scaler
        return cls(
            self._device_type,
            init_scale=self._host["scale"],
            growth_factor=self.config.growth_factor,
            backoff_factor=self.config.backoff_factor,
            growth_interval=self.config.growth_interval,
        )

    @property
    def enabled(self) -> bool:
        """Whether the loss is scaled (static or dynamic)."""
        return self.config.kind != "none"

    # -- read on the host, when asked -----------------------------------------------------------
    @property
    def scale(self) -> float:
        """The scale the next backward() multiplies by (a host read on a GPU for a dynamic scale)."""
        if self._state is None or self._state.scale is None:
            return float(self._host["scale"])
        return float(self._state.scale)

    def current_scale(self) -> torch.Tensor | float:
        """The scale now, without reading it: a device tensor for a dynamic scale after its first step (a
        :class:`StepRecord` keeps it and reads it when asked), else a number."""
        if self._state is None or self._state.scale is None:
            return float(self._host["scale"])
        return self._state.scale

    @property
    def skipped_steps(self) -> int:
        """Steps skipped so far (a host read on a GPU)."""
        return int(self._host["skipped_steps"]) if self._state is None else int(skipped_tensor(self._state.skipped))

    @property
    def last_skipped(self) -> bool:
        """Whether the last step was skipped (a host read on a GPU)."""
        return self._state is not None and bool(self._state.found)

    def check_divergence(self) -> None:
        """Raise :class:`TrainingDivergedError` if the dynamic scale fell below its floor at some step (a host read
        on a GPU). step() calls it every step with an optimizer that steps on the host (the read it makes anyway)
        and every ``DIVERGENCE_CHECK_EVERY`` steps otherwise."""
        st = self._state
        if st is None or st.diverged_at is None:
            return
        at = int(st.diverged_at)
        if at != _NEVER:
            c = self.config
            raise TrainingDivergedError(
                f"training diverged: loss scale fell below {c.min_scale:g} at step {at} (gradients overflow even at "
                f"scale {self.scale:g}; {self.skipped_steps} steps skipped so far). Look for NaN/Inf in the forward "
                "pass or use bf16")

    # -- per step -------------------------------------------------------------------------------
    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss if self._grad_scaler is None else self._grad_scaler.scale(loss)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        if self._grad_scaler is not None:
            self._grad_scaler.unscale_(optimizer)
        elif self.check_finite:  # (no no_grad() needed: autograd records nothing of this kernel -- a gradient that
            # requires grad, from create_graph, keeps its grad_fn; tests/precision/test_scaling.py holds it -- and
            # entering one costs ~1.5 us a step)
            self._found = self._check_nonfinite(optimizer, self._next_flag)

    def _next_flag(self, device: torch.device, own: bool = False) -> torch.Tensor:
        """kind none: this step's zeroed inf/NaN flag on ``device``, from the flag block (a new tensor for a second
        device; ``own``: the step's flag wherever the block was, the block moved to ``device`` if need be)."""
        block = self._block
        if self._step_flag is None and block is not None and block.used < FLAG_BLOCK and block.device == device:
            self._step_flag = flag = block.flags[block.used]  # (the usual step)
            block.used += 1
            return flag
        if self._step_flag is not None:
            return torch.zeros((), dtype=torch.float32, device=device)
        if block is None or block.used == FLAG_BLOCK or (own and block.device != device):
            block = self._block = _FlagBlock(self._skipped_so_far(device))
        elif block.device != device:
            return torch.zeros((), dtype=torch.float32, device=device)
        self._step_flag = flag = block.flags[block.used]
        block.used += 1
        return flag

    def _skipped_so_far(self, device: torch.device) -> torch.Tensor:
        if self._state is None:
            return torch.full((), float(self._host["skipped_steps"]), dtype=torch.float32, device=device)
        return skipped_tensor(self._state.skipped).to(device)

    def _found_flag(self, optimizer: torch.optim.Optimizer) -> torch.Tensor:
        """The unscaled gradients' inf/NaN flag as one 0-dim float32 tensor (1.0 or 0.0), agreed over ranks when
        sharded; on the device, no host read."""
        if self._grad_scaler is None:
            found, self._found = self._found, {}
        else:
            found = self._grad_scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
        if self._distributed:
            self._agree(found)
        if len(found) == 1:  # (one device: the flag itself, 0-dim from the check and from GradScaler alike)
            (flag,) = found.values()
            return flag if flag.dim() == 0 else flag.reshape(())
        if not found:  # (no gradients at all: nothing to skip)
            scale = None if self._grad_scaler is None else self._grad_scaler._scale
            return torch.zeros((), device=scale.device if scale is not None else "cpu")
        flags = list(found.values())
        first = flags[0].device
        return torch.stack([f.reshape(()).to(first, non_blocking=True) for f in flags]).amax()

    def _agree(self, found: dict[torch.device, torch.Tensor]) -> None:
        """Every rank's flag becomes the max over ranks, in place: the skip agrees too. One flag per device this
        rank has gradients on (a rank without any still takes part, with a zero flag: collectives must be called
        by all)."""
        flags = list(found.values()) or [torch.zeros(1, device=_collective_device(self._process_group))]
        total = torch.cat([f.reshape(1).float() for f in flags]).max().reshape(1)
        dist.all_reduce(total, op=dist.ReduceOp.MAX, group=self._process_group)
        for f in found.values():
            f.copy_(total.to(f.device, f.dtype).reshape(f.shape))

    def step(self, optimizer: torch.optim.Optimizer, step_index: int) -> _DeviceState | None:
        """Step ``optimizer`` unless its gradients overflowed and update the scale, on the device; returns the
        state after the step (None when nothing is checked: ``none`` without ``check_finite``).

        Gradients must already be unscaled (call :meth:`unscale_` first)."""
        self.steps += 1
        fused = self._fused
        if fused is None or fused.optimizer is not optimizer:
            fused = self._fused = FusedStep(optimizer, enabled=self._direct_step)
        if not self.check_finite:
            if fused.step(None):
                self.direct_steps += 1
            else:
                optimizer.step()
            return None
        if self._step_flag is not None and len(self._found) == 1 and not self._distributed:
            # none, one device (the usual step): the flag the check wrote is the step's, the count is the block's
            self._found = {}
            found, self._step_flag = self._step_flag, None
            after = _DeviceState(found, _Skipped(self._block, self._block.used - 1))  # type: ignore[arg-type]
        else:
            found = self._found_flag(optimizer)
            after = self._update(self._state or self._first_state(found.device), found, step_index)
        if steps_on_device(optimizer):
            fresh = unstarted_momentum(optimizer) if self._momentum_started is not optimizer else []
            if fused.step(found):  # (fused Adam/AdamW/SGD: the kernel without optimizer.step()'s Python)
                self.direct_steps += 1
            else:
                optimizer.grad_scale = None  # type: ignore[attr-defined]  (already unscaled)
                optimizer.found_inf = found  # type: ignore[attr-defined]  (the kernel skips the update when 1)
                try:
                    optimizer.step()
                finally:
                    del optimizer.grad_scale, optimizer.found_inf  # type: ignore[attr-defined]
            self._commit(after)
            if fresh:
                self._forget_skipped_start(optimizer, fresh, found)
            else:
                self._momentum_started = optimizer
            if self.steps % DIVERGENCE_CHECK_EVERY == 0:
                self.host_reads += 1
                self.check_divergence()
            return after
        if found.device.type == "meta":  # a traced step (ampbench predict): no values to read, the step is taken
            self._commit(after)
            optimizer.step()
            return after
        # One host read decides whether optimizer.step() runs (an optimizer that cannot skip by itself); it also
        # carries the divergence flag, so a collapsed scale is told at this very step.
        code = found if after.diverged_at is None else found + 2 * (after.diverged_at != _NEVER)
        self.host_reads += 1
        flags = int(code.item())
        self._commit(after)
        if flags & 2:
            self.check_divergence()
        if not flags & 1:
            optimizer.step()
        return after

    def _forget_skipped_start(self, optimizer: torch.optim.Optimizer, fresh: list[torch.Tensor],
                              found: torch.Tensor) -> None:
        """After the step that made ``fresh``'s momentum buffers (:func:`unstarted_momentum`): if the kernel skipped
        it, drop them, as a step skipped on the host never makes them -- the next step starts them again (one host
        read, at the first step only, and again only while first steps overflow)."""
        if found.device.type == "meta":  # (a traced step: nothing to read)
            return
        self.host_reads += 1
        if not found.item():
            self._momentum_started = optimizer
            return
        for p in fresh:
            optimizer.state[p].pop("momentum_buffer", None)
            if not optimizer.state[p]:
                del optimizer.state[p]

    def _first_state(self, device: torch.device) -> _DeviceState:
        h, dynamic = self._host, self.config.kind == "dynamic"
        return _DeviceState(
            found=torch.zeros((), device=device), skipped=torch.full((), float(h["skipped_steps"]), device=device),
            scale=self._grad_scaler._scale.reshape(()).clone() if dynamic and self._grad_scaler is not None  # type: ignore[union-attr]
            else None,
            growth=torch.full((), int(h["growth_tracker"]), dtype=torch.int32, device=device) if dynamic else None,
            hysteresis=torch.full((), int(h["hysteresis_left"]), dtype=torch.int32, device=device) if dynamic else None,
            diverged_at=torch.full((), _NEVER, dtype=torch.int64, device=device) if dynamic else None)

    def _update(self, st: _DeviceState, found: torch.Tensor, step_index: int) -> _DeviceState:
        """The state after a step whose inf/NaN flag is ``found``, computed on the device with new tensors.

        The scale rule: an overflow resets the growth count and uses up one unit of hysteresis; with none left the
        scale is multiplied by ``backoff_factor`` -- if that falls below ``min_scale``, the scale stops there and
        ``diverged_at`` records the step (the run raises :class:`TrainingDivergedError`). ``growth_interval`` clean
        steps in a row multiply it by ``growth_factor`` (capped at ``max_scale``) and re-arm the hysteresis. With
        hysteresis 1 (the default) this is GradScaler's own kernel (``torch._amp_update_scale_``) plus one clamp for
        the cap and the floor (in place: the scale is this step's own tensor) and the divergence's record: 4 ops
        over GradScaler's update. (Before: the scale stayed where it was when the back-off fell below the floor, one
        ``where`` more; the same value for a power-of-two scale and floor, as the defaults are.)"""
        if self._grad_scaler is None:  # none: the flag is the block's (the count is summed from the block when read)
            flag, self._step_flag = self._step_flag, None
            if flag is None:  # (no gradient was checked, or only on another device than the block's)
                flag = self._next_flag(found.device, own=True)
                self._step_flag = None
            if found is not flag:  # (flags of several devices, combined)
                flag.copy_(found)
            assert self._block is not None
            return _DeviceState(flag, _Skipped(self._block, self._block.used - 1))
        skipped = skipped_tensor(st.skipped) + found  # (none of these tensors requires grad: nothing is recorded)
        if st.scale is None:  # static: the scale never changes
            return _DeviceState(found, skipped)
        c = self.config
        assert st.growth is not None and st.hysteresis is not None and st.diverged_at is not None
        if c.hysteresis == 1:  # (the growth count is updated in place: only its current value is ever read)
            scale, growth = st.scale.clone(), st.growth
            torch._amp_update_scale_(scale, growth, found, c.growth_factor, c.backoff_factor, c.growth_interval)
            hysteresis = st.hysteresis
        else:
            bad = found > 0
            left = torch.where(bad, st.hysteresis - 1, st.hysteresis)
            count = torch.where(bad, 0, st.growth + 1)
            grow = count >= c.growth_interval
            back = bad & (left <= 0)
            scale = torch.where(back, st.scale * c.backoff_factor, torch.where(grow, st.scale * c.growth_factor, st.scale))
            growth = torch.where(grow, 0, count).to(torch.int32)
            hysteresis = torch.where(grow, c.hysteresis, left).to(torch.int32)
        below = scale < c.min_scale
        diverged_at = torch.where(below, st.diverged_at.clamp(max=step_index), st.diverged_at)
        scale.clamp_(c.min_scale, c.max_scale)  # (a new tensor of this step's: no record holds it yet)
        return _DeviceState(found, skipped, scale, growth, hysteresis, diverged_at)

    def _commit(self, after: _DeviceState) -> None:
        """``after`` becomes the state; the GradScaler scales the next loss by its scale (the state's own tensor: no
        one writes it in place, so a step's record keeps its value) and is ready for the next unscale_."""
        self._state = after
        if self._grad_scaler is not None:  # (what GradScaler.update(new_scale) does, without copying the scale in)
            if after.scale is not None:
                self._grad_scaler._scale = after.scale
            self._grad_scaler._per_optimizer_states.clear()

    # -- checkpointing ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Plain numbers (host reads)."""
        st = self._state
        growth = self._host["growth_tracker"] if st is None or st.growth is None else int(st.growth)
        left = self._host["hysteresis_left"] if st is None or st.hysteresis is None else int(st.hysteresis)
        return {
            "config": asdict(self.config),
            "scale": self.scale,
            "steps": self.steps,
            "skipped_steps": self.skipped_steps,
            "growth_tracker": int(growth),
            "hysteresis_left": int(left),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = replace(self.config, **state["config"])
        if saved.kind != self.config.kind:
            raise AmpbenchError(
                f"checkpoint was saved with loss scaling {saved.kind!r}, this run uses {self.config.kind!r}; "
                "construct MixedPrecision with the same loss_scale to resume"
            )
        self.steps = int(state["steps"])
        self._host = {"scale": float(state["scale"]), "skipped_steps": int(state["skipped_steps"]),
                      "growth_tracker": int(state["growth_tracker"]), "hysteresis_left": int(state["hysteresis_left"])}
        self._state = None  # the next step starts the device state from these
        self._block, self._step_flag = None, None
        self._grad_scaler = self._make_grad_scaler()  # its tensor scale starts at the loaded scale
