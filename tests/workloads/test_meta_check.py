"""A run's cells check a module's forward on a meta copy (``workloads/meta_check.py``): the workload each builds is the
one the real check builds (the oracle: the same build outside the run's context), the model is left as built, the real
forward runs where the copy cannot stand in, and bad input says the same line."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from ampbench.bench import CellSpec
from ampbench.errors import AmpbenchError
from ampbench.frameworks.torch import cell
from ampbench.workloads import create_user_workload, meta_check
from ampbench.workloads.base import seeded
from ampbench.workloads.meta_check import checked_by_the_run, meta_copy
from tests.workloads.test_user_models import SHAPES

M = str(Path(__file__).with_name("user_models.py"))
HERE = __name__
"""The models below as ``--model`` names them (``package.module``: this module, its :data:`CALLS` shared)."""
CALLS: list[str] = []
"""The device of each forward of the models below (the real check: cpu; the meta copy's: meta)."""


class Counted(nn.Module):
    """An MLP with a BatchNorm (the real check, in train mode, steps its running statistics) that records where each
    forward ran."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append(x.device.type)
        return self.body(x)


class Lazy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.LazyLinear(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append(x.device.type)
        return self.head(x)


class ReadsAValue(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append(x.device.type)
        return self.head(x) * (1.0 if float(x.abs().sum()) >= 0 else 2.0)  # (a value read: meta has none)


class GrowsOnFirstCall(nn.Module):
    """Registers a buffer on its first forward (a cache made on first use)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS.append(x.device.type)
        if not hasattr(self, "scale"):
            self.register_buffer("scale", torch.ones(3, device=x.device))
        return self.head(x) * self.scale


def counted() -> nn.Module:
    return Counted()


def lazy() -> nn.Module:
    return Lazy()


def reads_a_value() -> nn.Module:
    return ReadsAValue()


def grows_on_first_call() -> nn.Module:
    return GrowsOnFirstCall()


def calls() -> list[str]:
    return CALLS


def build(factory: str, checked: bool, **kw: Any) -> Any:
    calls().clear()
    kw = {"input_shape": "6", "num_classes": 3, "preset": "tiny", **kw}
    if checked:
        with checked_by_the_run():
            return create_user_workload(f"{HERE}:{factory}", **kw)
    return create_user_workload(f"{HERE}:{factory}", **kw)


def test_the_meta_check_runs_on_a_copy_and_leaves_the_model_as_built() -> None:
    real = build("counted", False)
    assert calls() == ["cpu"] and int(real.model.body[1].num_batches_tracked) == 1  # (the real check stepped the norm)
    meta = build("counted", True)
    assert calls() == ["meta"]
    with seeded(0):  # (the oracle: the factory's model as the build seeds it, never called)
        fresh = Counted()
    for (name, a), (_, b) in zip(meta.model.state_dict().items(), fresh.state_dict().items(), strict=True):
        assert a.device.type == "cpu" and torch.equal(a, b), name
    assert not torch.equal(real.model.body[1].running_mean, fresh.body[1].running_mean)
    assert meta.description == real.description and meta.loss_fn is real.loss_fn
    assert meta.metric is not None and real.metric is not None and meta.metric.name == real.metric.name


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_builds_the_workload_the_real_check_builds(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    factory, _, kw, _, _ = SHAPES[shape]
    ran: list[bool] = []
    forward = meta_check.meta_forward

    def spied(model: nn.Module, call: Any) -> Any:
        out = forward(model, call)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(meta_check, "meta_forward", spied)
    real = create_user_workload(f"{M}:{factory}", preset="tiny", **kw)
    assert ran == []  # (outside a run's cells: the real check)
    with checked_by_the_run():
        meta = create_user_workload(f"{M}:{factory}", preset="tiny", **kw)
    # (on the copy -- but the LM's nn.TransformerEncoder compares its mask with a causal one, a value read: the real check)
    assert ran == [shape != "lm"], shape
    assert type(meta.model).__qualname__ == type(real.model).__qualname__ and meta.description == real.description
    assert meta.loss_fn is real.loss_fn and meta.input_names == real.input_names
    assert (meta.metric.name, meta.metric.higher_is_better) == (real.metric.name, real.metric.higher_is_better)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_a_model_output_s_logits_and_tied_weights_on_the_copy() -> None:
    real = create_user_workload(f"{M}:hf_classifier", input_shape="12", vocab_size=100, num_classes=3, preset="tiny")
    with checked_by_the_run():
        meta = create_user_workload(f"{M}:hf_classifier", input_shape="12", vocab_size=100, num_classes=3,
                                    preset="tiny")
    assert type(meta.model) is type(real.model) and meta.description == real.description
    assert "the logits of its SequenceClassifierOutput" in meta.description
    import transformers

    lm = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    copy = meta_copy(lm)
    assert copy is not None and copy.lm_head.weight is copy.transformer.wte.weight  # (tied, as the model is)
    assert copy.lm_head.weight.device.type == "meta" and lm.lm_head.weight.device.type == "cpu"


@pytest.mark.parametrize("factory", ["lazy", "reads_a_value", "grows_on_first_call"])
def test_the_real_check_runs_where_the_copy_cannot_stand_in(factory: str) -> None:
    """A lazy module (its first forward makes its parameters), a value read, a buffer registered on first use: the
    real forward runs, and the model trains as the real check leaves it."""
    wl = build(factory, True)
    assert calls()[-1] == "cpu"
    assert not any(isinstance(p, nn.parameter.UninitializedParameter) for p in wl.model.parameters())
    assert all(t.device.type == "cpu" for t in [*wl.model.parameters(), *wl.model.buffers()])
    (x,), y = wl.example_batch(4)
    loss = wl.loss_fn(wl.call_model(wl.model, (x,), prepared=True), y)
    loss.backward()
    assert torch.isfinite(loss)


@pytest.mark.parametrize("kw, expect", [
    (dict(input_shape="7"), "forward on a batch of shape (2, 7) failed"),
    (dict(num_classes=4), "output (2, 3) is not (batch, 4) logits"),
])
def test_bad_input_says_the_real_check_s_line(kw: dict[str, Any], expect: str) -> None:
    for checked in (False, True):
        with pytest.raises(AmpbenchError) as e:
            build("counted", checked, **kw)
        assert expect in str(e.value), (checked, str(e.value))
    assert calls()[-1] == "cpu"  # (the meta copy failed too; the real forward said why)


def test_a_run_s_cells_build_on_meta_and_its_validation_for_real(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    built = cell.build_target

    def spied(*a: Any, **k: Any) -> Any:
        seen.append(meta_check.on_meta())
        return built(*a, **k)

    monkeypatch.setattr(cell, "build_target", spied)
    spec = CellSpec.of(workload=None, model=f"{HERE}:counted", preset="tiny", precision="fp32", batch_size=4,
                       device="cpu", measures=("throughput",), steps=2, warmup=1, input_shape="6", num_classes=3)
    cell.validate_cell_inputs(spec)
    verbs = cell.verbs(spec)
    verbs.build(spec, {})
    verbs.build_ahead(spec)
    verbs.estimate_steps(spec)
    assert seen == [False, True, True, True]
    assert not meta_check.on_meta()  # (left as it was)
