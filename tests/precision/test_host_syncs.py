"""No host sync in a steady-state step: counted with a TorchDispatchMode that counts ``aten._local_scalar_dense``
(what ``.item()``, ``float(t)``, ``bool(t)`` dispatch to), per mode and optimizer kind.

With an optimizer that takes ``found_inf`` (fused Adam/AdamW/SGD) the inf/NaN skip and the scale update stay on the
device: 0 reads per step. Any other optimizer: exactly 1 (whether to call its step()). What was true before stays
true: an inf step is skipped (weights and optimizer state unchanged) and counted when read; normal steps are bitwise
those of torch.amp.GradScaler with the same fused optimizer; hysteresis and the floor work on the device.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import functional as F

from ampbench import LossScaleConfig, MixedPrecision, TrainingDivergedError
from ampbench.measure.syncs import HostSyncCounter
from ampbench.precision import scaling

from ..conftest import batches, make_run

MODES = ["fp32", "amp-bf16", "master-bf16", "pure-bf16", "amp-fp16", "master-fp16", "pure-fp16"]


def _step(mp: MixedPrecision, model, optimizer, x, y, scale: float = 1.0):
    optimizer.zero_grad(set_to_none=True)
    with mp.autocast():
        loss = F.cross_entropy(model(x), y)
    mp.backward(loss * scale)
    return mp.step(optimizer)


def _set_up(precision: str, opt: str = "adamw", impl: str | None = "fused", **kw):
    model, optimizer = make_run(opt=opt, impl=impl)
    mp = MixedPrecision(precision, **kw)
    model, optimizer = mp.setup(model, optimizer)
    return mp, model, optimizer


def _loop(precision: str, opt: str, impl: str | None, steps: int, warmup: int = 3, inf_at: int | None = None,
          loss_scale=None):
    model, optimizer = make_run(opt=opt, impl=impl)
    mp = MixedPrecision(precision, loss_scale=loss_scale)
    model, optimizer = mp.setup(model, optimizer)
    data = batches(4)
    counter = HostSyncCounter()
    for i in range(warmup + steps):
        x, y = data[i % len(data)]
        if i == warmup:
            counter.__enter__()
            reads_before = mp.host_reads
        _step(mp, model, optimizer, x, y, float("inf") if i == inf_at else 1.0)
    counter.__exit__(None, None, None)
    return mp, model, optimizer, counter.reads, mp.host_reads - reads_before


@pytest.mark.parametrize("precision", MODES)
@pytest.mark.parametrize("opt", ["adamw", "sgd"])
def test_a_step_with_a_fused_optimizer_makes_no_host_sync(precision: str, opt: str) -> None:
    mp, *_, reads, engine_reads = _loop(precision, opt, "fused", steps=6)
    assert reads == 0 and engine_reads == 0, (precision, opt, reads)
    assert mp.totals["steps"] == 9  # (reading the counters afterwards is what syncs)


def _optimizer_own_reads(opt: str, impl: str, steps: int) -> int:
    """What the optimizer reads by itself (foreach/for-loop Adam reads its step counts), in a loop without ampbench."""
    model, optimizer = make_run(opt=opt, impl=impl)
    x, y = batches(1)[0]
    for i in range(3 + steps):
        if i == 3:
            counter = HostSyncCounter().__enter__()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    counter.__exit__(None, None, None)
    return counter.reads


# (pure-fp16 with Adam skips every step -- eps 1e-8 is 0 in fp16 -- so the optimizer's own reads never happen: it is
# counted with SGD)
@pytest.mark.parametrize(("precision", "opt", "impl"), [
    (p, o, i) for p in MODES for o, i in (("adamw", "foreach"), ("sgd", "forloop")) if (p, o) != ("pure-fp16", "adamw")])
def test_any_other_optimizer_makes_exactly_one_more(precision: str, opt: str, impl: str) -> None:
    *_, reads, engine_reads = _loop(precision, opt, impl, steps=6)
    assert reads - _optimizer_own_reads(opt, impl, 6) == 6 and engine_reads == 6, (precision, impl, reads)


def test_a_mode_without_the_check_never_reads() -> None:
    mp, model, optimizer = _set_up("amp-bf16", check_finite=False)
    x, y = batches(1)[0]
    with HostSyncCounter() as counter:
        for _ in range(3):
            _step(mp, model, optimizer, x, y)
    assert counter.reads == 0


def test_hooks_read_only_what_they_ask_for() -> None:
    """A hook that logs every 4th step reads every 4th step: the record's values are read lazily."""
    mp, model, optimizer = _set_up("amp-fp16")
    logged = []
    mp.on_step(lambda r: logged.append(r.scalars()) if r.step % 4 == 0 else None)
    x, y = batches(1)[0]
    with HostSyncCounter() as counter:
        for _ in range(8):
            _step(mp, model, optimizer, x, y)
    assert len(logged) == 2 and counter.reads == 2 * 4  # loss_scale, found_inf, skipped_steps, loss
    assert logged[0]["loss_scale"] == 2.0**16 and logged[0]["found_inf"] == 0.0


@pytest.mark.parametrize(("precision", "loss_scale"), [("amp-fp16", None), ("master-fp16", None),
                                                       ("amp-bf16", None), ("master-bf16", "static:8")])
def test_an_inf_step_is_skipped_on_the_device_and_counted_when_read(precision: str, loss_scale) -> None:
    mp, model, optimizer = _set_up(precision, loss_scale=loss_scale)
    data = batches(3)
    for i, (x, y) in enumerate(data):
        if i == 2:
            params = copy.deepcopy(model.state_dict())
            masters = [m.detach().clone() for m in mp.master_params()]
            state = copy.deepcopy(optimizer.state_dict())
            scale = mp.scale
        record = _step(mp, model, optimizer, x, y, float("inf") if i == 2 else 1.0)
    assert not record and record.skipped and record.skipped_steps == 1 and mp.totals["skipped_steps"] == 1
    for k, v in model.named_parameters():
        assert torch.equal(v, params[k]), k
    for a, b in zip(mp.master_params(), masters):
        assert torch.equal(a, b)
    for idx, st in state["state"].items():
        for k, v in st.items():
            assert torch.equal(torch.as_tensor(optimizer.state_dict()["state"][idx][k]), torch.as_tensor(v)), (idx, k)
    assert record.scale == scale and mp.scale == (scale / 2 if mp.loss_scale.kind == "dynamic" else scale)


@pytest.mark.parametrize("opt", ["adamw", "sgd"])
def test_normal_steps_are_bitwise_gradscalers_with_the_same_fused_optimizer(opt: str) -> None:
    """Oracle: the hand loop (autocast + torch.amp.GradScaler + the same fused optimizer), steps with an inf among
    them: same weights, same scales, bit for bit."""
    ours_model, ours_opt = make_run(opt=opt, impl="fused")
    ref_model, ref_opt = make_run(opt=opt, impl="fused")
    mp = MixedPrecision("amp-fp16", loss_scale=LossScaleConfig(growth_interval=3))
    ours_model, ours_opt = mp.setup(ours_model, ours_opt)
    scaler = torch.amp.GradScaler("cpu", growth_interval=3)
    ours_scales, ref_scales = [], []
    for i, (x, y) in enumerate(batches(10)):
        bad = float("inf") if i in (2, 6) else 1.0
        ours_opt.zero_grad()
        with mp.autocast():
            loss = F.cross_entropy(ours_model(x), y)
        mp.backward(loss * bad)
        mp.step(ours_opt)
        ours_scales.append(mp.scale)
        ref_opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(ref_model(x), y)
        scaler.scale(loss * bad).backward()
        scaler.step(ref_opt)
        scaler.update()
        ref_scales.append(scaler.get_scale())
    assert ours_scales == ref_scales and mp.totals["skipped_steps"] == 2
    for a, b in zip(ours_model.parameters(), ref_model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_hysteresis_and_the_cap_work_on_the_device(impl: str) -> None:
    mp, model, optimizer = _set_up("amp-fp16", impl=impl, loss_scale=LossScaleConfig(
        init_scale=1024.0, hysteresis=3, growth_interval=2, max_scale=1024.0 * 4))
    x, y = batches(1)[0]
    scales = []
    for overflow in [True, True, True, True, False, False, True, False, False, False, False, False, False]:
        _step(mp, model, optimizer, x, y, float("inf") if overflow else 1.0)
        scales.append(mp.scale)
    # (the host rule of tests/precision/test_scaling.py: two overflows tolerated, then back-off; growth re-arms;
    # growth stops at max_scale)
    assert scales == [1024, 1024, 512, 256, 256, 512, 512, 512, 1024, 1024, 2048, 2048, 4096]
    assert mp.totals["skipped_steps"] == 5


def test_a_collapsed_scale_is_told_within_the_check_interval_naming_its_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scaling, "DIVERGENCE_CHECK_EVERY", 8)
    mp, model, optimizer = _set_up("amp-fp16", loss_scale=LossScaleConfig(init_scale=4.0, min_scale=1.0))
    x, y = batches(1)[0]
    done = 0
    with pytest.raises(TrainingDivergedError, match=r"loss scale fell below 1 at step 3 "):
        for _ in range(20):
            done += 1
            _step(mp, model, optimizer, x, y, float("inf"))
    assert done == 8  # told at the first check, not at step 3 (no read in between)
    with pytest.raises(TrainingDivergedError, match="at step 3 "):
        mp.check_divergence()  # (and at once when asked)


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "master-bf16"])
def test_skip_counts_kept_as_flag_blocks_stay_true_and_records_keep_their_step(
        precision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a scale the step's flag comes from a block made FLAG_BLOCK steps at a time and the skipped count is
    summed when read (no op a step for either): across blocks, after a checkpoint, each record still reads its own
    step, and the counts are the overflows so far. Oracle: the host's own list of which steps overflowed."""
    monkeypatch.setattr(scaling, "FLAG_BLOCK", 4)
    mp, model, optimizer = _set_up(precision)
    bad = {1, 4, 5, 11, 12}
    data = batches(1) * 15
    records = []
    for i, (x, y) in enumerate(data[:7]):
        records.append(_step(mp, model, optimizer, x, y, float("inf") if i in bad else 1.0))
    saved = mp.state_dict()
    mp2, model2, optimizer2 = _set_up(precision)
    model2.load_state_dict(model.state_dict())
    optimizer2.load_state_dict(optimizer.state_dict())
    mp2.load_state_dict(saved)
    for i, (x, y) in enumerate(data[7:], start=7):
        records.append(_step(mp2, model2, optimizer2, x, y, float("inf") if i in bad else 1.0))
    assert [r.skipped for r in records] == [i in bad for i in range(15)]
    assert [r.skipped_steps for r in records] == [sum(j in bad for j in range(i + 1)) for i in range(15)]
    assert records[3].skipped_tensor is not None and float(records[3].skipped_tensor) == 1.0
    assert mp.totals["skipped_steps"] == 3 and mp2.totals["skipped_steps"] == len(bad)
    assert mp2.state_dict()["optimizers"][0]["scaler"]["skipped_steps"] == len(bad)
