"""The CUDA emulation of ``ampbench predict``'s trace (autocast's casts at every call depth, cuDNN's layouts, the fused
kernels), each checked against an independent computation.

Oracles: the dispatcher itself (which ops each device's autocast has a kernel for), the real ``torch.autocast("cpu")``
(the same emulation given the CPU's lists must reproduce it op by op on a zoo of models, on real CPU tensors), and a
real channels-last CPU step (every op's output layout)."""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ampbench.precision.fallbacks import autocast_kernel_works
from ampbench.predict.cuda_dispatch import CPU_RULES, CUDA_RULES, CudaDispatch, autocast_kernel_ops
from ampbench.predict.trace import trace_step
from ampbench.workloads.factory import build_meta
from tests import flop_zoo, zoo


@pytest.mark.parametrize("rules", [CPU_RULES, CUDA_RULES], ids=["cpu", "cuda"])
def test_the_lists_hold_exactly_the_ops_autocast_has_kernels_for(rules) -> None:
    """Oracle: the dispatcher (this CPU build of torch registers CUDA's autocast kernels too)."""
    assert rules.ops == autocast_kernel_ops(rules.device)


class _Ops(TorchDispatchMode):
    """Every aten op with the dtypes and layouts of its outputs, per phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.ops: dict[str, list[tuple[str, tuple[str, ...]]]] = collections.defaultdict(list)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        self.ops[self.phase].append((str(func), tuple(str(o.dtype) for o in outs if isinstance(o, torch.Tensor))))
        return out


class _Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dec = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dec(x, x[:, :4]).mean(1))


class _Upsample(nn.Module):
    """F.interpolate, GroupNorm, SiLU, a 1x1 conv: composite functions and fp32-listed ops between half convs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.norm, self.out = nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.Conv2d(8, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.norm(self.conv(x)))
        return self.out(F.interpolate(h, scale_factor=2, mode="bilinear")).flatten(1)[:, :3]


class _Einsum(nn.Module):
    """einsum (a C++ composite of bmm), exp and a sum reduction, a cat of a half and an fp32 tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(12, 8) / 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.einsum("btd,dk->btk", x, self.w)
        return torch.cat([h.exp().sum(1), x.mean(1)[:, :4]], dim=-1)


EXTRA: dict[str, tuple[Callable[[], nn.Module], Callable[[int], tuple[torch.Tensor, ...]], Callable[..., Any]]] = {
    "decoder-layer": (_Decoder, lambda n: (torch.randn(n, 6, 16),), F.cross_entropy),
    "upsample-groupnorm": (_Upsample, lambda n: (torch.randn(n, 3, 8, 8),), F.cross_entropy),
    "einsum-exp-cat": (_Einsum, lambda n: (torch.randn(n, 5, 12),), F.cross_entropy),
    "bce-with-logits": (lambda: nn.Sequential(nn.Linear(10, 16), nn.GELU(), nn.Linear(16, 3)), lambda n: (torch.randn(n, 10),),
                        lambda out, y: F.binary_cross_entropy_with_logits(out, F.one_hot(y, 3).float())),
    "mse": (lambda: nn.Sequential(nn.Conv1d(4, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(48, 3)),
            lambda n: (torch.randn(n, 4, 8),), lambda out, y: F.mse_loss(out, F.one_hot(y, 3).float())),
}


def _case(kind: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], torch.Tensor, Callable[..., Any]]:
    if kind in EXTRA:
        make, inputs, loss = EXTRA[kind]
        torch.manual_seed(0)
        return make(), inputs(4), torch.randint(0, 3, (4,)), loss
    which, name = kind.split(":", 1)
    wl = (zoo if which == "zoo" else flop_zoo).build(name, n=4)
    x, y = wl.train_data.inputs, wl.train_data.targets
    return wl.model, x, y, lambda out, t: wl.loss_fn(out, t)


ZOO = [f"zoo:{k}" for k in zoo.KINDS] + [f"flop:{k}" for k in flop_zoo.KINDS] + list(EXTRA)


def _record(model: nn.Module, inputs: tuple[torch.Tensor, ...], targets: torch.Tensor, loss_fn: Callable[..., Any],
            dtype: torch.dtype, emulate: bool) -> dict[str, list[Any]]:
    model = copy.deepcopy(model)
    rec = _Ops()
    cuda = CudaDispatch(dtype, CPU_RULES, kernels=False) if emulate else None
    with cuda or _nothing(), rec:
        with (cuda.autocast() if cuda else torch.autocast("cpu", dtype)):
            loss = loss_fn(model(*inputs), targets)
        rec.phase = "backward"
        loss.backward()
    return rec.ops


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("kind", ZOO)
def test_the_emulation_given_the_cpus_lists_reproduces_torch_autocast_cpu_op_by_op(kind: str) -> None:
    """Oracle: ``torch.autocast("cpu", bfloat16)`` itself, on the same model and batch (real CPU tensors): every aten
    op of the forward and the loss with its output dtypes, in order; the backward's as a multiset (the autograd
    engine may order independent branches differently)."""
    model, inputs, targets, loss_fn = _case(kind)
    if any(isinstance(m, nn.LSTM) for m in model.modules()) and not autocast_kernel_works(nn.LSTM, torch.bfloat16):
        pytest.skip("torch.autocast('cpu') cannot run an LSTM on this CPU (oneDNN has no bf16 LSTM without AVX-512)")
    real = _record(model, inputs, targets, loss_fn, torch.bfloat16, emulate=False)
    ours = _record(model, inputs, targets, loss_fn, torch.bfloat16, emulate=True)
    assert ours["forward"] == real["forward"]
    assert collections.Counter(ours["backward"]) == collections.Counter(real["backward"])
    assert any("bfloat16" in d for _, dts in real["forward"] for d in dts)  # (autocast did something to compare)


def test_the_emulation_leaves_real_autocast_as_it_was() -> None:
    """The kernels are registered for the block only: after it, torch.autocast("cpu") runs its own again."""
    x = torch.randn(4, 4)
    with CudaDispatch(torch.float16, CUDA_RULES) as cuda, cuda.autocast():
        pass
    with torch.autocast("cpu", torch.bfloat16):
        assert torch.mm(x, x).dtype == torch.bfloat16 and torch.exp(x.bfloat16()).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


def _dtypes(trace, name: str, phase: str = "forward") -> set[str]:
    return {o.dtype for o in trace.ops if o.name == name and o.phase == phase}


def test_cuda_rules_reach_inside_multihead_attention_and_the_encoder_layer() -> None:
    """The issue's case: nn.MultiheadAttention (need_weights: projections, bmm, softmax) and TransformerEncoderLayer
    (fused attention) dispatch through F.multi_head_attention_forward; CUDA autocast casts inside it."""
    wl = build_meta(lambda: flop_zoo.build("mha"))
    t = trace_step(wl, "amp-fp16", 8)
    assert _dtypes(t, "aten.bmm") == {"fp16"} and _dtypes(t, "aten.addmm") <= {"fp16"}
    assert _dtypes(t, "aten.bmm", "backward") == {"fp16"}
    encoder = trace_step(build_meta(lambda: zoo.build("encoder")), "amp-bf16", 8)
    assert _dtypes(encoder, "ampbench_predict.fused_attention") == {"bf16"}
    assert not [o for o in encoder.ops if o.name in ("aten.bmm", "aten._softmax")]
    assert _dtypes(encoder, "aten.native_layer_norm") == {"fp32"}  # (CUDA's fp32 list)


def test_cuda_rules_differ_from_the_cpus_where_the_lists_do() -> None:
    """exp and sum run in fp32 under CUDA autocast (not on the CPU); cross_entropy decomposes into log_softmax in fp32
    and nll_loss; bmm in an einsum runs in half on both."""
    wl = lambda: Workload_of(_Einsum(), (torch.zeros(8, 5, 12),))  # noqa: E731
    cuda = trace_step(build_meta(wl), "amp-bf16", 8)
    cpu = trace_step(build_meta(wl), "amp-bf16", 8, rules=CPU_RULES)
    assert _dtypes(cuda, "aten.exp") == {"fp32"} and _dtypes(cpu, "aten.exp") == {"bf16"}
    assert _dtypes(cuda, "aten.bmm") == _dtypes(cpu, "aten.bmm") == {"bf16"}
    assert _dtypes(cuda, "aten._log_softmax", "loss") == {"fp32"}


def Workload_of(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> Any:
    from ampbench.data.tensors import TensorData
    from ampbench.workloads.base import Workload

    n = inputs[0].shape[0]
    return Workload("t", model, TensorData(inputs, torch.zeros(n, dtype=torch.long)), batch_size=n)


class _Layouts(TorchDispatchMode):
    """Every aten op with whether each of its 4-D outputs is channels-last, per phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.ops: dict[str, list[tuple[str, tuple[bool, ...]]]] = collections.defaultdict(list)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        formats = tuple(o.is_contiguous(memory_format=torch.channels_last) and not o.is_contiguous()
                        for o in outs if isinstance(o, torch.Tensor) and o.dim() == 4 and o.shape[1] > 1
                        and o.shape[2] * o.shape[3] > 1)
        self.ops[self.phase].append((str(func), formats))
        return out


def _layouts(model: nn.Module, x: torch.Tensor, meta: bool) -> dict[str, list[Any]]:
    from ampbench.predict.trace import to_meta

    model = copy.deepcopy(model)
    if meta:
        model, x = to_meta(model), torch.empty_like(x, device="meta")
    model = model.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    rec = _Layouts()
    with CudaDispatch(None) if meta else _nothing(), rec:
        loss = model(x).float().sum()
        rec.phase = "backward"
        loss.backward()
    return rec.ops


CONV_NETS = ["zoo:cnn-bn", "flop:dense-conv", "flop:grouped-conv", "flop:depthwise", "flop:dilated-strided",
             "flop:transposed", "resnet-block"]


@pytest.mark.parametrize("kind", CONV_NETS)
def test_channels_last_is_carried_through_as_a_real_cpu_step_carries_it(kind: str) -> None:
    """Oracle: the same model run for real on this CPU in channels-last (fp32): every op's 4-D outputs are
    channels-last or not exactly as there -- convolutions (whose meta kernel alone returns NCHW), their backward,
    norms, pooling, elementwise ops -- the forward in order, the backward as a multiset."""
    if kind == "resnet-block":
        from predict_checks.references import Bottleneck

        torch.manual_seed(0)
        model, x = nn.Sequential(Bottleneck(16, 8, 2), Bottleneck(32, 8, 1)), torch.randn(2, 16, 12, 12)
    else:
        model, inputs, _, _ = _case(kind)
        x = inputs[0]
    real = _layouts(model, x, meta=False)
    traced = _layouts(model, x, meta=True)
    assert traced["forward"] == real["forward"]
    assert collections.Counter(traced["backward"]) == collections.Counter(real["backward"])
    assert any(any(f) for _, f in real["forward"])  # (channels-last reached the convolutions' outputs)


def test_group_norm_runs_nchw_off_the_cpu_as_cuda_does() -> None:
    """GroupNorm is where CUDA and the CPU differ: ATen's group_norm (and its derivative) makes the input contiguous in
    the input's format on the CPU only, NCHW elsewhere (``input.contiguous(input.device().is_cpu() ?
    input.suggest_memory_format() : MemoryFormat::Contiguous)``): the traced step copies to NCHW before the norm."""
    model, inputs, _, _ = _case("upsample-groupnorm")
    real = _layouts(model, inputs[0], meta=False)["forward"]
    traced = _layouts(model, inputs[0], meta=True)["forward"]
    assert ("aten.native_group_norm.default", (True,)) in real
    assert ("aten.native_group_norm.default", (False,)) in traced and ("aten.clone.default", (False,)) in traced


class _EncoderWithAttention(nn.Module):
    """The issue's case: nn.TransformerEncoder (fused attention inside) and nn.MultiheadAttention with its weights
    (explicit bmm and softmax inside F.multi_head_attention_forward)."""

    def __init__(self, d: int = 1024) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 16, 4 * d, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.mha, self.head = nn.MultiheadAttention(d, 16, batch_first=True), nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.enc(x)
        h, _ = self.mha(h, h, h)
        return self.head(h.mean(1))


def test_amp_is_predicted_faster_than_tf32_on_attention_models() -> None:
    """Predicted at 0.49-0.55x TF32 while the attention modules' matmuls escaped autocast; BERT-large-sized layers on
    an A100 now gain what half precision gives a compute-bound step (NVIDIA publishes 1.83x for BERT-large)."""
    from ampbench.measure.gpus import lookup
    from ampbench.predict.rows import Machine, Question, predict_target

    def build() -> Any:
        return Workload_of(_EncoderWithAttention(), (torch.zeros(32, 128, 1024),))

    rows = {r["precision"]: r for r in predict_target("enc", build, Question(("tf32", "amp-bf16", "amp-fp16"), 32),
                                                      Machine(lookup("a100-80gb")))}
    for amp in ("amp-bf16", "amp-fp16"):
        assert rows[amp]["predicted_speedup_vs_tf32"] > 1.4, rows[amp]
        assert rows[amp]["predicted_math_mode"] == amp[-4:]


def test_the_trace_registers_over_pythons_own_kernels_where_torch_refuses_by_default(monkeypatch) -> None:
    """torch 2.11's ``Library.impl`` defaults to ``allow_override=False``: a kernel over one that Python registered
    (aten::convolution's Meta kernel) raised there, and every prediction with it (found on an H200 machine). With that
    default put back, a convolution step still traces -- channels-last, as cuDNN lays it out -- and the meta kernel it
    covered is in force again afterwards."""
    impl = torch.library.Library.impl

    def strict(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=False):  # type: ignore[no-untyped-def]
        return impl(self, op_name, fn, dispatch_key, with_keyset=with_keyset, allow_override=allow_override)

    monkeypatch.setattr(torch.library.Library, "impl", strict)
    model, inputs, _, _ = _case("flop:dense-conv")
    traced = _layouts(model, inputs[0], meta=True)
    assert any(name.startswith("aten.convolution") and any(f) for name, f in traced["forward"])
    x = torch.empty(2, 3, 8, 8, device="meta").to(memory_format=torch.channels_last)
    assert not torch.nn.functional.conv2d(x, torch.empty(4, 3, 3, 3, device="meta")).is_contiguous(
        memory_format=torch.channels_last)  # (the meta kernel again: NCHW whatever the input)


class _GroupedQueryAttention(nn.Module):
    """Llama 3's attention shape: 8 query heads over 2 key/value heads (``enable_gqa``), causal."""

    def __init__(self, d: int = 64, heads: int = 8, kv_heads: int = 2) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, d // heads
        self.q, self.kv = nn.Linear(d, d), nn.Linear(d, 2 * kv_heads * self.dim)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.dim).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, self.dim).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.head(out.transpose(1, 2).reshape(b, s, -1).mean(1))


def test_grouped_query_attention_reads_its_kv_heads_and_counts_every_query_heads_flops() -> None:
    """It failed to trace (K/V expanded to Q's heads as a broadcast: 2 heads cannot broadcast to 8). Oracle: torch's
    own FLOP formulas, which take grouped-query shapes (``sdpa_flop_count``, ``sdpa_backward_flop_count``), and the
    tensors' sizes."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    model, x = _GroupedQueryAttention(), torch.randn(2, 16, 64)
    trace = trace_step(build_meta(lambda: Workload_of(copy.deepcopy(model), (x,))), "amp-bf16", 2)
    fwd = [o for o in trace.ops if o.name.endswith("fused_attention")]
    bwd = [o for o in trace.ops if o.name.endswith("fused_attention_backward")]
    assert len(fwd) == len(bwd) == 1
    q, k, v = torch.randn(2, 8, 16, 8), torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8)
    assert fwd[0].flops == sdpa_flop_count(q.shape, k.shape, v.shape) == 2 * 2 * (2 * 8 * 16 * 16 * 8)
    # (torch's backward formula adds the scores' recomputation, hardware work ours leaves out: its 5 products, our 4)
    assert bwd[0].flops == 2 * fwd[0].flops == sdpa_backward_flop_count(q.shape, q.shape, k.shape, v.shape) * 4 // 5
    assert fwd[0].bytes_read == 2 * (q.numel() + k.numel() + v.numel())  # (bf16: the K/V heads read as they are)
    assert fwd[0].causal and bwd[0].causal


def test_a_kept_batchnorm_is_traced_without_a_cast_around_it() -> None:
    """master-* keeps BatchNorm in fp32 by giving its kernel the half input with fp32 parameters (as amp-* runs it on
    CUDA): the traced step's forward has every batch norm in bf16 and no cast per norm -- the same casts as amp-bf16's
    forward at most (a cast around each of the 17 norms would add 34)."""
    from ampbench.workloads import create_workload

    def forward(precision: str) -> collections.Counter[tuple[str, str]]:
        trace = trace_step(build_meta(lambda: create_workload("resnet50", "tiny")), precision, 8, channels_last=True)
        return collections.Counter((o.name, o.dtype) for o in trace.ops if o.phase == "forward")

    master, amp = forward("master-bf16"), forward("amp-bf16")
    norms = master[("aten.native_batch_norm", "bf16")]
    assert norms == amp[("aten.native_batch_norm", "bf16")] == 17
    assert not master[("aten.native_batch_norm", "fp32")]
    casts = sum(n for (name, _), n in master.items() if name == "aten._to_copy")
    assert casts <= sum(n for (name, _), n in amp.items() if name == "aten._to_copy") and casts < norms
