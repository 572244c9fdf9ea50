"""Weights are never lost or corrupted, and silent misuse becomes an error that says the fix.

- every mode (not only the fp16 ones) skips and counts a step whose gradients hold inf/NaN;
- weights loaded into the model after setup() reach the fp32 master weights (master-* modes);
- optimizer.step() instead of mp.step(), clipping the model's gradients after backward() or unscale_() in
  master modes, a model cast after setup (before its forward), tied weights half kept in fp32, incomplete
  checkpoints: errors; a forward of an autocast mode outside mp.autocast(): a warning, once;
- optimizer.add_param_group() after setup just works;
- a user's nn.LSTM trains under amp-fp16 on CPU (oneDNN has no fp16 LSTM under autocast).
"""

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from ampbench import MixedPrecision
from ampbench.errors import AmpbenchError, MisuseError
from ampbench.precision import list_precisions, supported

from ..conftest import batches, make_run

CPU_MODES = [n for n in list_precisions() if supported(n, "cpu").ok]
MASTER = ["master-fp16", "master-bf16"]


def _step(mp, model, opt, x, y, scale_loss=1.0):
    opt.zero_grad()
    with mp.autocast():
        loss = F.cross_entropy(model(x), y)
    mp.backward(loss * scale_loss)
    return mp.step(opt), loss.item()


# -- non-finite gradients ----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("precision", CPU_MODES)
def test_every_mode_skips_a_step_with_nonfinite_gradients(precision, bad):
    model, opt = make_run(opt="sgd", lr=0.05)
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    (x, y), (x2, y2) = batches(2)
    assert _step(mp, model, opt, x, y)[0] or precision.endswith("fp16")  # fp16: 2^16 may overflow first
    weights = copy.deepcopy({k: v for k, v in model.named_parameters()})
    masters = [m.detach().clone() for m in mp.master_params()]
    state = copy.deepcopy(opt.state_dict())
    skipped = mp.totals["skipped_steps"]
    stepped, _ = _step(mp, model, opt, x2, y2, scale_loss=bad)
    assert not stepped and mp.last_step.skipped and mp.totals["skipped_steps"] == skipped + 1
    for k, v in model.named_parameters():
        assert torch.equal(v, weights[k]), k
    for a, b in zip(mp.master_params(), masters):
        assert torch.equal(a, b)
    assert str(opt.state_dict()) == str(state)


def backward_once(precision: str, **options: object) -> tuple[torch.nn.Module, torch.optim.Optimizer, MixedPrecision]:
    """A model set up under ``precision`` (SGD) after one scaled backward of one batch: (model, optimizer, mp)."""
    model, opt = make_run(opt="sgd")
    mp = MixedPrecision(precision, **options)  # type: ignore[arg-type]
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    opt.zero_grad()
    with mp.autocast():
        loss = F.cross_entropy(model(x), y)
    mp.backward(loss)
    return model, opt, mp


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "pure-bf16"])
def test_check_finite_off_steps_whatever_the_gradients_hold(precision):
    model, opt = make_run(opt="sgd", lr=0.05)
    mp = MixedPrecision(precision, check_finite=False)
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    stepped, _ = _step(mp, model, opt, x, y, scale_loss=float("nan"))
    assert stepped and mp.totals["skipped_steps"] == 0
    assert torch.isnan(model.fc1.weight).all()  # what the check exists to prevent


def test_check_finite_does_not_change_clean_training():
    runs = []
    for check in (True, False):
        model, opt = make_run(opt="sgd", lr=0.05)
        mp = MixedPrecision("amp-bf16", check_finite=check)
        model, opt = mp.setup(model, opt)
        runs.append([_step(mp, model, opt, x, y)[1] for x, y in batches(5)])
    assert runs[0] == runs[1]


# -- weights loaded after setup ------------------------------------------------------------------
def _fine_tune(precision, load, steps=4, seed=0):
    """Set up a fresh model, let ``load(model, mp)`` put the checkpoint in, train; the losses."""
    model, opt = make_run(opt="sgd", lr=0.05, seed=seed)
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    load(model, mp)
    return [_step(mp, model, opt, x, y)[1] for x, y in batches(steps)], model, mp


@pytest.mark.parametrize("precision", MASTER)
def test_checkpoint_loaded_after_setup_is_what_trains(precision):
    pretrained, _ = make_run(seed=7)
    ckpt = copy.deepcopy(pretrained.state_dict())  # fp32, as a pretrained checkpoint is

    def before(model, opt):  # the reference: load, then set up
        model.load_state_dict(ckpt)
        return model, opt

    model, opt = before(*make_run(opt="sgd", lr=0.05))
    ref_mp = MixedPrecision(precision)
    model, opt = ref_mp.setup(model, opt)
    reference = [_step(ref_mp, model, opt, x, y)[1] for x, y in batches(4)]

    after, model2, mp = _fine_tune(precision, lambda m, _: m.load_state_dict(ckpt))
    assert after == reference  # not the fresh init's trajectory
    for a, b in zip(mp.master_params(), ref_mp.master_params()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("precision", MASTER)
def test_fp32_checkpoint_keeps_full_precision_in_the_masters(precision):
    pretrained, _ = make_run(seed=7)
    ckpt = pretrained.state_dict()
    _, model, mp = _fine_tune(precision, lambda m, _: m.load_state_dict(ckpt), steps=0)
    opt_params = [p for g in mp._slots[0].optimizer.param_groups for p in g["params"]]
    assert torch.equal(mp.master_params()[0], ckpt["fc1.weight"])  # exact, not the half-rounded value
    assert any(p is mp.master_params()[0] for p in opt_params)


@pytest.mark.parametrize("precision", MASTER)
def test_submodule_load_and_in_place_edit_reach_the_masters(precision):
    model, opt = make_run(opt="sgd", lr=0.0)  # lr 0: a step changes nothing by itself
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    new_fc2 = nn.Linear(16, 4)
    model.fc2.load_state_dict(new_fc2.state_dict())
    with torch.no_grad():
        model.fc1.bias.fill_(0.25)
    x, y = batches(1)[0]
    _step(mp, model, opt, x, y)
    half = model.fc1.weight.dtype
    assert torch.equal(model.fc2.weight, new_fc2.weight.detach().to(half))  # not overwritten by the old master
    assert torch.equal(model.fc1.bias, torch.full_like(model.fc1.bias, 0.25))
    assert torch.equal(mp.master_params()[2], new_fc2.weight.detach())


@pytest.mark.parametrize("order", ["mp-then-model", "model-then-mp"])
def test_resume_in_either_order_keeps_the_exact_masters(order, tmp_path):
    model, opt = make_run(opt="sgd", lr=0.05)
    mp = MixedPrecision("master-fp16")
    model, opt = mp.setup(model, opt)
    data = batches(6)
    full = [_step(mp, model, opt, x, y)[1] for x, y in data]

    model, opt = make_run(opt="sgd", lr=0.05)
    mp = MixedPrecision("master-fp16")
    model, opt = mp.setup(model, opt)
    first = [_step(mp, model, opt, x, y)[1] for x, y in data[:3]]
    ckpt = {"model": copy.deepcopy(model.state_dict()), "opt": copy.deepcopy(opt.state_dict()),
            "mp": copy.deepcopy(mp.state_dict())}
    model2, opt2 = make_run(opt="sgd", lr=0.05)
    mp2 = MixedPrecision("master-fp16")
    model2, opt2 = mp2.setup(model2, opt2)
    if order == "mp-then-model":  # the half model checkpoint must not replace the exact fp32 masters
        mp2.load_state_dict(ckpt["mp"])
        model2.load_state_dict(ckpt["model"])
    else:
        model2.load_state_dict(ckpt["model"])
        mp2.load_state_dict(ckpt["mp"])
    opt2.load_state_dict(ckpt["opt"])
    second = [_step(mp2, model2, opt2, x, y)[1] for x, y in data[3:]]
    assert first + second == full


@pytest.mark.parametrize("cast", [lambda m: m.float(), lambda m: m.to(torch.float64)])
def test_model_cast_after_setup_is_refused(cast):
    model, opt, mp = backward_once("master-bf16")
    cast(model)  # (a forward after the cast fails by itself on the dtype; a device move would not)
    with pytest.raises(MisuseError, match="cast or moved after setup"):
        mp.step(opt)


@pytest.mark.parametrize("precision, cast", [
    ("amp-fp16", lambda m: m.half()),  # was: ValueError 'Attempting to unscale FP16 gradients' from GradScaler's code
    ("master-bf16", lambda m: m.float()),  # was: 'mat1 and mat2 must have the same dtype' from the forward
    ("master-bf16", lambda m: m.to(torch.float32)),
    ("fp32", lambda m: m.half()),  # (would train fp16 weights without a word)
    ("amp-bf16", lambda m: m.bfloat16()),
])
def test_a_model_cast_after_setup_is_refused_before_its_forward(precision, cast):
    model, opt = make_run(opt="sgd")
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    _step(mp, model, opt, x, y)  # (a good step first)
    cast(model)
    with pytest.raises(MisuseError, match="cast or moved after setup"), mp.autocast():
        model(x)
    # a forward outside mp.autocast() in a run whose steps use it: refused at its backward, before anything is unscaled
    # (in the modes that cast the model, before the forward: their cast hooks keep the check hook on every forward)
    with pytest.raises(MisuseError, match="cast or moved after setup"):
        out = model(x.to(next(model.parameters()).dtype))
        mp.backward(F.cross_entropy(out.float(), y))


@pytest.mark.parametrize("precision", ["fp32", "master-bf16", "amp-bf16"])
def test_a_model_cast_after_setup_is_refused_before_a_forward_run_outside_mp_autocast(precision):
    """A loop that never enters mp.autocast() (fp32 code, or a model that enters autocast itself) keeps the forward
    pre-hook: the forward itself is refused."""
    model, opt = make_run(opt="sgd")
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp-bf16"):
            loss = F.cross_entropy(model(x), y)
        mp.backward(loss)
        mp.step(opt)
    model.half()
    with pytest.raises(MisuseError, match="cast or moved after setup"):
        model(x.half())


def test_the_forward_hook_is_only_there_while_forwards_run_outside_mp_autocast():
    """The hook costs a forward Module._call_impl's slow path: a loop under mp.autocast() runs without it; a backward
    after a forward outside it puts it back, so the next such forward is checked (and warned about)."""
    model, opt = make_run(opt="sgd")
    mp = MixedPrecision("amp-bf16")
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    assert len(model._forward_pre_hooks) == 1  # (set up: forwards are checked)
    _step(mp, model, opt, x, y)
    assert len(model._forward_pre_hooks) == 0
    with pytest.warns(UserWarning, match="outside mp.autocast"):  # (unseen forward; the hook is back for the next)
        mp.backward(F.cross_entropy(model(x), y))
        mp.step(opt)
        mp.backward(F.cross_entropy(model(x), y))
    assert len(model._forward_pre_hooks) == 1
    mp.step(opt)
    _step(mp, model, opt, x, y)
    assert len(model._forward_pre_hooks) == 0


@pytest.mark.parametrize("precision", MASTER)
def test_clipping_model_grads_right_after_backward_is_refused(precision):
    """master-fp16: the model's gradients after mp.backward() are loss-scaled half copies; clipping them there (no
    unscale_) clipped nothing the optimizer steps and the step went on (was: returned 0.0, stepped unclipped)."""
    model, opt, mp = backward_once(precision)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
    assert norm > 0  # the gradients are there to see (scaled by the loss scale) ...
    before = [m.detach().clone() for m in mp.master_params()]
    with pytest.raises(MisuseError, match=r"max_grad_norm"):  # ... but stepping after writing them is refused
        mp.step(opt)
    for a, b in zip(mp.master_params(), before):
        assert torch.equal(a, b)


@pytest.mark.parametrize("precision", MASTER)
def test_reading_model_grads_after_backward_still_steps_the_same(precision):
    """Reading the half gradients a backward left (a gradient-norm logger) changes nothing: the step equals one
    that never looked, and micro-batches still accumulate in fp32."""
    def run(look: bool) -> list[torch.Tensor]:
        model, opt = make_run(opt="sgd", seed=1)
        mp = MixedPrecision(precision)
        model, opt = mp.setup(model, opt)
        for x, y in batches(3):
            with mp.autocast():
                loss = F.cross_entropy(model(x), y)
            mp.backward(loss / 2)
            with mp.autocast():
                mp.backward(F.cross_entropy(model(x), y) / 2)  # a second micro-batch
            if look:
                assert float(sum(p.grad.float().norm() for p in model.parameters() if p.grad is not None)) > 0
            mp.step(opt)
            opt.zero_grad()
        return [m.detach().clone() for m in mp.master_params()]

    for a, b in zip(run(False), run(True)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("precision", ["amp-fp16", "amp-bf16"])
def test_a_forward_outside_mp_autocast_is_warned_about_once(precision):
    """amp-fp16 forward outside mp.autocast() trained in fp32 at loss scale 65536 without a word."""
    model, opt = make_run(opt="sgd")
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    x, y = batches(1)[0]
    with pytest.warns(UserWarning, match=r"forward ran outside mp.autocast\(\).*computed in fp32"):
        mp.backward(F.cross_entropy(model(x), y))
    mp.step(opt)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: the second time is silent, and a forward under autocast is too
        mp.backward(F.cross_entropy(model(x), y))
        mp.step(opt)
        _step(mp, model, opt, x, y)
    fresh, opt2 = make_run(opt="sgd")
    mp2 = MixedPrecision(precision)
    fresh, opt2 = mp2.setup(fresh, opt2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.autocast("cpu", dtype=mp2.recipe.compute_dtype):  # autocast entered by hand is autocast too
            loss = F.cross_entropy(fresh(x), y)
        mp2.backward(loss)
        mp2.step(opt2)


def test_load_with_assign_is_refused():
    model, opt = make_run()
    mp = MixedPrecision("master-fp16")
    model, opt = mp.setup(model, opt)
    with pytest.raises(MisuseError, match="assign=True"):
        model.load_state_dict(make_run(seed=3)[0].state_dict(), assign=True)


# -- misuse ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", CPU_MODES)
def test_optimizer_step_instead_of_mp_step_is_refused(precision):
    model, opt, mp = backward_once(precision)
    before = [m.detach().clone() for m in mp.master_params()]
    with pytest.raises(MisuseError, match=r"call mp.step\(optimizer\)"):
        opt.step()
    for a, b in zip(mp.master_params(), before):  # nothing was stepped
        assert torch.equal(a, b)
    assert bool(mp.step(opt)) in (True, False)  # the right call still works afterwards


@pytest.mark.parametrize("precision", MASTER)
def test_clipping_model_grads_after_unscale_is_refused(precision):
    model, opt, mp = backward_once(precision, loss_scale="static:1024")
    mp.unscale_(opt)
    # the model's gradients are visible (half copies of the unscaled fp32 master gradients) ...
    torch.testing.assert_close(model.fc1.weight.grad.float(), mp.master_params()[0].grad, rtol=1e-2, atol=1e-4)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)  # ... but clipping them clips nothing that steps
    with pytest.raises(MisuseError, match=r"mp.clip_grad_norm_"):
        mp.step(opt)


@pytest.mark.parametrize("precision", ["amp-fp16", *MASTER])
def test_mp_clip_grad_norm_clips_what_the_optimizer_steps(precision):
    model, opt, mp = backward_once(precision)
    norm = mp.clip_grad_norm_(1e-3)
    assert norm > 1e-3
    stepped = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad.float()) for p in stepped]))
    assert total == pytest.approx(1e-3, rel=1e-3)
    mp.step(opt)


@pytest.mark.parametrize("precision", MASTER + ["amp-fp16"])
def test_add_param_group_after_setup_just_works(precision):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model[0].parameters(), lr=0.1)  # the head is added later (progressive unfreezing)
    mp = MixedPrecision(precision, loss_scale="static:256")
    model, opt = mp.setup(model, opt)
    opt.add_param_group({"params": list(model[2].parameters()), "lr": 0.1})
    head = model[2].weight.detach().clone()
    x, y = batches(1)[0]
    assert _step(mp, model, opt, x, y)[0]
    assert not torch.equal(model[2].weight, head)
    assert all(p.dtype == torch.float32 for g in opt.param_groups for p in g["params"])


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.mid = nn.Linear(8, 8)
        self.head = nn.Linear(8, 32, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.mid(self.embed(ids)))


def test_with_tied_names_every_module_a_kept_one_shares_a_tensor_with():
    from ampbench.precision.convert import with_tied

    model = Tied()
    assert with_tied(model, ["head"]) == ["head", "embed"] and with_tied(model, ["embed"]) == ["embed", "head"]
    assert with_tied(model, ["mid"]) == ["mid"] and with_tied(model, []) == []
    chain = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4), "c": nn.Linear(4, 4), "d": nn.Linear(4, 4)})
    chain.b.weight, chain.c.bias = chain.a.weight, chain.b.bias  # a~b by weight, b~c by bias: a chain
    assert with_tied(chain, ["a"]) == ["a", "b", "c"]
    # oracle: the engine takes what it names (and refuses the part alone, below)
    mp = MixedPrecision("master-fp16", keep_fp32=with_tied(model, ["head"]))
    mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert model.head.weight.dtype == torch.float32


def test_keep_fp32_on_a_tied_layer_fails_at_setup():
    model = Tied()
    mp = MixedPrecision("master-fp16", keep_fp32=["head"])
    with pytest.raises(AmpbenchError, match=r"head.weight is tied to embed.weight.*\['embed'\]"):
        mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    model = Tied()  # both sides kept: fine
    mp = MixedPrecision("master-fp16", keep_fp32=["head", "embed"])
    model, opt = mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with mp.autocast():
        out = model(torch.randint(0, 32, (2, 5)))
    mp.backward(out.float().square().mean())
    mp.step(opt)
    assert model.head.weight.dtype == torch.float32 and model.mid.weight.dtype == torch.float16


def _state():
    model, opt = make_run()
    mp = MixedPrecision("master-fp16")
    mp.setup(model, opt)
    return mp


@pytest.mark.parametrize("mutate,match", [
    (lambda s: s.pop("optimizers"), "lacks or mistypes optimizers"),
    (lambda s: s.pop("precision"), "lacks or mistypes precision"),
    (lambda s: s["optimizers"][0].pop("scaler"), "scaler"),
    (lambda s: s["optimizers"][0]["scaler"].pop("scale"), r"scaler\.scale"),
    (lambda s: s["optimizers"][0].pop("masters"), "masters"),
    (lambda s: s["optimizers"][0].update(masters={"master_params": [1, 2]}), "not a list of tensors"),
    (lambda s: s.clear(), "has: nothing"),
])
def test_incomplete_state_dict_says_what_is_missing(mutate, match):
    state = _state().state_dict()
    mutate(state)
    with pytest.raises(AmpbenchError, match=match):
        _state().load_state_dict(state)
    with pytest.raises(AmpbenchError, match="needs a dict"):
        _state().load_state_dict([state])


# -- LSTM under CPU autocast: a fallback exactly where this machine has no kernel ------------------------------
class UserLSTM(nn.Module):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.lstm = nn.LSTM(12, 16, batch_first=True, **kw)
        self.head = nn.Linear(self.lstm.proj_size or 16 * (2 if self.lstm.bidirectional else 1), 3)

    def forward(self, x, hx=None):
        out, (h, c) = self.lstm(x, hx)
        return self.head(out[:, -1])


@pytest.mark.isa
@pytest.mark.parametrize("precision", ["amp-fp16", "amp-bf16"])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "proj_size": 8}, {"bidirectional": True}])
def test_user_lstm_trains_under_cpu_autocast_on_any_cpu(kw, precision):
    """The contract on every CPU: the LSTM runs in the mode's half dtype (oneDNN's kernel where this machine has
    one, torch's native kernel through the fallback where it has not: AVX2-only CPUs for bf16, every CPU for fp16)."""
    from ampbench.precision.fallbacks import autocast_kernel_works

    torch.manual_seed(0)
    ref = UserLSTM(**kw)
    model = copy.deepcopy(ref)
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    half = mp.recipe.compute_dtype
    assert bool(mp.fallbacks) == (not autocast_kernel_works(nn.LSTM, half))
    assert all("lstm" in f for f in mp.fallbacks)
    x, y = torch.randn(4, 7, 12), torch.tensor([0, 1, 2, 0])
    with mp.autocast():
        out = model(x)
        lstm_out = model.lstm(x)[0]
    assert lstm_out.dtype == half  # the mode's math, not a silent fp32 run
    torch.testing.assert_close(out.float(), ref(x), atol=5e-2, rtol=5e-2)
    with mp.autocast():
        loss = F.cross_entropy(model(x), y)
    mp.backward(loss)
    assert mp.step(opt) or mp.last_step.skipped
    assert model.lstm.weight_ih_l0.dtype == torch.float32
    out_fp32 = model.lstm(x)[0]  # outside autocast the module is plain nn.LSTM
    assert out_fp32.dtype == torch.float32


@pytest.mark.parametrize("works", [True, False])
def test_the_lstm_fallback_follows_the_kernel_probe(monkeypatch, works):
    """Whatever this CPU has: where the probe finds oneDNN's bf16 LSTM missing the fallback is installed and trains
    in bf16; where it finds it, nothing is changed."""
    from ampbench.precision import fallbacks

    monkeypatch.setattr(fallbacks, "autocast_kernel_works", lambda kind, dtype: works)
    torch.manual_seed(0)
    model = UserLSTM()
    mp = MixedPrecision("amp-bf16")
    model, opt = mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert bool(mp.fallbacks) == (not works)
    if not works:
        assert "native bf16 kernel" in mp.fallbacks[0]
        with mp.autocast():
            assert model.lstm(torch.randn(2, 3, 12))[0].dtype == torch.bfloat16


def test_the_kernel_probe_is_tried_once_per_dtype():
    from ampbench.precision.fallbacks import autocast_kernel_works

    autocast_kernel_works(nn.LSTM, torch.bfloat16)
    hits = autocast_kernel_works.cache_info().hits
    autocast_kernel_works(nn.LSTM, torch.bfloat16)
    assert autocast_kernel_works.cache_info().hits == hits + 1


@pytest.mark.isa
def test_lstm_initial_state_and_packed_sequences_under_the_fallback():
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 5, batch_first=True)
    ref = copy.deepcopy(lstm)
    mp = MixedPrecision("amp-fp16")
    mp.setup(lstm, torch.optim.SGD(lstm.parameters(), lr=0.1))
    x = torch.randn(3, 4, 6)
    h0 = (torch.randn(1, 3, 5), torch.randn(1, 3, 5))
    packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([4, 3, 2]), batch_first=True)
    with mp.autocast():
        out, (h, c) = lstm(x, h0)
        pout, _ = lstm(packed)
    torch.testing.assert_close(out.float(), ref(x, h0)[0], atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(pout.data.float(), ref(packed)[0].data, atol=1e-2, rtol=1e-2)
