"""The host time activation checkpointing adds, as ``predict`` prices it (``cost.CHECKPOINT_HOST``), against the
measured stacks it was not fitted on (``benchmarks/results/cpu/checkpoint_overhead.json``: fitted on blocks of 2 and 4
layers, held out 3 and 6), through the product's own trace and pricing: the op count, the block calls and the
constants as the benchmark applied them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from ampbench.data.tensors import TensorData
from ampbench.execution.checkpointing import checkpoint_blocks
from ampbench.measure.gpus import lookup
from ampbench.predict.cost import CHECKPOINT_HOST, MEASURED_HOST, Host, price
from ampbench.predict.cuda_dispatch import CPU_RULES
from ampbench.predict.trace import trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta

GPU = lookup("a100-80gb")  # (any: the host's time is what is checked)
MEASURED = json.loads((Path(__file__).parents[2] / "benchmarks/results/cpu/checkpoint_overhead.json").read_text())


def _stack(per_block: int, policy: str, layers: int = 24, width: int = 8) -> Workload:
    """The benchmark's stack (blocks of ``per_block`` Linear + ReLU layers), its loss the mean square."""
    stack = nn.Sequential(*(nn.Sequential(*(m for _ in range(per_block) for m in (nn.Linear(width, width), nn.ReLU())))
                            for _ in range(layers // per_block)))
    model = nn.Sequential(stack)
    if policy != "off":
        checkpoint_blocks(model, "the stack", policy=policy)
    return Workload("stack", model, TensorData((torch.zeros(8, width),), torch.zeros(8, width)),
                    loss_fn=lambda out, _: out.square().mean(), batch_size=8,
                    make_optimizer=lambda p: torch.optim.SGD(p, lr=0.1))


def test_the_constants_are_the_benchmarks_fit() -> None:
    for policy, fitted in MEASURED["fitted"].items():
        assert (CHECKPOINT_HOST[policy].per_block, CHECKPOINT_HOST[policy].per_op) == (fitted["per_block"],
                                                                                        fitted["per_op"])


@pytest.mark.parametrize("policy", ["blocks", "selective"])
@pytest.mark.parametrize("per_block", [3, 6])
def test_a_checkpointed_steps_host_time_is_priced_within_10_percent_of_the_held_out_stacks(policy: str,
                                                                                          per_block: int) -> None:
    """The host time of the stack's forward and backward (its loss included, as the benchmark times it), priced on a
    host of the measured CPU's own us per op (its CPU-tensor op the unit: ``dispatch_share`` 1), against the
    measured forward + backward of that stack; without checkpointing the same pricing is the measured plain step by
    construction (its us per op are that step's)."""
    row = next(r for r in MEASURED["rows"] if r["layers_per_block"] == per_block)
    host = Host(forward_us=row["forward_us_per_op"], backward_us=row["backward_us_per_op"], dispatch_share=1.0)
    trace = trace_step(build_meta(lambda: _stack(per_block, policy)), "fp32", 8, rules=CPU_RULES)
    assert trace.checkpointing == policy and max(o.block for o in trace.ops) == 24 // per_block
    priced = price(trace, GPU, tf32=False, phases=("forward", "loss", "backward"), host=host).host_s
    measured = sum(row["us"][policy]) * 1e-6
    assert priced == pytest.approx(measured, rel=0.10), priced / measured - 1
    plain = price(trace_step(build_meta(lambda: _stack(per_block, "off")), "fp32", 8, rules=CPU_RULES),
                  GPU, tf32=False, phases=("forward", "loss", "backward"), host=host).host_s
    assert plain == pytest.approx(sum(row["us"]["off"]) * 1e-6, rel=0.05)


def test_a_compiled_block_pays_no_checkpoint_python_and_the_unit_is_a_cpu_op() -> None:
    from ampbench.predict.cost import Compiled

    trace = trace_step(build_meta(lambda: _stack(2, "selective")), "fp32", 8)
    eager = price(trace, GPU, tf32=False)
    compiled = price(trace, GPU, tf32=False, compiled=Compiled(fuse=True, graphs=False))
    plain_trace = trace_step(build_meta(lambda: _stack(2, "off")), "fp32", 8)
    plain = price(plain_trace, GPU, tf32=False)
    blocks, ops = 12, sum(1 for o in trace.ops if o.block and o.phase == "forward")
    extra = (blocks * CHECKPOINT_HOST["selective"].per_block + ops * CHECKPOINT_HOST["selective"].per_op) \
        * MEASURED_HOST.python_us * 1e-6
    recompute = sum(1 for o in trace.ops if o.phase == "backward") - sum(1 for o in plain_trace.ops
                                                                          if o.phase == "backward")
    assert eager.host_s == pytest.approx(plain.host_s + extra + recompute * MEASURED_HOST.backward_us * 1e-6, rel=1e-6)
    assert compiled.host_s < eager.host_s - extra
    assert MEASURED_HOST.python_us == pytest.approx(MEASURED_HOST.forward_us * 10.88 / 24.13, rel=1e-3)

