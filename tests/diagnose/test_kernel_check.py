"""A non-finite parameter gradient told apart: the kernel's fault (computed again, it is wrong where fp32's is
finite and in range) or the values' (computed again, it matches fp32's)."""

from __future__ import annotations

import contextlib

import torch

from ampbench.diagnose import diagnose
from ampbench.diagnose.kernel_check import REPEATS, verdict
from ampbench.precision.strided_conv import TOLERANCE
from tests.diagnose import planted


def test_a_half_gradient_is_wrong_where_fp32_s_is_finite_and_in_range() -> None:
    """Planted gradients against an fp32 reference whose largest |g| is 2: an inf, or an error past 5% of 2, is the
    kernel's; an error of 1% is rounding; an fp32 gradient past fp16's 65,504 (or itself NaN) is the values'."""
    ref = torch.tensor([[2.0, -1.0], [0.5, 0.25]])
    rounded = ref + 0.02
    inf = ref.clone()
    inf[0, 0] = float("inf")
    off = ref.clone()
    off[1, 1] = 0.25 + 0.2
    v = verdict([rounded, inf, off, rounded], ref, torch.bfloat16)
    assert v["fault"] and (v["calls"], v["nonfinite"], v["off"]) == (4, 1, 1)
    assert abs(v["max_error"] - 0.2) < 1e-6 and v["fp32_max"] == 2.0 and v["dtype"] == "bfloat16"
    assert not verdict([rounded] * 3, ref, torch.bfloat16)["fault"]  # (1% of the largest: rounding)
    assert TOLERANCE * 2.0 < 0.2
    big = ref * 1e5  # (beyond fp16's range: the half dtype overflows, its kernel is not at fault)
    assert not verdict([big.clone().fill_(float("inf"))], big, torch.float16)["fault"]
    nan = ref.clone()
    nan[0, 1] = float("nan")
    assert not verdict([nan], nan, torch.bfloat16)["fault"]  # (fp32 NaN too: the values')


def test_diagnose_says_a_faulty_half_kernel_is_at_fault_not_the_precision() -> None:
    """The planted kernel writes inf into every other half weight gradient of ``mid`` (fp32 calls are right): the
    first non-finite value is that gradient, and computed again from the same input and output gradient it is wrong
    in half of the calls while fp32's is finite -- the kernel's fault, with the layer kept in fp32 as the fix."""
    planted._FaultyLinear.calls = 0
    d = diagnose(planted.faulty_kernel, "pure-bf16", checks=("nonfinite",), steps=3)
    first, kernel = d.findings[0], d.findings[1]
    assert first.title.startswith("NaN/Inf first appears in the backward of mid (parameter mid.weight)")
    assert kernel.title == "the bfloat16 kernel computing mid.weight's gradient is at fault, not bfloat16's range"
    k = kernel.data["kernel"]
    assert k["fault"] and k["calls"] == REPEATS and k["nonfinite"] == REPEATS // 2 and k["fp32_finite"]
    assert "keep mid in fp32 (MixedPrecision keep_fp32=['mid'])" in kernel.fix


def test_a_gradient_that_matches_fp32_when_computed_again_is_said_to_be_the_values() -> None:
    """The same kernel, faulty only on the step's call: computed again it matches fp32's every time -- not the
    kernel at fault; the finding says so and no kernel finding follows."""
    planted._FaultyLinear.calls = 0
    faulty = planted._FaultyLinear.backward

    def once(ctx, g):  # type: ignore[no-untyped-def]
        if planted._FaultyLinear.calls >= 1:  # (after the step's fault: an even call, right, every time)
            planted._FaultyLinear.calls = 1
        return faulty(ctx, g)

    planted._FaultyLinear.backward = staticmethod(once)  # type: ignore[method-assign]
    try:
        d = diagnose(planted.faulty_kernel, "pure-bf16", checks=("nonfinite",), steps=3)
    finally:
        planted._FaultyLinear.backward = staticmethod(faulty)  # type: ignore[method-assign]
    assert len(d.findings) == 1 and "matched fp32's each time: this step's values, not the kernel" in d.findings[0].detail


def test_the_fp32_reference_is_the_module_s_own_math_not_a_forward_set_on_the_instance() -> None:
    """A kernel fallback sets ``forward`` on the module (a closure over the half module, which a deep copy keeps):
    the fp32 reference is the class's own forward. Planted: an instance forward that doubles its output -- a
    gradient twice fp32's, a fault; the reference taken through the closure would have agreed with it."""
    from ampbench.diagnose.kernel_check import recompute

    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 4).to(torch.bfloat16)
    own = layer.forward
    layer.forward = lambda x: own(x) * 2  # type: ignore[method-assign]
    model = torch.nn.Sequential(layer)
    x = torch.randn(16, 8, dtype=torch.bfloat16)
    k = recompute(model, "0", "0.weight", ((x,), {}), torch.randn(16, 4, dtype=torch.bfloat16), contextlib.nullcontext)
    assert k["fault"] and k["off"] == REPEATS and k["nonfinite"] == 0
