"""The engine's ops per step (issue 44): on a model too small to compute, a step's time is its host's, and every aten
op costs the host its dispatch (~1-4 us on a CPU). Counted with a TorchDispatchMode (every op: forward, backward,
optimizer), a MixedPrecision step issues at most the hand-written loop's ops plus the inf/NaN check's, in every mode,
so each microsecond taken out stays out. The hand loops are the ones every tutorial shows (and
benchmarks/engine_overhead.py times): a plain fp32 loop; autocast (+ torch.amp.GradScaler for fp16).

What the engine may add, by name:
- the inf/NaN check of the modes whose loss is not scaled: GradScaler's fused check kernel, and the optimizer's own
  undoing of its step count when handed ``found_inf`` (torch's fused Adam/AdamW);
- master-* modes: the fp32 master copies (half gradients into the masters, masters into the model: one foreach copy
  each), where the hand AMP loop casts every weight in every forward (more ops: the totals below hold);
- fp16 modes whose loss is scaled (the hand loop checks too): ampbench's scale rule over GradScaler's -- unscaling
  before the step (so gradients read after it are true), the step's scale kept for its record, one clamp for the
  ceiling (``max_scale``) and the floor (``min_scale``), and the record of the step a collapsing scale hit the floor.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from ampbench.measure.syncs import HostSyncCounter
from ampbench.precision import get

MODES = ["fp32", "amp-bf16", "amp-fp16", "master-bf16", "master-fp16", "pure-bf16", "pure-fp16"]

CHECK = Counter({"aten._amp_foreach_non_finite_check_and_unscale_.default": 1, "aten._foreach_sub_.List": 1})
MASTER_COPIES = Counter({"aten._foreach_copy_.default": 2})
SCALE_RULE = Counter({
    "aten.reciprocal.default": 1,  # unscale before the step (1/scale in fp32: no fp64 round trip, two casts fewer)
    "aten.clone.default": 1,  # the step's scale, kept for its record
    "aten.clamp_.default": 1,  # ceiling and floor in one
    "aten.lt.Scalar": 1, "aten.clamp.default": 1, "aten.where.self": 1,  # the step the floor was hit
})
PROFILER_LABEL = Counter({"profiler._record_function_enter_new.default": 1,
                          "profiler._record_function_exit._RecordFunction": 1})
"""torch's ``Optimizer.step`` wraps the step in ``record_function``: two ops the engine's direct fused step has not."""
SCALE_RULE_OPS = 4
"""The scale rule's ops over the hand GradScaler loop's, net (GradScaler's own update costs the hand loop one)."""


def _tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 8, generator=g), torch.randint(0, 4, (4,), generator=g)


def _benchmark():  # type: ignore[no-untyped-def]
    """benchmarks/engine_overhead.py, whose loops these are: the ops counted here are those of the loops it times."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "engine_overhead.py"
    spec = importlib.util.spec_from_file_location("engine_overhead", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()


def _ours(name: str) -> Callable[[], None]:
    return BENCH.ours_step_fn(name, _tiny(), *_data())  # type: ignore[no-any-return]  (fused AdamW, lr 1e-4)


def _hand(name: str) -> Callable[[], None]:
    return BENCH.hand_step_fn(name, _tiny(), *_data())  # type: ignore[no-any-return]


def _count(step: Callable[[], None]) -> tuple[Counter[str], int]:
    for _ in range(3):  # (past the first steps' lazy state)
        step()
    with HostSyncCounter() as counter:
        step()
    return counter.ops, counter.reads


@pytest.mark.parametrize("name", MODES)
def test_a_step_issues_the_hand_loops_ops_and_the_inf_nan_checks_only(name: str) -> None:
    with pytest.warns() if name == "pure-fp16" else contextlib.nullcontext():  # (pure-fp16: AdamW's eps=1e-8 is 0 in fp16)
        ours, reads = _count(_ours(name))
    hand, hand_reads = _count(_hand(name))
    scaled = get(name).default_loss_scale != "none"
    allowed = (SCALE_RULE if scaled else CHECK) + (MASTER_COPIES if get(name).master_weights else Counter())
    extra = ours - hand
    assert not extra - allowed, f"{name}: ops the engine adds beyond the allowed ones: {dict(extra - allowed)}"
    assert ours.total() <= hand.total() + (SCALE_RULE_OPS if scaled else CHECK.total()), \
        (name, ours.total(), hand.total(), dict(extra), dict(hand - ours))
    assert reads == hand_reads == 0  # (fused AdamW: the skip is decided on the device)


def test_the_check_is_the_fp32_steps_only_addition() -> None:
    """The floor of the unscaled modes, exactly: the hand fp32 loop's ops + the check kernel + the optimizer's
    found_inf handling -- no flag allocated, no counter added up, no loss detached per step. The engine takes fused
    AdamW's step without ``optimizer.step()`` (precision/fused_step.py): the same kernels, less the profiler label
    torch's step wraps them in; where it hands the step to ``optimizer.step()`` (here: a global step hook; or asked
    to: ``direct_step=False``), the ops are the hand loop's and the check's exactly."""
    ours, _ = _count(_ours("fp32"))
    hand, _ = _count(_hand("fp32"))
    assert ours - hand == CHECK and hand - ours == PROFILER_LABEL
    handle = register_optimizer_step_post_hook(lambda *a: None)
    try:
        ours, _ = _count(_ours("fp32"))
    finally:
        handle.remove()
    assert ours - hand == CHECK and not hand - ours
    ours = _count(BENCH.ours_step_fn("fp32", _tiny(), *_data(), direct_step=False))[0]
    assert ours - hand == CHECK and not hand - ours


@pytest.mark.parametrize("name", ["fp32", "amp-bf16"])
def test_the_hand_loop_with_the_skip_is_ours_work_written_by_hand(name: str) -> None:
    """benchmarks/engine_overhead.py also times ours against the hand loop with the inf/NaN skip written inline
    (the engine's own cost, the check's taken out): that loop issues the hand loop's ops and the check's exactly,
    steps the weights ours steps bit for bit, and skips the step ours skips (an inf gradient planted)."""
    hand = _count(_hand(name))[0]
    skip = _count(BENCH.hand_step_fn(name, _tiny(), *_data(), skip=True))[0]
    assert skip - hand == CHECK and not hand - skip
    x, y = _data()
    models = [_tiny(), _tiny()]
    steps = [BENCH.ours_step_fn(name, models[0], x, y), BENCH.hand_step_fn(name, models[1], x, y, skip=True)]
    for _ in range(3):
        for step in steps:
            step()
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b)
    before = [p.detach().clone() for p in models[1].parameters()]
    models[1][0].weight.register_hook(lambda g: torch.full_like(g, float("inf")))
    steps[1]()
    for a, b in zip(before, models[1].parameters(), strict=True):
        assert torch.equal(a, b)  # skipped: nothing moved (AdamW's weight decay included)
