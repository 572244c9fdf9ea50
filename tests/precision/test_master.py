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
