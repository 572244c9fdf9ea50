"""A step with gradient accumulation priced from three traced micro-batches (ampbench.predict.accumulation), and
``predict --grad-accum``: the ops each micro-batch adds, the FLOPs, the time's linearity in N, the held gradients'
memory, the rows and their identity."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampbench.cells import CellId
from ampbench.data.tensors import TensorData
from ampbench.measure.gpus import lookup
from ampbench.predict.accumulation import TRACED, accumulated
from ampbench.predict.cost import price
from ampbench.predict.rows import Machine, Question, predict_target
from ampbench.predict.trace import trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta
from tests.conftest import cli


def _mlp() -> Workload:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return Workload("mlp", model, TensorData((torch.zeros(64, 64),), torch.zeros(64, dtype=torch.long)),
                    loss_fn=F.cross_entropy, make_optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3), batch_size=64)


PARAMETERS = 6  # (three Linear layers: a weight and a bias each)


def _names(trace, micro: int) -> Counter:
    """The ops of one micro-batch by name, a scalar's aside (autograd adds a one-element gradient of its own once
    gradients are held: nothing a step's time or memory sees)."""
    return Counter(o.name for o in trace.ops if o.micro == micro and o.bytes_written > 8)


def test_each_micro_batch_after_the_first_adds_its_gradients_into_the_held_ones() -> None:
    """fp32: the second and third micro-batches run the first's ops and one in-place add per parameter (autograd's
    AccumulateGrad into the gradients already there); the optimizer and the unscale run once, after them."""
    t = trace_step(build_meta(_mlp), "amp-fp16", 32, micro_batches=TRACED)
    first, second, third = (_names(t, m) for m in range(3))
    assert second - first == Counter({"aten.add_": PARAMETERS}) and not first - second
    assert second == third
    once = Counter(o.name for o in t.ops if o.micro == TRACED)
    assert once["aten._amp_foreach_non_finite_check_and_unscale_"] == 1 and sum(
        1 for o in t.ops if o.phase == "optimizer" and o.micro < TRACED) == 0
    single = trace_step(build_meta(_mlp), "amp-fp16", 32)
    assert sum(first.values()) == sum(1 for o in single.ops if o.phase in ("forward", "loss", "backward")
                                      and o.bytes_written > 8)  # (the loss's weight: a scalar, aside)
    assert Counter(o.name for o in t.ops if o.name == "aten.mul" and o.phase == "loss")["aten.mul"] >= 3  # (weights)


def test_autograds_adds_into_held_gradients_are_marked_and_cost_the_host_a_launch_not_an_op() -> None:
    """AccumulateGrad's add into a held gradient takes the place of the detach that hands a fresh one over (a real
    CPU step of this model, counted: the same backward calls, a detach per parameter or an add), so each costs the host
    the launch it adds, not a whole op: one per parameter in each later micro-batch is marked, nothing else is, and
    the step's host time is each marked op's launch where pricing them as ops would take the backward's per-op figure
    (oracle: the difference by hand; an Ampere card: no kernel table, no kind's issue time beside the per-op figure)."""
    from dataclasses import replace

    from torch.utils._python_dispatch import TorchDispatchMode

    from ampbench.measure.step import build_step
    from ampbench.predict.cost import MEASURED_HOST

    t = trace_step(build_meta(_mlp), "fp32", 32, micro_batches=TRACED)
    marked = [o for o in t.ops if o.accumulates_grad]
    assert [sum(1 for o in marked if o.micro == m) for m in range(TRACED + 1)] == [0, PARAMETERS, PARAMETERS, 0]
    assert all(o.name == "aten.add_" and o.phase == "backward" for o in marked)

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    counts = []
    for n in (1, 2):  # (a plain step, then two micro-batches: the second's backward accumulates)
        step = build_step(_mlp(), "fp32", 32, torch.device("cpu"), micro_batches=n)
        step()
        with Count() as c:
            step()
        counts.append(c.names)
    plain, two = counts
    # (two micro-batches a step issue twice a plain step's calls: an add per parameter where a detach was)
    assert plain["add_"] == 0 and two["add_"] == PARAMETERS
    assert two["detach"] == 2 * plain["detach"] - PARAMETERS and sum(two.values()) == 2 * sum(plain.values())
    gpu = lookup("a100-80gb")
    step_n = accumulated(t, 4)
    as_ops = replace(step_n, ops=[replace(o, accumulates_grad=False) for o in step_n.ops])
    saved = price(as_ops, gpu, False).host_s - price(step_n, gpu, False).host_s
    per = (MEASURED_HOST.op_us("backward") - MEASURED_HOST.launch_us("backward")) * 1e-6
    assert saved == pytest.approx(PARAMETERS * 3 * per)  # (micro-batches 2, 3 and 4 of 4)


def test_master_modes_copy_the_first_micro_batch_into_the_masters_and_add_the_later_ones() -> None:
    """master-bf16: the second micro-batch's backward copies the first's half gradients into the fp32 masters'
    buffers (one multi-tensor copy); from the third on each adds the previous one's, cast to fp32 (a cast per
    parameter and one multi-tensor add) -- why a later micro-batch is traced apart from the second."""
    t = trace_step(build_meta(_mlp), "master-bf16", 32, micro_batches=TRACED)
    first, second, third = (_names(t, m) for m in range(3))
    assert second - first == Counter({"aten._foreach_copy_": 1})
    assert third - second == Counter({"aten._to_copy": PARAMETERS, "aten._foreach_add_": 1})
    assert second - third == Counter({"aten._foreach_copy_": 1})


def test_the_accumulated_step_repeats_the_later_micro_batch_and_prices_linearly_in_n() -> None:
    """N micro-batches: the first's and the second's ops once, the third's N - 2 times, the rest once (the op count
    an oracle); the FLOPs N times one micro-batch's; each micro-batch more adds the same time -- so past LINEAR_FROM
    the step is extended linearly, equal to the ops spelt out and priced (the oracle: ``_price`` of every op)."""
    from dataclasses import replace

    from ampbench.predict.accumulation import LINEAR_FROM, step_ops
    from ampbench.predict.cost import _price

    gpu = lookup("a100-80gb")
    t = trace_step(build_meta(_mlp), "fp32", 32, micro_batches=TRACED)
    single = trace_step(build_meta(_mlp), "fp32", 32)
    counts = [sum(1 for o in t.ops if o.micro == m) for m in range(TRACED + 1)]
    for n in (2, 3, 7):
        a = accumulated(t, n)
        assert a.accumulate == n and len(step_ops(a)) == counts[0] + counts[1] + (n - 2) * counts[2] + counts[3]
        assert price(a, gpu, tf32=False).flops == n * price(single, gpu, tf32=False).flops
    steps = [price(accumulated(t, n), gpu, tf32=False).step_s for n in (3, 4, 5)]
    assert steps[2] - steps[1] == pytest.approx(steps[1] - steps[0], rel=1e-6) and steps[1] > steps[0]
    for n in (LINEAR_FROM + 1, 12):
        extended, spelt = price(accumulated(t, n), gpu, tf32=False), _price(replace(t, accumulate=n), gpu, tf32=False)
        assert extended.step_s == pytest.approx(spelt.step_s, rel=1e-9)
        assert extended.host_s == pytest.approx(spelt.host_s, rel=1e-9) and extended.flops == spelt.flops
        assert (extended.ops, extended.launches) == (spelt.ops, spelt.launches)
        for k, v in spelt.time_split.items():
            assert extended.time_split[k] == pytest.approx(v, rel=1e-9, abs=1e-12)
        for k, v in spelt.op_split.items():
            assert extended.op_split[k] == pytest.approx(v, rel=1e-9, abs=1e-12)
    later = [o for o in step_ops(accumulated(t, 4)) if o.micro == 2]  # (each repetition's own storages)
    made = {k for o in later[: len(later) // 2] if o.allocates for k, _ in o.writes}
    assert made and not made & {k for o in later[len(later) // 2:] for k, _ in o.writes}
    with pytest.raises(ValueError):
        accumulated(single, 2)
    with pytest.raises(ValueError):
        accumulated(t, 1)
    assert accumulated(single, 1) is single


def test_the_earlier_micro_batches_gradients_raise_the_peak_by_at_most_their_bytes() -> None:
    """The peak of an accumulated step is above a plain step's (the gradients the first micro-batch left are held
    while the next runs its forward and backward) by no more than those gradients (their bytes the oracle)."""
    for mode in ("fp32", "amp-bf16"):
        single = trace_step(build_meta(_mlp), mode, 32)
        t = trace_step(build_meta(_mlp), mode, 32, micro_batches=TRACED)
        assert 0 < t.live_peak_bytes - single.live_peak_bytes <= single.grads_bytes
        assert t.activation_bytes == single.activation_bytes  # (a micro-batch's own, as run counts a step's)


def _build() -> Workload:
    from ampbench.workloads import build_target
    from ampbench.workloads.data_options import DataOptions

    return build_target("tabular-mlp", None, "tiny", DataOptions(), 0)


def test_predict_grad_accum_rows_say_the_step_of_n_micro_batches() -> None:
    """``Question(grad_accum=4)``: the step of 4 micro-batches of 16 (64 samples a step: samples/s over them), the
    peak a micro-batch's step with the gradients held, a row identity of its own; a plain row's keys unchanged."""
    gpu = lookup("a100-80gb")
    plain = predict_target("tabular-mlp", _build, Question(("fp32", "amp-bf16"), 16), Machine(gpu))
    acc = predict_target("tabular-mlp", _build, Question(("fp32", "amp-bf16"), 16, grad_accum=4), Machine(gpu))
    for p, a in zip(plain, acc):
        assert a["grad_accum"] == 4 and "grad_accum" not in p and a["batch_size"] == p["batch_size"] == 16
        assert a["predicted_samples_per_s"] == pytest.approx(64 / (a["predicted_step_ms"] / 1e3))
        assert a["predicted_step_ms"] > 3 * p["predicted_step_ms"] * 0.9
        assert a["flops_per_step"] == 4 * p["flops_per_step"]
        assert a["predicted_peak_bytes"] > p["predicted_peak_bytes"]
        assert CellId.of(a).grad_accum == 4 and CellId.of(p).grad_accum == 1 and CellId.of(a) != CellId.of(p)
        assert CellId.of(a).to_row() == {k: a[k] for k in CellId.of(a).to_row()}
    assert acc[1]["predicted_speedup_vs_fp32"] == pytest.approx(acc[0]["predicted_step_ms"] /
                                                                acc[1]["predicted_step_ms"])


@pytest.mark.parametrize("extra, said", [
    (["--grad-accum", "0"], "--grad-accum 0: give the micro-batches per optimizer step, an integer >= 1"),
    (["--grad-accum", "2", "--inference"], "--inference predicts the forward alone"),
])
def test_predict_refuses_a_grad_accum_it_cannot_price_in_one_line(extra: list[str], said: str, tmp_path) -> None:
    code, out, err = cli("predict", "--gpu", "a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny", *extra,
                         "--db", str(tmp_path / "p.db"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1 and said in err, err
    assert not (tmp_path / "p.db").exists()


def test_predict_grad_accum_on_the_command_line(tmp_path) -> None:
    code, out, err = cli("predict", "--gpu", "a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny",
                         "--batch-size", "16", "--grad-accum", "4", "--precisions", "fp32",
                         "--db", str(tmp_path / "p.db"))
    text = " ".join(out.split())
    assert code == 0, err
    assert "batch 16 x 4 micro-batches a step (64 samples): predicted on a100-80gb" in text
    assert "ampbench run of this cell on a100-80gb" in text  # (run --grad-accum measures the same step)


def test_an_accumulated_setting_is_named_in_the_predictions_tables() -> None:
    cell = CellId(workload="bert", preset="small", precision="fp32", batch_size=16, grad_accum=4)
    assert cell.describe() == "batch 16 x 4 micro-batches a step, eager"
    assert cell.describe(with_batch=False) == "4 micro-batches a step, eager"
    assert cell.but(grad_accum=1).describe() == "batch 16, eager"


def _real_accumulated_peak(build, precision: str, batch: int) -> int:
    """Oracle: the most bytes a real CPU step of ``ampbench train --grad-accum 3`` holds at once -- train's own
    accumulation (``_accumulate``) and the engine's step on real tensors, every storage followed from when it is made
    (or held from the step's start: weights, optimizer state, master copies, the batch) to when the step frees it."""
    from ampbench.frameworks.torch.train import _accumulate
    from ampbench.measure.step import build_step
    from ampbench.predict.trace import _Recorder, held_from_start

    step = build_step(build(), precision, batch, torch.device("cpu"))
    for _ in range(3):  # (the optimizer's state made, as the trace's first step makes it)
        step()
    group = [step.batches[0]] * TRACED  # (one batch, as the trace feeds each micro-batch the same one)
    rec = _Recorder({}, follow_storages=True)
    rec.hold(held_from_start(step.model, step.optimizer, step.mp, step.batches[0]))
    with rec:
        step.optimizer.zero_grad(set_to_none=True)
        _accumulate(step.workload, step.model, step.mp, group, TRACED * batch)
        step.mp.step(step.optimizer)
    return max(o.live for o in rec.ops)


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "master-bf16"])
def test_the_accumulated_peak_equals_what_a_real_accumulated_cpu_step_holds(precision: str) -> None:
    """The traced accumulated step's peak (CPU rules) against train's own three micro-batches on real CPU tensors:
    fp32 to the byte but train's running sum of the step's loss (one fp32 scalar the trace does not keep), half modes
    within 0.5% (the CPU's half normalisation statistics and autocast copies, as the plain step's oracle allows)."""
    from ampbench.predict.cuda_dispatch import CPU_RULES

    trace = trace_step(build_meta(_mlp), precision, 16, rules=CPU_RULES, micro_batches=TRACED)
    real = _real_accumulated_peak(_mlp, precision, 16)
    if precision == "fp32":
        assert real - trace.live_peak_bytes in (0, 4)
    else:
        assert trace.live_peak_bytes == pytest.approx(real, rel=0.005)


def test_an_oom_row_of_a_model_with_repeated_blocks_prices_checkpointing_too() -> None:
    """bert small at twice the largest batch a T4 holds: the oom row counts its repeated blocks (4 layers: the oracle,
    its preset) and prices the batch with them checkpointed under each policy -- each figure the row of the same
    batch asked for with ``--checkpointing`` (the oracle) -- and the line under the table names both ways to that
    batch and the faster; a model without blocks (tabular-mlp) has neither; a row stored before the prices points
    to --checkpointing."""
    from rich.console import Console

    from ampbench.report.accumulation import checkpointed_text
    from ampbench.report.console import predicted_tables
    from ampbench.workloads import build_target
    from ampbench.workloads.data_options import DataOptions

    gpu = lookup("t4")

    def build():  # type: ignore[no-untyped-def]
        return build_target("bert", None, "small", DataOptions(), 0)

    largest = predict_target("bert", build, Question(("fp32",), 64), Machine(gpu))[0]["predicted_max_batch"]
    batch = 2 * largest
    bert = predict_target("bert", build, Question(("fp32",), batch), Machine(gpu))[0]
    assert bert["status"] == "oom" and bert["predicted_blocks"] == 4
    asked = predict_target("bert", build, Question(("fp32",), batch, checkpointing=("blocks", "selective")),
                           Machine(gpu))
    for r in asked:
        c = bert["predicted_checkpointed"][r["checkpointing"]]
        assert c["peak_bytes"] == r["predicted_peak_bytes"]
        if r["status"] == "ok":
            assert c["step_ms"] == pytest.approx(r["predicted_step_ms"], rel=1e-9)
            assert c["samples_per_s"] == pytest.approx(r["predicted_samples_per_s"], rel=1e-9)
        else:
            assert r["status"] == "oom" and "step_ms" not in c
    blocks = bert["predicted_checkpointed"]["blocks"]
    assert blocks["samples_per_s"] > 0  # (blocks holds a layer's input alone: twice the batch fits)
    console = Console(record=True, width=600)
    for part in predicted_tables([bert], gpu, 600):
        console.print(part)
    said = " ".join(console.export_text().split())
    assert f"checkpointing its 4 repeated blocks (--checkpointing): blocks {blocks['step_ms']:,.1f} ms a step" in said
    accumulated = bert["predicted_accumulated_samples_per_s"]
    faster = ("gradient accumulation" if accumulated > blocks["samples_per_s"] else "--checkpointing")
    assert f"the faster way to this batch: {faster}" in said
    old = {k: v for k, v in bert.items() if k != "predicted_checkpointed"}
    assert checkpointed_text(old) == ("checkpointing its 4 repeated blocks holds less of the batch's activations "
                                      "(predict --checkpointing off,blocks,selective prices it)")
    mlp = predict_target("tabular-mlp", _build, Question(("fp32",), 2**28), Machine(gpu))[0]
    assert mlp["status"] == "oom" and "predicted_blocks" not in mlp


def test_predict_several_grad_accums_side_by_side(tmp_path) -> None:
    """``--grad-accum 1,4``: each accumulation's rows, every precision; the step of 4 priced from the same traces as
    asking for it alone."""
    from ampbench.predict.config import PredictConfig

    both = PredictConfig.from_strings(gpu="a100-80gb", workloads="tabular-mlp", preset="tiny", batch_size="16",
                                      precisions="fp32,amp-bf16", grad_accum="1,4").predict()
    assert [(r["precision"], int(r.get("grad_accum") or 1)) for r in both] == [
        ("fp32", 1), ("amp-bf16", 1), ("fp32", 4), ("amp-bf16", 4)]
    alone = PredictConfig.from_strings(gpu="a100-80gb", workloads="tabular-mlp", preset="tiny", batch_size="16",
                                       precisions="fp32,amp-bf16", grad_accum="4").predict()
    for a, b in zip(both[2:], alone):
        assert a["predicted_step_ms"] == pytest.approx(b["predicted_step_ms"], rel=1e-12)
        assert a["predicted_peak_bytes"] == b["predicted_peak_bytes"]
