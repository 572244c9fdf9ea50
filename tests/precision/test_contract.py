"""Shared contract every registered precision mode must honour (cf. Lightning's test_all.py)."""

import pytest
import torch
from torch.nn import functional as F

from ampbench import MixedPrecision
from ampbench.precision import get, list_precisions, supported

from ..conftest import batches, make_run

pytestmark = pytest.mark.isa  # run again under ONEDNN_MAX_CPU_ISA=AVX2 by make test

CPU_MODES = [n for n in list_precisions() if supported(n, "cpu").ok]


def test_every_mode_is_either_runnable_or_refused_with_a_reason():
    for name in list_precisions():
        s = supported(name, "cpu")
        assert s.ok or s.reason, name


@pytest.mark.parametrize("name", CPU_MODES)
def test_recipe_declares_itself(name):
    r = get(name)
    assert r.summary and r.name == name
    assert r.param_dtype in (torch.float32, torch.float16, torch.bfloat16)
    assert r.default_loss_scale in ("none", "dynamic")
    if r.master_weights:
        assert r.param_dtype != torch.float32 and r.keeps_norm_fp32


@pytest.mark.parametrize("name", CPU_MODES)
def test_trains_checkpoints_and_reports(name, tmp_path):
    model, opt = make_run(opt="sgd", lr=0.05)  # SGD: pure-fp16 + Adam eps underflow is a known trap
    mp = MixedPrecision(name)
    model, opt = mp.setup(model, opt)
    recipe = get(name)
    assert model.fc1.weight.dtype == recipe.param_dtype
    losses = []
    for x, y in batches(6):
        opt.zero_grad()
        with mp.autocast():
            out = model(x)
            loss = F.cross_entropy(out, y)
        mp.backward(loss)
        assert isinstance(bool(mp.step(opt)), bool)  # (a StepRecord, true when it stepped)
        losses.append(loss.item())
        assert torch.isfinite(out).all()
    assert all(torch.isfinite(torch.tensor(losses)))
    assert mp.totals["steps"] == 6
    assert mp.last_step.scale == (2.0**16 if recipe.default_loss_scale == "dynamic" else 1.0)
    state = mp.state_dict()
    torch.save(state, tmp_path / "mp.pt")
    loaded = torch.load(tmp_path / "mp.pt", weights_only=True)
    assert loaded["precision"] == name
    fresh_model, fresh_opt = make_run(opt="sgd", lr=0.05)
    mp2 = MixedPrecision(name)
    mp2.setup(fresh_model, fresh_opt)
    mp2.load_state_dict(loaded)
    assert mp2.totals["steps"] == 6
    if recipe.master_weights:
        assert torch.equal(fresh_model.fc1.weight, model.fc1.weight)
