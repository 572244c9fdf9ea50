"""Every figure a benchmark row carries, computed a second, independent way (tests/oracles.py) over the model
zoo (tests/zoo.py): MLP, CNN with BatchNorm, tied-embedding LM, nn.TransformerEncoder, LSTM, frozen layers,
a dict-input model -- in fp32, amp-*, master-* and fp8. The row comes from the cell's own code path
(bench.cell.throughput_memory), so what is checked is what ampbench stores."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from ampbench.cells import CellSpec
from ampbench.measure.memory import model_sizes
from ampbench.precision.support import supported
from tests import oracles, zoo

FP8_PROBLEM = supported("fp8-tensorwise", "cpu").reason or None
"""Why fp8 cannot run on this CPU (no torchao, or no fp8 matmul kernel: AVX2 and AVX-512 CPUs without FP16/AMX)."""

CPU = torch.device("cpu")
pytestmark = pytest.mark.isa  # run again under ONEDNN_MAX_CPU_ISA=AVX2 by make test


def measured(kind: str, precision: str, wl=None):  # type: ignore[no-untyped-def]
    from ampbench.frameworks.torch.cell import throughput_memory

    wl = wl or zoo.build(kind)
    fp8 = {"fp8_filter": "dims"} if precision.startswith("fp8") else {}  # (the zoo's layers are too small for "auto")
    spec = CellSpec.of(device="cpu", workload=f"zoo:{kind}", preset="tiny", precision=precision, batch_size=zoo.BATCH,
                    steps=2, warmup=1, **fp8)
    step, row = throughput_memory(wl, spec, zoo.BATCH, CPU, None)
    return wl, step, row


FP8 = [] if FP8_PROBLEM is not None else ["fp8-tensorwise"]


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "master-bf16", *FP8])
@pytest.mark.parametrize("kind", zoo.KINDS)
def test_memory_split_and_flops_match_the_oracles(kind: str, precision: str) -> None:
    wl, step, row = measured(kind, precision)
    model = step.eager_model
    assert row.get("status") in (None, "ok")
    # weights: every parameter and buffer object once (tied weights are one), numel x dtype size
    assert row["weights_bytes"] == oracles.elements_bytes([*model.parameters(), *model.buffers()])
    # gradients: trainable parameters the optimizer steps directly; master-* moves half grads to fp32 masters
    masters = {id(p) for p in step.mp.master_params()}
    tracked = [p for p in model.parameters() if p.requires_grad and p.dtype in (torch.float16, torch.bfloat16)] \
        if masters else []
    direct = [p for p in model.parameters() if p.requires_grad and all(p is not q for q in tracked)]
    assert row["grads_bytes"] == oracles.elements_bytes(direct)
    # optimizer: Adam's moments + step counters, plus the fp32 masters and the gradients of the trained ones
    held = [p for g in step.optimizer.param_groups for p in g["params"] if id(p) in masters]
    assert row["optimizer_bytes"] == (oracles.adam_state_bytes(step.optimizer) + oracles.elements_bytes(held)
                                      + oracles.elements_bytes([p for p in held if p.requires_grad]))
    # activations: what the autograd graph holds for backward, found by walking it
    inputs, targets = step.batches[0]
    with step.mp.autocast():
        loss = wl.loss_fn(wl.call_model(model, inputs), targets)
    assert row["activation_bytes"] == oracles.graph_saved_bytes(loss, model) > 0
    # the model file: what torch.save writes, each storage once (the tied LM's embedding/head is one tensor)
    fresh = zoo.build(kind).model  # (the cell sizes the model as built, before it is set up)
    sizes = model_sizes(fresh)
    assert sizes["model_bytes_fp32"] == oracles.torch_save_bytes(fresh)
    assert sizes["model_bytes_half"] == oracles.torch_save_bytes(fresh, torch.float16)
    if kind == "mlp":  # the textbook count: three Linear layers, the first needs no input gradient -- except that
        # torchao's Float8Linear (fp8 modes) computes it anyway: its autograd Function always returns one (it runs)
        assert row["flops_per_step"] == oracles.linear_flops(zoo.BATCH, [(32, 64), (64, 64), (64, 2)],
                                                             first_needs_input_grad=precision.startswith("fp8"))
    if kind == "frozen":  # the frozen body runs forward only; the head's input needs no gradient (nothing before it trains)
        assert row["flops_per_step"] == 2 * zoo.BATCH * 32 * 64 + 2 * 2 * zoo.BATCH * 64 * 4


def test_tied_weights_are_one_tensor_in_the_model_file() -> None:
    """A GPT-style LM with a tied embedding/head: the file holds the shared matrix once."""
    model = zoo.build("tied-lm").model
    entries = sum(t.numel() * 4 for t in model.state_dict().values())
    sizes = model_sizes(model)
    assert sizes["model_bytes_fp32"] == oracles.torch_save_bytes(model) < entries
    assert entries - sizes["model_bytes_fp32"] == 64 * 32 * 4  # the head's entry names the embedding's storage


def test_linear_weights_are_not_counted_as_activations() -> None:
    """F.linear saves weight.t(), a plain view of the parameter: the model's state, not an activation.
    fp32 saves no weight copies at all; amp-bf16 saves bf16 copies of them (real memory until backward)."""
    _, _, fp32 = measured("mlp", "fp32")
    _, _, bf16 = measured("mlp", "amp-bf16")
    weights_fp32 = (64 * 64 + 64 * 2) * 4  # the Linears whose input needs a gradient save their weight
    x, h = zoo.BATCH * 32 * 4, zoo.BATCH * 64 * 4
    assert fp32["activation_bytes"] < weights_fp32 + x  # was: the weights' fp32 bytes counted in
    assert bf16["activation_bytes"] > fp32["activation_bytes"] - 2 * h  # bf16 copies of inputs and weights count


def test_skipped_steps_match_a_gradscaler_loop() -> None:
    """amp-fp16 with a loss large enough to overflow at the first scales: the steps ampbench skips and its
    final scale are those of the textbook torch.autocast + torch.amp.GradScaler loop on the same batches."""
    def big_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.float(), y) * 2.0**12

    wl = zoo.build("mlp")
    wl.loss_fn = big_loss
    _, step, row = measured("mlp", "amp-fp16", wl)
    reference = zoo.build("mlp")
    batches = [(b[0], b[1]) for b in step.batches]
    skipped, scale = oracles.gradscaler_skipped_steps(reference.model, batches, big_loss, step.calls)
    assert skipped > 0
    assert row["skipped_steps"] == skipped
    assert row["loss_scale"] == scale


@pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))
@pytest.mark.parametrize("kind", ["encoder", "tied-lm", "mlp", "lstm"])
def test_fp8_layers_count_every_linear(kind: str) -> None:
    """Every nn.Linear (subclasses too: nn.MultiheadAttention's out_proj) is converted or skipped with a reason,
    and the converted count is the number of Float8Linear modules after setup."""
    _, step, row = measured(kind, "fp8-tensorwise")
    fresh = zoo.build(kind).model
    linears = zoo.linear_layers(fresh)
    layers = step.mp.fp8_layers
    assert layers.total == len(linears)
    assert sorted([*layers.converted, *layers.skipped]) == sorted(linears)
    converted = [n for n, m in step.eager_model.named_modules() if type(m).__name__ == "Float8Linear"]
    assert sorted(converted) == sorted(layers.converted)
    assert bool(converted) == (kind != "lstm")  # (dims: every multiple-of-16 Linear; the LSTM's 3-way head is not)
    assert row["fp8_layers"].startswith(f"{len(converted)}/{len(linears)} converted")


@pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))
def test_fp8_says_why_attention_out_proj_stays_bf16() -> None:
    _, step, _ = measured("encoder", "fp8-tensorwise")
    reasons = step.mp.fp8_layers.skipped
    assert set(reasons) >= {"enc.layers.0.self_attn.out_proj", "enc.layers.1.self_attn.out_proj"}
    assert "MultiheadAttention" in reasons["enc.layers.0.self_attn.out_proj"]


def test_the_zoo_builds_what_it_says() -> None:
    enc = zoo.build("encoder").model
    assert len(zoo.linear_layers(enc)) == 7
    assert sum(type(m) is nn.Linear for m in enc.modules()) == 5
    lm = zoo.build("tied-lm").model
    assert lm.lm_head.weight is lm.tok.weight


def test_rows_say_which_kernels_the_cpu_ran() -> None:
    """Every CPU row's env records oneDNN's ISA cap and ATen's kernel level: a figure measured under
    ONEDNN_MAX_CPU_ISA=AVX2 is labelled as such (make test runs this file under that cap too)."""
    import os

    from ampbench.measure.env import environment

    env = environment(CPU)
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or "").upper()
    assert env["cpu_isa_limit"] == (cap if cap not in ("", "ALL", "DEFAULT") else None)
    assert env["aten_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    if cap == "AVX2":
        assert not any(env["cpu_half_hardware"].values())


def test_skipped_timed_steps_are_a_warning_on_an_ok_row() -> None:
    """Some timed steps skipped for overflow (not all): the row stays ok and says how many, counted again by the
    textbook GradScaler loop over the same batches (all steps minus those before the timed ones)."""
    def big_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.float(), y) * 2.0**9

    wl = zoo.build("mlp")
    wl.loss_fn = big_loss
    spec = CellSpec.of(device="cpu", workload="zoo:mlp", preset="tiny", precision="amp-fp16", batch_size=zoo.BATCH,
                       steps=8, warmup=1)
    from ampbench.frameworks.torch.cell import throughput_memory

    step, row = throughput_memory(wl, spec, zoo.BATCH, CPU, None)
    batches = [(b[0], b[1]) for b in step.batches]
    # before the timed steps: the first and the memory step, which counts the FLOPs (warm-up 1 = none more)
    before, _ = oracles.gradscaler_skipped_steps(zoo.build("mlp").model, batches, big_loss, 2)
    through, _ = oracles.gradscaler_skipped_steps(zoo.build("mlp").model, batches, big_loss, 2 + 8)
    assert 0 < through - before < 8 and row.get("status") != "diverged"
    (w,) = row["warnings"]
    assert w.startswith(f"{through - before} of the 8 timed steps were skipped for inf/NaN gradients")


@pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))
def test_fp8_mfu_divides_by_the_peak_of_what_ran_in_fp8() -> None:
    """The zoo MLP under fp8-tensorwise (dims rule): its first two Linears convert, the 64x2 head stays bf16. The
    share of the FLOPs in fp8 is the converted layers' by hand, and the MFU peak mixes fp8's and bf16's by it."""
    from ampbench.measure.flops import fp8_peak

    _, step, row = measured("mlp", "fp8-tensorwise")
    b = zoo.BATCH
    fp8 = 3 * 2 * b * 32 * 64 + 3 * 2 * b * 64 * 64  # (Float8Linear computes the first layer's input gradient too)
    assert step.mp.fp8_layers.converted == ["net.0", "net.2"]
    assert row["fp8_flops_share"] == pytest.approx(fp8 / row["flops_per_step"])
    assert row["math_mode"] == "fp8"
    s = row["fp8_flops_share"]
    assert fp8_peak("NVIDIA H100 80GB HBM3", "cuda", s) == pytest.approx(1 / (s / 1979.0 + (1 - s) / 989.5))
    assert fp8_peak("NVIDIA H100 80GB HBM3", "cuda", 0.0) == 989.5


@pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))
def test_an_fp8_row_where_nothing_converted_says_so_and_is_bf16s_math() -> None:
    """torchao's size thresholds (--fp8-filter auto) convert none of the zoo's small layers: the row is amp-bf16's
    math, labelled so, its MFU against bf16's peak (was: fp8 label, MFU halved)."""
    from ampbench.frameworks.torch.cell import throughput_memory

    wl = zoo.build("mlp")
    spec = CellSpec.of(device="cpu", workload="zoo:mlp", preset="tiny", precision="fp8-tensorwise",
                       batch_size=zoo.BATCH, steps=2, warmup=1)
    _, row = throughput_memory(wl, spec, zoo.BATCH, CPU, None)
    assert row["fp8_flops_share"] == 0.0 and row["math_mode"] == "bf16"
    assert any(w.startswith("no Linear layer was converted to fp8") for w in row["warnings"])
