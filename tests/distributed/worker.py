"""Run by the tests under torchrun (2 processes, gloo, CPU): every scenario in one launch, results as JSON.

    python -m torch.distributed.run --nproc-per-node 2 tests/distributed/worker.py OUT_DIR

This is also what a user's own torchrun script looks like (docs/distributed.md): init the process
group, build model and optimizer, ``mp.setup``, train with ``mp.autocast`` / ``mp.backward`` / ``mp.step``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ampbench import MixedPrecision
from ampbench.distributed import checkpoint
from ampbench.distributed.placement import Fsdp, placement_of
from ampbench.measure.syncs import HostSyncCounter
from ampbench.precision.support import supported

FP8_PROBLEM = supported("fp8-tensorwise", "cpu").reason or None
"""Why fp8 cannot run on this CPU (no torchao, or no fp8 matmul kernel: AVX2 and AVX-512 CPUs without FP16/AMX)."""


STEPS = 5
BATCH = 8  # per rank
PLANT_STEP = 2  # amp-fp16: rank 1 alone gets an inf gradient in one row of fc1.weight at this step


class _InfOnRank1(torch.autograd.Function):
    """Identity; in backward on rank 1 at the planted step, feature 0's gradient becomes inf: only row 0 of
    fc1.weight's gradient is inf, a row that FSDP2 shards onto rank 0 -- rank 1's own shard stays finite."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, armed: bool) -> torch.Tensor:  # type: ignore[override]
        ctx.armed = armed
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        if ctx.armed:
            g = g.clone()
            g[:, 0] = float("inf")
        return g, None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 4)
        self.armed = False
        self.seen: dict[str, str] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        self.seen["fc1_out"] = str(h.dtype).removeprefix("torch.")
        h = _InfOnRank1.apply(h, self.armed)
        h = self.norm(torch.relu(h))
        self.seen["norm_out"] = str(h.dtype).removeprefix("torch.")
        return self.fc2(h)  # (B, 4)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.norm = nn.Linear(32, 32), nn.LayerNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.fc(x))) + x


class BlockNet(nn.Module):
    """A stack of two blocks between an input and an output layer: FSDP2 units of their own, as a transformer's."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.blocks, self.out = nn.Linear(16, 32), nn.ModuleList([Block(), Block()]), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)



def _described(mp: Any) -> str | None:
    """What the engine's (strategy, precision) pair does, as the results record it."""
    layout = mp.placement.layout
    return layout.describe() if layout is not None else None

def _engine(precision: str, strategy: str | None, grad_reduce_dtype: str | None = None, **kw: Any) -> MixedPrecision:
    """The engine on this rank's CPU, placed as the strategy's name says (``grad_reduce_dtype``: its reduce dtype)."""
    return MixedPrecision(precision, placement=placement_of(strategy, grad_reduce_dtype), device="cpu", **kw)


def train_blocks(precision: str, rank: int, world: int, strategy: str | None, checkpointed: bool | str = False,
                 **kw: Any) -> dict[str, Any]:
    """BlockNet trained STEPS steps (``strategy`` None: one process over the ranks' batches concatenated), the bytes
    this rank put into FSDP2's all-gathers counted; ``checkpointed``: its blocks checkpointed first, as ``run
    --checkpointing blocks`` does before ``mp.setup``."""
    from ampbench.distributed.comm import fsdp_bytes
    from ampbench.distributed.units import fsdp_split
    from ampbench.execution.checkpointing import checkpoint_blocks

    torch.manual_seed(0)
    net = BlockNet()
    if checkpointed:
        checkpoint_blocks(net, "BlockNet", policy="blocks" if checkpointed is True else checkpointed)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    mp = _engine(precision, strategy, **kw)
    model, opt = mp.setup(net, opt)
    with gathered_bytes() as sent:
        for step in range(STEPS):
            xs, ys = zip(*(data(step, r) for r in (range(world) if strategy is None else (rank,))))
            opt.zero_grad()
            with mp.autocast():
                loss = nn.functional.cross_entropy(model(torch.cat(xs)).float(), torch.cat(ys))
            mp.backward(loss)
            mp.step(opt)
    out: dict[str, Any] = {"params": full_params(model)}
    if strategy == "fsdp":
        from torch.distributed.fsdp import FSDPModule

        out.update(units=[isinstance(m, FSDPModule) for m in (model, *model.blocks, model.inp, model.out)],
                   gathered_per_step=sum(sent) / STEPS,
                   counted_per_step=fsdp_bytes(mp.placement.layout, fsdp_split(model, mp))[0] / world)
    return out


def data(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(BATCH, 16, generator=g)
    return x, (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4] > 0).long()


def full_params(model: nn.Module) -> list[float]:
    """Every parameter, gathered whole (DTensor shards included), flattened, in fp32."""
    out = []
    for p in model.parameters():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        out.extend(t.detach().float().flatten().tolist())
    return out


def build(precision: str, strategy: str, fused: bool = False, blocks: bool = False,
          **kw: Any) -> tuple[nn.Module, torch.optim.Optimizer, MixedPrecision, Net]:
    """``blocks``: BlockNet (FSDP2 units per block) in place of Net."""
    torch.manual_seed(0)
    net = BlockNet() if blocks else Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, **({"fused": True} if fused else {}))
    mp = _engine(precision, strategy, **kw)
    model, opt = mp.setup(net, opt)
    return model, opt, mp, net


def train(model: nn.Module, opt: torch.optim.Optimizer, mp: MixedPrecision, net: Net, rank: int, steps: range,
          plant: bool = False, read: bool = True) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        x, y = data(step, rank)
        net.armed = plant and rank == 1 and step == PLANT_STEP
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x).float(), y)
        mp.backward(loss)
        record = mp.step(opt)
        out.append({"step": step, "loss": loss.detach(), "stepped": record, "scale": record.next_scale_value})
    for o in out if read else ():  # (read after the steps: a read in the loop would be a host sync per step)
        o.update(loss=float(o["loss"]), stepped=bool(o["stepped"]), scale=float(o["scale"]))
    return out


def reference(precision: str, world: int, **kw: Any) -> list[float]:
    """The same training on one process over the ranks' batches concatenated (the mean loss, as DDP averages)."""
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    mp = MixedPrecision(precision, device="cpu", **kw)
    model, opt = mp.setup(net, opt)
    for step in range(STEPS):
        xs, ys = zip(*(data(step, r) for r in range(world)))
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(torch.cat(xs)).float(), torch.cat(ys))
        mp.backward(loss)
        mp.step(opt)
    return full_params(model)


@contextlib.contextmanager
def gathered_bytes() -> Iterator[list[int]]:
    """Bytes this rank contributes to each FSDP2 all-gather (its ``dist.all_gather_single`` inputs)."""
    sent: list[int] = []
    original = dist.all_gather_single

    def counting(output: torch.Tensor, input: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        sent.append(input.numel() * input.element_size())
        return original(output, input, *args, **kwargs)

    dist.all_gather_single = counting
    try:
        yield sent
    finally:
        dist.all_gather_single = original


def main(out_dir: Path) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    results: dict[str, Any] = {}
    for strategy in ("ddp", "fsdp"):
        for precision in ("fp32", "amp-bf16", "master-bf16", "amp-fp16"):
            model, opt, mp, net = build(precision, strategy)
            fp16 = precision == "amp-fp16"
            steps = train(model, opt, mp, net, rank, range(STEPS), plant=fp16)
            params = [p for p in model.parameters()]
            results[f"{strategy}/{precision}"] = {
                "steps": steps, "params": full_params(model), "layout": _described(mp),
                "param_dtypes": sorted({str(p.dtype).removeprefix("torch.") for p in params}),
                "seen": dict(net.seen), "skipped": mp.totals["skipped_steps"],
                "reference": reference(precision, world) if precision in ("fp32", "amp-bf16") and rank == 0 else None,
            }
    # gradient accumulation as `ampbench train --grad-accum 2` steps it (frameworks.torch.train._accumulate): each
    # rank's batch in two micro-batches, every micro-batch's gradients reduced as its backward ends
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    from ampbench.data import TensorData
    from ampbench.distributed.wrap import deferred_sync
    from ampbench.frameworks.torch.train import _accumulate
    from ampbench.workloads.base import Workload

    for strategy in ("ddp", "fsdp"):
        for precision in ("fp32", "master-bf16"):
            model, opt, mp, net = build(precision, strategy)
            reduced: list[int] = []  # (DDP: the buckets it all-reduced, counted by a comm hook doing the default)
            if strategy == "ddp":
                model.register_comm_hook(reduced, lambda seen, bucket: (seen.append(1), allreduce_hook(None, bucket))[1])
            wl = Workload(name="net", model=net, train_data=TensorData((torch.zeros(1, 16),), torch.zeros(1).long()),
                          loss_fn=lambda out, y: nn.functional.cross_entropy(out.float(), y))
            for step in range(STEPS):
                x, y = data(step, rank)
                opt.zero_grad()
                _accumulate(wl, model, mp, [((x[:5],), y[:5]), ((x[5:],), y[5:])], BATCH, deferred_sync(model, mp))
                mp.step(opt)
            out = results[f"{strategy}/{precision}/accumulated"] = {"params": full_params(model),
                                                                    "reduced_per_step": len(reduced) / STEPS}
            if strategy == "ddp":  # (the buckets one backward reduces: a step of one micro-batch)
                reduced.clear()
                opt.zero_grad()
                _accumulate(wl, model, mp, [((x,), y)], BATCH)
                mp.step(opt)
                out["reduced_per_backward"] = len(reduced)
                # run --grad-accum's timed step (measure.step.TrainStep): the same reductions a step as train's
                from ampbench.measure.step import TrainStep

                reduced.clear()
                TrainStep(wl, model, opt, mp, [((x[:4],), y[:4]), ((x[4:],), y[4:])], torch.device("cpu"), 4,
                          micro_batches=2)()
                out["timed_step_reduced"] = len(reduced)
    # DDP's gradient memory: its buckets (the .grad tensors are views into them), counted as DDP reports them
    from ampbench.distributed.wrap import ddp_bucket_bytes
    from ampbench.measure.memory import state_bytes

    for precision in ("fp32", "master-bf16"):
        model, opt, mp, net = build(precision, "ddp")
        train(model, opt, mp, net, rank, range(2))
        x, y = data(0, rank)
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x).float(), y)
        mp.backward(loss)
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        storages = {g.untyped_storage().data_ptr(): g.untyped_storage().nbytes() for g in grads}
        buckets = ddp_bucket_bytes(model)
        results[f"ddp/{precision}/grad-memory"] = {
            "buckets": buckets, "param_bytes": sum(p.numel() * p.element_size() for p in net.parameters() if p.requires_grad),
            "grad_storages": len(storages), "grad_storage_bytes": sum(storages.values()), "grads_seen": len(grads),
            "reported": state_bytes(model, opt, mp.master_params(), buckets).grads}
        mp.step(opt)
    # bf16's inf check reads each rank's own shard: the planted inf is seen by rank 0 only, unless the flags are
    # agreed; the control runs without the agreement (what it prevents: rank 1 steps, rank 0 skips)
    for agree in (True, False):
        model, opt, mp, net = build("amp-bf16", "fsdp")
        mp.scaler_for(opt)._distributed = agree
        steps = train(model, opt, mp, net, rank, range(STEPS), plant=True)
        results[f"fsdp/amp-bf16/planted/{'agreed' if agree else 'not-agreed'}"] = {
            "steps": steps, "params": full_params(model), "skipped": mp.totals["skipped_steps"]}
    # a fused optimizer skips on the device: the overflow planted on rank 1 is agreed (all_reduce of the flag, FSDP)
    # or all-reduced with the gradients (DDP) and skipped on both ranks without a host read in any step
    for strategy in ("ddp", "fsdp"):
        model, opt, mp, net = build("amp-fp16", strategy, fused=True)
        train(model, opt, mp, net, rank, range(1))  # (warm-up: lazy state)
        with HostSyncCounter() as counter:
            steps = train(model, opt, mp, net, rank, range(1, STEPS), plant=True, read=False)
        for o in steps:
            o.update(loss=float(o["loss"]), stepped=bool(o["stepped"]), scale=float(o["scale"]))
        results[f"{strategy}/amp-fp16/fused"] = {"reads": counter.reads, "engine_reads": mp.host_reads,
                                                 "steps": steps, "params": full_params(model),
                                                 "direct_steps": mp.direct_steps}
        # the same run stepped through optimizer.step() (the direct step off): the same bits on each rank
        model, opt, mp, net = build("amp-fp16", strategy, fused=True, direct_step=False)
        train(model, opt, mp, net, rank, range(STEPS), plant=True)
        results[f"{strategy}/amp-fp16/fused/optimizer.step"] = {"params": full_params(model),
                                                                "direct_steps": mp.direct_steps}
    # a model whose loss does not reach every trained parameter (an unused head) steps under DDP as run steps it
    # (measure.step.build_step: DDP told to find them, a warning says so); it failed at its second step
    import warnings

    from ampbench.data import TensorData
    from ampbench.distributed.placement import Ddp
    from ampbench.measure.step import build_step
    from ampbench.workloads.base import Workload

    for precision in ("fp32", "master-bf16"):
        torch.manual_seed(0)
        head = Net()
        head.aux = nn.Linear(32, 3)  # (never called)
        x, y = data(0, rank)
        wl = Workload(name="unused", model=head, train_data=TensorData((x,), y), batch_size=4,
                      loss_fn=lambda out, y: nn.functional.cross_entropy(out.float(), y))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = build_step(wl, precision, 4, torch.device("cpu"), mp_options={"placement": Ddp()})
        for _ in range(3):
            step()
        results[f"ddp/{precision}/unused"] = {
            "find_unused": step.model.find_unused_parameters, "params": full_params(step.model),
            "warned": [str(w.message) for w in caught if str(w.message).startswith("ddp:")]}
    # compressed gradient all-reduce (DDP comm hook) and FSDP reduce dtype
    for strategy in ("ddp", "fsdp"):
        model, opt, mp, net = build("amp-bf16", strategy, grad_reduce_dtype="bf16")
        steps = train(model, opt, mp, net, rank, range(STEPS))
        results[f"{strategy}/amp-bf16/reduce-bf16"] = {"steps": steps, "params": full_params(model),
                                                       "layout": _described(mp)}
    # fp8 under FSDP2 (fp8_filter dims: fc1, 32x16, converts; fc2's 4 rows do not): tensorwise all-gathers fc1's
    # weight in fp8, rowwise in fp32 as amp-bf16 does; the bytes each rank puts into FSDP's all-gathers are counted
    fp8 = not FP8_PROBLEM
    for precision in ("amp-bf16", "fp8-tensorwise", "fp8-rowwise") if fp8 else ():
        kw = {"fp8_filter": "dims"} if precision.startswith("fp8") else {}
        model, opt, mp, net = build(precision, "fsdp", **kw)
        with gathered_bytes() as sent:
            steps = train(model, opt, mp, net, rank, range(STEPS))
        results[f"fsdp/{precision}/gather"] = {
            "steps": steps, "params": full_params(model), "layout": _described(mp),
            "gathered_per_step": sum(sent) / STEPS, "fc1_weight": type(model.fc1.weight.to_local()).__name__,
            "converted": mp.fp8_layers.converted if mp.fp8_layers else None,
            "reference": reference(precision, world, **kw) if rank == 0 else None}
    if fp8:  # the same per-rank math (each rank scales its own activations) with DDP's all-reduce
        model, opt, mp, net = build("fp8-tensorwise", "ddp", fp8_filter="dims")
        results["ddp/fp8-tensorwise"] = {"steps": train(model, opt, mp, net, rank, range(STEPS)),
                                         "params": full_params(model)}
    # FSDP2 units per repeated block: the bytes the ranks put into the all-gathers (blocks twice a step: resharded
    # after forward) against run's count, and the training against one process
    for precision in ("amp-bf16", "master-bf16") + (("fp8-tensorwise",) if not FP8_PROBLEM else ()):
        kw = {"fp8_filter": "dims"} if precision.startswith("fp8") else {}  # (inp and the blocks' fc convert)
        results[f"fsdp/{precision}/blocks"] = {
            **train_blocks(precision, rank, world, "fsdp", **kw),
            "reference": train_blocks(precision, rank, world, None, **kw)["params"] if rank == 0 else None}
    # activation checkpointing under FSDP2: each checkpointed block still a unit, recomputed with its parameters
    # gathered for its backward
    results["fsdp/master-bf16/blocks/checkpointed"] = train_blocks("master-bf16", rank, world, "fsdp", checkpointed=True)
    results["fsdp/master-bf16/blocks/selective"] = train_blocks("master-bf16", rank, world, "fsdp",
                                                                checkpointed="selective")
    # a fused SGD (what the harness builds for SGD workloads) over FSDP2's sharded parameters: torch's fused kernel has
    # no DTensor rule, so it steps with foreach, with a warning
    import warnings

    torch.manual_seed(0)
    net = BlockNet()
    mp = MixedPrecision("amp-bf16", placement=Fsdp(), device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, opt = mp.setup(net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, fused=True))
    for step in range(3):
        x, y = data(step, rank)
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x).float(), y)
        mp.backward(loss)
        mp.step(opt)
    from ampbench.precision.optimizers import implementation

    results["fsdp/amp-bf16/fused-sgd"] = {"params": full_params(model), "impl": implementation(opt),
                                          "warned": [str(w.message) for w in caught if "foreach" in str(w.message)]}
    # checkpoint: train 3 steps, save, train on; a fresh run loads the checkpoint and trains the same steps
    cases = [("fsdp", "master-bf16", {}), ("fsdp", "amp-fp16", {}), ("ddp", "master-bf16", {}),
             ("fsdp", "master-bf16", {"blocks": True})]
    for strategy, precision, kw in cases + ([("fsdp", "fp8-tensorwise", {"fp8_filter": "dims"})] if fp8 else []):
        name = f"{strategy}/{precision}" + ("/blocks" if kw.get("blocks") else "")
        ckpt = out_dir / f"ckpt-{name.replace('/', '-')}"
        model, opt, mp, net = build(precision, strategy, **kw)
        train(model, opt, mp, net, rank, range(3))
        checkpoint.save(ckpt, model, opt, mp, extra={"step": 3})
        straight = train(model, opt, mp, net, rank, range(3, STEPS + 2))
        model, opt, mp, net = build(precision, strategy, **kw)
        extra = checkpoint.load(ckpt, model, opt, mp)
        resumed = train(model, opt, mp, net, rank, range(extra["step"], STEPS + 2))
        results[f"resume/{name}"] = {"straight": straight, "resumed": resumed}
    (out_dir / f"rank{rank}.json").write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
