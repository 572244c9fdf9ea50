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
import enum
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import torch
from torch import nn

from ampbench.distributed import wrap
from ampbench.distributed.strategy import check_reduce_dtype, check_strategy, layout
from ampbench.distributed.wrap import param_names, require_process_group
from ampbench.errors import AmpbenchError, MisuseError, UnsupportedPrecisionError
from ampbench.precision.convert import resolve_keep_fp32
from ampbench.precision.fp8 import Fp8Options
from ampbench.precision.grad_mode import no_grad
from ampbench.precision.master_weights import MasterWeights
from ampbench.precision.optimizer_state import convert as convert_optimizer
from ampbench.precision.optimizer_state import effective as optimizer_state_of
from ampbench.precision.optimizer_state import refusal as state_refusal
from ampbench.precision.registry import get
from ampbench.precision.scaling import LossScaleConfig, LossScaler, skipped_tensor
from ampbench.precision.support import Support, supported

STATE_FORMAT = 1
_SETUP_ATTR = "_ampbench_precision"
M = TypeVar("M")
Opt = TypeVar("Opt")


class Stage(enum.Enum):
    READY = "ready"
    ACCUMULATING = "accumulating"
    UNSCALED = "unscaled"


_READY, _ACCUMULATING, _UNSCALED = Stage.READY, Stage.ACCUMULATING, Stage.UNSCALED
"""(Module constants: an enum member's lookup costs ~70 ns, several times a step.)"""


@dataclass(slots=True)
class StepRecord:
    """What happened at one optimizer step, read on the host only when asked: ``skipped``, ``scale``,
    ``skipped_steps``, ``next_scale``, ``loss`` and ``grad_norm`` each read a device value (a host sync on a GPU;
    a hook that logs every 100th record syncs every 100 steps). True when the optimizer stepped."""

    step: int
    """1-based count of step() calls on this optimizer, skipped ones included."""
    summed_loss: torch.Tensor | None = field(default=None, repr=False)
    """The losses passed to backward() since the previous step (their sum; the loss itself, graph and all, for one
    backward: detaching it costs an op every step, so :attr:`loss_tensor` detaches it when read)."""
    grad_norm_tensor: torch.Tensor | None = field(default=None, repr=False)
    """Total gradient norm before clipping, when max_grad_norm was given."""
    found_tensor: torch.Tensor | None = field(default=None, repr=False)
    """1.0 when the gradients held inf/NaN and the step was skipped (None: not checked)."""
    skipped_count: Any = field(default=None, repr=False)
    """Steps skipped so far on this optimizer, this one included, as the scaler keeps it (None: not checked); read
    :attr:`skipped_tensor` or :attr:`skipped_steps`."""
    scale_value: torch.Tensor | float = field(default=1.0, repr=False)
    """Loss scale the step's gradients were computed with."""
    next_scale_value: torch.Tensor | float = field(default=1.0, repr=False)
    """Loss scale after this step's update."""

    @property
    def skipped(self) -> bool:
        """True when the gradients overflowed and the optimizer step was skipped."""
        return self.found_tensor is not None and bool(self.found_tensor)

    def __bool__(self) -> bool:
        """Whether the optimizer stepped (``if mp.step(opt):``; a host read on a GPU)."""
        return not self.skipped

    @property
    def skipped_tensor(self) -> torch.Tensor | None:
        """Steps skipped so far on this optimizer, this one included, on the device (None: not checked)."""
        return None if self.skipped_count is None else skipped_tensor(self.skipped_count)

    @property
    def skipped_steps(self) -> int:
        """Steps skipped so far on this optimizer, this one included."""
        return 0 if self.skipped_count is None else int(skipped_tensor(self.skipped_count))

    @property
    def scale(self) -> float:
        """Loss scale the step's gradients were computed with (1.0 without scaling)."""
        return float(self.scale_value)

    @property
    def next_scale(self) -> float:
        """Loss scale after this step's update (what the next backward() scales by)."""
        return float(self.next_scale_value)

    @property
    def loss_tensor(self) -> torch.Tensor | None:
        """Sum of the losses passed to backward() since the previous step (detached; on the device)."""
        return None if self.summed_loss is None else self.summed_loss.detach()

    @property
    def loss(self) -> float | None:
        return None if self.summed_loss is None else float(self.summed_loss)

    @property
    def grad_norm(self) -> float | None:
        return None if self.grad_norm_tensor is None else float(self.grad_norm_tensor)

    def scalars(self) -> dict[str, float]:
        """What a logger plots for this step, by tag: ``loss_scale`` (the scale after the step's update),
        ``found_inf`` (1 when the gradients held inf/NaN and the step was skipped), ``skipped_steps`` (so far),
        and ``loss`` / ``grad_norm`` when known (reading them is a host sync on a GPU)."""
        out = {"loss_scale": self.next_scale, "found_inf": float(self.skipped), "skipped_steps": float(self.skipped_steps)}
        if self.summed_loss is not None:
            out["loss"] = float(self.summed_loss)
        if self.grad_norm_tensor is not None:
            out["grad_norm"] = float(self.grad_norm_tensor)
        return out


@dataclass
class _Slot:
    """Per-optimizer state: its scaler, its master weights, where it is in the state machine."""

    optimizer: torch.optim.Optimizer
    scaler: LossScaler
    masters: MasterWeights | None
    stage: Stage = _READY
    steps: int = 0
    pending_loss: torch.Tensor | None = None
    in_step: bool = False
    """True while mp.step() runs the optimizer: any other optimizer.step() call is a misuse."""
    where: tuple[torch.Tensor, torch.dtype, torch.device] | None = None
    """A parameter of the model (the half one in master modes) with its dtype and device at setup (a model cast or
    moved after setup is refused)."""


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
        check_finite: check every step's gradients for inf/NaN and skip the step if any (default). The fp16
            modes' scaler always checks; for the others this costs one fused pass over the gradients and,
            on a GPU, a host sync per step (like GradScaler's). ``False`` steps whatever the gradients hold.
        strategy: ``None`` (one device), ``"ddp"`` or ``"fsdp"`` (FSDP2): setup wraps or shards the model for
            torch.distributed; what each (strategy, precision) pair does: :mod:`ampbench.distributed.strategy`.
        grad_reduce_dtype: with a strategy, the dtype gradients are reduced in (``"fp32"``, ``"bf16"``, ``"fp16"``).
        mesh, process_group: FSDP2's device mesh (default: every rank on this device type) and the group
            the ranks agree on skipped steps over (default: the world).
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
        fp8: Fp8Options | None = None,
        fp8_skip: Sequence[str] = (),
        fp8_filter: str = "auto",
        strategy: str | None = None,
        grad_reduce_dtype: str | torch.dtype | None = None,
        mesh: Any = None,
        process_group: Any = None,
        optimizer_state: str | None = None,
    ) -> None:
        self.recipe = get(precision)
        self.name = self.recipe.name
        self.optimizer_state = optimizer_state_of(self.name, optimizer_state)
        """The optimizer's state precision when it is not the mode's own (None: the optimizer as built)."""
        why = state_refusal(self.name, self.optimizer_state)
        if why:
            raise AmpbenchError(f"Passed MixedPrecision({precision!r}, optimizer_state={optimizer_state!r}): {why}")
        self.strategy = check_strategy(strategy)
        reduce = check_reduce_dtype(grad_reduce_dtype)
        if reduce is not None and self.strategy is None:
            raise AmpbenchError(f"grad_reduce_dtype applies to strategy ddp or fsdp, not to one device ({precision!r})")
        self.layout = layout(self.strategy, self.recipe, reduce) if self.strategy else None
        """What this (strategy, precision) pair does (ampbench.distributed.strategy); None on one device."""
        self._mesh, self._process_group = mesh, process_group
        if fp8 is None and (fp8_skip or fp8_filter != "auto"):  # (the keywords before Fp8Options)
            fp8 = Fp8Options(tuple(fp8_skip) if not isinstance(fp8_skip, str) else (fp8_skip,), fp8_filter)
        if self.recipe.is_fp8:  # the recipe built with its options (and FSDP2's fp8 all-gather when the layout has it)
            self.recipe = get(precision, options=fp8 or Fp8Options(),
                              fsdp_all_gather=bool(self.layout and self.layout.fp8_all_gather))
        elif fp8 is not None:
            raise AmpbenchError(f"fp8 options (fp8_skip/fp8_filter) apply to the fp8 modes, not {self.name!r}")
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
        self.check_finite = bool(check_finite)
        self.fallbacks: list[str] = []
        """Kernel fallbacks installed at setup (ops this device has no kernel for in this mode)."""
        self.last_step: StepRecord | None = None
        """What the last step() did (see :meth:`StepRecord.scalars` for a logger)."""
        self._step_hooks: list[Callable[[StepRecord], None]] = []
        self._slots: list[_Slot] = []
        self._is_setup = False
        self._forward_autocast: bool | None = None
        """Autocast recipes: whether autocast was on when the model's last forward started (a forward pre-hook)."""
        self._warned_autocast = False
        # Made once at setup, read every step (the step's host time is the product: benchmarks/engine_overhead.py)
        self._with_masters = False
        """Some optimizer steps fp32 master weights."""
        self._watched: list[tuple[torch.Tensor, torch.dtype, torch.device]] = []
        """A parameter per optimizer with its dtype and device at setup (a model cast or moved since is refused)."""
        self._autocast_probe: str | None = None
        """Autocast recipes: the device type whose autocast state the forward pre-hook records."""
        self._context_device: str | None = None
        self._models: list[nn.Module] = []
        self._probes: list[Any] = []
        """The forward pre-hooks' handles while they are installed (see :meth:`_install_probe`)."""
        self._context_entered = False
        """mp.autocast() was entered since the last backward."""

    def __repr__(self) -> str:
        strategy = f", strategy={self.strategy!r}" if self.strategy else ""
        state = f", optimizer_state={self.optimizer_state!r}" if self.optimizer_state else ""
        return f"MixedPrecision({self.name!r}, loss_scale={self.loss_scale.kind!r}{strategy}{state})"

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
        if self.optimizer_state is not None:  # first: the masters and the wrappers take the rebuilt optimizer
            why = state_refusal(self.name, self.optimizer_state, self.device)
            if why:
                raise UnsupportedPrecisionError(why)
            optimizers = [convert_optimizer(o, self.optimizer_state) for o in optimizers]
            optimizer = optimizers if isinstance(optimizer, (list, tuple)) else optimizers[0]  # type: ignore[assignment]
        if self.layout is not None:
            require_process_group(f"MixedPrecision(strategy={self.strategy!r})")
        with_masters = self.recipe.master_weights and (self.layout is None or self.layout.engine_masters)

        fp32_copies: dict[int, torch.Tensor] = {}
        if with_masters:  # taken before the cast: masters start from the exact fp32 init
            fp32_copies = {
                id(p): p.detach().clone().float() for p in model_params.values() if p.is_floating_point()
            }
        names = None  # fsdp: the optimizers' parameters by name, before a conversion (fp8) replaces any
        if self.layout is not None and self.layout.strategy == "fsdp":
            names = param_names(models[0])
        if self.layout is None or self.layout.engine_casts:
            self._convert(models)
        self.fallbacks = self.recipe.kernel_fallbacks(models, self.device)
        for note in self.fallbacks:
            warnings.warn(f"ampbench {self.name} on {self.device}: {note}", stacklevel=2)
        wrapped = self._wrap(models, optimizers, names)
        for opt in optimizers:
            masters = MasterWeights(opt, fp32_copies) if with_masters else None
            half_grads = any(
                p.dtype in (torch.float16, torch.bfloat16) for g in opt.param_groups for p in g["params"]
            )
            scaler = LossScaler(self.loss_scale, self.device.type, half_grads=half_grads, check_finite=self.check_finite,
                                process_group=self._process_group, distributed=self.strategy == "fsdp")
            if half_grads:
                _warn_eps_underflow(opt)
            slot = _Slot(opt, scaler, masters)
            held = masters.model_params if masters is not None and len(masters) else \
                [p for g in opt.param_groups for p in g["params"]]
            first = next((p for p in held if p.is_floating_point()), None)
            slot.where = None if first is None else (first, first.dtype, first.device)
            opt.register_step_pre_hook(_step_guard(slot))
            self._slots.append(slot)
        masters_of = [s.masters for s in self._slots if s.masters is not None]
        self._with_masters = bool(masters_of)
        self._watched = [s.where for s in self._slots if s.where is not None]
        self._autocast_probe = self.device.type if self.recipe.autocasts and self.device.type != "meta" else None
        self._context_device = self.device.type
        for m in models:
            if masters_of:
                _watch_loads(m, masters_of)
            setattr(m, _SETUP_ATTR, repr(self))
        self._models = models
        self._install_probe()
        self._is_setup = True
        if self.strategy == "ddp":  # the DDP wrappers are what the caller trains
            return (wrapped if isinstance(model, (list, tuple)) else wrapped[0]), optimizer  # type: ignore[return-value]
        return model, optimizer

    def _wrap(self, models: list[nn.Module], optimizers: list[torch.optim.Optimizer],
              names: dict[int, str] | None = None) -> list[nn.Module]:
        """Strategies: DDP wrappers (after the casts, so buckets have the trained dtypes), or FSDP2 shards
        in place (the optimizers rebound to the sharded parameters). One device: the models as they are."""
        if self.layout is None:
            return models

        assert self.device is not None
        if self.layout.strategy == "ddp":
            return [wrap.wrap_ddp(m, self.layout, self.device, self._process_group) for m in models]
        if len(models) > 1:
            raise AmpbenchError("strategy fsdp takes one model per MixedPrecision (its optimizers are rebound to the "
                                "sharded parameters)")
        mesh = self._mesh if self._mesh is not None else wrap.default_mesh(self.device)
        units = [m for _, m in resolve_keep_fp32(models[0], self.keep_fp32, keep_norm=True)] \
            if self.layout.fsdp_norm_units else []
        return [wrap.shard_and_rebind(models[0], optimizers, self.layout, mesh, units, names)]

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
        return _ForwardContext(self, self.recipe.forward_context(self._context_device or self._device_type()))

    def _install_probe(self) -> None:
        """What a forward must be checked for -- the model cast or moved since setup, autocast off in an autocast
        mode -- is checked by entering mp.autocast(), which a step's forward runs under. A forward pre-hook checks
        forwards that run outside it: it is installed at setup and again whenever a backward follows a forward
        that ran outside mp.autocast(), and removed when mp.autocast() is entered (a hook costs a forward ~7 us
        of host time: Module._call_impl's slow path; see docs/precision.md, "What the engine costs a step") --
        except in the modes that cast the model, whose cast hooks put every forward on that path anyway: there it
        stays, and a forward of a model cast since setup is refused before it runs, in mp.autocast() or not."""
        if not self._probes:
            self._probes = [m.register_forward_pre_hook(self._before_forward) for m in self._models]

    def _remove_probe(self) -> None:
        for handle in self._probes:
            handle.remove()
        self._probes = []

    def _refuse_moved(self, p: torch.Tensor, dtype: torch.dtype, device: torch.device) -> None:
        if self._with_masters:
            raise MisuseError(
                f"the model was cast or moved after setup() (its parameters are now {p.dtype} on {p.device}, were "
                f"{dtype} on {device}); model.to()/.half()/.float() bypass the fp32 master weights. Move the model to "
                "its device before setup() and let MixedPrecision cast it")
        raise MisuseError(
            f"the model was cast or moved after setup() (its parameters are now {p.dtype} on {p.device}, "
            f"were {dtype} on {device}); model.half()/.float()/.to() change what {self.name} trains (and a "
            "half model's gradients cannot be unscaled). Move the model to its device before setup() and "
            "let MixedPrecision choose the dtypes"
        )

    def _before_forward(self, module: nn.Module, args: Any) -> None:
        """A forward pre-hook on every set-up model: the model was not cast or moved since setup (a forward in the
        wrong dtype fails, or trains in it), and whether autocast is on (an autocast mode warns at backward)."""
        for p, dtype, device in self._watched:
            if p.dtype != dtype or p.device != device:
                self._refuse_moved(p, dtype, device)
        if self._autocast_probe is not None:  # (meta: a traced step, autocast emulated)
            self._forward_autocast = torch.is_autocast_enabled(self._autocast_probe)

    def _warn_outside_autocast(self) -> None:
        if self._forward_autocast is False and not self._warned_autocast:
            self._warned_autocast = True
            scale = (f", with its gradients scaled by {self._slots[0].scaler.scale:g}"
                     if self._slots and self._slots[0].scaler.scale != 1 else "")
            warnings.warn(
                f"ampbench {self.name}: the model's forward ran outside mp.autocast() (autocast was off when it "
                f"started), so it computed in fp32{scale}: run the forward and the loss under `with mp.autocast():` "
                "(ignore this if the model enters autocast itself)", stacklevel=3)

    def _slot(self, optimizer: torch.optim.Optimizer | None, call: str) -> _Slot:
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
        if slot.stage is _UNSCALED:
            raise MisuseError(
                "backward() after unscale_(): the gradients of this step were already unscaled; call step() first"
            )
        for p, dtype, device in self._watched:
            if p.dtype != dtype or p.device != device:
                self._refuse_moved(p, dtype, device)
        if self._forward_autocast is False and not self._warned_autocast:
            self._warn_outside_autocast()
        if not self._context_entered and not self._probes:  # (a forward outside mp.autocast(), unseen: probe the next)
            self._install_probe()
        self._context_entered = False
        if self._with_masters:
            for s in self._slots:  # optimizer.add_param_group() since setup: the new half params get masters
                if s.masters is not None:
                    s.masters.adopt_new_groups()
            for s in self._slots:  # an earlier micro-batch's half grads into the fp32 masters first: fp32 accumulation
                if s.masters is not None and s.stage is not _UNSCALED:  # (unscaled: its model grads are copies)
                    s.masters.check_left_grads()
                    s.masters.grads_to_master()
        with self.recipe.backward_context(self._context_device):
            slot.scaler.scale_loss(loss).backward(**kwargs)
        if self._with_masters:
            for s in self._slots:  # every optimizer's half grads (a GAN's D loss also reaches G) stay until the step
                if s.masters is not None and s.stage is not _UNSCALED:
                    s.masters.mark_model_grads()
        # The loss is kept for the step's record: as it is for one backward (its graph was freed by it; detaching
        # would cost an op a step), detached where the graph was kept (retain_graph, create_graph) or summed.
        if slot.pending_loss is not None:
            with no_grad():
                slot.pending_loss = slot.pending_loss + loss
        else:
            slot.pending_loss = loss.detach() if kwargs else loss
        slot.stage = _ACCUMULATING

    def unscale_(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Unscale this step's gradients now (to inspect or clip them yourself); step() won't redo it."""
        slot = self._slot(optimizer, "unscale_")
        if slot.stage is _READY:
            raise MisuseError("unscale_() before backward(): there are no gradients for this step yet")
        if slot.stage is _UNSCALED:
            raise MisuseError("unscale_() was already called for this step; call step() next")
        self._move_grads(slot)
        slot.scaler.unscale_(slot.optimizer)
        slot.stage = _UNSCALED
        if slot.masters is not None:  # readable half copies; written ones are refused at step()
            slot.masters.show_grads_on_model()

    def clip_grad_norm_(
        self, max_norm: float, optimizer: torch.optim.Optimizer | None = None, norm_type: float = 2.0
    ) -> torch.Tensor:
        """Clip the gradients the optimizer will step (the fp32 masters in master-* modes), unscaled
        first if needed; returns the total norm before clipping. Call between backward() and step()."""
        slot = self._slot(optimizer, "clip_grad_norm_")
        if slot.stage is _READY:
            raise MisuseError("clip_grad_norm_() before backward(): there are no gradients for this step yet")
        if not max_norm > 0:
            raise AmpbenchError(f"max_norm must be > 0, got {max_norm!r}")
        if slot.stage is _ACCUMULATING:
            self._move_grads(slot)
            slot.scaler.unscale_(slot.optimizer)
            slot.stage = _UNSCALED
        params = [p for g in slot.optimizer.param_groups for p in g["params"] if p.grad is not None]
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)

    def move_grads(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Master modes: move the half gradients the last backward left on the model into the fp32 master gradients
        now (``step``, ``unscale_`` and the next ``backward`` do it anyway): the state the optimizer steps from, e.g.
        to measure it. Other modes: nothing to move."""
        slot = self._slot(optimizer, "move_grads")
        if slot.stage is _ACCUMULATING:
            self._move_grads(slot)

    @staticmethod
    def _move_grads(slot: _Slot) -> None:
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
        if slot.stage is _READY:
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
            if slot.stage is _UNSCALED:
                slot.masters.check_model_grads_untouched()
                if slot.masters.adopt_new_groups():
                    raise MisuseError("optimizer.add_param_group() between unscale_() and step(): add param groups "
                                      "before the step's backward()")
            else:
                self._move_grads(slot)  # (the new parameters' gradients too)
            slot.masters.sync_from_model()  # weights loaded or edited since the last step
        if slot.stage is _ACCUMULATING:
            slot.scaler.unscale_(slot.optimizer)
        grad_norm = None
        if max_grad_norm is not None:
            params = [p for g in slot.optimizer.param_groups for p in g["params"] if p.grad is not None]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        used_scale = slot.scaler.current_scale()
        slot.steps += 1
        slot.stage = _READY
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
        _check_state(state)
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
            slot.stage = _READY
            slot.pending_loss = None


_STATE_KEYS = {"format": int, "precision": str, "optimizers": list}
_SLOT_KEYS = {"steps": int, "scaler": dict}
_SCALER_KEYS = ("config", "scale", "steps", "skipped_steps", "growth_tracker", "hysteresis_left")


def _check_state(state: Any) -> None:
    """A MixedPrecision state dict has every entry load_state_dict reads, of the right type."""
    how = "pass the dict mp.state_dict() returned (saved whole, e.g. torch.save({'mp': mp.state_dict(), ...}))"
    if not isinstance(state, dict):
        raise AmpbenchError(f"MixedPrecision.load_state_dict() needs a dict, got {type(state).__name__}: {how}")
    missing = [k for k, t in _STATE_KEYS.items() if not isinstance(state.get(k), t)]
    if missing:
        raise AmpbenchError(f"MixedPrecision.load_state_dict(): the state lacks or mistypes {', '.join(missing)} "
                            f"(it has: {', '.join(map(str, state)) or 'nothing'}): {how}")
    if state["format"] != STATE_FORMAT:
        raise AmpbenchError(f"unknown MixedPrecision checkpoint format {state['format']!r} (this ampbench reads "
                            f"{STATE_FORMAT})")
    for i, st in enumerate(state["optimizers"]):
        bad = [k for k, t in _SLOT_KEYS.items() if not isinstance(st, dict) or not isinstance(st.get(k), t)]
        bad += [f"scaler.{k}" for k in _SCALER_KEYS if isinstance(st, dict) and isinstance(st.get("scaler"), dict)
                and k not in st["scaler"]]
        if isinstance(st, dict) and "masters" not in st:
            bad.append("masters")
        if bad:
            raise AmpbenchError(f"MixedPrecision.load_state_dict(): optimizer {i}'s entry lacks or mistypes "
                                f"{', '.join(bad)}: {how}")


class _ForwardContext:
    """mp.autocast(): the recipe's forward context, entered after the checks a forward needs (the model not cast or
    moved since setup); a forward inside runs with autocast on, so the forward pre-hook that checks forwards run
    outside it is removed (:meth:`MixedPrecision._install_probe`)."""

    __slots__ = ("inner", "mp")

    def __init__(self, mp: MixedPrecision, inner: AbstractContextManager[None]) -> None:
        self.mp, self.inner = mp, inner

    def __enter__(self) -> None:
        mp = self.mp
        for p, dtype, device in mp._watched:
            if p.dtype != dtype or p.device != device:
                mp._refuse_moved(p, dtype, device)
        if mp._probes and not mp.recipe.casts_model:  # (a cast model has cast hooks: the slow path is paid anyway)
            mp._remove_probe()
        mp._context_entered = True
        if mp._autocast_probe is not None:
            mp._forward_autocast = True
        self.inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.inner.__exit__(*exc)


def _step_guard(slot: _Slot) -> Any:
    """An optimizer step pre-hook refusing optimizer.step() outside mp.step()."""

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not slot.in_step:
            raise MisuseError(
                f"{type(optimizer).__name__}.step() was called directly on an optimizer set up by MixedPrecision: "
                "call mp.step(optimizer) instead (it unscales the gradients, skips inf/NaN steps and, in "
                "master-* modes, steps the fp32 master weights and copies them into the model)"
            )

    return hook


def _watch_loads(model: nn.Module, masters: list[MasterWeights]) -> None:
    """load_state_dict hooks on the modules owning master-tracked parameters: the pre-hook hands the
    checkpoint's full-precision tensors to the masters, the post-hook syncs them at once."""
    tracked = {id(p): ms for ms in masters for p in ms.model_params}

    def pre(module: nn.Module, state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
        for name, p in module._parameters.items():
            ms = tracked.get(id(p)) if p is not None else None
            t = state_dict.get(prefix + name) if ms is not None else None
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.element_size() > p.element_size():
                ms.pending[id(p)] = t  # type: ignore[union-attr]

    def post(module: nn.Module, incompatible: Any) -> None:
        for name, p in module._parameters.items():
            if p is not None and id(p) not in tracked and p.is_floating_point() and name in owned.get(id(module), ()):
                raise MisuseError(
                    f"load_state_dict(assign=True) replaced {type(module).__name__}.{name}, a parameter the "
                    "optimizer's fp32 master weights belong to; load before setup(), or without assign=True"
                )
        for ms in masters:
            ms.sync_from_model()

    owned: dict[int, set[str]] = {}
    for module in model.modules():
        names = {n for n, p in module._parameters.items() if p is not None and id(p) in tracked}
        if names:
            owned[id(module)] = names
            if hasattr(module, "register_load_state_dict_pre_hook"):
                module.register_load_state_dict_pre_hook(pre)
            else:  # torch < 2.5 has it under its private name only
                module._register_load_state_dict_pre_hook(pre, with_module=True)
            module.register_load_state_dict_post_hook(post)
