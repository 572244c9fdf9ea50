"""MixedPrecision's call-order contract, accumulation, clipping, several optimizers, checkpoints."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from ampbench import LossScaleConfig, MixedPrecision
from ampbench.errors import AmpbenchError, MisuseError, UnsupportedPrecisionError
from ampbench.precision import LossScaler
from ampbench.precision.tf32_flags import read_tf32, tf32_scope

from ..conftest import TinyNet, batches, make_run


def _setup(precision="amp-fp16", **kw):
    model, opt = make_run()
    mp = MixedPrecision(precision, **kw)
    model, opt = mp.setup(model, opt)
    return model, opt, mp


def _loss(mp, model, x, y):
    with mp.autocast():
        return F.cross_entropy(model(x), y)


# -- misuse -----------------------------------------------------------------------------------
def test_step_before_any_backward():
    model, opt, mp = _setup()
    with pytest.raises(MisuseError, match=r"step\(\) called before any backward\(\).*mp.backward\(loss\)"):
        mp.step(opt)


def test_step_twice_for_one_backward():
    model, opt, mp = _setup()
    x, y = batches(1)[0]
    mp.backward(_loss(mp, model, x, y))
    mp.step(opt)
    with pytest.raises(MisuseError, match="step\\(\\) called twice for one backward"):
        mp.step(opt)


def test_setup_twice():
    model, opt, mp = _setup()
    with pytest.raises(MisuseError, match="already called"):
        mp.setup(model, opt)
    with pytest.raises(MisuseError, match="already set up"):
        MixedPrecision("fp32").setup(model, opt)


def test_optimizer_not_holding_model_params():
    model, _ = make_run()
    other = torch.optim.SGD(TinyNet().parameters(), lr=0.1)
    with pytest.raises(MisuseError, match="not the model's.*model.parameters"):
        MixedPrecision("amp-bf16").setup(model, other)


def test_backward_after_unscale_and_unscale_twice():
    model, opt, mp = _setup()
    x, y = batches(1)[0]
    mp.backward(_loss(mp, model, x, y))
    mp.unscale_(opt)
    with pytest.raises(MisuseError, match="already called"):
        mp.unscale_(opt)
    with pytest.raises(MisuseError, match="backward\\(\\) after unscale_"):
        mp.backward(_loss(mp, model, x, y))
    assert mp.step(opt)


def test_calls_before_setup_and_unknown_optimizer():
    mp = MixedPrecision("amp-fp16")
    with pytest.raises(MisuseError, match="setup"):
        mp.backward(torch.ones(()))
    model, opt, mp = _setup()
    with pytest.raises(MisuseError, match="not passed to setup"):
        mp.step(torch.optim.SGD(TinyNet().parameters(), lr=1))


def test_unsupported_mode_refused_not_replaced():
    model, opt = make_run()
    with pytest.raises(UnsupportedPrecisionError, match="tf32 cannot run on cpu: TF32"):
        MixedPrecision("tf32").setup(model, opt)


def test_bad_constructor_arguments():
    with pytest.raises(AmpbenchError, match="unknown precision"):
        MixedPrecision("fp9")
    with pytest.raises(AmpbenchError, match="keep_fp32 applies"):
        MixedPrecision("amp-fp16", keep_fp32=["fc1"])
    model, opt = make_run()
    with pytest.raises(AmpbenchError, match="keep_fp32='fc3' is not a submodule.*Did you mean 'fc2'"):
        MixedPrecision("master-fp16", keep_fp32=["fc3"]).setup(model, opt)


# -- accumulation and clipping ---------------------------------------------------------------
@pytest.mark.parametrize("precision", ["amp-fp16", "master-fp16", "fp32"])
def test_gradient_accumulation_unscales_once_and_matches_full_batch(precision, monkeypatch):
    calls = []
    orig = LossScaler.unscale_
    monkeypatch.setattr(LossScaler, "unscale_", lambda self, o: (calls.append(1), orig(self, o)))
    x, y = batches(1, batch=64)[0]
    # micro-batches of 32 (each loss / 2) vs one batch of 64; BN statistics differ, so use eval()
    grads = {}
    for mode in ("accumulate", "full"):
        model, opt, mp = _setup(precision)
        model.eval()
        if mode == "accumulate":
            for xs, ys in ((x[:32], y[:32]), (x[32:], y[32:])):
                mp.backward(_loss(mp, model, xs, ys) / 2)
        else:
            mp.backward(_loss(mp, model, x, y))
        mp.unscale_(opt)
        grads[mode] = [p.grad.clone() for g in opt.param_groups for p in g["params"]]
        mp.step(opt)
    assert len(calls) == 2  # once per step (two runs), not once per micro-batch
    tol = 1e-6 if precision == "fp32" else 2e-3
    for a, b in zip(grads["accumulate"], grads["full"]):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("precision", ["amp-fp16", "master-fp16"])
def test_clipping_sees_unscaled_gradients(precision):
    x, y = batches(1)[0]
    ref_model, ref_opt = make_run()
    F.cross_entropy(ref_model(x), y).backward()
    ref_norm = torch.nn.utils.clip_grad_norm_(ref_model.parameters(), 1e9)

    model, opt, mp = _setup(precision)
    assert mp.scale == 2.0**16
    mp.backward(_loss(mp, model, x, y))
    mp.step(opt, max_grad_norm=1e-3)
    assert mp.last_step.grad_norm == pytest.approx(ref_norm.item(), rel=2e-2)  # not 65536x larger


def test_bad_max_grad_norm():
    model, opt, mp = _setup()
    x, y = batches(1)[0]
    mp.backward(_loss(mp, model, x, y))
    with pytest.raises(AmpbenchError, match="max_grad_norm"):
        mp.step(opt, max_grad_norm=0)


# -- several optimizers (GAN) ---------------------------------------------------------------------
@pytest.mark.parametrize("precision", ["amp-fp16", "master-fp16"])
def test_gan_one_scaler_per_optimizer(precision):
    torch.manual_seed(0)
    gen, disc = nn.Linear(4, 8), nn.Linear(8, 1)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    mp = MixedPrecision(precision, loss_scale=LossScaleConfig(init_scale=256.0))  # no overflow at start
    (gen, disc), (opt_g, opt_d) = mp.setup([gen, disc], [opt_g, opt_d])
    real = torch.randn(16, 8)
    for step in range(3):
        z = torch.randn(16, 4)
        opt_d.zero_grad()
        with mp.autocast():
            fake = gen(z)
            d_loss = F.softplus(-disc(real)).mean() + F.softplus(disc(fake.detach())).mean()
        if step == 1:
            d_loss = d_loss * float("inf")  # only D overflows
        mp.backward(d_loss, optimizer=opt_d)
        mp.step(opt_d)
        opt_g.zero_grad()
        with mp.autocast():
            g_loss = F.softplus(-disc(gen(z))).mean()
        mp.backward(g_loss, optimizer=opt_g)
        assert mp.step(opt_g)
    assert mp.scaler_for(opt_d).skipped_steps == 1 and mp.scaler_for(opt_d).scale == 128
    assert mp.scaler_for(opt_g).skipped_steps == 0 and mp.scaler_for(opt_g).scale == 256
    with pytest.raises(MisuseError, match="optimizer=opt"):
        mp.backward(g_loss)


# -- step records -------------------------------------------------------------------------------
def test_step_record_and_totals():
    model, opt, mp = _setup("amp-fp16")
    for x, y in batches(3):
        loss = _loss(mp, model, x, y)
        mp.backward(loss)
        mp.step(opt)
    rec = mp.last_step
    assert rec.step == 3 and rec.skipped is False and rec.scale == 2.0**16
    assert rec.loss == pytest.approx(loss.item())
    assert mp.totals == {"steps": 3, "skipped_steps": 0, "scales": [2.0**16]}


# -- checkpoints --------------------------------------------------------------------------------
def _train(precision, data, model=None, opt=None, mp=None):
    if model is None:
        model, opt, mp = _setup(precision)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = _loss(mp, model, x, y)
        mp.backward(loss)
        mp.step(opt)
        losses.append(loss.item())
    return losses, model, opt, mp


@pytest.mark.parametrize("precision", ["fp32", "amp-fp16", "amp-bf16", "master-fp16", "master-bf16", "pure-bf16"])
def test_resume_from_checkpoint_continues_with_the_same_losses(precision, tmp_path):
    data = batches(8)
    full, *_ = _train(precision, data)

    first, model, opt, mp = _train(precision, data[:4])
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "mp": mp.state_dict()}, path)

    ckpt = torch.load(path, weights_only=True)
    model2, opt2, mp2 = _setup(precision)
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["opt"])
    mp2.load_state_dict(ckpt["mp"])
    second, *_ = _train(precision, data[4:], model2, opt2, mp2)
    assert first + second == full  # exact, on CPU


def test_load_state_dict_checks_precision():
    _, _, mp = _setup("amp-fp16")
    _, _, other = _setup("amp-bf16")
    with pytest.raises(AmpbenchError, match="saved in precision 'amp-fp16'"):
        other.load_state_dict(mp.state_dict())


# -- global state ---------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "master-bf16"])
def test_tf32_flags_scoped_and_restored_on_cuda_and_left_alone_elsewhere(precision):
    """The TF32 flags are CUDA's (cuBLAS, cuDNN): a CUDA step's forward and backward contexts switch them off for
    these modes and restore the user's setting after; off CUDA (the CPU run here) the contexts touch nothing."""
    model, opt, mp = _setup(precision)
    x, y = batches(1)[0]
    with tf32_scope(True):  # the user's setting
        for ctx in (mp.recipe.forward_context("cuda"), mp.recipe.backward_context("cuda")):
            with ctx:
                assert not read_tf32().matmul and not read_tf32().cudnn
            assert read_tf32().matmul and read_tf32().cudnn
        with mp.autocast():  # (cpu)
            assert read_tf32().matmul and read_tf32().cudnn
            loss = F.cross_entropy(model(x), y)
        mp.backward(loss)
        assert read_tf32().matmul and read_tf32().cudnn


def test_tf32_scope_respects_the_new_api():
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("torch without the fp32_precision API")
    m = torch.backends.cuda.matmul
    saved = m.fp32_precision
    try:
        m.fp32_precision = "tf32"
        with tf32_scope(False):
            assert m.fp32_precision == "ieee" and read_tf32().api == "fp32_precision"
        assert m.fp32_precision == "tf32"
    finally:
        m.fp32_precision = saved
        m.fp32_precision = "none"  # back to "unset", so legacy reads work again


def test_tf32_flags_use_the_new_api_without_a_warning_and_leave_the_process_as_found():
    """torch >= 2.9: the legacy setters are deprecated (they warn on CUDA builds), and mixing the APIs makes legacy
    reads raise. Scopes write fp32_precision for matmul, cuDNN conv and RNN alike, and restore what they found, so a
    fresh process can still read the legacy flags afterwards."""
    import subprocess
    import sys

    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("torch without the fp32_precision API")
    code = """
import warnings, torch
warnings.simplefilter("error")
from ampbench.precision.tf32_flags import read_tf32, tf32_scope
b = torch.backends
found = (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision)
with tf32_scope(True):
    assert read_tf32().matmul and read_tf32().cudnn and b.cudnn.rnn.fp32_precision == "tf32"
    with tf32_scope(False):
        assert not read_tf32().matmul and not read_tf32().cudnn and b.cudnn.rnn.fp32_precision == "ieee"
    assert read_tf32().matmul
assert (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision) == found
print(b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]  # torch's defaults, legacy-readable again
