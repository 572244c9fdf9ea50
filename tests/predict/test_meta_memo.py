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


def test_views_in_place_ops_subclasses_and_other_devices_run_their_kernel_every_time(monkeypatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    x = torch.empty(4, 4, device="meta")
    with MetaMemo("test") as memo:
        for _ in range(2):
            v = x.t()  # a view: the same storage as x
            assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
            x.add_(1)  # in place: x itself
            y = torch.ones(3) * 2  # CPU tensors: values, not metadata
            assert y.tolist() == [2.0, 2.0, 2.0]
    assert memo.hits == 0
    assert not memo.memo  # nothing remembered
    assert not meta_memo._op_cacheable(torch.ops.aten.add_.Tensor)
    assert not meta_memo._op_cacheable(torch.ops.aten.t.default)
    assert meta_memo._op_cacheable(torch.ops.aten.mm.default)


def test_an_op_that_raised_is_not_remembered_and_raises_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta_memo, "_MEMOS", {})
    a, b = torch.empty(3, 4, device="meta"), torch.empty(5, 6, device="meta")
    with MetaMemo("test") as memo:
        for _ in range(2):
            with pytest.raises(RuntimeError):
                torch.mm(a, b)
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
