"""The meta memo: a traced step answered from remembered meta outputs is the step traced op by op (every op's shapes,
bytes, FLOPs and the bytes alive after it), and only outputs a rebuild gives exactly are remembered.

Device: none (meta tensors)."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from ampbench.predict import meta_memo, trace
from ampbench.predict.cuda_dispatch import CPU_RULES
from ampbench.predict.meta_memo import MetaMemo
from ampbench.workloads.factory import build_meta, create_workload


def _traced(monkeypatch: pytest.MonkeyPatch, memo: bool, name: str, precision: str, **kwargs) -> trace.Trace:
    with monkeypatch.context() as m:
        if not memo:
            m.setattr(trace, "MetaMemo", lambda regime: contextlib.nullcontext())
        else:
            m.setattr(meta_memo, "_MEMOS", {})  # (a fresh memo: nothing remembered from another test)
        t = trace.trace_step(build_meta(lambda: create_workload(name, "tiny")), precision, 4, **kwargs)
    return dataclasses.replace(t, seconds=0.0)


@pytest.mark.parametrize(("name", "precision", "kwargs"), [
    ("gpt2", "amp-bf16", {}),  # (repeated blocks, attention, tied embeddings, AdamW's fused update)
    ("resnext", "master-fp16", {"channels_last": True}),  # (cuDNN's channels-last convolutions, grouped; fp32 masters)
    ("lstm-lm", "amp-fp16", {"micro_batches": 3}),  # (cuDNN's RNN; an accumulation's micro-batches)
    ("mnist-cnn", "fp32", {"rules": CPU_RULES}),  # (the CPU's rules, the oracle tests')
])
def test_a_step_traced_from_the_memo_is_the_step_traced_op_by_op(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                 precision: str, kwargs: dict) -> None:
    plain = _traced(monkeypatch, False, name, precision, **kwargs)
    remembered = _traced(monkeypatch, True, name, precision, **kwargs)
    assert len(plain.ops) > 20
    assert remembered == plain


def test_the_second_step_of_a_trace_is_answered_from_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    x, w = torch.empty(8, 16, device="meta"), torch.empty(16, 16, device="meta")
    with MetaMemo("test") as memo:
        first = torch.mm(torch.relu(x), w)
        misses = memo.misses
        second = torch.mm(torch.relu(x), w)
    assert (memo.misses, memo.hits) == (misses, misses) and misses >= 2  # (relu, mm: each remembered, then answered)
    assert second.shape == first.shape and second.stride() == first.stride() and second.dtype == first.dtype
    assert second.untyped_storage() is not first.untyped_storage()  # (a new tensor, as the kernel gives)


def test_a_remembered_output_keeps_its_layout_and_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each output answered from the memo has the shape, strides, dtype and storage the kernel gives."""
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    x = torch.empty(2, 3, 8, 8, device="meta").contiguous(memory_format=torch.channels_last)
    w = torch.empty(4, 3, 3, 3, device="meta").contiguous(memory_format=torch.channels_last)

    def ops() -> list[torch.Tensor]:
        return [F.conv2d(x, w) * 2, x.half() + 1, x.permute(0, 2, 3, 1) * 3, torch.empty_like(x).sum((0, 2))]

    def meta(t: torch.Tensor) -> tuple:
        return t.shape, t.stride(), t.dtype, t.storage_offset(), t.untyped_storage().nbytes()

    kernel = [meta(t) for t in ops()]
    with MetaMemo("test") as memo:
        ops()
        remembered = [meta(t) for t in ops()]
    assert memo.hits >= 4
    assert remembered == kernel
    assert kernel[1][2] == torch.float16 and kernel[0][1] != kernel[2][1]


def test_views_shape_changing_ops_out_variants_and_other_devices_run_their_kernel_every_time(monkeypatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    x = torch.empty(4, 4, device="meta")
    out = torch.empty(4, 4, device="meta")
    ws = [torch.empty(4, 6, device="meta") for _ in range(2)]
    with MetaMemo("test") as memo:
        for w in ws:
            v = x.t()  # a view: the same storage as x
            assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
            w.t_()  # an in-place view: its shape changes
            assert w.shape == (6, 4)
            torch.add(x, 1, out=out)  # out=: a written argument that is not the first
            y = torch.ones(3) * 2  # CPU tensors: values, not metadata
            y.add_(1)
            assert y.tolist() == [3.0, 3.0, 3.0]
    assert memo.hits == 0 and not memo.memo  # nothing remembered
    for op in (torch.ops.aten.t.default, torch.ops.aten.t_.default, torch.ops.aten.resize_.default,
               torch.ops.aten.add.out, torch.ops.aten.set_.source_Tensor):
        assert meta_memo._op_kind(op) is None, op
    assert meta_memo._op_kind(torch.ops.aten.mm.default) == meta_memo.FRESH
    assert meta_memo._op_kind(torch.ops.aten.add_.Tensor) == meta_memo.IN_PLACE
    assert meta_memo._op_kind(torch.ops.aten._foreach_mul_.Scalar) == meta_memo.IN_PLACE


def test_an_in_place_op_answered_from_the_memo_returns_the_tensor_it_writes(monkeypatch) -> None:
    """As the kernel: ``add_`` returns its first argument, the same object, metadata as it was (a foreach op returns
    nothing). A second tensor of the same metadata is answered without the kernel."""
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    a, b = (torch.empty(3, 5, device="meta").t() for _ in range(2))
    xs = [torch.empty(2, device="meta"), torch.empty(7, 2, device="meta")]
    with MetaMemo("test") as memo:
        assert a.add_(1) is a and a.mul_(a) is a
        torch._foreach_mul_(xs, 2.0)
        misses = memo.misses
        assert b.add_(1) is b and b.mul_(b) is b
        torch._foreach_mul_(xs, 2.0)
    assert memo.misses == misses and memo.hits == 3
    assert (b.shape, b.stride()) == ((5, 3), (1, 5))


def test_an_in_place_op_that_changed_its_tensor_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_resize_output_`` writes its tensor's shape and is not tagged a view op: the first call's metadata check
    keeps it out of the memo, so the next tensor is resized too."""
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    resize = torch.ops.aten._resize_output_.default
    assert meta_memo._op_kind(resize) == meta_memo.IN_PLACE
    xs = [torch.empty(2, 3, device="meta") for _ in range(2)]
    with MetaMemo("test") as memo:
        for x in xs:
            resize(x, [4, 5], torch.device("meta"))
    assert [x.shape for x in xs] == [(4, 5), (4, 5)] and memo.hits == 0


def test_an_op_that_raised_is_not_remembered_and_raises_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    a, b = torch.empty(3, 4, device="meta"), torch.empty(5, 6, device="meta")
    with MetaMemo("test") as memo:
        for _ in range(2):
            with pytest.raises(RuntimeError):
                torch.mm(a, b)
            with pytest.raises(RuntimeError):
                a.add_(b)  # (an in-place op refused: the shapes do not broadcast)
    assert not memo.memo and memo.hits == 0


def test_the_arguments_other_than_tensors_are_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """1, 1.0 and True promote an integer tensor differently; a sum over another dimension has another shape."""
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    i = torch.empty(4, 6, device="meta", dtype=torch.int32)
    with MetaMemo("test"):
        dtypes = [(i + 1).dtype, (i + 1.0).dtype, (i + True).dtype, (i + 1).dtype]
        shapes = [i.sum(0).shape, i.sum(1).shape, i.sum(0).shape]
    assert dtypes == [torch.int32, torch.float32, torch.int32, torch.int32]
    assert shapes == [(6,), (4,), (6,)]


def test_each_regime_has_its_own_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    x = torch.empty(2, 2, device="meta")
    with MetaMemo(("cuda", True)):
        x * 2
    with MetaMemo(("cpu", True)) as other:
        x * 2
    assert other.hits == 0 and set(meta_memo._MEMOS) == {("cuda", True), ("cpu", True)}


def test_a_full_memo_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    monkeypatch.setattr(meta_memo, "MAX_ENTRIES", 3)
    with MetaMemo("test") as memo:
        for n in range(1, 8):
            torch.empty(n, device="meta") * 2
            assert len(memo.memo) <= 3
    assert memo.hits == 0 and len(memo.memo) >= 1
