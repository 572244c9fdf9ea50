"""fp32 master weights for a half model (apex O2's ``master_params``, Megatron's ``main_params``).

The optimizer's param groups are rewritten to hold fp32 copies of every half parameter; the half
parameters stay in the model. Per step:
  backward  -> half grads are moved into the fp32 master grads (accumulated in fp32 across
               micro-batches; the half grads are freed)
  step      -> the optimizer (and GradScaler's unscale / inf check) works on fp32 masters only
  after it  -> masters are copied back into the half model parameters; master grads are dropped
The fp32 copies are taken *before* the model is cast, so masters start from the exact fp32 init.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ampbench.errors import AmpbenchError


class MasterWeights:
    """The half<->fp32 parameter pairs of one optimizer."""

    def __init__(self, optimizer: torch.optim.Optimizer, fp32_copies: dict[int, torch.Tensor]) -> None:
        """``fp32_copies``: id(param) -> its fp32 value taken before the model was cast."""
        self.optimizer = optimizer
        self.model_params: list[nn.Parameter] = []
        self.master_params: list[nn.Parameter] = []
        for group in optimizer.param_groups:
            new_params = []
            for p in group["params"]:
                copy = fp32_copies.get(id(p))
                if copy is None or p.dtype == torch.float32:
                    new_params.append(p)  # kept fp32 (norm layers): the optimizer uses it directly
                    continue
                master = nn.Parameter(copy, requires_grad=p.requires_grad)
                if p in optimizer.state:  # move existing optimizer state to the master, in fp32
                    optimizer.state[master] = {
                        k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v
                        for k, v in optimizer.state.pop(p).items()
                    }
                self.model_params.append(p)
                self.master_params.append(master)
                new_params.append(master)
            group["params"] = new_params

        self._buffers: list[torch.Tensor | None] = [None] * len(self.master_params)

    def __len__(self) -> int:
        return len(self.model_params)

    @torch.no_grad()
    def grads_to_master(self) -> None:
        """Move the half gradients into the fp32 master gradients (adding to what is there).

        fp32 buffers are kept across steps and re-attached as ``master.grad``, so the usual
        ``optimizer.zero_grad()`` (set_to_none) costs no reallocation; copies are batched with
        ``torch._foreach_*`` (one kernel per dtype/device group instead of one per tensor).
        """
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
        if fresh_dst:
            torch._foreach_copy_(fresh_dst, fresh_src)
        if acc_dst:
            torch._foreach_add_(acc_dst, [g.float() for g in acc_src])

    @torch.no_grad()
    def master_to_model(self) -> None:
        """Copy the fp32 masters into the half model parameters (round to nearest)."""
        if self.model_params:
            torch._foreach_copy_(self.model_params, self.master_params)

    def drop_master_grads(self) -> None:
        for m in self.master_params:
            m.grad = None

    def state_dict(self) -> dict[str, Any]:
        return {"master_params": [m.detach().clone() for m in self.master_params]}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state["master_params"]
        if len(saved) != len(self.master_params):
            raise AmpbenchError(
                f"checkpoint holds {len(saved)} master weights, this optimizer has {len(self.master_params)}: "
                "was it saved from the same model and optimizer?"
            )
        for m, s in zip(self.master_params, saved):
            if m.shape != s.shape:
                raise AmpbenchError(f"master weight shape mismatch: checkpoint {tuple(s.shape)} vs {tuple(m.shape)}")
            m.copy_(s)
        self.master_to_model()
