"""The traced step (meta tensors, CUDA's autocast rules): its ops' dtypes, FLOPs and bytes, and the memory split --
each checked against a second computation (a real CPU step counted by ampbench's measuring code, or a hand count)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampbench.data.tensors import TensorData
from ampbench.measure.flops import count_flops
from ampbench.precision import MixedPrecision
from ampbench.predict.trace import effective_bytes, trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta


class Attn(nn.Module):
    """Linear -> LayerNorm -> scores by matmul -> softmax -> matmul -> Linear: one op of each autocast list."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.inp, self.ln, self.out = nn.Linear(d, d), nn.LayerNorm(d), nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln(self.inp(x))
        att = torch.softmax(torch.matmul(h, h.transpose(1, 2)), dim=-1)
        return self.out(torch.matmul(att, h).mean(1))


def _workload(model_fn, shape=(8, 32), classes=4, n=16, opt=None) -> Workload:
    return Workload("t", model_fn(), TensorData((torch.zeros(n, *shape),), torch.zeros(n, dtype=torch.long)),
                    loss_fn=F.cross_entropy, make_optimizer=opt or (lambda p: torch.optim.AdamW(p, lr=1e-3)),
                    batch_size=n)


def _ops(trace, phase: str, name: str) -> list:
    return [o for o in trace.ops if o.phase == phase and o.name == name]


def test_cuda_autocast_runs_matmuls_in_half_and_norms_softmax_loss_in_fp32() -> None:
    t = trace_step(build_meta(lambda: _workload(Attn)), "amp-fp16", 16)
    assert {o.dtype for o in _ops(t, "forward", "aten.addmm")} == {"fp16"}  # the Linears
    assert {o.dtype for o in _ops(t, "forward", "aten.bmm")} == {"fp16"}  # CUDA autocast runs bmm in half
    assert {o.dtype for o in _ops(t, "forward", "aten.native_layer_norm")} == {"fp32"}
    # softmax: CUDA's half_to_float kernel, one op reading the half scores and writing fp32 (no separate cast)
    assert [(o.dtype, o.bytes_read, o.bytes_written) for o in _ops(t, "forward", "aten._softmax")] == [
        ("fp16", 16 * 8 * 8 * 2, 16 * 8 * 8 * 4)]
    # cross_entropy_loss decomposes (CUDA lists no rule for it): log_softmax in the logits' dtype (it passes that dtype
    # explicitly, so fp32_set_opt_dtype leaves it), nll_loss on their fp32 cast
    assert [o.dtype for o in t.ops if o.phase == "loss" and o.name != "aten._to_copy"] == ["fp16", "fp32"]
    assert {o.dtype for o in _ops(t, "backward", "aten.mm")} == {"fp16"}  # half gradients through half matmuls
    # the weight casts: once per weight and bias (autocast's cache), fp32 -> fp16
    casts = [o for o in _ops(t, "forward", "aten._to_copy") if o.dtype == "fp32"]
    assert len([o for o in casts if o.bytes_written * 2 == o.bytes_read]) >= 4


def test_a_weight_used_twice_is_cast_once() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Linear(32, 32, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w(self.w(x)).mean(1)[:, :4]

    t = trace_step(build_meta(lambda: _workload(Tied)), "amp-bf16", 16)
    weight_casts = [o for o in _ops(t, "forward", "aten._to_copy") if o.bytes_read == 32 * 32 * 4]
    assert len(weight_casts) == 1


def test_fp32_keeps_every_op_fp32_and_master_modes_run_a_half_model() -> None:
    fp32 = trace_step(build_meta(lambda: _workload(Attn)), "fp32", 16)
    assert {o.dtype for o in fp32.ops if o.phase in ("forward", "backward") and o.name != "aten._to_copy"} <= {"fp32"}
    master = trace_step(build_meta(lambda: _workload(Attn)), "master-bf16", 16)
    assert {o.dtype for o in _ops(master, "forward", "aten.addmm")} == {"bf16"}
    # fp32 copies of the weights that became bf16 (the LayerNorm's 2 x 32 stay fp32 in the model: no copy)
    assert master.master_bytes == fp32.weights_bytes - 2 * 32 * 4


def test_attention_is_one_fused_op_with_the_model_flops() -> None:
    class Sdpa(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 16).permute(2, 0, 3, 1, 4)
            return self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2).mean(1))

    t = trace_step(build_meta(lambda: _workload(Sdpa)), "amp-bf16", 16)
    fwd = _ops(t, "forward", "ampbench_predict.fused_attention")
    bwd = _ops(t, "backward", "ampbench_predict.fused_attention_backward")
    assert len(fwd) == 1 and len(bwd) == 1 and fwd[0].dtype == "bf16"
    b, h, s, d = 16, 2, 8, 16
    assert fwd[0].flops == 2 * 2 * b * h * s * s * d and bwd[0].flops == 2 * fwd[0].flops  # QK^T and PV; 4 in backward
    assert fwd[0].bytes_read == 3 * b * h * s * d * 2  # Q, K, V read once in bf16: no s x s scores in memory
    assert not [o for o in t.ops if o.name in ("aten.bmm", "aten._softmax")]  # (not the decomposed math path)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 128), nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


class Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.adaptive_avg_pool2d(torch.relu(self.bn(self.c(x))), 1).flatten(1))


@pytest.mark.parametrize("model_fn, shape", [(Mlp, (64,)), (Cnn, (3, 12, 12))])
@pytest.mark.parametrize("precision", ["fp32", "master-bf16", "pure-bf16"])
def test_the_flops_equal_a_real_cpu_step_counted_by_runs_counter(model_fn, shape, precision) -> None:
    """Oracle: the same step run for real on this CPU (the dtypes of these modes are the same on both devices), its
    FLOPs counted by the FLOP counter of ``ampbench run``. (The memory split: tests/predict/test_memory.py.)"""
    torch.manual_seed(0)
    wl = _workload(model_fn, shape, n=16)
    trace = trace_step(build_meta(lambda: _workload(model_fn, shape, n=16)), precision, 16)
    model, opt = wl.model, wl.make_optimizer(wl.model.parameters())
    mp = MixedPrecision(precision, device="cpu")
    model, opt = mp.setup(model, opt)
    x, y = wl.train_data.inputs[0], wl.train_data.targets

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with mp.autocast():
            loss = F.cross_entropy(model(x), y)
        mp.backward(loss)
        mp.step(opt)

    step()
    assert sum(o.flops for o in trace.ops) == count_flops(step)


def test_bytes_count_broadcast_dimensions_once() -> None:
    t = torch.empty(1, 8, device="meta").expand(4, 8)
    assert effective_bytes(t) == 8 * 4 and effective_bytes(torch.empty(4, 8, device="meta")) == 4 * 8 * 4


def test_a_builder_that_reads_values_is_built_on_the_cpu_and_traced_on_meta() -> None:
    def reads() -> Workload:
        n = int(torch.ones(()).sum().item()) * 16  # a value read while building: impossible on meta
        return _workload(Mlp, (64,), n=n)

    t = trace_step(build_meta(reads), "fp32", 16)
    assert t.weights_bytes == 4 * (64 * 128 + 128 + 128 * 10 + 10) and math.isfinite(t.activation_bytes)


@pytest.mark.parametrize("precision, state", [("amp-bf16", "8bit"), ("fp32", "4bit"), ("pure-bf16", "bf16-sr"),
                                              ("master-bf16", "fp8")])
def test_low_precision_optimizer_states_traced_on_meta_take_what_a_real_step_holds(precision: str, state: str,
                                                                                     monkeypatch) -> None:
    """Oracle: the same step with torchao's optimizer on this CPU (its update eager: the same tensors), its state
    storage counted by ampbench run's counter (codes, scales and lookup tables of each quantized moment)."""
    from ampbench.measure.memory import state_bytes
    from ampbench.precision.optimizer_state import missing

    if missing():
        pytest.skip(missing())
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")

    class Wide(nn.Module):  # (a 4096-element weight: quantized; the rest plain)
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)))

    trace = trace_step(build_meta(lambda: _workload(Wide, (64,))), precision, 16,
                       mp_options={"optimizer_state": state})
    torch.manual_seed(0)
    wl = _workload(Wide, (64,))
    mp = MixedPrecision(precision, device="cpu", optimizer_state=state)
    model, opt = mp.setup(wl.model, wl.make_optimizer(wl.model.parameters()))
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        with mp.autocast():
            loss = F.cross_entropy(model(wl.train_data.inputs[0]), wl.train_data.targets)
        mp.backward(loss)
        mp.step(opt)
    held = state_bytes(model, opt, [])  # (the optimizer's states alone: masters are counted apart in both)
    assert trace.torchao and not trace.fusable and trace.state_bytes == held.optimizer
    kind = "bf16" if state == "bf16-sr" else state
    assert kind in (trace.optimizer_states or "")


def test_a_language_model_on_synthetic_text_is_built_on_meta_its_tokens_on_the_cpu() -> None:
    """The Markov text is walked reading its values (on the CPU whatever the default device); the model around it stays on
    meta -- not the whole workload rebuilt on the CPU, its weights initialised for nothing. The tokens are the ones a
    real build draws."""
    from ampbench.workloads import create_workload

    for name in ("gpt2", "lstm-lm"):
        meta, real = build_meta(lambda n=name: create_workload(n, "tiny")), create_workload(name, "tiny")
        assert {p.device.type for p in meta.model.parameters()} == {"meta"}, name
        ((x, *_), y), ((rx, *_), ry) = next(iter(meta.train_data.batches(4))), next(iter(real.train_data.batches(4)))
        assert x.device.type == "cpu" and torch.equal(x, rx) and torch.equal(y, ry), name


@pytest.mark.parametrize("optimizer", [torch.optim.AdamW, torch.optim.SGD])
def test_a_fusable_optimizers_update_is_recorded_as_its_one_fused_kernel(optimizer: type, monkeypatch) -> None:
    """The recorded step does not step a fusable optimizer tensor by tensor on meta (what CUDA runs is one fused
    kernel, which the cost model prices and the peak leaves out): one op, its bytes the parameters, their gradients and
    the state read and the parameters and state written; every other op, the split and the peak as when the meta
    for-loop ran (the oracle: the same trace with it run)."""
    import contextlib

    from ampbench.predict import trace as trace_module
    from ampbench.predict.trace import peak_ops

    def build() -> Workload:
        wl = _workload(Mlp, (64,))
        wl.make_optimizer = lambda p: optimizer(p, lr=1e-3, momentum=0.9) if optimizer is torch.optim.SGD \
            else optimizer(p, lr=1e-3)
        return wl

    fused = trace_step(build_meta(build), "amp-bf16", 16)
    monkeypatch.setattr(trace_module, "_fused_update", lambda *_: contextlib.nullcontext())
    looped = trace_step(build_meta(build), "amp-bf16", 16)
    (update,) = [o for o in fused.ops if o.phase == "optimizer"]
    assert update.name == {torch.optim.AdamW: "aten._fused_adamw_", torch.optim.SGD: "aten._fused_sgd_"}[optimizer]
    params = 4 * (64 * 128 + 128 + 128 * 10 + 10)
    state = params * (2 if optimizer is torch.optim.AdamW else 1) + (4 * 4 if optimizer is torch.optim.AdamW else 0)
    assert fused.state_bytes == state and fused.stepped_bytes == params and update.tensors == 4
    assert (update.bytes_read, update.bytes_written) == (2 * params + state, params + state)
    assert len([o for o in looped.ops if o.phase == "optimizer"]) > 4  # (the oracle did step tensor by tensor)
    def rest(t): return [(o.name, o.phase, o.bytes_read, o.bytes_written, o.live) for o in t.ops if o.phase != "optimizer"]

    assert rest(fused) == rest(looped)
    assert fused.live_peak_bytes == looped.live_peak_bytes and len(peak_ops(fused.ops, True)) == len(rest(fused))
    assert (fused.weights_bytes, fused.grads_bytes, fused.optimizer_bytes, fused.activation_bytes) == \
        (looped.weights_bytes, looped.grads_bytes, looped.optimizer_bytes, looped.activation_bytes)
