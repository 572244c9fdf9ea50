"""fused_step.FusedStep: a fused Adam/AdamW step without optimizer.step()'s Python. Oracle: optimizer.step() on a
twin (same parameters, same gradients, same state): every parameter and state tensor equal bit for bit after each
step, whatever the options, groups, dtypes, flags, LR schedules and loads; and where the direct step would not be
exactly optimizer.step(), it declines (returns False) so the caller calls optimizer.step()."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ampbench import MixedPrecision
from ampbench.measure.syncs import HostSyncCounter
from ampbench.precision.fused_step import FusedStep


def _model(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).to(dtype)


def _grads(model: nn.Module, step: int, bad: bool = False) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    grads = [torch.randn(p.shape, generator=g).to(p.dtype) for p in model.parameters()]
    if bad:
        grads[1].view(-1)[0] = float("nan")
    return grads


def _set(model: nn.Module, grads: list[torch.Tensor]) -> None:
    for p, g in zip(model.parameters(), grads, strict=True):
        p.grad = g.clone()


def _equal(a: torch.optim.Optimizer, b: torch.optim.Optimizer, ma: nn.Module, mb: nn.Module) -> None:
    for pa, pb in zip(ma.parameters(), mb.parameters(), strict=True):
        assert torch.equal(pa, pb)
        sa, sb = a.state[pa], b.state[pb]
        assert sa.keys() == sb.keys()
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


def _twins(make: Callable[[nn.Module], torch.optim.Optimizer], dtype: torch.dtype = torch.float32):  # type: ignore[no-untyped-def]
    ma, mb = _model(dtype), _model(dtype)
    return ma, make(ma), mb, make(mb)


def _torch_step(opt: torch.optim.Optimizer, found: torch.Tensor | None) -> None:
    if found is None:
        opt.step()
        return
    opt.found_inf, opt.grad_scale = found, None  # type: ignore[attr-defined]  (as GradScaler hands them over)
    try:
        opt.step()
    finally:
        del opt.found_inf, opt.grad_scale  # type: ignore[attr-defined]


def _step_twins(ma: nn.Module, a: torch.optim.Optimizer, mb: nn.Module, b: torch.optim.Optimizer, direct: FusedStep,
                step: int, found: torch.Tensor | None = None, bad: bool = False) -> bool:
    """The same gradients on both; ``a`` through optimizer.step(), ``b`` directly where it takes the step (else
    optimizer.step()); both hold the same bits after. Whether the direct step took it."""
    grads = _grads(ma, step, bad)
    _set(ma, grads)
    _set(mb, grads)
    _torch_step(a, found)
    took = direct.step(found)
    if not took:
        _torch_step(b, found)
    _equal(a, b, ma, mb)
    return took


OPTIMIZERS = {
    "adamw": lambda m: torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True),
    "adam": lambda m: torch.optim.Adam(m.parameters(), lr=1e-2, fused=True),
    "adam-decay": lambda m: torch.optim.Adam(m.parameters(), lr=1e-2, weight_decay=0.1, fused=True),
    "adamw-amsgrad-maximize": lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.8, 0.9), eps=1e-6,
                                                          weight_decay=0.05, amsgrad=True, maximize=True, fused=True),
    "sgd": lambda m: torch.optim.SGD(m.parameters(), lr=0.1, fused=True),
    "sgd-momentum": lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3, fused=True),
    "sgd-nesterov-maximize": lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.8, nesterov=True,
                                                       maximize=True, fused=True),
    "sgd-dampening-groups": lambda m: torch.optim.SGD([{"params": list(m.parameters())[:2], "momentum": 0.5},
                                                       {"params": list(m.parameters())[2:]}],
                                                      lr=0.1, dampening=0.1, fused=True),
    "two-groups": lambda m: torch.optim.AdamW([{"params": list(m.parameters())[:2], "lr": 1e-2},
                                               {"params": list(m.parameters())[2:], "lr": 1e-3,
                                                "weight_decay": 0.0}], fused=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("with_flag", [False, True])
def test_steps_as_optimizer_step_does(name: str, with_flag: bool) -> None:
    ma, a, mb, b = _twins(OPTIMIZERS[name])
    direct = FusedStep(b)
    taken = []
    for step in range(6):
        bad = with_flag and step in (2, 3)
        found = torch.tensor(1.0 if bad else 0.0) if with_flag else None
        taken.append(_step_twins(ma, a, mb, b, direct, step, found, bad))
    assert taken == [False] + [True] * 5  # (the first step makes the state: torch's)
    if with_flag and "adam" in name:  # the skipped steps were not counted
        assert int(b.state[next(mb.parameters())]["step"]) == 4


def test_bf16_parameters() -> None:
    ma, a, mb, b = _twins(OPTIMIZERS["adamw"], torch.bfloat16)
    direct = FusedStep(b)
    assert [_step_twins(ma, a, mb, b, direct, step) for step in range(4)] == [False, True, True, True]


def test_lr_scheduler_marks_the_step_and_its_lr_is_used() -> None:
    ma, a, mb, b = _twins(OPTIMIZERS["adamw"])
    sa = torch.optim.lr_scheduler.StepLR(a, step_size=2, gamma=0.5)
    sb = torch.optim.lr_scheduler.StepLR(b, step_size=2, gamma=0.5)
    direct = FusedStep(b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ("Detected call of lr_scheduler.step() before optimizer.step()")
        for step in range(6):
            assert _step_twins(ma, a, mb, b, direct, step) == (step > 0)
            sa.step()
            sb.step()
    assert b._opt_called  # type: ignore[attr-defined]
    assert a.param_groups[0]["lr"] == b.param_groups[0]["lr"] == 1e-2 * 0.5 ** 3


def test_load_state_dict_and_add_param_group_remake_the_lists() -> None:
    ma, a, mb, b = _twins(OPTIMIZERS["adamw"])
    direct = FusedStep(b)

    def step(i: int) -> bool:
        return _step_twins(ma, a, mb, b, direct, i)

    step(0)
    assert step(1)
    saved = copy.deepcopy(a.state_dict())
    step(2)
    a.load_state_dict(saved)
    b.load_state_dict(copy.deepcopy(saved))  # (new state tensors: lists made from the old ones would step those)
    assert step(3)
    extra_a, extra_b = nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))
    a.add_param_group({"params": [extra_a], "lr": 0.1})
    b.add_param_group({"params": [extra_b], "lr": 0.1})
    extra_a.grad, extra_b.grad = torch.full((4,), 0.5), torch.full((4,), 0.5)
    assert not step(4)  # the new parameter has no state yet: torch's step makes it
    extra_a.grad, extra_b.grad = torch.full((4,), -0.5), torch.full((4,), -0.5)
    assert step(5)
    assert torch.equal(extra_a, extra_b)


def test_state_replaced_by_hand_remakes_the_lists() -> None:
    """The resume recipe that moves an optimizer's state by reassigning its tensors (``state[k] = v.to(device)``), and
    a parameter's whole state swapped: the direct step steps the tensors the optimizer holds now."""
    ma, a, mb, b = _twins(OPTIMIZERS["adamw"])
    direct = FusedStep(b)
    for i in range(5):
        assert _step_twins(ma, a, mb, b, direct, i) == (i > 0)
        if i == 1:
            for state in b.state.values():
                for k, v in state.items():
                    state[k] = v.clone()
        if i == 2:
            p = next(mb.parameters())
            b.state[p] = {k: v.clone() for k, v in b.state[p].items()}


def test_a_parameter_without_a_gradient_declines() -> None:
    ma, a, mb, b = _twins(OPTIMIZERS["adamw"])
    direct = FusedStep(b)
    for step in range(2):
        _set(mb, _grads(mb, step))
        if not direct.step(None):
            b.step()
    _set(mb, _grads(mb, 2))
    next(iter(mb.parameters())).grad = None  # (torch steps the others only)
    assert not direct.step(None)


def _subclass(m: nn.Module) -> torch.optim.Optimizer:
    class Mine(torch.optim.AdamW):
        pass

    return Mine(m.parameters(), fused=True)


DECLINES: dict[str, Callable[[nn.Module, torch.optim.Optimizer], object]] = {
    "post hook": lambda m, o: o.register_step_post_hook(lambda *a: None),
    "pre hook": lambda m, o: o.register_step_pre_hook(lambda *a: None),
    "global hook": lambda m, o: register_optimizer_step_pre_hook(lambda *a: None),
    "lr tensor": lambda m, o: o.param_groups[0].__setitem__("lr", torch.tensor(1e-3)),
    "patched step": lambda m, o: setattr(o, "step", o.step),
    "not fused": lambda m, o: o.param_groups[0].__setitem__("fused", None),
}


@pytest.mark.parametrize("what", sorted(DECLINES))
def test_declines_where_optimizer_step_does_more(what: str) -> None:
    m = _model()
    opt = OPTIMIZERS["adamw"](m)
    direct = FusedStep(opt)
    _set(m, _grads(m, 0))
    opt.step()
    _set(m, _grads(m, 1))
    assert direct.step(None)
    handle = DECLINES[what](m, opt)
    try:
        _set(m, _grads(m, 2))
        assert not direct.step(None)
    finally:
        if hasattr(handle, "remove"):
            handle.remove()  # type: ignore[union-attr]


def test_declines_other_optimizers_and_under_the_profiler() -> None:
    m = _model()
    for opt in (_subclass(m), torch.optim.AdamW(m.parameters(), foreach=True),
                torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.Adagrad(m.parameters(), fused=True)):
        _set(m, _grads(m, 0))
        opt.step()
        assert not FusedStep(opt).step(None)
    opt = OPTIMIZERS["adamw"](m)
    direct = FusedStep(opt)
    _set(m, _grads(m, 0))
    opt.step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        assert not direct.step(None)  # (the trace keeps torch's Optimizer.step#AdamW.step)
    assert direct.step(None)


@pytest.mark.parametrize("name", ["fp32", "amp-bf16", "master-bf16", "amp-fp16"])
def test_the_engine_trains_the_same_bits_either_way(name: str) -> None:
    """MixedPrecision's step (direct, the default) against direct_step=False (optimizer.step()), a NaN step among
    them: the same weights, optimizer state and skipped steps."""
    runs = []
    for direct in (True, False):
        model = _model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
        mp = MixedPrecision(name, direct_step=direct)
        model, opt = mp.setup(model, opt)
        g = torch.Generator().manual_seed(3)
        for step in range(6):
            opt.zero_grad(set_to_none=True)
            with mp.autocast():
                loss = model(torch.randn(4, 6, generator=g)).square().mean()
            if step == 3:
                loss = loss * float("nan")
            mp.backward(loss)
            with HostSyncCounter() as counter:
                mp.step(opt)
            labelled = any(op.startswith("profiler._record_function") for op in counter.ops)
            assert labelled == (not direct or step == 0), (step, direct)  # (torch's step labels itself)
        runs.append((model, opt, mp.totals["skipped_steps"]))
    (ma, a, skipped_a), (mb, b, skipped_b) = runs
    assert skipped_a == skipped_b >= 1
    for pa, pb in zip(ma.parameters(), mb.parameters(), strict=True):
        assert torch.equal(pa, pb)
    for (pa, sa), (pb, sb) in zip(a.state.items(), b.state.items(), strict=True):
        assert torch.equal(pa, pb) and sa.keys() == sb.keys()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name", ["amp-fp16", "master-fp16"])
def test_a_skipped_first_sgd_step_leaves_no_momentum(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's fused SGD makes its momentum buffers with empty_like at its first step and skips the kernel when that
    step overflowed: the buffers keep whatever memory they got (on CUDA, freed blocks holding inf/NaN: the lent H200's
    ResNet-50 diverged in amp-fp16). Here empty_like gives NaN, as such a block would. Oracle: torch's own loop --
    non-fused SGD stepped by torch.amp.GradScaler, which skips on the host -- on the same data and scales: no state
    after the skipped step, then the same weights and buffers (to fused-vs-for-loop rounding), all finite."""
    nan_empty = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, *a, **k: nan_empty(t, *a, **k).fill_(float("nan"))
                        if (k.get("dtype") or t.dtype).is_floating_point else nan_empty(t, *a, **k))

    def batches() -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(5)
        return [torch.randn(4, 6, generator=g) for _ in range(5)]

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, fused=True)
    mp = MixedPrecision(name)
    model, opt = mp.setup(model, opt)
    for step, x in enumerate(batches()):
        opt.zero_grad(set_to_none=True)
        with mp.autocast():
            loss = model(x).float().square().mean()
        mp.backward(loss * float("inf") if step == 0 else loss)
        mp.step(opt)
        if step == 0:
            assert not opt.state, "a skipped first step kept momentum buffers"
    assert mp.totals["skipped_steps"] == 1
    masters = mp.master_params(opt) if name.startswith("master") else list(model.parameters())
    for p in masters:
        assert torch.isfinite(p).all() and torch.isfinite(opt.state[p]["momentum_buffer"]).all()
    if name.startswith("master"):
        return  # (the oracle below is AMP's loop; master-fp16 is held to the contract: nothing kept, all finite)
    ref = _model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, foreach=False)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    for step, x in enumerate(batches()):
        ref_opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", torch.float16):
            loss = ref(x).float().square().mean()
        scaler.scale(loss * float("inf") if step == 0 else loss).backward()
        scaler.step(ref_opt)
        scaler.update()
    for p, q in zip(masters, ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[p]["momentum_buffer"], ref_opt.state[q]["momentum_buffer"],
                                   rtol=1e-5, atol=1e-6)
