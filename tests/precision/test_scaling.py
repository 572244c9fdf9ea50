"""Loss scaling: the 2017 paper's effect, parity with torch.amp.GradScaler, hysteresis, floor, clamps."""

import copy
import itertools

import pytest
import torch
from torch import nn

from ampbench import LossScaleConfig, MixedPrecision, TrainingDivergedError
from ampbench.errors import AmpbenchError

from ..conftest import batches, make_run

INF_STEPS = {2, 3, 7, 8, 9, 15}  # steps (0-based) whose loss is multiplied by inf


def _tiny_grad_problem(seed: int = 0):
    """A regression whose gradients sit below fp16's smallest subnormal, 2^-24 (~6e-8)."""
    torch.manual_seed(seed)
    x = torch.randn(256, 16)
    y = x @ torch.randn(16, 1)
    model = nn.Linear(16, 1, bias=False)
    opt = torch.optim.Adam(model.parameters(), lr=5e-2)
    return model, opt, x, y


def _train_tiny_grads(loss_scale, steps=80):
    model, opt, x, y = _tiny_grad_problem()
    w0 = model.weight.detach().clone().float()
    mp = MixedPrecision("master-fp16", loss_scale=loss_scale)
    model, opt = mp.setup(model, opt)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with mp.autocast():
            mse = ((model(x) - y) ** 2).mean()
            loss = mse * 2.0**-28  # dL/d(out) ~ 2^-33: far below 2^-24
        mp.backward(loss)
        mp.step(opt)
        losses.append(mse.item())
    return model, mp, w0, losses


def test_gradients_below_fp16_subnormal_do_not_learn_without_scaling():
    model, mp, w0, losses = _train_tiny_grads("none")
    # The half gradients flushed to zero: the fp32 master weights never moved.
    assert torch.equal(mp.master_params()[0].detach(), w0)
    assert losses[-1] == losses[0]


def test_gradients_below_fp16_subnormal_learn_with_dynamic_scaling():
    model, mp, w0, losses = _train_tiny_grads("dynamic")
    assert not torch.equal(mp.master_params()[0].detach(), w0)
    assert losses[-1] < 0.1 * losses[0]
    assert mp.totals["skipped_steps"] == 0


def _run_ours(config: LossScaleConfig, steps: int = 20):
    model, opt = make_run()
    mp = MixedPrecision("amp-fp16", loss_scale=config)
    model, opt = mp.setup(model, opt)
    scales, skipped = [], []
    for i, (x, y) in enumerate(batches(steps)):
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x), y)
        if i in INF_STEPS:
            loss = loss * float("inf")
        mp.backward(loss)
        stepped = mp.step(opt)
        scales.append(mp.last_step.scale)
        skipped.append(not stepped)
    return model, scales, skipped


def _run_gradscaler(growth_interval: int, steps: int = 20):
    """The loop every tutorial shows: autocast + torch.amp.GradScaler."""
    model, opt = make_run()
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    scales, skipped = [], []
    for i, (x, y) in enumerate(batches(steps)):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        if i in INF_STEPS:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        scales.append(before)
        skipped.append(scaler.get_scale() < before)
    return model, scales, skipped


def test_dynamic_scaling_matches_gradscaler_trajectory():
    ours_model, ours_scales, ours_skipped = _run_ours(LossScaleConfig(growth_interval=3, max_scale=2.0**40))
    ref_model, ref_scales, ref_skipped = _run_gradscaler(growth_interval=3)
    assert ours_scales == ref_scales
    assert ours_skipped == ref_skipped
    assert sum(ours_skipped) == len(INF_STEPS)
    assert any(b > a for a, b in itertools.pairwise(ours_scales))  # growth happened too
    for a, b in zip(ours_model.parameters(), ref_model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("precision,loss_scale", [
    ("amp-fp16", "dynamic"), ("master-fp16", "dynamic"), ("amp-bf16", "static:8"),
    # pure-fp16 with Adam diverges (eps=1e-8 is 0 in fp16): use SGD with momentum, and a scale
    # low enough that fp16 gradients do not overflow on the first steps
    ("pure-fp16", LossScaleConfig(init_scale=2.0**8)),
])
def test_skipped_step_leaves_weights_and_optimizer_state_unchanged(precision, loss_scale):
    model, opt = make_run(opt="sgd" if precision == "pure-fp16" else "adam")
    mp = MixedPrecision(precision, loss_scale=loss_scale)
    model, opt = mp.setup(model, opt)
    data = batches(3)
    for i, (x, y) in enumerate(data):
        if i == 2:
            params_before = copy.deepcopy(model.state_dict())
            masters_before = [m.detach().clone() for m in mp.master_params()]
            state_before = copy.deepcopy(opt.state_dict())
            scale_before = mp.scale
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x), y)
        mp.backward(loss * float("inf") if i == 2 else loss)
        stepped = mp.step(opt)
        assert bool(stepped) == (i != 2)
    assert mp.last_step.skipped and mp.totals["skipped_steps"] == 1
    for k, v in model.named_parameters():  # (BN running stats do move: the forward pass ran)
        assert torch.equal(v, params_before[k]), k
    for a, b in zip(mp.master_params(), masters_before):
        assert torch.equal(a, b)
    after = opt.state_dict()["state"]
    for idx, st in state_before["state"].items():
        for k, v in st.items():
            assert torch.equal(torch.as_tensor(after[idx][k]), torch.as_tensor(v)), (idx, k)
    if mp.loss_scale.kind == "static":
        assert mp.scale == scale_before == 8.0
    else:
        assert mp.scale == scale_before / 2


def _scaler_and_steps(config: LossScaleConfig, pattern: list[bool]):
    """Drive a LossScaler directly with an overflow pattern; return scales after each step."""
    model, opt = make_run()
    mp = MixedPrecision("amp-fp16", loss_scale=config)
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    out = []
    for overflow in pattern:
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x), y)
        mp.backward(loss * float("inf") if overflow else loss)
        mp.step(opt)
        out.append(mp.scale)
    return out, mp


def test_hysteresis_tolerates_overflows_before_backing_off():
    cfg = LossScaleConfig(init_scale=1024.0, hysteresis=3, growth_interval=2)
    scales, mp = _scaler_and_steps(cfg, [True, True, True, True, False, False, True])
    # two overflows tolerated, the third backs off, the fourth too (hysteresis used up);
    # two clean steps grow the scale and re-arm hysteresis, so the next overflow is tolerated.
    assert scales == [1024, 1024, 512, 256, 256, 512, 512]
    assert mp.totals["skipped_steps"] == 5


def test_scale_floor_raises_training_diverged():
    cfg = LossScaleConfig(init_scale=4.0, min_scale=1.0)
    with pytest.raises(TrainingDivergedError, match=r"loss scale fell below 1 at step 3"):
        _scaler_and_steps(cfg, [True] * 5)


def test_a_back_off_below_the_floor_stops_at_it_and_names_the_step():
    """A floor that is not a power of two (min_scale 3): the back-off from 4 to 2 stops the scale at 3 (one clamp for
    the ceiling and the floor) and the divergence names step 1 -- with any optimizer: a fused one reads it later."""
    for fused in (False, True):
        model, opt = make_run()
        if fused:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        mp = MixedPrecision("amp-fp16", loss_scale=LossScaleConfig(init_scale=4.0, min_scale=3.0))
        model, opt = mp.setup(model, opt)
        x, y = batches(1)[0]
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x), y)
        mp.backward(loss * float("inf"))
        with pytest.raises(TrainingDivergedError, match=r"fell below 3 at step 1 "):
            mp.step(opt)
            assert fused and mp.last_step.next_scale == 3.0  # (a fused step raises at the next check)
            mp.check_divergence()


def test_scale_never_grows_past_max():
    cfg = LossScaleConfig(init_scale=4.0, growth_interval=1, max_scale=16.0)
    scales, _ = _scaler_and_steps(cfg, [False] * 5)
    assert scales == [8, 16, 16, 16, 16]


def test_static_scale_stays_fixed_and_skips_overflow():
    scales, mp = _scaler_and_steps(LossScaleConfig.parse(128), [False, True, False])
    assert scales == [128, 128, 128]
    assert mp.totals["skipped_steps"] == 1


@pytest.mark.parametrize("spec,kind,value,hyst", [
    (None, "dynamic", 2.0**16, 1), ("none", "none", 1.0, 1), ("dynamic", "dynamic", 2.0**16, 1),
    ("hysteresis", "dynamic", 2.0**16, 2), ("hysteresis:4", "dynamic", 2.0**16, 4),
    ("static:512", "static", 512.0, 1), (1024, "static", 1024.0, 1), ("256", "static", 256.0, 1),
])
def test_parse_loss_scale_specs(spec, kind, value, hyst):
    cfg = LossScaleConfig.parse(spec)
    assert (cfg.kind, cfg.init_scale, cfg.hysteresis) == (kind, value, hyst)


@pytest.mark.parametrize("spec", ["dynamo", "static:x", -1.0, True, "none:3"])
def test_bad_loss_scale_specs_say_what_is_valid(spec):
    with pytest.raises(AmpbenchError, match="loss_scale"):
        MixedPrecision("amp-fp16", loss_scale=spec)


def test_defaults_follow_gradscaler():
    cfg = LossScaleConfig()
    ref = torch.amp.GradScaler("cpu")
    assert cfg.init_scale == ref.get_scale() == 2.0**16
    assert cfg.growth_factor == ref.get_growth_factor()
    assert cfg.backoff_factor == ref.get_backoff_factor()
    assert cfg.growth_interval == ref.get_growth_interval()
    assert cfg.max_scale == 2.0**24


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("fused", [True, False])
def test_finite_check_records_nothing_on_gradients_that_require_grad(fused):
    """backward(create_graph=True) (a gradient penalty) leaves gradients that require grad: the inf/NaN check runs on
    them without autograd recording it (their grad_fn is the backward's) -- the engine enters no no_grad() for it --
    and a NaN among them still skips the step."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=fused)
    mp = MixedPrecision("fp32")
    model, opt = mp.setup(model, opt)
    x = torch.randn(8, 4)
    mp.backward(model(x).pow(2).sum(), create_graph=True)
    fns = [p.grad.grad_fn for p in model.parameters()]
    assert all(p.grad.requires_grad for p in model.parameters())
    assert mp.step(opt)
    assert [p.grad.grad_fn for p in model.parameters()] == fns
    before = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad(set_to_none=True)
    mp.backward(model(x).pow(2).sum() * float("nan"), create_graph=True)
    assert not mp.step(opt)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


# -- gradients GradScaler's kernel cannot take (bf16 on CUDA) ------------------------------------------------------
def _without_bf16_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU as CUDA is: GradScaler's kernel takes fp32/fp64/fp16 only (on CUDA, bf16 raises 'not implemented')."""
    from ampbench.precision import scaling

    kernel = torch._amp_foreach_non_finite_check_and_unscale_

    def cuda_like(grads, found_inf, inv_scale):
        if grads[0].dtype == torch.bfloat16:
            raise NotImplementedError("\"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'")
        return kernel(grads, found_inf, inv_scale)

    monkeypatch.setattr(torch, "_amp_foreach_non_finite_check_and_unscale_", cuda_like)
    monkeypatch.setitem(scaling._KERNEL_DTYPES, "cpu", (torch.float32, torch.float64, torch.float16))


@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("inv_scale", [None, 0.25])
def test_check_and_unscale_without_the_kernel_matches_it(monkeypatch, bad, inv_scale):
    """The oracle is GradScaler's kernel itself, which takes bf16 on the CPU: same gradients after, same flag."""
    from ampbench.precision.scaling import check_and_unscale_

    torch.manual_seed(0)
    grads = [torch.randn(5, 3).bfloat16() * 1e3, torch.randn(7).bfloat16()]
    if bad is not None:
        grads[1][4] = bad
    ref = [g.clone() for g in grads]
    ref_flag = torch.zeros(())
    torch._amp_foreach_non_finite_check_and_unscale_(ref, ref_flag, torch.tensor(inv_scale or 1.0))
    _without_bf16_kernel(monkeypatch)
    flag = torch.zeros(())
    check_and_unscale_(grads, flag, None if inv_scale is None else torch.tensor(inv_scale))
    assert flag.item() == ref_flag.item() == (0.0 if bad is None else 1.0)
    for a, b in zip(grads, ref):
        assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    check_and_unscale_([torch.ones(3).bfloat16()], flag, None)  # a clean group after a bad one: the flag stays set
    assert flag.item() == ref_flag.item()


@pytest.mark.parametrize("loss_scale", ["none", "dynamic"])
def test_pure_bf16_skips_a_nan_step_where_the_kernel_lacks_bf16(monkeypatch, loss_scale):
    """pure-bf16's gradients are bf16: on CUDA they take the fallback check (found on an H200, where every pure-bf16
    step raised); a NaN step is skipped, a clean one applied, and a scale backs off as with the kernel."""
    _without_bf16_kernel(monkeypatch)
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    mp = MixedPrecision("pure-bf16", loss_scale=loss_scale)
    model, opt = mp.setup(model, opt)
    x = torch.randn(8, 4).bfloat16()
    mp.backward(model(x).float().pow(2).sum())
    assert mp.step(opt)
    before = [p.detach().clone() for p in model.parameters()]
    scale = mp.scale
    opt.zero_grad(set_to_none=True)
    mp.backward(model(x).float().pow(2).sum() * float("nan"))
    assert not mp.step(opt)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert mp.totals["skipped_steps"] == 1 and mp.scale == (scale / 2 if loss_scale == "dynamic" else scale)
