"""The strided convolution over a 1x1 input, run as its kernel's center tap where this CPU's half weight gradient for
it is wrong (an AMX Xeon's oneDNN bf16 kernel: wrong in 43-100 % of calls)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ampbench import MixedPrecision
from ampbench.precision import strided_conv


@pytest.mark.parametrize("k, p, stride, groups", [(3, 1, 2, 1), (3, 1, 2, 4), (3, 1, 3, 32), (5, 2, 2, 2),
                                                  (7, 3, 2, 1), (3, 0, 2, 1)])
def test_the_center_tap_is_the_convolution_over_a_1x1_input(k: int, p: int, stride: int, groups: int) -> None:
    """In fp32 (no faulty kernel): the rewritten call's output and every gradient equal the module's own, the taps
    off center getting zero, as in the module's own -- where one output position is fed by the center tap alone; a
    kernel without padding (p=0 over a 1x1 input) has no output to compute and is left to the module."""
    torch.manual_seed(0)
    conv = nn.Conv2d(32, 32, k, stride=stride, padding=p, groups=groups, bias=True)
    x = torch.randn(4, 32, 1, 1, requires_grad=True)
    if not strided_conv.center_tap_applies(conv, x):
        assert p == 0 and k > 1
        return
    gy = torch.randn(4, 32, 1, 1)
    own = conv(x)
    gx, gw, gb = torch.autograd.grad(own, (x, conv.weight, conv.bias), gy)
    strided_conv.install([conv])
    tapped = conv(x)
    tx, tw, tb = torch.autograd.grad(tapped, (x, conv.weight, conv.bias), gy)
    torch.testing.assert_close(tapped, own)
    for a, b in ((tx, gx), (tw, gw), (tb, gb)):
        torch.testing.assert_close(a, b)
    off = torch.ones_like(tw, dtype=torch.bool)
    off[:, :, p, p] = False
    assert not tw[off].any() and not gw[off].any()


def test_a_larger_input_or_a_stride_of_1_is_the_module_s_own_call() -> None:
    conv = nn.Conv2d(8, 8, 3, stride=2, padding=1)
    assert strided_conv.center_tap_applies(conv, torch.zeros(1, 8, 1, 1))
    assert not strided_conv.center_tap_applies(conv, torch.zeros(1, 8, 2, 2))
    assert not strided_conv.center_tap_applies(nn.Conv2d(8, 8, 3, padding=1), torch.zeros(1, 8, 1, 1))
    assert not strided_conv.center_tap_applies(nn.Conv2d(8, 8, 3, stride=2, padding=1, dilation=2),
                                               torch.zeros(1, 8, 1, 1))


def test_it_is_installed_only_where_the_check_finds_the_kernel_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """The setup's check decides (planted here both ways): wrong -> the strided convolutions with a window get the
    center-tap call and the mode says so in one note; right -> nothing changes, and a model without a strided
    convolution is not even checked."""
    def model() -> nn.Module:
        return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.Conv2d(8, 8, 1, stride=2),
                             nn.Conv2d(8, 8, 3, padding=1), nn.Flatten(), nn.LazyLinear(2))

    monkeypatch.setattr(strided_conv, "strided_weight_grad_works", lambda dtype: False)
    notes = strided_conv.cpu_strided_conv_fallback([m := model()], torch.bfloat16)
    assert len(notes) == 1
    assert notes[0].startswith("0: where its input is 1x1, a strided convolution runs as its kernel's center tap")
    assert [getattr(c, strided_conv._INSTALLED_ATTR, False) for c in list(m)[:3]] == [True, False, False]
    monkeypatch.setattr(strided_conv, "strided_weight_grad_works", lambda dtype: True)
    assert strided_conv.cpu_strided_conv_fallback([m := model()], torch.bfloat16) == []
    assert not any(getattr(c, strided_conv._INSTALLED_ATTR, False) for c in m)
    monkeypatch.setattr(strided_conv, "strided_weight_grad_works", lambda dtype: pytest.fail("checked"))
    assert strided_conv.cpu_strided_conv_fallback([nn.Linear(2, 2)], torch.bfloat16) == []


@pytest.mark.isa  # (make test runs it again as an AVX2-only CPU)
@pytest.mark.parametrize("precision", ["amp-bf16", "master-bf16", "pure-bf16"])
def test_a_bf16_mode_s_weight_gradient_of_a_strided_convolution_over_a_1x1_input_is_fp32_s(precision: str) -> None:
    """The contract, on every CPU: set up by the engine, the bf16 weight gradient of ResNeXt tiny's last 3x3 stride-2
    convolution over its 1x1 input matches fp32's (5 % of its largest value) in each of 20 calls -- an AMX Xeon's
    oneDNN computed it wrong in 43 % of calls and inf in 1 %, before the engine routed that call around its kernel
    there. The oracle: the same convolution in fp32."""
    torch.manual_seed(0)
    conv = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=4, bias=False)
    ref_conv = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=4, bias=False)
    ref_conv.load_state_dict(conv.state_dict())
    x = torch.randn(8, 32, 1, 1)
    gy = torch.randn(8, 32, 1, 1)
    (ref,) = torch.autograd.grad(ref_conv(x), ref_conv.weight, gy)
    mp = MixedPrecision(precision)
    model, _ = mp.setup(nn.Sequential(conv), torch.optim.SGD(conv.parameters(), lr=0.0))
    weight = model[0].weight
    for _ in range(20):
        with mp.autocast():
            y = model(x.to(weight.dtype) if weight.dtype != torch.float32 else x)
        (got,) = torch.autograd.grad(y, weight, gy.to(y.dtype))
        got = got.float()
        assert bool(torch.isfinite(got).all())
        assert float((got - ref).abs().max()) <= 0.05 * float(ref.abs().max())
