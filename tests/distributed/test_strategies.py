"""DDP and FSDP2 with every kind of recipe, 2 processes over gloo on this CPU (one torchrun launch for all
scenarios: tests/distributed/worker.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ampbench import MixedPrecision
from ampbench.distributed import layout
from ampbench.distributed.placement import Ddp, Fsdp, OneDevice, placement_of
from ampbench.errors import AmpbenchError
from ampbench.launch import free_port
from ampbench.precision import get
from ampbench.precision.support import supported

FP8_PROBLEM = supported("fp8-tensorwise", "cpu").reason or None
"""Why fp8 cannot run on this CPU (no torchao, or no fp8 matmul kernel: AVX2 and AVX-512 CPUs without FP16/AMX)."""


WORKER = Path(__file__).with_name("worker.py")
MODES = ("fp32", "amp-bf16", "master-bf16", "amp-fp16")
NEEDS_TORCHAO = pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
                        "127.0.0.1", "--master-port", str(free_port()), str(WORKER), str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads((out / "rank0.json").read_text()), json.loads((out / "rank1.json").read_text())


@pytest.mark.parametrize("precision", ["fp32", "master-bf16"])
def test_a_parameter_the_loss_does_not_reach_steps_under_ddp_and_is_said(ranks: tuple[dict[str, Any], dict[str, Any]],
                                                                         precision: str) -> None:
    """An unused head (aux: 32 x 3 + 3) failed DDP at its second step ("Expected to have finished reduction in the
    prior iteration"); found on a meta copy before the wrap, DDP is told to look for it, and the warning names it."""
    r0, r1 = ranks[0][f"ddp/{precision}/unused"], ranks[1][f"ddp/{precision}/unused"]
    assert r0["find_unused"] and r0["params"] == r1["params"]
    assert r0["warned"] == ["ddp: 2 trained parameter(s) get no gradient from the loss (aux.weight, aux.bias): "
                            "DistributedDataParallel(find_unused_parameters=True), which walks the autograd graph each "
                            "step; freeze them (requires_grad_(False)) to spare that"]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.parametrize("precision", MODES)
def test_ranks_hold_identical_weights_after_steps(ranks: tuple[dict[str, Any], dict[str, Any]], strategy: str,
                                                  precision: str) -> None:
    r0, r1 = ranks[0][f"{strategy}/{precision}"], ranks[1][f"{strategy}/{precision}"]
    assert r0["params"] == r1["params"]
    assert all(s["stepped"] for s in r0["steps"]) or precision == "amp-fp16"


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.parametrize("precision, tol", [("fp32", 1e-6), ("amp-bf16", 0.05)])
def test_two_ranks_train_like_one_process_on_both_batches(ranks: tuple[dict[str, Any], dict[str, Any]], strategy: str,
                                                          precision: str, tol: float) -> None:
    """The gradients are averaged over ranks: 2 x batch 8 trains like one process on batch 16 (fp32 to rounding)."""
    r = ranks[0][f"{strategy}/{precision}"]
    assert max(abs(a - b) for a, b in zip(r["params"], r["reference"])) < tol


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.parametrize("precision, tol", [("fp32", 1e-6), ("master-bf16", 0.02)])
def test_accumulated_micro_batches_train_as_the_whole_batch_on_every_rank(
        ranks: tuple[dict[str, Any], dict[str, Any]], strategy: str, precision: str, tol: float) -> None:
    """`train --grad-accum 2` under a strategy: each rank's batch of 8 as micro-batches of 5 and 3 trains as the whole
    batch did, the ranks identical. DDP in fp32 all-reduces once a step (the first micro-batch under no_sync: one
    bucket reduced, not two); master-* modes move each micro-batch's half gradients into the fp32 masters, so each
    micro-batch's are reduced (no_sync left the first unreduced there: the ranks parted when it was tried). ``run
    --grad-accum``'s timed step reduces as often (one rule: ``distributed.wrap.deferred_sync``)."""
    r = ranks[0][f"{strategy}/{precision}/accumulated"]
    a0, a1 = r["params"], ranks[1][f"{strategy}/{precision}/accumulated"]["params"]
    assert a0 == a1
    if strategy == "ddp":  # (master-bf16's model: two dtypes, two buckets a backward)
        assert r["reduced_per_step"] == r["reduced_per_backward"] * (1 if precision == "fp32" else 2)
        assert r["timed_step_reduced"] == r["reduced_per_step"]  # (run --grad-accum's timed step: the same rule)
    whole = ranks[0][f"{strategy}/{precision}"]["params"]
    assert max(abs(a - b) for a, b in zip(a0, whole)) < tol


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_fp16_overflow_on_one_rank_is_skipped_on_every_rank(ranks: tuple[dict[str, Any], dict[str, Any]],
                                                            strategy: str) -> None:
    """Rank 1 alone gets an inf gradient in a row of fc1.weight that FSDP shards onto rank 0: both ranks skip
    that step and halve the scale, and their weights stay identical."""
    s0, s1 = (ranks[i][f"{strategy}/amp-fp16"]["steps"] for i in (0, 1))
    assert [(s["stepped"], s["scale"]) for s in s0] == [(s["stepped"], s["scale"]) for s in s1] == [
        (True, 65536.0), (True, 65536.0), (False, 32768.0), (True, 32768.0), (True, 32768.0)]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_with_a_fused_optimizer_ranks_agree_on_the_skip_without_a_host_read(
        ranks: tuple[dict[str, Any], dict[str, Any]], strategy: str) -> None:
    """The overflow planted on rank 1 is skipped on both ranks (FSDP: the flag all-reduced on the device; DDP: the
    gradients are), counted by a dispatch mode: no host read in any of the steps, on either rank."""
    r0, r1 = (ranks[i][f"{strategy}/amp-fp16/fused"] for i in (0, 1))
    assert (r0["reads"], r1["reads"], r0["engine_reads"], r1["engine_reads"]) == (0, 0, 0, 0)
    assert [(s["stepped"], s["scale"]) for s in r0["steps"]] == [(s["stepped"], s["scale"]) for s in r1["steps"]] == [
        (True, 65536.0), (False, 32768.0), (True, 32768.0), (True, 32768.0)]
    assert r0["params"] == r1["params"]
    # the engine stepped the fused kernel itself after the first step (DTensor shards under FSDP), bit for bit what
    # optimizer.step() does on each rank
    assert r0["direct_steps"] == r1["direct_steps"] == len(r0["steps"])
    via = [ranks[i][f"{strategy}/amp-fp16/fused/optimizer.step"] for i in (0, 1)]
    assert via[0]["direct_steps"] == via[1]["direct_steps"] == 0
    assert via[0]["params"] == r0["params"] and via[1]["params"] == r1["params"]


def test_a_nonfinite_gradient_in_one_shard_is_skipped_on_every_rank(ranks: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """amp-bf16 checks each rank's own gradient shard for inf/NaN: the planted inf lands in rank 0's shard only.
    Agreed, both ranks skip that step; the control, without the agreement, splits them: rank 0 skips, rank 1
    steps its half of every parameter -- a partial update the agreed run never makes."""
    a0, a1 = ranks[0]["fsdp/amp-bf16/planted/agreed"], ranks[1]["fsdp/amp-bf16/planted/agreed"]
    assert (a0["skipped"], a1["skipped"]) == (1, 1) and a0["params"] == a1["params"]
    assert [s["stepped"] for s in a1["steps"]] == [True, True, False, True, True]
    n0, n1 = ranks[0]["fsdp/amp-bf16/planted/not-agreed"], ranks[1]["fsdp/amp-bf16/planted/not-agreed"]
    assert (n0["skipped"], n1["skipped"]) == (1, 0)
    assert n0["params"] == n1["params"] != a0["params"]  # (one sharded model, half of it stepped)


def test_dtypes_each_pair_trains_in(ranks: tuple[dict[str, Any], dict[str, Any]]) -> None:
    r = ranks[0]
    # fsdp master-*: the sharded fp32 parameters are the masters, compute in bf16 (norm in fp32, half output)
    assert r["fsdp/master-bf16"]["param_dtypes"] == ["float32"]
    assert r["fsdp/master-bf16"]["seen"] == {"fc1_out": "bfloat16", "norm_out": "bfloat16"}
    # ddp master-*: the model is bf16 (norm fp32) with fp32 masters in the optimizer, as on one device
    assert r["ddp/master-bf16"]["param_dtypes"] == ["bfloat16", "float32"]
    assert r["ddp/amp-fp16"]["seen"]["fc1_out"] == "float16" and r["fsdp/fp32"]["seen"]["fc1_out"] == "float32"
    assert "all-reduced in bfloat16" in r["ddp/amp-bf16/reduce-bf16"]["layout"]
    assert "reduce-scattered in bfloat16" in r["fsdp/amp-bf16/reduce-bf16"]["layout"]
    for strategy in ("ddp", "fsdp"):
        assert ranks[0][f"{strategy}/amp-bf16/reduce-bf16"]["params"] == ranks[1][f"{strategy}/amp-bf16/reduce-bf16"]["params"]


@pytest.mark.parametrize("case", ["fsdp/master-bf16", "fsdp/amp-fp16", "ddp/master-bf16", "fsdp/master-bf16/blocks",
                                  pytest.param("fsdp/fp8-tensorwise", marks=NEEDS_TORCHAO)])
def test_a_resumed_run_reproduces_the_uninterrupted_losses(ranks: tuple[dict[str, Any], dict[str, Any]], case: str) -> None:
    for rank in ranks:
        r = rank[f"resume/{case}"]
        assert [s["loss"] for s in r["resumed"]] == [s["loss"] for s in r["straight"]]
        assert [s["scale"] for s in r["resumed"]] == [s["scale"] for s in r["straight"]]


def test_ddp_gradient_memory_is_its_buckets_counted_once(ranks: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """DDP holds every gradient in its all-reduce buckets; ampbench makes .grad views into them (one copy, not two) and
    counts a rank's gradient memory as the buckets DDP reports: the parameters' elements x the gradient dtype's size,
    also in master-* modes, whose half gradients stay on the model (views into the buckets) until mp.step moves them
    on to the fp32 masters."""
    fp32, master = ranks[0]["ddp/fp32/grad-memory"], ranks[0]["ddp/master-bf16/grad-memory"]
    assert fp32["buckets"] == fp32["param_bytes"] == fp32["reported"] == 4 * (16 * 32 + 32 + 2 * 32 + 32 * 4 + 4)
    assert fp32["grad_storage_bytes"] == fp32["buckets"] and fp32["grad_storages"] < fp32["grads_seen"]  # views
    # master-bf16 after mp.backward: every parameter shows its gradient, a view into the bf16 (or, for the LayerNorm,
    # fp32) buckets: nothing beyond the buckets until mp.step moves the half ones to the fp32 masters
    assert master["grads_seen"] == 6 and master["buckets"] == master["param_bytes"] == master["reported"]
    assert master["grad_storage_bytes"] == master["buckets"] and master["grad_storages"] < master["grads_seen"]
    norm = 4 * 2 * 32  # the LayerNorm's weight and bias stay fp32
    assert master["buckets"] == (fp32["buckets"] - norm) // 2 + norm  # the rest in bf16 buckets


def test_pairs_are_described_and_bad_ones_refused() -> None:
    assert layout("fsdp", get("master-fp16")).describe() == (
        "FSDP2 over the master-fp16 recipe; sharded params fp32, all-gathered in float16; gradients reduce-scattered in "
        "float32; norm layers fp32 units")
    assert layout("fsdp", get("pure-bf16")).describe().startswith("FSDP2 over the pure-bf16 recipe; sharded params half")
    with pytest.raises(AmpbenchError, match="compression applies to fp32 gradients"):
        MixedPrecision("master-bf16", placement=Ddp(reduce_dtype="fp16"))
    assert layout("fsdp", get("fp8-tensorwise")).fp8_all_gather and not layout("fsdp", get("fp8-rowwise")).fp8_all_gather
    assert not layout("ddp", get("fp8-tensorwise")).fp8_all_gather
    with pytest.raises(AmpbenchError, match="strategy='dpp': choose from ddp, fsdp"):
        placement_of("dpp")  # (the command line's --strategy)
    with pytest.raises(AmpbenchError, match="grad_reduce_dtype='bf16' applies to strategy ddp or fsdp"):
        placement_of(None, "bf16")
    with pytest.raises(AmpbenchError, match="grad_reduce_dtype='int8': choose from"):
        Fsdp(reduce_dtype="int8")
    with pytest.raises(AmpbenchError, match="a placement is OneDevice"):
        MixedPrecision("amp-bf16", placement="ddp")  # type: ignore[arg-type]


def test_a_placement_is_a_value_bound_to_the_recipe_never_changed() -> None:
    """One small class per strategy: the engine binds a copy to its recipe (its layout); the caller's value is left as
    given, so one value serves several engines."""
    ddp = Ddp(reduce_dtype="bf16")
    a, b = MixedPrecision("amp-bf16", placement=ddp), MixedPrecision("master-bf16", placement=ddp)
    assert ddp.layout is None and a.placement is not ddp and b.placement is not ddp
    pa, pb = a.placement, b.placement
    assert pa.strategy == pb.strategy == "ddp" and pa.layout is not None and pb.layout is not None
    assert pa.layout.describe() == layout("ddp", get("amp-bf16"), placement_of("ddp", "bf16").reduce_dtype).describe()
    assert pb.layout.describe() != pa.layout.describe()
    one = MixedPrecision("amp-bf16")
    assert isinstance(one.placement, OneDevice) and one.placement.strategy is None and one.placement.layout is None
    assert not one.placement.shards_gradients and Fsdp().bound(get("amp-bf16")).shards_gradients
    assert repr(a) == "MixedPrecision('amp-bf16', loss_scale='none', placement=Ddp(reduce_dtype=torch.bfloat16))"


def test_setup_without_a_process_group_says_how_to_launch() -> None:
    import torch

    model = torch.nn.Linear(4, 2)
    mp = MixedPrecision("amp-bf16", placement=Ddp())
    with pytest.raises(AmpbenchError, match="needs torch.distributed initialised: launch with torchrun"):
        mp.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))


@NEEDS_TORCHAO
def test_fsdp_fp8_tensorwise_all_gathers_the_fp8_weights_in_one_byte(ranks: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """fc1 (32x16) is the converted layer: under tensorwise its weight is torchao's fp8-cast wrapper and each rank
    puts its 16x16 shard into the all-gather as 256 bytes instead of 1024 (fp32, as amp-bf16 and rowwise do)."""
    gather = {p: ranks[0][f"fsdp/{p}/gather"] for p in ("amp-bf16", "fp8-tensorwise", "fp8-rowwise")}
    assert gather["fp8-tensorwise"]["converted"] == gather["fp8-rowwise"]["converted"] == ["fc1"]
    assert gather["fp8-tensorwise"]["fc1_weight"] == "WeightWithDynamicFloat8CastTensor"
    assert gather["fp8-rowwise"]["fc1_weight"] == "Tensor"
    assert gather["amp-bf16"]["gathered_per_step"] == gather["fp8-rowwise"]["gathered_per_step"] == 740 * 4 / 2
    assert gather["amp-bf16"]["gathered_per_step"] - gather["fp8-tensorwise"]["gathered_per_step"] == 16 * 16 * 3
    assert "fp8 Linear weights all-gathered in float8_e4m3fn" in gather["fp8-tensorwise"]["layout"]


@NEEDS_TORCHAO
@pytest.mark.parametrize("precision", ["fp8-tensorwise", "fp8-rowwise"])
def test_fsdp_fp8_trains_as_ddp_and_one_process_do(ranks: tuple[dict[str, Any], dict[str, Any]], precision: str) -> None:
    """Ranks agree; tensorwise under FSDP (weights cast to fp8 on the shards with the whole weight's amax) is
    bit-identical to DDP (each rank casts the whole weight); both differ from one process on the 16 rows only
    because each rank scales its own 8 rows' activations, so the one-process check is loose."""
    r0, r1 = ranks[0][f"fsdp/{precision}/gather"], ranks[1][f"fsdp/{precision}/gather"]
    assert r0["params"] == r1["params"] and all(s["stepped"] for s in r0["steps"])
    if precision == "fp8-tensorwise":
        assert r0["params"] == ranks[0]["ddp/fp8-tensorwise"]["params"]
    assert max(abs(a - b) for a, b in zip(r0["params"], r0["reference"])) < 0.1


@pytest.mark.parametrize("precision", ["amp-bf16", "master-bf16", pytest.param("fp8-tensorwise", marks=NEEDS_TORCHAO)])
def test_fsdp_shards_each_repeated_block_as_a_unit_and_counts_what_it_gathers(
        ranks: tuple[dict[str, Any], dict[str, Any]], precision: str) -> None:
    """BlockNet's two blocks are FSDP2 units of their own (the root the third; its input and output layers are the
    root's); the bytes each rank puts into FSDP2's all-gathers -- counted on ``dist.all_gather_single``, the oracle --
    are what ``run`` counts (``fsdp_bytes``: the blocks twice a step, resharded after forward; master-*'s fp32 norm
    units twice; the root once; fp8-tensorwise's Float8Linear weights in 1 byte, in the blocks and the root); the
    ranks train as one process does (fp8: each rank scales its own activations, so loosely)."""
    r0, r1 = ranks[0][f"fsdp/{precision}/blocks"], ranks[1][f"fsdp/{precision}/blocks"]
    assert r0["units"] == [True, True, True, False, False]
    assert r0["gathered_per_step"] == r0["counted_per_step"] == r1["gathered_per_step"]
    assert r0["params"] == r1["params"]
    assert max(abs(a - b) for a, b in zip(r0["params"], r0["reference"])) < (0.1 if precision.startswith("fp8") else 2e-2)


@pytest.mark.parametrize("policy", ["checkpointed", "selective"])
def test_checkpointed_blocks_under_fsdp_train_as_without(ranks: tuple[dict[str, Any], dict[str, Any]],
                                                         policy: str) -> None:
    """--checkpointing blocks (and selective) under fsdp: the checkpointed blocks are still FSDP2 units, gather the
    same bytes, and the ranks end at the weights of the same training without checkpointing (the recompute sees the
    gathered weights)."""
    plain = ranks[0]["fsdp/master-bf16/blocks"]
    r0, r1 = ranks[0][f"fsdp/master-bf16/blocks/{policy}"], ranks[1][f"fsdp/master-bf16/blocks/{policy}"]
    assert r0["units"] == plain["units"] and r0["gathered_per_step"] == plain["gathered_per_step"]
    assert r0["params"] == r1["params"]
    assert max(abs(a - b) for a, b in zip(r0["params"], plain["params"])) < 1e-6


def test_a_fused_sgd_under_fsdp_steps_with_foreach_and_says_so(ranks: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """torch's fused SGD has no kernel for FSDP2's sharded (DTensor) parameters (it failed every SGD workload's fsdp
    cell at its first step): it steps with foreach, the ranks agreeing."""
    r0, r1 = ranks[0]["fsdp/amp-bf16/fused-sgd"], ranks[1]["fsdp/amp-bf16/fused-sgd"]
    assert r0["impl"] == "SGD (foreach)" and len(r0["warned"]) == 1 and "no kernel for FSDP2" in r0["warned"][0]
    assert r0["params"] == r1["params"]
