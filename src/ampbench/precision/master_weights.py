"""fp32 master weights for a half model (apex O2's ``master_params``, Megatron's ``main_params``).

The optimizer's param groups are rewritten to hold fp32 copies of every half parameter; the half
parameters stay in the model. Per step:
  backward  -> the (scaled) half grads stay on the model until the step, or until the next backward
               (micro-batches: they are moved into the fp32 master grads first, so accumulation is fp32);
               written in place before the step (clipping without ``mp.unscale_()``) they are refused
  step      -> half grads moved into the fp32 master grads (the half ones freed); the optimizer (and the
               unscale / inf check) works on fp32 masters only
  after it  -> masters are copied back into the half model parameters; master grads are dropped
The fp32 copies are taken *before* the model is cast, so masters start from the exact fp32 init.

The model may be changed behind the masters' back after setup: ``model.load_state_dict`` (fine-tuning
from a checkpoint), or an in-place edit under ``torch.no_grad()``. Left alone, the next step would
copy the stale masters over it. :meth:`MasterWeights.sync_from_model` notices it from the parameters'
version counters (every in-place write bumps them; reading them costs ~0.07 µs a parameter) and takes
the new values; a ``load_state_dict`` hook hands it the checkpoint's own fp32 tensors, so loading an
fp32 checkpoint keeps its full precision in the masters. A model moved or cast after setup
(``model.to()``, ``.half()``, ``.float()``) cannot be repaired: it raises, saying to call setup after.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ampbench.errors import AmpbenchError, MisuseError
from ampbench.precision.grad_mode import no_grad


class MasterWeights:
    """The half<->fp32 parameter pairs of one optimizer."""

    def __init__(self, optimizer: torch.optim.Optimizer, fp32_copies: dict[int, torch.Tensor]) -> None:
        """``fp32_copies``: id(param) -> its fp32 value taken before the model was cast."""
        self.optimizer = optimizer
        self.model_params: list[nn.Parameter] = []
        self.master_params: list[nn.Parameter] = []
        self._buffers: list[torch.Tensor | None] = []
        self._groups_seen = 0
        self._adopt_groups(fp32_copies)
        self.pending: dict[int, torch.Tensor] = {}
        """id(model param) -> the full-precision value a load_state_dict just gave it (see module docstring)."""
        self._shown: list[tuple[torch.Tensor, int]] = []
        """The half gradient copies show_grads_on_model put on the model, with their version counters."""
        self._left: list[torch.Tensor] = []
        """The scaled half gradients a backward left on the model ..."""
        self._left_versions: list[int] = []
        """... and their version counters then."""
        self._buffers_made = False
        """Every master has its fp32 gradient buffer (made at the first step that gave it a gradient)."""
        self._record()

    def __len__(self) -> int:
        return len(self.model_params)

    def _adopt_groups(self, fp32_copies: dict[int, torch.Tensor]) -> None:
        """Replace the half parameters of param groups not seen yet with fp32 masters."""
        opt = self.optimizer
        for group in opt.param_groups[self._groups_seen:]:
            new_params = []
            for p in group["params"]:
                if p.dtype not in (torch.float16, torch.bfloat16):
                    new_params.append(p)  # kept fp32 (norm layers): the optimizer uses it directly
                    continue
                copy = fp32_copies.get(id(p))
                master = nn.Parameter(copy if copy is not None else p.detach().float(), requires_grad=p.requires_grad)
                if p in opt.state:  # move existing optimizer state to the master, in fp32
                    opt.state[master] = {
                        k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v
                        for k, v in opt.state.pop(p).items()
                    }
                self.model_params.append(p)
                self.master_params.append(master)
                self._buffers.append(None)
                self._buffers_made = False
                new_params.append(master)
            group["params"] = new_params
        self._groups_seen = len(opt.param_groups)

    def adopt_new_groups(self) -> bool:
        """Give fp32 masters to param groups added by ``optimizer.add_param_group`` since setup
        (their half parameters start their masters from their current values). True if any were."""
        if len(self.optimizer.param_groups) == self._groups_seen:
            return False
        first = len(self.model_params)
        self._adopt_groups({})
        self._versions.extend(p._version for p in self.model_params[first:])
        return True

    def _record(self) -> None:
        """Remember what the model holds now (after a sync): version counters, and the dtype/device."""
        self._versions = [p._version for p in self.model_params]
        first = self.model_params[0] if self.model_params else None
        self._where = (first.dtype, first.device) if first is not None else None

    # -- per step -----------------------------------------------------------------------------
    # Host time: a step's work on the parameters is a few foreach ops; the Python left per parameter is one list
    # comprehension per pass (reading .grad or ._version) and the .grad attribute writes (benchmarks/engine_overhead.py)
    @property
    def grad_buffers(self) -> list[torch.Tensor]:
        """The fp32 master gradients' buffers made so far: kept across steps (re-attached as ``master.grad`` at each
        move), so they are held while ``optimizer.zero_grad()`` has the masters' gradients at None."""
        return [b for b in self._buffers if b is not None]

    def grads_to_master(self) -> None:
        """Move the half gradients into the fp32 master gradients (adding to what is there).

        fp32 buffers are kept across steps and re-attached as ``master.grad``, so the usual
        ``optimizer.zero_grad()`` (set_to_none) costs no reallocation; copies are batched with
        ``torch._foreach_*`` (one kernel per dtype/device group instead of one per tensor).
        """
        grads = [p.grad for p in self.model_params]
        present = [g for g in grads if g is not None]
        if not present:  # (the backward of a step's first micro-batch: nothing to move yet)
            return
        if self._buffers_made and len(present) == len(grads) and all([m.grad is None for m in self.master_params]):
            # the usual step: every parameter got a gradient, the optimizer's zero_grad dropped the masters' ones
            with no_grad():
                torch._foreach_copy_(self._buffers, present)  # type: ignore[arg-type]
            for m, buf in zip(self.master_params, self._buffers):
                m.grad = buf
            for p in self.model_params:
                p.grad = None
            return
        fresh_src, fresh_dst, acc_src, acc_dst = [], [], [], []
        for i, (p, m) in enumerate(zip(self.model_params, self.master_params)):
            if p.grad is None:
                continue
            if m.grad is None:
                buf = self._buffers[i]
                if buf is None:
                    buf = self._buffers[i] = torch.empty_like(m, dtype=torch.float32)
                fresh_src.append(p.grad)
                fresh_dst.append(buf)
                m.grad = buf
            else:
                acc_src.append(p.grad)
                acc_dst.append(m.grad)
            p.grad = None
        self._buffers_made = all([b is not None for b in self._buffers])
        with no_grad():
            if fresh_dst:
                torch._foreach_copy_(fresh_dst, fresh_src)
            if acc_dst:
                torch._foreach_add_(acc_dst, [g.float() for g in acc_src])

    def mark_model_grads(self) -> None:
        """After a backward: remember the half gradients it left on the model (see :meth:`check_left_grads`)."""
        self._left = [g for g in [p.grad for p in self.model_params] if g is not None]
        self._left_versions = [g._version for g in self._left]

    def check_left_grads(self) -> None:
        """The half gradients a backward left on the model were not written before they were moved: clipping
        or scaling them in place (``clip_grad_norm_(model.parameters())`` right after ``mp.backward``) would act
        on loss-scaled half copies the optimizer never steps. (A gradient replaced by another tensor is moved as
        it is.)"""
        left, versions, self._left, self._left_versions = self._left, self._left_versions, [], []
        if [g._version for g in left] != versions:
            raise MisuseError(
                "the model's gradients were changed between mp.backward() and mp.step() (e.g. torch.nn.utils."
                "clip_grad_norm_(model.parameters(), ...)); in master-* modes they are loss-scaled half copies and the "
                "optimizer steps the fp32 master gradients. Clip with mp.step(optimizer, max_grad_norm=...) or "
                "mp.clip_grad_norm_(max_norm)"
            )

    def check_where(self) -> None:
        """The model was not cast or moved since setup (its first half parameter's dtype and device)."""
        if self._where is not None:
            first = self.model_params[0]
            if (first.dtype, first.device) != self._where:
                raise MisuseError(
                    f"the model was cast or moved after setup() (its parameters are now {first.dtype} on "
                    f"{first.device}, were {self._where[0]} on {self._where[1]}); model.to()/.half()/.float() "
                    "bypass the fp32 master weights. Move the model to its device before setup() and let "
                    "MixedPrecision cast it"
                )

    @torch.no_grad()
    def show_grads_on_model(self) -> None:
        """After unscaling: half copies of the (unscaled) master grads on the model parameters, to read.

        Writing them changes nothing the optimizer sees, so :meth:`check_model_grads_untouched` refuses
        a step after they were written (e.g. ``clip_grad_norm_(model.parameters())``).
        """
        pairs = [(p, m) for p, m in zip(self.model_params, self.master_params) if m.grad is not None]
        for p, m in pairs:
            p.grad = m.grad.to(p.dtype)
        self._shown = [(p.grad, p.grad._version) for p, _ in pairs]

    def check_model_grads_untouched(self) -> None:
        shown, self._shown = self._shown, []
        written = any(g._version != v for g, v in shown)
        for p in self.model_params:
            p.grad = None
        if written:
            raise MisuseError(
                "the model's gradients were changed after mp.unscale_() (e.g. torch.nn.utils.clip_grad_norm_("
                "model.parameters(), ...)); in master-* modes they are half copies for reading and the optimizer "
                "steps the fp32 master gradients. Clip with mp.clip_grad_norm_(max_norm) or "
                "mp.step(optimizer, max_grad_norm=...)"
            )

    def master_to_model(self) -> None:
        """Copy the fp32 masters into the half model parameters (round to nearest)."""
        if self.model_params:
            with no_grad():
                torch._foreach_copy_(self.model_params, self.master_params)
        self._versions = [p._version for p in self.model_params]

    def drop_master_grads(self) -> None:
        for m in self.master_params:
            m.grad = None

    def sync_from_model(self) -> int:
        """Take into the masters what was written into the model since the last sync; the count of tensors.

        A changed parameter's master becomes the full-precision value a ``load_state_dict`` gave it
        (:attr:`pending`), else the model's half value -- unless that half value is exactly the master
        rounded (a half checkpoint of this very run loaded after ``mp.load_state_dict``): then the
        master already holds it, with more precision, and is kept.
        """
        self.check_where()
        versions = [p._version for p in self.model_params]
        if versions == self._versions:  # (every step: nothing was written)
            self.pending = {}
            return 0
        changed = [i for i, (v, w) in enumerate(zip(versions, self._versions)) if v != w]
        pending, self.pending = self.pending, {}
        with no_grad():
            for i in changed:
                p, m = self.model_params[i], self.master_params[i]
                exact = pending.get(id(p))
                if exact is not None and exact.shape == m.shape:
                    m.copy_(exact)
                elif not torch.equal(m.to(p.dtype), p):
                    m.copy_(p)
        self._record()
        return len(changed)

    # -- checkpointing ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"master_params": [m.detach().clone() for m in self.master_params]}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("master_params") if isinstance(state, dict) else None
        if not isinstance(saved, (list, tuple)) or not all(isinstance(s, torch.Tensor) for s in saved):
            raise AmpbenchError("MixedPrecision checkpoint: the master weights entry is not a list of tensors; "
                                "pass what mp.state_dict() returned")
        if len(saved) != len(self.master_params):
            raise AmpbenchError(
                f"checkpoint holds {len(saved)} master weights, this optimizer has {len(self.master_params)}: "
                "was it saved from the same model and optimizer?"
            )
        for m, s in zip(self.master_params, saved):
            if m.shape != s.shape:
                raise AmpbenchError(f"master weight shape mismatch: checkpoint {tuple(s.shape)} vs {tuple(m.shape)}")
            m.copy_(s)
        self.pending = {}
        self.master_to_model()
