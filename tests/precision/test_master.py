"""master-fp16 / master-bf16: half model, fp32 norm layers, fp32 master weights and optimizer state."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from ampbench import MixedPrecision

from ..conftest import batches, make_run


@pytest.mark.parametrize("precision,half", [("master-fp16", torch.float16), ("master-bf16", torch.bfloat16)])
def test_dtypes_after_setup_and_steps(precision, half):
    model, opt = make_run()
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    for x, y in batches(2):
        opt.zero_grad()
        with mp.autocast():
            out = model(x)
            loss = F.cross_entropy(out, y)
        mp.backward(loss)
        mp.step(opt)
    assert out.dtype == torch.float32  # outputs cast to fp32 for the loss
    assert model.fc1.weight.dtype == half and model.fc2.bias.dtype == half
    for norm in (model.bn, model.norm):  # normalisation layers stay fp32 (BN buffers too)
        assert all(p.dtype == torch.float32 for p in norm.parameters())
    assert model.bn.running_mean.dtype == torch.float32
    opt_params = [p for g in opt.param_groups for p in g["params"]]
    assert all(p.dtype == torch.float32 for p in opt_params)  # the optimizer sees fp32 only
    assert len(mp.master_params()) == 4  # fc1/fc2 weight+bias; norm params are used directly
    for st in opt.state.values():
        assert all(v.dtype == torch.float32 for v in st.values() if torch.is_tensor(v) and v.dim())
    for m, p in zip(mp.master_params(), (model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias)):
        assert torch.equal(m.detach().to(half), p.detach())  # model params are the rounded masters


def test_masters_start_from_the_exact_fp32_init():
    model, opt = make_run()
    ref = model.fc1.weight.detach().clone()
    mp = MixedPrecision("master-fp16")
    mp.setup(model, opt)
    assert torch.equal(mp.master_params()[0].detach(), ref)


K = 30
# max |master - fp32 weight| after K SGD steps (lr 0.05; weights reach ~1.3). Measured on CPU:
# master-fp16 0.002, master-bf16 0.012 -- the same as amp-fp16 / amp-bf16 (0.002 / 0.012).
TOL = {"master-fp16": 5e-3, "master-bf16": 2.5e-2}


@pytest.mark.parametrize("precision", ["master-fp16", "master-bf16"])
def test_master_weights_track_fp32_run(precision):
    data = batches(K)
    ref_model, ref_opt = make_run(opt="sgd", lr=0.05)
    for x, y in data:
        ref_opt.zero_grad()
        F.cross_entropy(ref_model(x), y).backward()
        ref_opt.step()

    model, opt = make_run(opt="sgd", lr=0.05)
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, opt)
    for x, y in data:
        opt.zero_grad()
        with mp.autocast():
            loss = F.cross_entropy(model(x), y)
        mp.backward(loss)
        mp.step(opt)
    masters = iter(mp.master_params())
    worst = 0.0
    for name, ref_p in ref_model.named_parameters():
        p = dict(model.named_parameters())[name]
        ours = p if p.dtype == torch.float32 else next(masters)
        worst = max(worst, (ours.detach() - ref_p.detach()).abs().max().item())
    assert worst < TOL[precision], f"{precision}: master weights drifted {worst:.3g} from the fp32 run"


def test_pure_fp16_warns_when_adam_eps_is_zero_in_fp16():
    model, opt = make_run(opt="adam")
    with pytest.warns(UserWarning, match="eps=1e-08 is 0 in float16"):
        MixedPrecision("pure-fp16").setup(model, opt)


def test_keep_fp32_by_name_and_by_type():
    model, opt = make_run(opt="sgd")
    mp = MixedPrecision("pure-fp16", keep_fp32=["fc2"])
    mp.setup(model, opt)
    assert model.fc2.weight.dtype == torch.float32 and model.fc1.weight.dtype == torch.float16
    assert model.norm.weight.dtype == torch.float16  # pure: norms not kept unless asked
    x, _ = batches(1)[0]
    assert model(x).dtype == torch.float32

    model, opt = make_run()
    MixedPrecision("master-bf16", keep_fp32=[nn.Linear]).setup(model, opt)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_integer_inputs_are_not_cast():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mp = MixedPrecision("master-fp16")
    mp.setup(model, opt)
    tokens = torch.randint(0, 10, (5, 3))
    with mp.autocast():
        out = model(tokens)
    assert out.dtype == torch.float32 and out.shape == (5, 2)


def test_kept_modules_compute_in_fp32_and_hand_their_neighbours_half_tensors():
    """The cast hooks' boundaries: a kept embedding (integer input) hands on bf16, a kept norm (bf16 input) computes in
    fp32 and hands back bf16, a kept module called with a keyword computes in fp32 too, and the model's output is fp32."""
    seen: dict[str, tuple[torch.dtype, ...]] = {}

    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(8))

        def forward(self, x: torch.Tensor, *, bias: torch.Tensor) -> torch.Tensor:
            seen["gate"] = (x.dtype, bias.dtype, self.scale.dtype)
            return x * self.scale + bias

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.norm, self.gate, self.fc = nn.Embedding(10, 8), nn.LayerNorm(8), Gate(), nn.Linear(8, 2)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h = self.emb(tokens)
            seen["emb out"] = (h.dtype,)
            h = self.norm(h)
            seen["norm out"] = (h.dtype,)
            h = self.gate(h, bias=torch.zeros(8, dtype=h.dtype))
            seen["gate out"] = (h.dtype,)
            return self.fc(h)

    model = Net()
    norm_forward = model.norm.forward
    model.norm.forward = lambda x: (seen.__setitem__("norm", (x.dtype, model.norm.weight.dtype)), norm_forward(x))[1]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mp = MixedPrecision("master-bf16", keep_fp32=["emb", "gate"])
    mp.setup(model, opt)
    with mp.autocast():
        out = model(torch.randint(0, 10, (3,)))
    bf16, fp32 = torch.bfloat16, torch.float32
    assert seen == {"emb out": (bf16,), "norm": (fp32, fp32), "norm out": (bf16,), "gate": (fp32, fp32, fp32),
                    "gate out": (bf16,)}
    assert out.dtype == fp32 and model.fc.weight.dtype == bf16


def _normed() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU(), nn.BatchNorm1d(8), nn.Linear(8, 3))


def test_kept_norms_change_class_not_hooks_and_compute_as_the_hooks_did():
    """A kept module's class becomes a subclass of its own whose forward casts (no hooks: they put each call on
    Module._call_impl's slow path); the same model kept through the two hooks (the way left for a module whose
    instance has its own forward) gives the same outputs and gradients bit for bit, in fp32 inside, bf16 around."""
    from ampbench.precision.convert import computes_in_fp32, kept_fp32_class

    def run(model: nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
        mp = MixedPrecision("master-bf16")
        mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
        with mp.autocast():
            out = model(x)
        out.sum().backward()
        return out, [p.grad for p in model.parameters()]

    by_class = _normed()
    by_hooks = _normed()
    for i in (1, 3):  # an instance forward: the hooks' way
        by_hooks[i].forward = type(by_hooks[i]).forward.__get__(by_hooks[i])
    out, grads = run(by_class)
    hook_out, hook_grads = run(by_hooks)
    ln, bn = by_class[1], by_class[3]
    assert type(ln) is kept_fp32_class(nn.LayerNorm, torch.bfloat16) and type(bn).__mro__[1] is nn.BatchNorm1d
    assert isinstance(ln, nn.LayerNorm) and type(ln).__name__ == "LayerNorm" and repr(ln).startswith("LayerNorm(")
    assert not (ln._forward_hooks or ln._forward_pre_hooks or bn._forward_hooks or bn._forward_pre_hooks)
    assert by_hooks[1]._forward_pre_hooks and type(by_hooks[1]) is nn.LayerNorm
    assert computes_in_fp32(ln) and not computes_in_fp32(by_hooks[1]) and not computes_in_fp32(by_class[0])
    assert out.dtype == torch.float32 and torch.equal(out, hook_out)
    for g, h in zip(grads, hook_grads, strict=True):
        assert (g is None and h is None) or torch.equal(g, h)
    seen = []
    ln.register_forward_hook(lambda m, args, output: seen.append((args[0].dtype, m.weight.dtype, output.dtype)))
    by_class(torch.randn(4, 8))
    assert seen == [(torch.bfloat16, torch.float32, torch.bfloat16)]  # the user's hook sees what the neighbours see


def test_a_kept_module_survives_pickling_and_deepcopy_with_its_casts():
    """Its class is named as its base's, so pickled by name it would come back without the casts: pickle and
    copy.deepcopy rebuild it with the kept class, and the copy computes the same bits."""
    import copy
    import io

    model = _normed()
    MixedPrecision("master-bf16").setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    model.eval()
    x = torch.randn(4, 8)
    want = model(x)
    buf = io.BytesIO()
    torch.save(model[1], buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    for twin in (copy.deepcopy(model), loaded):
        assert type(twin[1] if isinstance(twin, nn.Sequential) else twin) is type(model[1])
    half = torch.randn(4, 8).bfloat16()
    assert loaded(half).dtype == torch.bfloat16 and torch.equal(loaded(half), model[1](half))
    assert torch.equal(copy.deepcopy(model)(x), want)


def _bn_kernel_dtypes(model: nn.Module, x: torch.Tensor) -> list[tuple[torch.dtype, torch.dtype]]:
    """(input, weight) dtypes of every batch-norm kernel a forward and backward run, as the dispatcher sees them."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[tuple[torch.dtype, torch.dtype]] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if "batch_norm" in func.__name__ and "backward" not in func.__name__ and len(args) > 1:
                seen.append((args[0].dtype, args[1].dtype))
            return func(*args, **(kwargs or {}))

    with Watch():
        model(x).float().sum().backward()
    return seen


@pytest.mark.parametrize("precision", ["master-bf16", "master-fp16"])
def test_a_kept_batchnorm_takes_its_half_input_and_keeps_fp32_statistics(precision: str) -> None:
    """A kept BatchNorm's kernel reads the half input with fp32 weight, bias and running statistics (no cast up
    before it, none back after: two passes over every activation of a convnet); its output is half, its parameters,
    gradients and running statistics fp32, and it computes what the cast path computes within half rounding (4-D
    channels-last and 2-D inputs). The SyncBatchNorm keeps the cast."""
    from ampbench.precision.convert import computes_in_fp32, kept_fp32_class, takes_half_input

    half = torch.bfloat16 if precision.endswith("bf16") else torch.float16

    def net() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1),
                             nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8 * 6 * 6, 4), nn.BatchNorm1d(4))

    x = (torch.randn(16, 3, 6, 6, generator=torch.Generator().manual_seed(1)) * 2 + 1)
    x = x.to(memory_format=torch.channels_last)
    direct, cast = net(), net()
    for i in (1, 4, 7):  # the cast path: the same modules kept through the two hooks (an instance forward)
        cast[i].forward = type(cast[i]).forward.__get__(cast[i])
    for m in (direct, cast):
        MixedPrecision(precision).setup(m, torch.optim.SGD(m.parameters(), lr=0.1))
    assert takes_half_input(nn.BatchNorm2d) and not takes_half_input(nn.SyncBatchNorm)
    assert not takes_half_input(nn.LayerNorm)
    assert type(direct[1]) is kept_fp32_class(nn.BatchNorm2d, half) and not computes_in_fp32(direct[1])
    assert _bn_kernel_dtypes(direct, x) == [(half, torch.float32)] * 3
    assert _bn_kernel_dtypes(cast, x) == [(torch.float32, torch.float32)] * 3
    for m in (direct, cast):  # (one more step's gradients, from zero)
        m.zero_grad()
    out_d, out_c = direct(x), cast(x)
    assert out_d.dtype == out_c.dtype == torch.float32  # (the root hands the loss fp32)
    torch.testing.assert_close(out_d, out_c, atol=2e-2, rtol=2e-2)
    out_d.sum().backward()
    out_c.sum().backward()
    for (name, p), q in zip(direct.named_parameters(), cast.parameters(), strict=True):
        kept = name.split(".")[0] in ("1", "4", "7")
        assert p.dtype == (torch.float32 if kept else half) and p.grad.dtype == p.dtype
        scale = q.grad.float().abs().max().item() + 1e-3
        assert (p.grad.float() - q.grad.float()).abs().max().item() <= 0.05 * scale, name
    for i in (1, 4, 7):
        assert direct[i].running_mean.dtype == torch.float32
        torch.testing.assert_close(direct[i].running_mean, cast[i].running_mean, atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(direct[i].running_var, cast[i].running_var, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["master-bf16", "master-fp16"])
def test_a_kept_batchnorm_on_cuda_reads_half_as_amp_does(precision: str) -> None:
    """On CUDA the kept BatchNorm's kernel is the one amp-* runs (half input, fp32 parameters), channels-last, and
    its outputs equal the cast path's within half rounding."""
    half = torch.bfloat16 if precision.endswith("bf16") else torch.float16
    torch.manual_seed(0)
    bn = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)).cuda().to(memory_format=torch.channels_last)
    ref = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)).cuda().to(memory_format=torch.channels_last)
    ref.load_state_dict(bn.state_dict())
    ref[1].forward = type(ref[1]).forward.__get__(ref[1])  # (the cast path: kept through the two hooks)
    for m in (bn, ref):
        MixedPrecision(precision).setup(m, torch.optim.SGD(m.parameters(), lr=0.1))
    x = torch.randn(32, 3, 28, 28, device="cuda").to(memory_format=torch.channels_last)
    assert _bn_kernel_dtypes(bn, x) == [(half, torch.float32)]
    torch.testing.assert_close(bn(x), ref(x), atol=2e-2, rtol=2e-2)
