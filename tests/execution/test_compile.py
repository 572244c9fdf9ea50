"""torch.compile with the precision engine on CPU: no graph break or recompile from ampbench's own code
in any mode, and the compiled model trains like the eager one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ampbench import MixedPrecision
from ampbench.execution import Execution, compile_counts, finish_model, prepare_model
from ampbench.precision import list_precisions, supported

CPU_MODES = [p for p in list_precisions() if supported(p, "cpu").ok]
STEPS = 4
# Compiled and eager runs differ by the order of floating-point operations (Inductor fuses and reorders);
# half modes round each differently. Loss after 4 Adam steps, relative.
TOLERANCE = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 1e-2, "fp8": 5e-2}


class Net(nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear -> BatchNorm1d -> Linear: norm layers the half modes keep fp32,
    dims multiples of 16 so the fp8 modes convert them."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(32, 64), nn.LayerNorm(64), nn.Linear(64, 32)
        self.bn, self.head = nn.BatchNorm1d(32), nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.bn(self.fc2(nn.functional.gelu(self.norm(self.fc1(x))))))  # (B, 16)


def _train(precision: str, compiled: bool) -> tuple[list[float], object, object, torch.dtype]:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-4)  # (1e-8 is 0 in fp16: pure-fp16 would go NaN)
    extra = {"fp8_filter": "dims"} if precision.startswith("fp8") else {}
    mp = MixedPrecision(precision, **extra)
    model, opt = mp.setup(model, opt)
    run: nn.Module = model
    counts = []
    start = compile_counts()  # (dynamo's counters are process-wide: other tests' breaks are in them)
    if compiled:
        torch._dynamo.reset()
        run = torch.compile(model, fullgraph=True)  # fullgraph: any graph break raises
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(STEPS, 32, 32, generator=g), torch.randint(0, 16, (STEPS, 32), generator=g)
    losses = []
    for i in range(STEPS):
        opt.zero_grad()
        with mp.autocast():
            out = run(x[i])
            loss = nn.functional.cross_entropy(out.float(), y[i])
        mp.backward(loss)
        mp.step(opt)
        losses.append(float(loss))
        counts.append(compile_counts() - start)
    return losses, counts[0], counts[-1], out.dtype


@pytest.mark.parametrize("precision", CPU_MODES)
def test_compiled_model_has_no_graph_break_and_trains_like_eager(precision: str) -> None:
    eager, _, _, eager_dtype = _train(precision, compiled=False)
    compiled, after_first, after_last, compiled_dtype = _train(precision, compiled=True)
    assert compiled_dtype == eager_dtype  # the mode's autocast / half model is traced with the graph
    assert after_last.breaks == 0
    assert after_first.graphs >= 1 and after_last.graphs == after_first.graphs, "ampbench's step made dynamo recompile"
    dtype = "fp8" if precision.startswith("fp8") else "bf16" if "bf16" in precision else "fp16" if "fp16" in precision else "fp32"
    for e, c in zip(eager, compiled):
        assert abs(c - e) <= TOLERANCE[dtype] * abs(e), (precision, eager, compiled)


def test_channels_last_reaches_weights_masters_and_inputs() -> None:
    """master-bf16 in channels-last: the half conv weight, its fp32 master and the conv's input are all channels-last,
    and training steps keep it so."""
    torch.manual_seed(0)
    seen: list[bool] = []
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 4))
    model[0].register_forward_pre_hook(lambda m, a: seen.append(a[0].is_contiguous(memory_format=torch.channels_last)))
    ex = Execution(memory_format="channels_last")
    prepare_model(model, ex)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mp = MixedPrecision("master-bf16")
    model, opt = mp.setup(model, opt)
    run = finish_model(model, ex)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    for _ in range(2):
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(run(x).float(), y)
        mp.backward(loss)
        assert mp.step(opt)
    weight = model[0].weight
    assert weight.dtype == torch.bfloat16 and weight.is_contiguous(memory_format=torch.channels_last)
    master = next(m for m in mp.master_params() if m.dim() == 4)
    assert master.dtype == torch.float32 and master.is_contiguous(memory_format=torch.channels_last)
    assert seen == [True, True]


def test_flop_counting_goes_around_the_compiled_model_and_a_fallback_is_seen() -> None:
    """Dynamo stops running a frame's compiled code once it was called under a TorchDispatchMode (the FLOP
    counter): the harness counts FLOPs through the eager model, and checks the steps after still ran compiled."""
    from ampbench.measure.flops import count_flops_split
    from ampbench.measure.step import build_step
    from ampbench.workloads import create_workload

    def step_of(compile: str):  # type: ignore[no-untyped-def]
        wl = create_workload("tabular-mlp", "tiny", None, 0)
        return build_step(wl, "amp-bf16", 8, torch.device("cpu"), execution=Execution(compile=compile))

    eager = step_of("off")
    eager(probe=True)
    assert eager.ran_compiled is False
    step = step_of("on")
    step(probe=True)
    assert step.ran_compiled is True
    flops, _ = count_flops_split(lambda: step(eager=True))
    step(probe=True)
    assert flops > 0 and step.ran_compiled is True
    count_flops_split(step)  # what the harness must not do
    step(probe=True)
    assert step.ran_compiled is False
