"""What a forward is checked for under a :class:`~ampbench.precision.MixedPrecision`: the model not cast or moved
since setup (a forward in the wrong dtype fails, or trains in it), and, in the autocast modes, autocast on.

Entering ``mp.autocast()`` -- which a step's forward runs under -- checks both. A forward pre-hook (the probe)
checks forwards that run outside it: installed at setup and again whenever a backward follows a forward that ran
outside ``mp.autocast()``, removed when ``mp.autocast()`` is entered (a hook costs a forward ~7 us of host time:
``Module._call_impl``'s slow path; docs/precision.md, "What the engine costs a step") -- except in the modes that
cast the model, whose cast hooks put every forward on that path anyway: there it stays, and a forward of a model
cast since setup is refused before it runs, in ``mp.autocast()`` or not.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from ampbench.errors import MisuseError


class ForwardWatch:
    """The forward checks of one set-up MixedPrecision (made at setup)."""

    __slots__ = ("autocast_probe", "context_entered", "forward_autocast", "keep_probe", "loss_scale", "models",
                 "name", "probes", "warned", "watched", "with_masters")

    def __init__(self, name: str, models: list[nn.Module], watched: list[tuple[torch.Tensor, torch.dtype, torch.device]],
                 autocast_probe: str | None, keep_probe: bool, with_masters: bool,
                 loss_scale: Callable[[], float]) -> None:
        self.name, self.models, self.watched = name, models, watched
        """``watched``: a parameter per optimizer with its dtype and device at setup."""
        self.autocast_probe = autocast_probe
        """Autocast recipes: the device type whose autocast state the probe records (None: not recorded)."""
        self.keep_probe, self.with_masters, self.loss_scale = keep_probe, with_masters, loss_scale
        self.forward_autocast: bool | None = None
        """Whether autocast was on when the model's last forward started."""
        self.warned = False
        self.probes: list[Any] = []
        """The probes' handles while they are installed."""
        self.context_entered = False
        """mp.autocast() was entered since the last backward."""
        self.install_probe()

    def install_probe(self) -> None:
        if not self.probes:
            self.probes = [m.register_forward_pre_hook(self.before_forward) for m in self.models]

    def check_not_moved(self) -> None:
        for p, dtype, device in self.watched:
            if p.dtype != dtype or p.device != device:
                self._refuse_moved(p, dtype, device)

    def entered(self) -> None:
        """mp.autocast() entered: its forward is checked now and runs with autocast on."""
        self.check_not_moved()
        if self.probes and not self.keep_probe:
            for handle in self.probes:
                handle.remove()
            self.probes = []
        self.context_entered = True
        if self.autocast_probe is not None:
            self.forward_autocast = True

    def before_backward(self) -> None:
        """At backward: the model not moved; a forward outside autocast warned about (once); a forward outside
        mp.autocast() not seen by a probe gets the probe back for the next."""
        self.check_not_moved()
        if self.forward_autocast is False and not self.warned:
            self._warn_outside_autocast()
        if not self.context_entered and not self.probes:
            self.install_probe()
        self.context_entered = False

    def before_forward(self, module: nn.Module, args: Any) -> None:
        """The probe (a forward pre-hook on every set-up model)."""
        self.check_not_moved()
        if self.autocast_probe is not None:  # (meta: a traced step, autocast emulated)
            self.forward_autocast = torch.is_autocast_enabled(self.autocast_probe)

    def _refuse_moved(self, p: torch.Tensor, dtype: torch.dtype, device: torch.device) -> None:
        if self.with_masters:
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

    def _warn_outside_autocast(self) -> None:
        self.warned = True
        scale = self.loss_scale()
        scaled = f", with its gradients scaled by {scale:g}" if scale != 1 else ""
        warnings.warn(
            f"ampbench {self.name}: the model's forward ran outside mp.autocast() (autocast was off when it "
            f"started), so it computed in fp32{scaled}: run the forward and the loss under `with mp.autocast():` "
            "(ignore this if the model enters autocast itself)", stacklevel=4)


class ForwardContext:
    """mp.autocast(): the recipe's forward context, entered after the forward's checks (none before setup)."""

    __slots__ = ("inner", "watch")

    def __init__(self, watch: ForwardWatch | None, inner: AbstractContextManager[None]) -> None:
        self.watch, self.inner = watch, inner

    def __enter__(self) -> None:
        if self.watch is not None:
            self.watch.entered()
        self.inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.inner.__exit__(*exc)
