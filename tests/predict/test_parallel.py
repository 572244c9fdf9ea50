"""``ampbench predict --gpus N --strategy ddp|fsdp``: the ring all-reduce recomputed by hand, DDP's buckets, the
exposed communication, FSDP2's all-gathers and reduce-scatters per unit as run wraps the model (its repeated blocks
overlapping their neighbours' compute), the fabric's refusals, and the scaling efficiency against published multi-GPU
results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from predict_checks import neusight
from predict_checks.references import resnet50_workload

from ampbench.errors import AmpbenchError
from ampbench.measure.gpus import lookup
from ampbench.predict.config import PredictConfig
from ampbench.predict.cost import price
from ampbench.predict.parallel import (
    BUCKET_BYTES,
    FIRST_BUCKET_BYTES,
    Fabric,
    buckets,
    ddp_cost,
    fabric,
    fsdp_cost,
)
from ampbench.predict.trace import trace_step
from ampbench.workloads.factory import build_meta
from tests.conftest import cli


def test_the_ring_all_reduce_and_the_fabric() -> None:
    a100 = lookup("a100-80gb")
    f = fabric(a100, 8, 1, None)
    assert (f.interconnect, f.world) == ("nvlink", 8) and f.bus_gbs == pytest.approx(600 / 2 * 0.8)
    assert f.allreduce_s(10**8) == pytest.approx(2 * 7 / 8 * 1e8 / 240e9 + 14 * 5e-6)
    assert fabric(a100, 8, 1, "pcie").bus_gbs == pytest.approx(31.5 * 0.8)  # (PCIe gen 4 x16)
    assert fabric(a100, 8, 4, None).bus_gbs == pytest.approx(25 * 0.8)  # (one HDR NIC per GPU: the slowest link)
    assert fabric(a100, 8, 4, "ethernet").bus_gbs == pytest.approx(12.5 / 8 * 0.8)  # (one 100 GbE port per machine)
    assert Fabric(1, 1, "pcie", 10.0, 1e-6).allreduce_s(10**9) == 0.0
    assert fabric(lookup("t4"), 4, 1, None).interconnect == "pcie"  # (no NVLink: PCIe by default)


@pytest.mark.parametrize("gpu, gpus, nodes, link, said", [
    ("t4", 4, 1, "nvlink", "t4 has no NVLink"), ("a100-80gb", 8, 1, "infiniband", "joins machines"),
    ("a100-80gb", 8, 2, "pcie", "is within a machine"), ("a100-80gb", 8, 1, "tpu-link", "choose from"),
    ("a100-80gb", 0, 1, None, "must be >= 1")])
def test_a_fabric_that_cannot_be_is_one_line(gpu: str, gpus: int, nodes: int, link: str | None, said: str) -> None:
    with pytest.raises(AmpbenchError, match=said):
        fabric(lookup(gpu), gpus, nodes, link)


def test_ddp_buckets_and_the_exposed_all_reduce() -> None:
    rest = 60 * 2**20 - FIRST_BUCKET_BYTES - 2 * BUCKET_BYTES
    assert buckets(60 * 2**20) == [FIRST_BUCKET_BYTES, BUCKET_BYTES, BUCKET_BYTES, rest]
    assert buckets(100) == [100]
    trace = trace_step(build_meta(resnet50_workload), "amp-fp16", 64, channels_last=True)
    gpu = lookup("v100-16gb")
    single = price(trace, gpu, False).step_s
    backward = price(trace, gpu, False, phases=("backward",)).step_s
    one = ddp_cost(trace, gpu, False, fabric(gpu, 1, 1, None))
    assert (one.step_s, one.exposed_s) == (single, 0.0)
    fast = ddp_cost(trace, gpu, False, fabric(gpu, 8, 1, None))
    grads = trace.backward_grads_bytes
    assert fast.allreduce_s == pytest.approx(sum(fabric(gpu, 8, 1, None).allreduce_s(b) for b in buckets(grads)))
    # the last bucket cannot hide: at least its all-reduce is exposed, at most all of them
    assert fabric(gpu, 8, 1, None).allreduce_s(buckets(grads)[-1]) <= fast.exposed_s + 1e-12 <= fast.allreduce_s + 1e-12
    assert fast.step_s == pytest.approx(single + fast.exposed_s) and fast.allreduce_s < backward
    slow = ddp_cost(trace, gpu, False, fabric(gpu, 8, 2, "ethernet"))  # (the all-reduce longer than the backward)
    assert slow.allreduce_s > backward and slow.exposed_s >= slow.allreduce_s - backward
    assert slow.scaling_efficiency < fast.scaling_efficiency <= 1.0


def test_predict_over_many_gpus(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    code, text, err = cli("predict", "--gpu", "a100-80gb", "--gpus", "8", "--strategy", "ddp", "--workloads",
                          "tabular-mlp", "--preset", "small", "--precisions", "fp32,amp-bf16", "--json", str(out),
                          "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert "ddp x8 (8 per machine x 1) over nvlink" in " ".join(text.split())
    for r in json.loads(out.read_text()):
        assert (r["strategy"], r["world_size"]) == ("ddp", 8)
        assert r["predicted_samples_per_s"] == pytest.approx(8 * r["batch_size"] * 1e3 / r["predicted_step_ms"])
        assert r["predicted_samples_per_s_per_gpu"] == pytest.approx(r["predicted_samples_per_s"] / 8)
        assert r["predicted_joules_per_sample"] == pytest.approx(400 / r["predicted_samples_per_s_per_gpu"])  # (each GPU)
        assert 0 < r["predicted_scaling_efficiency"] <= 1 and r["predicted_comm_ms"] <= r["predicted_allreduce_ms"]


def test_several_gpus_without_a_strategy_are_ddp_said_so_and_a_slow_fabric_is_communication_bound(
        tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    code, text, err = cli("predict", "--gpu", "a100-80gb", "--gpus", "8", "--nodes", "2", "--interconnect",
                          "ethernet", "--workloads", "wide-mlp", "--preset", "tiny", "--precisions",
                          "fp32,amp-bf16", "--json", str(out), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    flat = " ".join(text.split())
    assert "16 GPUs and no --strategy: predicted as DDP (data parallel" in flat and "None" not in flat
    for r in json.loads(out.read_text()):
        assert r["strategy"] == "ddp"
        split = r["predicted_time_split"]
        assert split["communication"] == pytest.approx(r["predicted_comm_share"])
        assert sum(split.values()) == pytest.approx(1.0)
        assert r["predicted_bound"] == max(split, key=split.get)
        if r["predicted_comm_share"] > 0.5:  # (the case: 0.84 of the step, which said "launch")
            assert r["predicted_bound"] == "communication"
    assert any(json.loads(out.read_text())[i]["predicted_bound"] == "communication" for i in range(2))


@pytest.mark.parametrize("kw, said", [
    ({"strategy": "ddp"}, "--strategy ddp needs more than one GPU: add --gpus N"),
    ({"gpus_per_node": 0}, "--gpus 0: give a count >= 1"),  # (was predicted as one GPU)
    ({"gpus_per_node": 8, "nodes": -1}, "--nodes -1: give a count >= 1"),
    ({"gpus_per_node": 8, "strategy": "zero3"}, "predict takes ddp or fsdp"),
    ({"gpus_per_node": 8, "strategy": "ddp", "inference": True}, "--inference one GPU's forward"),
    ({"gpus_per_node": 8, "inference": True}, "--gpus 8 --nodes 1 predicts training over many GPUs"),
    ({"gpus_per_node": 4, "strategy": "ddp", "interconnect": "nvlink", "gpu": "t4"}, "t4 has no NVLink")])
def test_bad_many_gpu_options_are_one_line(kw: dict, said: str) -> None:
    with pytest.raises(AmpbenchError, match=said):
        PredictConfig.from_strings(**{"gpu": "a100-80gb", "workloads": "tabular-mlp", "preset": "tiny", **kw})


# ---- published scaling -----------------------------------------------------------------------------------------------
# DeepLearningExamples ResNet-50 v1.5 (PyTorch) README, training performance, 8 GPUs vs 1 (strong scaling, per-GPU
# batch as on one GPU): DGX A100 80GB TF32 7.72x, AMP 6.72x; DGX-1 V100 16GB FP32 7.76x, AMP 6.93x; V100 32GB FP32
# 7.75x, AMP 6.96x. Checked: the predicted scaling efficiency (one GPU's step / the 8-GPU step) within 15%.
DLE_SCALING = {("a100-80gb", "tf32", 256): 7.72, ("a100-80gb", "amp-fp16", 256): 6.72, ("v100-16gb", "fp32", 112): 7.76,
               ("v100-16gb", "amp-fp16", 256): 6.93, ("v100-32gb", "fp32", 112): 7.75, ("v100-32gb", "amp-fp16", 256): 6.96}
SCALING_MISSES = {
    ("a100-80gb", "amp-fp16", 256): "predicted 0.997 against 0.84 (+19%): the published AMP runs lose what gradient "
                                    "communication does not explain (the input pipeline at 16,600 img/s, left out)",
    ("v100-16gb", "amp-fp16", 256): "predicted 0.998 against 0.866 (+15.2%), as the A100's",
}


@pytest.mark.parametrize("key", [pytest.param(k, id="-".join(map(str, k)), marks=pytest.mark.xfail(
    strict=True, reason=SCALING_MISSES[k])) if k in SCALING_MISSES else pytest.param(k, id="-".join(map(str, k)))
    for k in DLE_SCALING])
def test_resnet50_eight_gpu_scaling_within_15_percent(key: tuple[str, str, int]) -> None:
    gpu_key, precision, batch = key
    gpu = lookup(gpu_key)
    trace = trace_step(build_meta(resnet50_workload), "fp32" if precision == "tf32" else precision, batch,
                       channels_last=precision == "amp-fp16")
    predicted = ddp_cost(trace, gpu, precision == "tf32", fabric(gpu, 8, 1, None)).scaling_efficiency
    assert abs(predicted / (DLE_SCALING[key] / 8) - 1) <= 0.15, (predicted, DLE_SCALING[key] / 8)


def test_neusight_four_h100_data_parallel_scaling() -> None:
    """GPT-2 large, sequence 1024, 4 per GPU: NeuSight measured 642.1 ms a step on 4 x H100 (data parallel) against
    638.8 ms on one (its forward and backward, fp32): efficiency 0.995. Predicted within 15%."""
    pytest.importorskip("transformers")
    (one,) = [s for s in neusight.steps() if s.gpu == "h100-sxm" and s.model == "gpt2_large" and s.batch == 4]
    trace = trace_step(build_meta(neusight.step_workload(one)), "fp32", 4)
    gpu = lookup("h100-sxm")
    d = ddp_cost(trace, gpu, False, fabric(gpu, 4, 1, None))
    measured = one.total_ms / 642.0809020996094
    assert abs(d.scaling_efficiency / measured - 1) <= 0.15, (d.scaling_efficiency, measured)


# ---- FSDP2 ----------------------------------------------------------------------------------------------------------
def _bert_tiny():  # type: ignore[no-untyped-def]
    from ampbench.workloads import DataOptions, build_target

    return lambda: build_target("bert", None, "tiny", DataOptions(), 0, preset_given=False)


@pytest.mark.parametrize("precision, gather, reduce", [("amp-bf16", 4, 4), ("pure-bf16", 2, 2), ("master-bf16", 2, 4)])
def test_fsdp_moves_each_units_parameters_and_gradients_in_the_layouts_dtypes(
        precision: str, gather: int, reduce: int) -> None:
    """Recomputed by hand from BERT tiny's modules and the dtypes ``run --strategy fsdp`` uses (amp-*: fp32 parameters
    and gradients; pure-*: half both; master-*: half all-gathered, fp32 reduced, its LayerNorms fp32 units): its two
    BertLayers are units of their own, all-gathered twice (resharded after forward), the root once; every gradient is
    reduce-scattered once; a rank sends (N-1)/N of each."""
    from ampbench.distributed.strategy import layout
    from ampbench.precision import get

    build = _bert_tiny()
    model = build().model
    numel = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    layers = [m for m in model.modules() if type(m).__name__ == "BertLayer"]
    block = sum(p.numel() for m in layers for p in m.parameters())
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    norm = sum(p.numel() for m in norms for p in m.parameters())
    norm_in = sum(p.numel() for m in layers for n in m.modules() if isinstance(n, torch.nn.LayerNorm)
                  for p in n.parameters())
    assert len(layers) == 2 and 0 < norm_in < norm
    trace = trace_step(build_meta(build), precision, 8)
    assert trace.fsdp is not None and (trace.fsdp.numel, trace.fsdp.blocks) == (numel, 2)
    if precision.startswith("master"):  # (norm units fp32, twice; the blocks' own elements less their norms)
        gathered = (numel - block - (norm - norm_in)) * gather + 2 * (block - norm_in) * gather + 2 * norm * 4
    else:
        gathered = (numel - block) * gather + 2 * block * gather
    gpu = lookup("a100-80gb")
    f = fsdp_cost(trace, gpu, False, fabric(gpu, 8, 1, None, "fsdp"), layout("fsdp", get(precision)))
    assert f.comm_bytes == int(7 / 8 * (gathered + numel * reduce)) and f.units == 3


def test_fsdp_overlaps_the_blocks_collectives_with_their_neighbours_compute() -> None:
    """The timeline's limits, each computed apart: on a free network nothing waits (the step is the compute with the
    optimizer's shard); on a slow one the step is the collectives end to end (they queue on one network) plus what no
    collective overlaps; in between, per-block units wait less than one unit for the whole model, whose all-gather
    and reduce-scatter nothing hides."""
    from dataclasses import replace

    from ampbench.distributed.strategy import layout
    from ampbench.distributed.units import FsdpSplit
    from ampbench.precision import get

    trace = trace_step(build_meta(_bert_tiny()), "amp-bf16", 64)
    gpu, lay = lookup("a100-80gb"), layout("fsdp", get("amp-bf16"))
    rest = price(trace, gpu, False, phases=("forward", "loss", "backward", "step")).step_s
    optimizer = price(trace, gpu, False, phases=("optimizer",))
    shard = max(optimizer.host_s, optimizer.gpu_s / 16)
    base = fabric(gpu, 8, 2, None, "fsdp")
    free = fsdp_cost(trace, gpu, False, replace(base, bus_gbs=1e12, hop_s=0.0), lay)
    assert free.exposed_s == pytest.approx(0.0, abs=1e-9) and free.step_s == pytest.approx(rest + shard)
    slow = fsdp_cost(trace, gpu, False, replace(base, bus_gbs=1e-3), lay)
    comm = slow.allgather_s + slow.reduce_scatter_s
    assert comm <= slow.step_s <= comm + rest + shard
    assert slow.step_s >= comm + shard  # (the first all-gather's wait and the optimizer after the last reduce-scatter)
    blocks = fsdp_cost(trace, gpu, False, base, lay)
    root_only = fsdp_cost(replace(trace, fsdp=FsdpSplit(trace.fsdp.numel)), gpu, False, base, lay)
    assert root_only.units == 1 and blocks.units == 3
    assert root_only.exposed_s == pytest.approx(root_only.allgather_s + root_only.reduce_scatter_s)
    assert blocks.exposed_s < root_only.exposed_s
    assert blocks.exposed_s < blocks.allgather_s + blocks.reduce_scatter_s  # (some of it hidden)


def test_predict_fsdp_rows_say_what_they_move_and_shard_the_state(tmp_path: Path) -> None:
    from ampbench.workloads import DataOptions, build_target

    build = lambda: build_target("tabular-mlp", None, "tiny", DataOptions(), 0, preset_given=False)  # noqa: E731
    model = build().model
    numel = sum(p.numel() for p in model.parameters())
    norms = (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.modules.batchnorm._BatchNorm)
    norm = sum(p.numel() for m in model.modules() if isinstance(m, norms) for p in m.parameters())
    assert norm > 0
    out = tmp_path / "p.json"
    code, text, err = cli("predict", "--gpu", "a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny",
                          "--precisions", "fp32,master-bf16", "--gpus", "4", "--strategy", "fsdp",
                          "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert code == 0, err
    rows = {r["precision"]: r for r in json.loads(out.read_text())}
    one = {r["precision"]: r for r in PredictConfig.from_strings(gpu="a100-80gb", workloads="tabular-mlp",
                                                                 preset="tiny", precisions="fp32,master-bf16").predict()}
    for name, r in rows.items():
        assert r["status"] == "ok" and r["strategy"] == "fsdp" and r["world_size"] == 4 and r["predicted_fsdp_units"] == 1
        assert r["predicted_comm_ms"] == pytest.approx(r["predicted_allgather_ms"] + r["predicted_reduce_scatter_ms"])
        # (tabular-mlp has no repeated blocks: the root is its one unit, nothing hides its collectives)
        assert r["predicted_comm_bytes_per_step"] > 0 and 0 < r["predicted_scaling_efficiency"] < 1
        # memory, by hand: each rank a quarter of the state, plus the one unit's parameters and gradients whole in the
        # all-gather dtype (fp32; master-bf16: bf16) while it computes; master-*'s half gradients beside the masters
        # are that unit's, not held apart
        single = one[name]
        whole = (numel - norm) * 2 + norm * 4 if name == "master-bf16" else numel * 4  # (master-*: norms fp32 units)
        assert r["predicted_optimizer_bytes"] == single["predicted_optimizer_bytes"] // 4
        assert r["predicted_weights_bytes"] == single["predicted_weights_bytes"] // 4 + whole
        assert r["predicted_grads_bytes"] == single["predicted_grads_bytes"] // 4 + whole
        held = ("predicted_weights_bytes", "predicted_grads_bytes", "predicted_optimizer_bytes")
        trace = trace_step(build_meta(build), name, max(r["batch_size"], 2))
        in_flight = max(0, trace.backward_grads_bytes - trace.grads_bytes)
        assert r["predicted_peak_bytes"] == single["predicted_peak_bytes"] - sum(single[k] for k in held) + sum(
            r[k] for k in held) - in_flight
    said = " ".join(text.split())
    assert "reduce-scatters" in said and "one unit, as run wraps a model without repeated blocks" in said


def test_an_fsdp_rank_holds_its_shard_and_the_units_it_computes() -> None:
    """BERT tiny, amp-bf16 (fp32 gathered), 8 ranks, by hand from its modules: a rank holds 1/8 of the one-GPU
    weights, gradients and optimizer state, plus the root's parameters and gradients whole, and two BertLayers'
    parameters (the one computing, the one prefetched) and one's gradients."""
    from ampbench.distributed.strategy import layout
    from ampbench.precision import get
    from ampbench.predict.parallel import fsdp_memory

    build = _bert_tiny()
    model = build().model
    numel = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    layer = sum(p.numel() for p in next(m for m in model.modules() if type(m).__name__ == "BertLayer").parameters())
    trace = trace_step(build_meta(build), "amp-bf16", 8)
    m = fsdp_memory(trace, layout("fsdp", get("amp-bf16")), 8, 8000, 4000, 16000)
    root = (numel - 2 * layer) * 4
    assert (m.weights, m.gradients, m.optimizer) == (1000 + root + 2 * layer * 4, 500 + root + layer * 4, 2000)


def _accumulating(precision: str) -> tuple:  # type: ignore[type-arg]
    """bert tiny's step of ``precision`` at batch 16, traced plain and with three micro-batches."""
    from ampbench.predict.accumulation import TRACED

    build = _bert_tiny()
    return (trace_step(build_meta(build), precision, 16),
            trace_step(build_meta(build), precision, 16, micro_batches=TRACED))


def test_ddp_reduces_an_accumulated_step_once_or_every_micro_batch_by_mode() -> None:
    """DDP under gradient accumulation as train runs it: amp-* all-reduce once a step (no_sync before the last
    micro-batch: the plain step's buckets, waited on past one backward, whatever N); master-* every micro-batch (N x
    the buckets, N x the wait); on a network that costs nothing the step is the one-GPU accumulated step."""
    from dataclasses import replace

    from ampbench.predict.accumulation import accumulated

    gpu = lookup("a100-80gb")
    base = fabric(gpu, 8, 2, None)
    for precision, every in (("amp-bf16", False), ("master-bf16", True)):
        plain, traced = _accumulating(precision)
        one = ddp_cost(plain, gpu, False, base)
        d4, d8 = (ddp_cost(accumulated(traced, n), gpu, False, base, every_micro_batch=every) for n in (4, 8))
        for n, d in ((4, d4), (8, d8)):
            assert d.single_s == pytest.approx(price(accumulated(traced, n), gpu, False).step_s)
            assert d.step_s == pytest.approx(d.single_s + d.exposed_s)
            assert d.allreduce_s == pytest.approx(one.allreduce_s * (n if every else 1))  # (the same buckets)
        if every:
            assert d8.exposed_s == pytest.approx(2 * d4.exposed_s) and d4.exposed_s > 0
        else:
            assert d8.exposed_s == pytest.approx(d4.exposed_s)
        # (the last micro-batch's backward adds into the held gradients: longer than a plain one, hiding as much)
        assert 0 < d4.exposed_s / (4 if every else 1) <= one.exposed_s * (1 + 1e-9)
        free = ddp_cost(accumulated(traced, 4), gpu, False, replace(base, bus_gbs=1e12, hop_s=0.0),
                        every_micro_batch=every)
        assert free.exposed_s == pytest.approx(0.0, abs=1e-9) and free.step_s == pytest.approx(d4.single_s)


def test_fsdp_gathers_and_reduce_scatters_every_micro_batch_of_an_accumulated_step() -> None:
    """FSDP2 under gradient accumulation: every micro-batch all-gathers and reduce-scatters as a plain step does (N x
    the collectives and the bytes); on one rank over a free network the step is the one-GPU accumulated step priced
    whole (within 2 %: priced as its micro-batches, each reduce-scattered shard's add for autograd's); each micro-batch
    more adds the same time."""
    from dataclasses import replace

    from ampbench.distributed.strategy import layout
    from ampbench.precision import get
    from ampbench.predict.accumulation import accumulated

    gpu, lay = lookup("a100-80gb"), layout("fsdp", get("amp-bf16"))
    plain, traced = _accumulating("amp-bf16")
    base = fabric(gpu, 8, 2, None, "fsdp")
    one = fsdp_cost(plain, gpu, False, base, lay)
    f3, f4, f8 = (fsdp_cost(accumulated(traced, n), gpu, False, base, lay) for n in (3, 4, 8))
    assert f4.allgather_s == pytest.approx(4 * one.allgather_s)
    assert f4.reduce_scatter_s == pytest.approx(4 * one.reduce_scatter_s)
    assert f4.comm_bytes == 4 * one.comm_bytes and f4.units == one.units
    assert f8.step_s - f4.step_s == pytest.approx(4 * (f4.step_s - f3.step_s))
    assert f4.step_s > 3.5 * one.step_s
    alone = fsdp_cost(accumulated(traced, 4), gpu, False, Fabric(1, 1, "nvlink", 1e12, 0.0, "fsdp"), lay)
    assert alone.exposed_s == pytest.approx(0.0, abs=1e-9)
    assert alone.step_s == pytest.approx(price(accumulated(traced, 4), gpu, False).step_s, rel=0.02)
    slow = fsdp_cost(accumulated(traced, 4), gpu, False, replace(base, bus_gbs=1e-3), lay)
    assert slow.step_s >= slow.allgather_s + slow.reduce_scatter_s  # (the collectives queue on one network)


def test_predict_accumulated_steps_over_many_gpus(tmp_path: Path) -> None:
    """``predict --grad-accum 4 --gpus 8``: samples/s over every rank's 4 micro-batches, each GPU's too; how often a
    step reduces (``predicted_reductions``), said in the fabric's line."""
    for strategy, reductions in (("ddp", {"amp-bf16": 1, "master-bf16": 4}), ("fsdp", {"amp-bf16": 4,
                                                                                         "master-bf16": 4})):
        out = tmp_path / f"{strategy}.json"
        code, text, err = cli("predict", "--gpu", "a100-80gb", "--gpus", "8", "--strategy", strategy, "--workloads",
                              "bert", "--preset", "tiny", "--batch-size", "16", "--grad-accum", "4", "--precisions",
                              "amp-bf16,master-bf16", "--json", str(out), "--db", str(tmp_path / "r.db"))
        assert code == 0, err
        said = " ".join(text.split())
        assert "batch 16 x 4 micro-batches a step (64 samples)" in said
        rows = json.loads(out.read_text())
        for r in rows:
            assert (r["strategy"], r["world_size"], r["grad_accum"]) == (strategy, 8, 4)
            assert r["predicted_samples_per_s"] == pytest.approx(8 * 16 * 4 * 1e3 / r["predicted_step_ms"])
            assert r["predicted_samples_per_s_per_gpu"] == pytest.approx(r["predicted_samples_per_s"] / 8)
            assert r["predicted_reductions"] == reductions[r["precision"]]
        if strategy == "ddp":
            assert ("the gradients' all-reduce (once, in the last of 4 micro-batches' backward; master-bf16 in each "
                    "micro-batch's)") in said
        else:
            assert "each of 4 micro-batches gathers and reduce-scatters anew" in said


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_an_oom_batch_over_many_gpus_trains_by_accumulation_priced_as_that_step(strategy: str) -> None:
    """A batch per GPU that does not fit a rank: its row says the strategy (its title's), and the fewest equal
    micro-batches whose accumulated step fits a rank (FSDP: its share), priced as that step asked for with
    ``--grad-accum`` over the same ranks (the oracle); the console names train's options for those ranks."""
    from rich.console import Console

    from ampbench.measure.gpus import lookup as gpu_of
    from ampbench.predict.rows import Machine, Question, predict_target
    from ampbench.report.console import predicted_tables
    from ampbench.workloads import DataOptions, build_target

    def build():  # type: ignore[no-untyped-def]
        return build_target("tabular-mlp", None, "tiny", DataOptions(), 0)

    gpu = gpu_of("t4")
    machine = Machine(gpu, fabric(gpu, 4, 1, None, strategy))
    fits = predict_target("tabular-mlp", build, Question(("fp32",), 64), machine)[0]
    big = fits["predicted_max_batch"] + 1
    row = predict_target("tabular-mlp", build, Question(("fp32",), big), machine)[0]
    assert row["status"] == "oom" and (row["strategy"], row["world_size"], row["gpus_per_node"]) == (strategy, 4, 4)
    n, micro = row["predicted_accumulated_micro_batches"], row["predicted_accumulated_batch"]
    assert n >= 2 and n * micro == big and row["predicted_accumulated_peak_bytes"] <= row["predicted_usable_bytes"]
    same = predict_target("tabular-mlp", build, Question(("fp32",), micro, grad_accum=n), machine)[0]
    assert same["status"] == "ok" and same["strategy"] == strategy
    assert row["predicted_accumulated_step_ms"] == pytest.approx(same["predicted_step_ms"], rel=1e-9)
    assert row["predicted_accumulated_samples_per_s"] == pytest.approx(same["predicted_samples_per_s"], rel=1e-9)
    assert row["predicted_accumulated_samples_per_s"] == pytest.approx(4 * big * 1e3 / same["predicted_step_ms"])
    assert row["predicted_accumulated_peak_bytes"] == same["predicted_peak_bytes"]
    console = Console(record=True, width=400)
    for part in predicted_tables([row], gpu, 400):
        console.print(part)
    said = " ".join(console.export_text().split())
    assert f"{strategy} x4 (batch per GPU; samples/s of all) predicted on t4" in said
    assert (f"(ampbench train --batch-size {micro} --grad-accum {n} --strategy {strategy} --nproc-per-node 4)"
            in said)
