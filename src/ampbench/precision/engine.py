"""MixedPrecision: the object users train with.

    mp = MixedPrecision("master-fp16")                # or MixedPrecision("O2", loss_scale="dynamic")
    model, optimizer = mp.setup(model, optimizer)     # cast model, fp32 master weights
    for x, y in loader:
        optimizer.zero_grad()
        with mp.autocast():
            loss = loss_fn(model(x), y)
        mp.backward(loss)                             # scaled backward
        mp.step(optimizer, max_grad_norm=1.0)         # true when it stepped (reading that syncs)

Each optimizer moves through an explicit state machine (cf. torch.amp.GradScaler's OptState):
READY --backward--> ACCUMULATING --unscale_--> UNSCALED --step--> READY. ``step`` from
ACCUMULATING unscales first. Calls in the wrong order raise :class:`MisuseError` saying what to do.
Several ``backward`` calls before one ``step`` are gradient accumulation: unscaling happens once.

Every mode checks the gradients for inf/NaN before stepping (``check_finite``; the fp16 modes' loss
scaler does it anyway): a non-finite step is skipped and counted, never stepped into the weights. The
check, the skip and the scale update stay on the device: with an optimizer that takes ``found_inf``
(``fused=True`` Adam, AdamW, SGD, Adagrad) a steady-state step makes no host sync in any mode; with any
other, one (whether to call its ``step()``). Counters and the scale are read when asked (``totals``,
``scale``, a :class:`StepRecord`'s fields, ``state_dict``). See docs/precision.md, "Host syncs".
Misuse that would silently train wrong raises :class:`MisuseError` with the fix: ``optimizer.step()``
called instead of ``mp.step()``, the model cast or moved after setup (checked by a forward pre-hook and at
``backward``, before a forward in the wrong dtype can fail or train in it), model gradients
written between ``backward`` and ``step`` in master modes (clipping the loss-scaled half copies, or the
read-only copies ``unscale_()`` shows). A forward of an autocast mode run outside ``mp.autocast()`` (it
would compute in fp32, at the fp16 modes' loss scale) is warned about once: the model may enter autocast
itself. Weights loaded into the model after setup (``load_state_dict``, in-place edits) are taken into the
fp32 master weights before the next step.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import torch
from torch import nn

from ampbench.distributed.placement import OneDevice, Placement
from ampbench.errors import AmpbenchError, MisuseError, UnsupportedPrecisionError
from ampbench.precision import engine_state
from ampbench.precision.convert import resolve_keep_fp32
from ampbench.precision.forward_watch import ForwardContext, ForwardWatch
from ampbench.precision.fp8 import Fp8Options
from ampbench.precision.grad_mode import no_grad
from ampbench.precision.master_weights import MasterWeights
from ampbench.precision.optimizer_slot import ACCUMULATING, READY, UNSCALED, OptimizerSlot, step_guard
from ampbench.precision.optimizer_state import convert as convert_optimizer
from ampbench.precision.optimizer_state import effective as optimizer_state_of
from ampbench.precision.optimizer_state import refusal as state_refusal
from ampbench.precision.registry import get
from ampbench.precision.scaling import LossScaleConfig, LossScaler
from ampbench.precision.setup_checks import (
    SETUP_ATTR,
    models_and_optimizers,
    refuse_sparse_gradients_with_masters,
    warn_eps_underflow,
    watch_loads,
)
from ampbench.precision.step_record import StepRecord
from ampbench.precision.support import Support, supported

__all__ = ["MixedPrecision", "StepRecord"]
M = TypeVar("M")
Opt = TypeVar("Opt")


class MixedPrecision:
    """Train a PyTorch model in one precision mode, with loss scaling and fp32 master weights.

    Args:
        precision: mode name or alias (``ampbench list``), e.g. ``"amp-bf16"``, ``"O2"``.
        loss_scale: ``None`` (the mode's default), ``"none"``, ``"dynamic"``, ``"hysteresis[:N]"``,
            ``"static:VALUE"`` or a number, or a :class:`LossScaleConfig`.
        keep_fp32: modules to keep in fp32 in the half-model modes: qualified names (as in
            ``model.named_modules()``) or module classes. Norm layers are kept by ``master-*`` anyway.
        device: where the model lives; by default taken from the model's parameters at setup.
        check_finite: check every step's gradients for inf/NaN and skip the step if any (default). The fp16
            modes' scaler always checks; for the others this costs one fused pass over the gradients (and one host
            read per step with an optimizer that cannot skip a step by itself: build it ``fused=True``). ``False``
            steps whatever the gradients hold.
        direct_step: a fused torch Adam, AdamW or SGD is stepped by calling its kernel with lists made once
            (:mod:`ampbench.precision.fused_step`: the same kernels and bits as ``optimizer.step()``, without its
            per-step Python, ~40 µs on a CPU host; anything it would not do exactly as ``optimizer.step()`` does -- step hooks, a
            profiler, a subclass -- goes through ``optimizer.step()``). ``False``: always ``optimizer.step()``.
        placement: where it trains (:mod:`ampbench.distributed.placement`): ``None`` or ``OneDevice()``,
            ``Ddp(reduce_dtype=None, process_group=None)``, ``Fsdp(reduce_dtype=None, mesh=None,
            process_group=None)``: setup wraps or shards the model for torch.distributed; ``reduce_dtype`` the dtype
            gradients are reduced in (``"fp32"``, ``"bf16"``, ``"fp16"``), ``mesh`` FSDP2's device mesh (default:
            every rank on this device type), ``process_group`` the group the ranks agree on skipped steps over
            (default: the world). What each (strategy, precision) pair does: :mod:`ampbench.distributed.strategy`.
        optimizer_state: the precision of the optimizer's states: ``None`` (the optimizer as built: states in the
            dtype of the weights it steps), ``"fp32"``, ``"bf16"``, ``"bf16-sr"``, ``"8bit"``, ``"4bit"``, ``"fp8"``
            (:mod:`ampbench.precision.optimizer_state`: setup rebuilds a torch Adam/AdamW as torchao's, same
            hyper-parameters, and returns it in place of the one given).
    """

    def __init__(
        self,
        precision: str,
        loss_scale: LossScaleConfig | str | float | None = None,
        *,
        keep_fp32: Sequence[str | type[nn.Module]] = (),
        device: str | torch.device | None = None,
        check_finite: bool = True,
        direct_step: bool = True,
        fp8: Fp8Options | None = None,
        fp8_skip: Sequence[str] = (),
        fp8_filter: str = "auto",
        placement: Placement | None = None,
        optimizer_state: str | None = None,
    ) -> None:
        self.recipe = get(precision)
        self.name = self.recipe.name
        self.optimizer_state = optimizer_state_of(self.name, optimizer_state)
        """The optimizer's state precision when it is not the mode's own (None: the optimizer as built)."""
        why = state_refusal(self.name, self.optimizer_state)
        if why:
            raise AmpbenchError(f"Passed MixedPrecision({precision!r}, optimizer_state={optimizer_state!r}): {why}")
        if placement is not None and not isinstance(placement, Placement):
            raise AmpbenchError(f"Passed MixedPrecision({precision!r}, placement={placement!r}): a placement is "
                                "OneDevice(), Ddp(...) or Fsdp(...) (ampbench.distributed.placement)")
        self.placement = (placement or OneDevice()).bound(self.recipe)
        """One device or a torch.distributed strategy (DDP/FSDP2), bound to this recipe: what it changes of the
        setup (its ``strategy``, None on one device, and ``layout``: what this (strategy, precision) pair does,
        :mod:`ampbench.distributed.strategy`)."""
        if fp8 is None and (fp8_skip or fp8_filter != "auto"):  # (the keywords before Fp8Options)
            fp8 = Fp8Options(tuple(fp8_skip) if not isinstance(fp8_skip, str) else (fp8_skip,), fp8_filter)
        if self.recipe.is_fp8:  # the recipe built with its options (and FSDP2's fp8 all-gather when the layout has it)
            self.recipe = get(precision, options=fp8 or Fp8Options(),
                              fsdp_all_gather=self.placement.fp8_all_gather)
        elif fp8 is not None:
            raise AmpbenchError(f"fp8 options (fp8_skip/fp8_filter) apply to the fp8 modes, not {self.name!r}")
        self.loss_scale = LossScaleConfig.parse(loss_scale, default=self.recipe.default_loss_scale)  # (ParameterError)
        if isinstance(keep_fp32, (str, type)):
            keep_fp32 = [keep_fp32]
        self.keep_fp32 = tuple(keep_fp32)
        if self.keep_fp32 and not self.recipe.casts_model:
            raise AmpbenchError(
                f"keep_fp32 applies to modes that cast the model (master-*, pure-*), not {self.name!r}"
            )
        self.device: torch.device | None = torch.device(device) if device is not None else None
        self.check_finite = bool(check_finite)
        self.direct_step = bool(direct_step)
        self.fallbacks: list[str] = []
        """Kernel fallbacks installed at setup (ops this device has no kernel for in this mode)."""
        self.last_step: StepRecord | None = None
        """What the last step() did (see :meth:`StepRecord.scalars` for a logger)."""
        self._step_hooks: list[Callable[[StepRecord], None]] = []
        self._slots: list[OptimizerSlot] = []
        self._is_setup = False
        # Made once at setup, read every step (the step's host time is the product: benchmarks/engine_overhead.py)
        self._with_masters = False
        """Some optimizer steps fp32 master weights."""
        self._watch: ForwardWatch | None = None
        """What a forward is checked for (made at setup)."""
        self._context_device: str | None = None

    def __repr__(self) -> str:
        placement = f", placement={self.placement!r}" if self.placement.strategy else ""
        state = f", optimizer_state={self.optimizer_state!r}" if self.optimizer_state else ""
        return f"MixedPrecision({self.name!r}, loss_scale={self.loss_scale.kind!r}{placement}{state})"

    @property
    def fp8_layers(self):  # type: ignore[no-untyped-def]
        """fp8 modes after setup: which Linear layers became Float8Linear and why others did not (else None)."""
        return getattr(self.recipe, "layers", None)

    # -- setup -------------------------------------------------------------------------------
    def supported(self, device: str | torch.device | None = None) -> Support:
        """Whether ``device`` (default: this run's device) can run this mode."""
        return supported(self.name, device or self.device or "cpu")

    def setup(self, model: M, optimizer: Opt) -> tuple[M, Opt]:
        """Prepare model(s) and optimizer(s) for this mode, in place; returns them.

        Takes one module and one optimizer, or lists of them (a GAN: one scaler per optimizer).
        """
        if self._is_setup:
            raise MisuseError(
                f"setup() was already called on {self!r}; use one MixedPrecision per training run"
            )
        models, optimizers = models_and_optimizers(model, optimizer)
        model_params = {id(p): p for m in models for p in m.parameters()}
        self.device = self.device or next(
            (p.device for p in model_params.values()), torch.device("cpu")
        )
        support = supported(self.name, self.device)
        if not support.ok:
            raise UnsupportedPrecisionError(f"{self.name} cannot run on {self.device}: {support.reason}")
        if self.optimizer_state is not None:  # first: the masters and the wrappers take the rebuilt optimizer
            why = state_refusal(self.name, self.optimizer_state, self.device)
            if why:
                raise UnsupportedPrecisionError(why)
            optimizers = [convert_optimizer(o, self.optimizer_state) for o in optimizers]
            optimizer = optimizers if isinstance(optimizer, (list, tuple)) else optimizers[0]  # type: ignore[assignment]
        place = self.placement
        place.before_setup(models, f"MixedPrecision({self.name!r}, placement={place!r})")
        with_masters = self.recipe.master_weights and place.engine_masters
        if with_masters:
            refuse_sparse_gradients_with_masters(models, self.name)

        fp32_copies: dict[int, torch.Tensor] = {}
        if with_masters:  # taken before the cast: masters start from the exact fp32 init
            fp32_copies = {
                id(p): p.detach().clone().float() for p in model_params.values() if p.is_floating_point()
            }
        if place.engine_casts:
            self._convert(models)
        self.fallbacks = self.recipe.kernel_fallbacks(models, self.device)
        for note in self.fallbacks:
            warnings.warn(f"ampbench {self.name} on {self.device}: {note}", stacklevel=2)
        wrapped = place.wrap(models, optimizers, self.device, self.fp32_units)
        for opt in optimizers:
            masters = MasterWeights(opt, fp32_copies) if with_masters else None
            half_grads = any(
                p.dtype in (torch.float16, torch.bfloat16) for g in opt.param_groups for p in g["params"]
            )
            scaler = LossScaler(self.loss_scale, self.device.type, half_grads=half_grads, check_finite=self.check_finite,
                                process_group=place.process_group, distributed=place.shards_gradients,
                                direct_step=self.direct_step)
            if half_grads:
                warn_eps_underflow(opt)
            slot = OptimizerSlot(opt, scaler, masters)
            held = masters.model_params if masters is not None and len(masters) else \
                [p for g in opt.param_groups for p in g["params"]]
            first = next((p for p in held if p.is_floating_point()), None)
            slot.where = None if first is None else (first, first.dtype, first.device)
            opt.register_step_pre_hook(step_guard(slot))
            self._slots.append(slot)
        masters_of = [s.masters for s in self._slots if s.masters is not None]
        self._with_masters = bool(masters_of)
        self._context_device = self.device.type
        for m in models:
            if masters_of:
                watch_loads(m, masters_of)
            setattr(m, SETUP_ATTR, repr(self))
        first = self._slots[0].scaler
        self._watch = ForwardWatch(
            self.name, models, [s.where for s in self._slots if s.where is not None],
            self.device.type if self.recipe.autocasts and self.device.type != "meta" else None,
            keep_probe=self.recipe.casts_model, with_masters=bool(masters_of), loss_scale=lambda: first.scale)
        self._is_setup = True
        return place.trained(model, wrapped), optimizer

    def fp32_units(self, model: nn.Module) -> list[nn.Module]:
        """The modules the engine keeps in fp32 as units of their own under FSDP master-* (norm layers and
        keep_fp32)."""
        return [m for _, m in resolve_keep_fp32(model, self.keep_fp32, keep_norm=True)]

    def fp8_weights(self, model: nn.Module) -> list[nn.Parameter]:
        """The weights of the set-up ``model`` converted to Float8Linear (none outside the fp8 modes)."""
        layers = self.fp8_layers
        return [model.get_submodule(n).weight for n in layers.converted] if layers is not None else []

    def _convert(self, models: list[nn.Module]) -> None:
        names = [k for k in self.keep_fp32 if isinstance(k, str)]
        types = [k for k in self.keep_fp32 if not isinstance(k, str)]
        unmatched = set(names)
        for m in models:
            own = {n for n, _ in m.named_modules()}
            mine = [n for n in names if n in own]
            unmatched -= set(mine)
            if len(models) == 1:
                mine = names  # one model: let convert report unknown names with suggestions
            self.recipe.convert_module(m, [*mine, *types])
        if unmatched and len(models) > 1:
            raise AmpbenchError(f"keep_fp32 names {sorted(unmatched)} match no submodule of the models")

    # -- training step -------------------------------------------------------------------------
    def _device_type(self) -> str:
        if self.device is None:
            raise MisuseError(f"{self!r} does not know its device yet: call setup() first or pass device=")
        return self.device.type

    def autocast(self) -> AbstractContextManager[None]:
        """Context for the forward pass (and the loss): autocast for amp-*, math-mode flags for all. Entering it
        checks that the model was not cast or moved since setup."""
        return ForwardContext(self._watch, self.recipe.forward_context(self._context_device or self._device_type()))

    def _slot(self, optimizer: torch.optim.Optimizer | None, call: str) -> OptimizerSlot:
        slots = self._slots
        if optimizer is None and len(slots) == 1:
            return slots[0]
        if not self._is_setup:
            raise MisuseError(f"{call}() called before setup(): call model, optimizer = mp.setup(model, optimizer)")
        if optimizer is None:
            raise MisuseError(
                f"{len(slots)} optimizers are set up: pass {call}(..., optimizer=opt) to say which "
                "one this loss belongs to (each has its own loss scaler)"
            )
        for s in slots:
            if s.optimizer is optimizer:
                return s
        raise MisuseError(f"{call}(): this {type(optimizer).__name__} was not passed to setup()")

    def backward(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer | None = None, **kwargs: Any) -> None:
        """Scaled backward. Call once per micro-batch; several calls before step() accumulate.

        ``kwargs`` go to ``Tensor.backward`` (``retain_graph``, ``inputs``).
        """
        slot = self._slot(optimizer, "backward")
        if not isinstance(loss, torch.Tensor):
            raise AmpbenchError(f"backward() needs the loss tensor, got {type(loss).__name__}")
        if slot.stage is UNSCALED:
            raise MisuseError(
                "backward() after unscale_(): the gradients of this step were already unscaled; call step() first"
            )
        if self._watch is not None:
            self._watch.before_backward()
        if self._with_masters:
            for s in self._slots:  # optimizer.add_param_group() since setup: the new half params get masters
                if s.masters is not None:
                    s.masters.adopt_new_groups()
            for s in self._slots:  # an earlier micro-batch's half grads into the fp32 masters first: fp32 accumulation
                if s.masters is not None and s.stage is not UNSCALED:  # (unscaled: its model grads are copies)
                    s.masters.check_left_grads()
                    s.masters.grads_to_master()
        with self.recipe.backward_context(self._context_device):
            slot.scaler.scale_loss(loss).backward(**kwargs)
        if self._with_masters:
            for s in self._slots:  # every optimizer's half grads (a GAN's D loss also reaches G) stay until the step
                if s.masters is not None and s.stage is not UNSCALED:
                    s.masters.mark_model_grads()
        # The loss is kept for the step's record: as it is for one backward (its graph was freed by it; detaching
        # would cost an op a step), detached where the graph was kept (retain_graph, create_graph) or summed.
        if slot.pending_loss is not None:
            with no_grad():
                slot.pending_loss = slot.pending_loss + loss
        else:
            slot.pending_loss = loss.detach() if kwargs else loss
        slot.stage = ACCUMULATING

    def unscale_(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Unscale this step's gradients now (to inspect or clip them yourself); step() won't redo it."""
        slot = self._slot(optimizer, "unscale_")
        if slot.stage is READY:
            raise MisuseError("unscale_() before backward(): there are no gradients for this step yet")
        if slot.stage is UNSCALED:
            raise MisuseError("unscale_() was already called for this step; call step() next")
        self._move_grads(slot)
        slot.scaler.unscale_(slot.optimizer)
        slot.stage = UNSCALED
        if slot.masters is not None:  # readable half copies; written ones are refused at step()
            slot.masters.show_grads_on_model()

    def clip_grad_norm_(
        self, max_norm: float, optimizer: torch.optim.Optimizer | None = None, norm_type: float = 2.0
    ) -> torch.Tensor:
        """Clip the gradients the optimizer will step (the fp32 masters in master-* modes), unscaled
        first if needed; returns the total norm before clipping. Call between backward() and step()."""
        slot = self._slot(optimizer, "clip_grad_norm_")
        if slot.stage is READY:
            raise MisuseError("clip_grad_norm_() before backward(): there are no gradients for this step yet")
        if not max_norm > 0:
            raise AmpbenchError(f"max_norm must be > 0, got {max_norm!r}")
        if slot.stage is ACCUMULATING:
            self._move_grads(slot)
            slot.scaler.unscale_(slot.optimizer)
            slot.stage = UNSCALED
        params = [p for g in slot.optimizer.param_groups for p in g["params"] if p.grad is not None]
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)

    def move_grads(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Master modes: move the half gradients the last backward left on the model into the fp32 master gradients
        now (``step``, ``unscale_`` and the next ``backward`` do it anyway): the state the optimizer steps from, e.g.
        to measure it. Other modes: nothing to move."""
        slot = self._slot(optimizer, "move_grads")
        if slot.stage is ACCUMULATING:
            self._move_grads(slot)

    @staticmethod
    def _move_grads(slot: OptimizerSlot) -> None:
        """Master modes: the half gradients the backward left on the model into the fp32 masters (refused if written
        in place since: they were loss-scaled copies the optimizer never steps)."""
        if slot.masters is not None:
            slot.masters.adopt_new_groups()
            slot.masters.check_left_grads()
            slot.masters.grads_to_master()

    def step(
        self, optimizer: torch.optim.Optimizer | None = None, max_grad_norm: float | None = None
    ) -> StepRecord:
        """Unscale, clip, step unless gradients overflowed, update the scale -- on the device: no host sync with an
        optimizer that takes ``found_inf`` (fused Adam/AdamW/SGD/Adagrad), one with any other (whether to call its
        step). Returns the step's record, true when the optimizer stepped (``if mp.step(opt):`` reads it).

        Raises :class:`~ampbench.errors.TrainingDivergedError` when the dynamic scale fell below its floor: at that
        step with a host-stepped optimizer, within ``DIVERGENCE_CHECK_EVERY`` steps (naming the step) otherwise, or
        at :meth:`check_divergence`.
        """
        slot = self._slot(optimizer, "step")
        if slot.stage is READY:
            if slot.steps == 0:
                raise MisuseError(
                    "step() called before any backward(): call mp.backward(loss) first "
                    "(not loss.backward(), which bypasses loss scaling and master weights)"
                )
            raise MisuseError(
                "step() called twice for one backward(): call mp.backward(loss) before each step() "
                "(did you call loss.backward() instead of mp.backward(loss)?)"
            )
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise AmpbenchError(f"max_grad_norm must be > 0, got {max_grad_norm!r}")
        if slot.masters is not None:
            if slot.stage is UNSCALED:
                slot.masters.check_model_grads_untouched()
                if slot.masters.adopt_new_groups():
                    raise MisuseError("optimizer.add_param_group() between unscale_() and step(): add param groups "
                                      "before the step's backward()")
            else:
                self._move_grads(slot)  # (the new parameters' gradients too)
            slot.masters.sync_from_model()  # weights loaded or edited since the last step
        if slot.stage is ACCUMULATING:
            slot.scaler.unscale_(slot.optimizer)
        grad_norm = None
        if max_grad_norm is not None:
            params = [p for g in slot.optimizer.param_groups for p in g["params"] if p.grad is not None]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        used_scale = slot.scaler.current_scale()
        slot.steps += 1
        slot.stage = READY
        loss, slot.pending_loss = slot.pending_loss, None
        slot.in_step = True
        try:
            after = slot.scaler.step(slot.optimizer, step_index=slot.steps)
        finally:
            slot.in_step = False
            if slot.masters is not None:
                slot.masters.drop_master_grads()
        if slot.masters is not None:  # (after a skipped step the masters are unchanged: the copy rewrites the same values)
            slot.masters.master_to_model()
        self.last_step = StepRecord(slot.steps, loss, grad_norm, after.found if after else None,
                                    after.skipped if after else None, used_scale, slot.scaler.current_scale())
        if self._step_hooks:  # (a copy: a hook may remove itself)
            for hook in list(self._step_hooks):
                hook(self.last_step)
        return self.last_step

    def on_step(self, hook: Callable[[StepRecord], None]) -> Callable[[], None]:
        """Call ``hook(record)`` after every step() (a logger callback: ``record.scalars()`` holds the loss scale,
        found-inf and skipped steps); returns a function that removes the hook."""
        self._step_hooks.append(hook)
        return lambda: self._step_hooks.remove(hook) if hook in self._step_hooks else None

    @contextlib.contextmanager
    def direct_optimizer_steps(self) -> Iterator[None]:
        """Let code that must call ``optimizer.step()`` itself do so (the guard is off inside): torch.distributed
        .checkpoint initialises an empty optimizer's state with one zero-gradient, zero-lr step."""
        for s in self._slots:
            s.in_step = True
        try:
            yield
        finally:
            for s in self._slots:
                s.in_step = False

    def check_divergence(self) -> None:
        """Raise :class:`~ampbench.errors.TrainingDivergedError` if a dynamic scale fell below its floor at some step
        (one host read per optimizer; call it where a loop reads results anyway, e.g. after timed steps)."""
        for s in self._slots:
            s.scaler.check_divergence()

    @property
    def host_reads(self) -> int:
        """Host reads of device values the steps made so far (0 per step with fused optimizers)."""
        return sum(s.scaler.host_reads for s in self._slots)

    @property
    def direct_steps(self) -> int:
        """Optimizer steps taken so far by the fused kernel directly, not through ``optimizer.step()``
        (``direct_step``)."""
        return sum(s.scaler.direct_steps for s in self._slots)

    # -- introspection -------------------------------------------------------------------------
    @property
    def scale(self) -> float:
        """Current loss scale (of the only optimizer; see scaler_for() with several): a host read on a GPU."""
        return self._slot(None, "scale").scaler.scale

    def current_scale(self) -> torch.Tensor | float:
        """The current loss scale without reading it (a device tensor once a dynamic scale has stepped): keep it and
        read it later, e.g. a curve of scales read once after the loop."""
        return self._slot(None, "current_scale").scaler.current_scale()

    def scaler_for(self, optimizer: torch.optim.Optimizer | None = None) -> LossScaler:
        return self._slot(optimizer, "scaler_for").scaler

    @property
    def totals(self) -> dict[str, Any]:
        """Steps and skipped steps summed over optimizers; current scale per optimizer."""
        return {
            "steps": sum(s.steps for s in self._slots),
            "skipped_steps": sum(s.scaler.skipped_steps for s in self._slots),
            "scales": [s.scaler.scale for s in self._slots],
        }

    def master_params(self, optimizer: torch.optim.Optimizer | None = None) -> list[nn.Parameter]:
        """The fp32 master copies (empty for modes without master weights)."""
        masters = self._slot(optimizer, "master_params").masters
        return [] if masters is None else list(masters.master_params)

    def master_grad_buffers(self, optimizer: torch.optim.Optimizer | None = None) -> list[torch.Tensor]:
        """The fp32 master gradients' buffers, held across steps (empty for modes without master weights)."""
        masters = self._slot(optimizer, "master_grad_buffers").masters
        return [] if masters is None else masters.grad_buffers

    # -- checkpointing -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Scalers, master weights and counters; plain tensors and numbers (weights_only-loadable)."""
        return engine_state.state_dict(self.name, self.loss_scale, self._slots)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore after setup() (and in any order with model/optimizer ``load_state_dict``)."""
        if not self._is_setup:
            raise MisuseError("load_state_dict() needs setup() first: set up the model and optimizer, then load")
        engine_state.load_state_dict(self.name, self._slots, state)
