"""MixedPrecision: the object users train with.

    mp = MixedPrecision("master-fp16")                # or MixedPrecision("O2", loss_scale="dynamic")
    model, optimizer = mp.setup(model, optimizer)     # cast model, fp32 master weights
    for x, y in loader:
        optimizer.zero_grad()
        with mp.autocast():
            loss = loss_fn(model(x), y)
        mp.backward(loss)                             # scaled backward
        stepped = mp.step(optimizer, max_grad_norm=1.0)

Each optimizer moves through an explicit state machine (cf. torch.amp.GradScaler's OptState):
READY --backward--> ACCUMULATING --unscale_--> UNSCALED --step--> READY. ``step`` from
ACCUMULATING unscales first. Calls in the wrong order raise :class:`MisuseError` saying what to do.
Several ``backward`` calls before one ``step`` are gradient accumulation: unscaling happens once.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import torch
from torch import nn

from ampbench.errors import AmpbenchError, MisuseError, UnsupportedPrecisionError
from ampbench.precision.master_weights import MasterWeights
from ampbench.precision.registry import get
from ampbench.precision.scaling import LossScaleConfig, LossScaler
from ampbench.precision.support import Support, supported

STATE_FORMAT = 1
_SETUP_ATTR = "_ampbench_precision"
M = TypeVar("M")
Opt = TypeVar("Opt")


class Stage(enum.Enum):
    READY = "ready"
    ACCUMULATING = "accumulating"
    UNSCALED = "unscaled"


@dataclass
class StepRecord:
    """What happened at one optimizer step. ``loss`` reads the tensor lazily (a sync on GPU)."""

    step: int
    """1-based count of step() calls on this optimizer, skipped ones included."""
    skipped: bool
    """True when the gradients overflowed and the optimizer step was skipped."""
    scale: float
    """Loss scale the step's gradients were computed with (1.0 without scaling)."""
    loss_tensor: torch.Tensor | None = field(default=None, repr=False)
    """Sum of the losses passed to backward() since the previous step (detached)."""
    grad_norm_tensor: torch.Tensor | None = field(default=None, repr=False)
    """Total gradient norm before clipping, when max_grad_norm was given."""

    @property
    def loss(self) -> float | None:
        return None if self.loss_tensor is None else float(self.loss_tensor)

    @property
    def grad_norm(self) -> float | None:
        return None if self.grad_norm_tensor is None else float(self.grad_norm_tensor)


@dataclass
class _Slot:
    """Per-optimizer state: its scaler, its master weights, where it is in the state machine."""

    optimizer: torch.optim.Optimizer
    scaler: LossScaler
    masters: MasterWeights | None
    stage: Stage = Stage.READY
    steps: int = 0
    pending_loss: torch.Tensor | None = None


def _as_list(obj: Any, kind: type, what: str) -> list[Any]:
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not items:
        raise AmpbenchError(f"setup() got an empty list of {what}s")
    for it in items:
        if not isinstance(it, kind):
            raise AmpbenchError(f"setup() expects {what}(s) of type {kind.__name__}, got {type(it).__name__}")
    return items


def _warn_eps_underflow(optimizer: torch.optim.Optimizer) -> None:
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
                    stacklevel=3,
                )


class MixedPrecision:
    """Train a PyTorch model in one precision mode, with loss scaling and fp32 master weights.

    Args:
        precision: mode name or alias (``ampbench list``), e.g. ``"amp-bf16"``, ``"O2"``.
        loss_scale: ``None`` (the mode's default), ``"none"``, ``"dynamic"``, ``"hysteresis[:N]"``,
            ``"static:VALUE"`` or a number, or a :class:`LossScaleConfig`.
        keep_fp32: modules to keep in fp32 in the half-model modes: qualified names (as in
            ``model.named_modules()``) or module classes. Norm layers are kept by ``master-*`` anyway.
        device: where the model lives; by default taken from the model's parameters at setup.
    """

    def __init__(
        self,
        precision: str,
        loss_scale: LossScaleConfig | str | float | None = None,
        *,
        keep_fp32: Sequence[str | type[nn.Module]] = (),
        device: str | torch.device | None = None,
    ) -> None:
        self.recipe = get(precision)
        self.name = self.recipe.name
        try:
            self.loss_scale = LossScaleConfig.parse(loss_scale, default=self.recipe.default_loss_scale)
        except AmpbenchError as e:
            raise AmpbenchError(f"Passed MixedPrecision({precision!r}, loss_scale={loss_scale!r}): {e}") from None
        if isinstance(keep_fp32, (str, type)):
            keep_fp32 = [keep_fp32]
        self.keep_fp32 = tuple(keep_fp32)
        if self.keep_fp32 and not self.recipe.casts_model:
            raise AmpbenchError(
                f"keep_fp32 applies to modes that cast the model (master-*, pure-*), not {self.name!r}"
            )
        self.device: torch.device | None = torch.device(device) if device is not None else None
        self.last_step: StepRecord | None = None
        self._slots: list[_Slot] = []
        self._is_setup = False

    def __repr__(self) -> str:
        return f"MixedPrecision({self.name!r}, loss_scale={self.loss_scale.kind!r})"

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
        models = _as_list(model, nn.Module, "model")
        optimizers = _as_list(optimizer, torch.optim.Optimizer, "optimizer")
        for m in models:
            if getattr(m, _SETUP_ATTR, None) is not None:
                raise MisuseError(
                    f"{type(m).__name__} was already set up by {getattr(m, _SETUP_ATTR)!r}; "
                    "build a fresh model (and optimizer) for another MixedPrecision"
                )
        model_params = {id(p): p for m in models for p in m.parameters()}
        for i, opt in enumerate(optimizers):
            held = [p for g in opt.param_groups for p in g["params"]]
            foreign = [p for p in held if id(p) not in model_params]
            if not held or foreign:
                raise MisuseError(
                    f"optimizer {i} ({type(opt).__name__}) holds {len(foreign) if held else 0} of {len(held)} "
                    "parameters that are not the model's. Create the optimizer from model.parameters() "
                    "and pass that model to setup()"
                )
        self.device = self.device or next(
            (p.device for p in model_params.values()), torch.device("cpu")
        )
        support = supported(self.name, self.device)
        if not support.ok:
            raise UnsupportedPrecisionError(f"{self.name} cannot run on {self.device}: {support.reason}")

        fp32_copies: dict[int, torch.Tensor] = {}
        if self.recipe.master_weights:  # taken before the cast: masters start from the exact fp32 init
            fp32_copies = {
                id(p): p.detach().clone().float() for p in model_params.values() if p.is_floating_point()
            }
        self._convert(models)
        for opt in optimizers:
            masters = MasterWeights(opt, fp32_copies) if self.recipe.master_weights else None
            half_grads = any(
                p.dtype in (torch.float16, torch.bfloat16) for g in opt.param_groups for p in g["params"]
            )
            scaler = LossScaler(self.loss_scale, self.device.type, half_grads=half_grads)
            if half_grads:
                _warn_eps_underflow(opt)
            self._slots.append(_Slot(opt, scaler, masters))
        for m in models:
            setattr(m, _SETUP_ATTR, repr(self))
        self._is_setup = True
        return model, optimizer

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
        """Context for the forward pass (and the loss): autocast for amp-*, math-mode flags for all."""
        return self.recipe.forward_context(self._device_type())

    def _slot(self, optimizer: torch.optim.Optimizer | None, call: str) -> _Slot:
        if not self._is_setup:
            raise MisuseError(f"{call}() called before setup(): call model, optimizer = mp.setup(model, optimizer)")
        if optimizer is None:
            if len(self._slots) > 1:
                raise MisuseError(
                    f"{len(self._slots)} optimizers are set up: pass {call}(..., optimizer=opt) to say which "
                    "one this loss belongs to (each has its own loss scaler)"
                )
            return self._slots[0]
        for s in self._slots:
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
        if slot.stage is Stage.UNSCALED:
            raise MisuseError(
                "backward() after unscale_(): the gradients of this step were already unscaled; call step() first"
            )
        with self.recipe.backward_context():
            slot.scaler.scale_loss(loss).backward(**kwargs)
        for s in self._slots:  # every optimizer's half grads: a GAN's D loss also reaches G
            if s.masters is not None:
                s.masters.grads_to_master()
        detached = loss.detach()
        slot.pending_loss = detached if slot.pending_loss is None else slot.pending_loss + detached
        slot.stage = Stage.ACCUMULATING

    def unscale_(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Unscale this step's gradients now (to inspect or clip them yourself); step() won't redo it."""
        slot = self._slot(optimizer, "unscale_")
        if slot.stage is Stage.READY:
            raise MisuseError("unscale_() before backward(): there are no gradients for this step yet")
        if slot.stage is Stage.UNSCALED:
            raise MisuseError("unscale_() was already called for this step; call step() next")
        slot.scaler.unscale_(slot.optimizer)
        slot.stage = Stage.UNSCALED

    def step(
        self, optimizer: torch.optim.Optimizer | None = None, max_grad_norm: float | None = None
    ) -> bool:
        """Unscale, clip, step unless gradients overflowed, update the scale. Returns True if stepped.

        Raises :class:`~ampbench.errors.TrainingDivergedError` when the dynamic scale falls below its floor.
        """
        slot = self._slot(optimizer, "step")
        if slot.stage is Stage.READY:
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
        if slot.stage is Stage.ACCUMULATING:
            slot.scaler.unscale_(slot.optimizer)
        grad_norm = None
        if max_grad_norm is not None:
            params = [p for g in slot.optimizer.param_groups for p in g["params"] if p.grad is not None]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        used_scale = slot.scaler.scale
        slot.steps += 1
        slot.stage = Stage.READY
        loss, slot.pending_loss = slot.pending_loss, None
        try:
            stepped = slot.scaler.step(slot.optimizer, step_index=slot.steps)
        finally:
            if slot.masters is not None:
                slot.masters.drop_master_grads()
        if stepped and slot.masters is not None:
            slot.masters.master_to_model()
        self.last_step = StepRecord(slot.steps, not stepped, used_scale, loss, grad_norm)
        return stepped

    # -- introspection -------------------------------------------------------------------------
    @property
    def scale(self) -> float:
        """Current loss scale (of the only optimizer; see scaler_for() with several)."""
        return self._slot(None, "scale").scaler.scale

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

    # -- checkpointing -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Scalers, master weights and counters; plain tensors and numbers (weights_only-loadable)."""
        return {
            "format": STATE_FORMAT,
            "precision": self.name,
            "loss_scale": asdict(self.loss_scale),
            "optimizers": [
                {
                    "steps": s.steps,
                    "scaler": s.scaler.state_dict(),
                    "masters": None if s.masters is None else s.masters.state_dict(),
                }
                for s in self._slots
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore after setup() (and in any order with model/optimizer ``load_state_dict``)."""
        if not self._is_setup:
            raise MisuseError("load_state_dict() needs setup() first: set up the model and optimizer, then load")
        if state.get("format") != STATE_FORMAT:
            raise AmpbenchError(f"unknown MixedPrecision checkpoint format {state.get('format')!r}")
        if state["precision"] != self.name:
            raise AmpbenchError(
                f"checkpoint was saved in precision {state['precision']!r}, this run is {self.name!r}"
            )
        saved = state["optimizers"]
        if len(saved) != len(self._slots):
            raise AmpbenchError(f"checkpoint has {len(saved)} optimizers, this run set up {len(self._slots)}")
        for slot, st in zip(self._slots, saved):
            slot.steps = int(st["steps"])
            slot.scaler.load_state_dict(st["scaler"])
            if slot.masters is not None:
                if st["masters"] is None:
                    raise AmpbenchError("checkpoint holds no master weights for this optimizer")
                slot.masters.load_state_dict(st["masters"])
            slot.stage = Stage.READY
            slot.pending_loss = None
