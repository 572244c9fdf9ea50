"""What a training step needs of a model, checked before the run: the check refuses exactly what torch itself refuses
at the first step (the oracle: that step, run), and passes what torch trains."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn

from ampbench.data import TensorData
from ampbench.errors import AmpbenchError
from ampbench.measure.trainable import check_trainable, unused_parameters
from ampbench.precision import MixedPrecision
from ampbench.workloads.base import Workload


class Bag(nn.Module):
    def __init__(self, sparse: bool = True) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(50, 8, sparse=sparse)
        self.head = nn.Linear(8, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids))


class NoParams(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :2] * 2


def _frozen_bag() -> nn.Module:
    m = Bag()
    m.bag.requires_grad_(False)  # (a frozen sparse embedding makes no gradient)
    return m


def _frozen_head() -> nn.Module:
    m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    m[0].requires_grad_(False)  # (fine-tuning a head: trains)
    return m


def _torch_steps(model: nn.Module, make: Callable[..., torch.optim.Optimizer]) -> bool:
    """One real step, plain torch: whether torch takes it."""
    ids = torch.randint(0, 50, (4, 3)) if isinstance(model, Bag) else torch.randn(4, 4)
    try:
        opt = make([p for p in model.parameters() if p.requires_grad])
        nn.functional.cross_entropy(model(ids), torch.tensor([0, 1, 0, 1])).backward()
        opt.step()
    except (RuntimeError, ValueError):
        return False
    return True


CASES = {  # name: (model, optimizer)
    "frozen": (lambda: nn.Linear(4, 2).requires_grad_(False), torch.optim.Adam),
    "no parameters": (NoParams, torch.optim.SGD),
    "sparse under Adam": (Bag, torch.optim.Adam),
    "sparse under AdamW": (Bag, torch.optim.AdamW),
    "sparse under SGD": (Bag, torch.optim.SGD),
    "sparse under Adagrad": (Bag, torch.optim.Adagrad),
    "dense under Adam": (lambda: Bag(sparse=False), torch.optim.Adam),
    "frozen sparse embedding under Adam": (_frozen_bag, torch.optim.Adam),
    "a frozen layer": (_frozen_head, torch.optim.Adam),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_check_refuses_what_torch_refuses_at_the_first_step(name: str) -> None:
    build, opt = CASES[name]

    def make(params):  # type: ignore[no-untyped-def]
        return opt(params, lr=0.1)

    torch.manual_seed(0)
    takes = _torch_steps(build(), make)
    if takes:
        check_trainable(build(), make, "m.py:f")
    else:
        with pytest.raises(AmpbenchError, match=r"^m.py:f: (the model has no trainable parameter|EmbeddingBag 'bag' "
                                                r"has sparse=True \(sparse gradients\), which Adam)"):
            check_trainable(build(), make, "m.py:f")
    assert takes == (name not in ("frozen", "no parameters", "sparse under Adam", "sparse under AdamW"))


def test_master_weights_refuse_sparse_gradients_at_setup_and_autocast_steps_them() -> None:
    """master-* copy each gradient into a dense fp32 buffer, which a sparse one cannot be copied into (it failed at
    the first step: "copy_() between dense and sparse Tensors"): refused at setup; amp-* steps them."""
    for mode in ("master-bf16", "master-fp16"):
        model = Bag()
        with pytest.raises(AmpbenchError, match=f"^{mode} keeps dense fp32 master gradients; EmbeddingBag 'bag' "):
            MixedPrecision(mode).setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    model = Bag()
    before = model.bag.weight.detach().clone()
    mp = MixedPrecision("amp-bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt = mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    ids = torch.randint(0, 50, (4, 3))
    with mp.autocast():
        loss = nn.functional.cross_entropy(model(ids).float(), torch.tensor([0, 1, 0, 1]))
    mp.backward(loss)
    assert model.bag.weight.grad.is_sparse
    mp.step()
    changed = (model.bag.weight != before).any(dim=1)
    assert set(changed.nonzero().flatten().tolist()) == set(ids.flatten().tolist())  # (only the rows looked up)


class Heads(nn.Module):
    """A body, the head the loss reads, an aux head it does not, a frozen unused one, and a branch taken only when
    the input's values say so (a value read: a meta copy cannot say which)."""

    def __init__(self, read_values: bool = False) -> None:
        super().__init__()
        self.body, self.head, self.aux = nn.Linear(4, 8), nn.Linear(8, 2), nn.Linear(8, 3)
        self.frozen = nn.Linear(8, 3).requires_grad_(False)
        self.read_values = read_values

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.body(x))
        if self.read_values and bool(x.sum() > 1e9):
            return self.aux(h)[:, :2]
        return self.head(h)


@pytest.mark.parametrize("read_values", [False, True])
def test_the_unused_parameters_are_those_a_real_backward_leaves_without_a_gradient(read_values: bool) -> None:
    model = Heads(read_values)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 0, 1, 0, 1])
    wl = Workload(name="heads", model=model, train_data=TensorData((x,), y), batch_size=2)
    found = unused_parameters(wl)
    nn.functional.cross_entropy(model(x[:2]), y[:2]).backward()  # (the oracle: the real step, on the CPU)
    real = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert real == ["aux.weight", "aux.bias"]
    assert found == (None if read_values else real)  # (a value read: not known, DDP keeps its default)
    assert all(p.device.type == "cpu" for p in model.parameters())  # (the model itself untouched)
