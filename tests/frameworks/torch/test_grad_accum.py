"""``ampbench train --grad-accum N`` and ``--max-grad-norm``: N micro-batches per optimizer step train as one batch
of their samples would (oracle: the same steps at N x the batch), each micro-batch weighted by its share, the pure
modes' half sums said; the clip acts on the unscaled gradients of the whole step."""

import json

import pytest
import torch
from torch import nn

from ampbench.data import TensorData
from ampbench.frameworks.torch.command import accumulates_in_half
from ampbench.frameworks.torch.train import TrainConfig, _accumulate, train
from ampbench.precision import MixedPrecision
from ampbench.workloads.base import Workload
from tests.conftest import in_process


def _workload(seed: int = 0, samples: int = 96) -> Workload:
    """An MLP without BatchNorm or dropout (whose micro-batches would see other statistics than the whole batch)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 12, generator=g)
    y = (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long()
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 3))
    return Workload(name="mlp", model=model, train_data=TensorData((x,), y), batch_size=8,
                    make_optimizer=lambda params: torch.optim.SGD(params, lr=0.5, momentum=0.9))  # (Adam's step would
    # hardly see gradients N times too large: SGD's is proportional to them)


def _weights(wl: Workload) -> list[torch.Tensor]:
    return [p.detach().float().clone() for p in wl.model.parameters()]


@pytest.mark.parametrize("precision,tol", [("fp32", 1e-5), ("amp-fp16", 2e-3), ("master-bf16", 1e-2)])
def test_accumulated_steps_train_as_the_whole_batch_would(precision: str, tol: float) -> None:
    """3 steps of 4 micro-batches of 8 against 3 steps of batch 32: the same samples in the same order (the shuffle
    draws one permutation of the split), so the same weights."""
    results = {}
    for accum, batch in ((4, 8), (1, 32)):
        wl = _workload()
        r = train(wl, TrainConfig(precision=precision, epochs=1, batch_size=batch, grad_accum=accum,
                                  max_steps_per_epoch=3, evaluate_train=False))
        results[accum] = (r, _weights(wl))
    (acc, w_acc), (full, w_full) = results[4], results[1]
    assert acc.steps == full.steps == 3 and acc.grad_accum == 4 and full.grad_accum == 1
    assert acc.skipped_steps == full.skipped_steps
    for a, b in zip(w_acc, w_full):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    assert acc.final_loss == pytest.approx(full.final_loss, rel=tol, abs=tol)  # (the step's loss: the whole batch's)


def test_a_short_micro_batch_weighs_by_its_samples() -> None:
    """Micro-batches of 8 and 4 accumulate the gradient of the 12 samples' mean loss (oracle: one backward of it)."""
    wl = _workload()
    x, y = wl.train_data.inputs[0][:12], wl.train_data.targets[:12]
    mp = MixedPrecision("fp32")
    model, _ = mp.setup(wl.model, torch.optim.SGD(wl.model.parameters(), lr=0.1))
    loss = _accumulate(wl, model, mp, [((x[:8],), y[:8]), ((x[8:],), y[8:])], 12)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    whole = wl.loss_fn(model(x), y)
    whole.backward()
    for a, p in zip(got, model.parameters()):
        torch.testing.assert_close(a, p.grad, atol=1e-6, rtol=1e-5)
    assert float(loss.detach()) == pytest.approx(float(whole.detach()), rel=1e-6)


def test_steps_count_whole_optimizer_steps_and_every_sample() -> None:
    wl = _workload(samples=100)  # (13 micro-batches of 8, the last of 4: 4 steps of 3, the 13th left out)
    r = train(wl, TrainConfig(precision="fp32", epochs=2, batch_size=8, grad_accum=3, evaluate_train=False))
    assert r.steps == 8 and r.steps_trained == 8 and r.grad_accum == 3 and r.batch_size == 8


def test_more_micro_batches_than_the_split_holds_is_one_line() -> None:
    with pytest.raises(Exception, match=r"--grad-accum 20: mlp's training split holds 12 batches of 8, fewer than one "
                                        r"optimizer step's 20; give --grad-accum <= 12"):
        train(_workload(), TrainConfig(precision="fp32", epochs=1, grad_accum=20))


def test_pure_modes_sum_their_micro_batches_in_half_and_say_so() -> None:
    """The note's claim, held: pure-bf16's accumulated gradients are bf16; master-bf16's are summed in fp32."""
    assert accumulates_in_half("pure-bf16", 4) == ("--grad-accum 4: pure-bf16 sums the micro-batches' gradients in "
                                                   "bf16, its parameters' dtype (each sum rounded to bf16); "
                                                   "master-bf16 sums them in fp32")
    assert "in fp16" in (accumulates_in_half("pure-fp16", 2) or "")
    for mode in ("fp32", "amp-bf16", "master-bf16", "master-fp16"):
        assert accumulates_in_half(mode, 4) is None
    assert accumulates_in_half("pure-bf16", 1) is None
    wl = _workload()
    x, y = wl.train_data.inputs[0][:16], wl.train_data.targets[:16]
    for mode, dtype in (("pure-bf16", torch.bfloat16), ("master-bf16", torch.float32)):
        wl = _workload()
        mp = MixedPrecision(mode)
        model, opt = mp.setup(wl.model, torch.optim.Adam(wl.model.parameters()))
        _accumulate(wl, model, mp, [((x[:8],), y[:8]), ((x[8:],), y[8:])], 16)
        mp.unscale_(opt)
        stepped = [p for g in opt.param_groups for p in g["params"]]
        assert {p.grad.dtype for p in stepped} == {dtype}, mode


def test_cli_says_the_accumulation(tmp_path) -> None:
    out = tmp_path / "r.json"
    r = in_process("train", "mnist-cnn", "--preset", "tiny", "--precision", "pure-bf16", "--batch-size", "4",
                   "--grad-accum", "2", "--max-steps", "2", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "--grad-accum 2: pure-bf16 sums the micro-batches' gradients in bf16" in r.stdout
    assert "(gradients accumulated over 2 micro-batches of 4: 8 a step)" in r.stdout
    d = json.loads(out.read_text())
    assert d["grad_accum"] == 2 and d["batch_size"] == 4 and d["steps_trained"] == 2


@pytest.mark.parametrize("precision", ["fp32", "amp-fp16"])  # (master-fp16's model holds fp16 roundings of its
@pytest.mark.parametrize("accum", [1, 2])  # masters: tests/precision/test_engine.py clips there, on the masters)
def test_max_grad_norm_clips_the_unscaled_gradients_of_the_whole_step(precision: str, accum: int) -> None:
    """One SGD step (no momentum) moves the weights by exactly lr x max_grad_norm when the clip acts: the clip is on
    the unscaled, accumulated gradients (on amp-fp16's loss-scaled ones the step would be 65,536x shorter)."""
    wl = _workload()
    wl.make_optimizer = lambda params: torch.optim.SGD(params, lr=0.5)
    before = torch.cat([w.flatten() for w in _weights(wl)])
    r = train(wl, TrainConfig(precision=precision, epochs=1, batch_size=16 // accum, grad_accum=accum,
                              max_steps_per_epoch=1, max_grad_norm=0.01, evaluate_train=False))
    assert r.steps == 1 and r.skipped_steps == 0
    moved = float((torch.cat([w.flatten() for w in _weights(wl)]) - before).norm())
    assert moved == pytest.approx(0.5 * 0.01, rel=1e-4)


def test_the_progress_line_says_the_gradient_norm_when_clipping() -> None:
    seen = []
    train(_workload(), TrainConfig(precision="fp32", epochs=1, max_steps_per_epoch=2, max_grad_norm=1.0,
                                   evaluate_train=False), on_progress=seen.append, progress_every=0.0)
    assert seen and all(p.grad_norm is not None and p.grad_norm > 0 for p in seen)
    seen.clear()
    train(_workload(), TrainConfig(precision="fp32", epochs=1, max_steps_per_epoch=2, evaluate_train=False),
          on_progress=seen.append, progress_every=0.0)
    assert seen and all(p.grad_norm is None for p in seen)
