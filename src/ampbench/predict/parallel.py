"""A training step over many GPUs (``ampbench predict --gpus N [--nodes M] --strategy ddp``): each rank's step as one
GPU runs it, plus the gradient all-reduce DDP cannot hide behind the backward.

DDP (torch's defaults): the gradients, in their own dtype, are reduced in buckets of 25 MiB (the first 1 MiB), each
launched when the backward has produced its gradients -- last layers first -- on one communication stream, with
NCCL's ring: ``2 (n-1)/n x bytes / bus bandwidth`` plus ``2 (n-1)`` hops of latency. A bucket's gradients are taken
to be ready as the backward has produced that share of all gradient bytes; what the last bucket's all-reduce (and any
queue behind it) runs past the backward's end is the step's exposed communication.

The fabric: within one machine NVLink (half the datasheet's both-directions figure per direction) or PCIe (x16 of the
GPU's generation); across machines the network -- InfiniBand taken as one HDR 200 Gb/s NIC per GPU (25 GB/s, as a
DGX has), Ethernet as one 100 GbE port per machine shared by its GPUs -- and the ring runs at its slowest link.
NCCL reaches ``BUS_EFFICIENCY`` of a link (a prior, not fitted).

FSDP2 as ``run --strategy fsdp`` wraps the model (:func:`ampbench.distributed.wrap.wrap_fsdp`): each repeated block a
unit, then the root (master-* modes: the normalisation layers units of their own, in fp32), their collectives laid out
on one network as FSDP2 issues and prefetches them (:func:`fsdp_cost`); the optimizer steps each rank's shard (1/N of
its work). The bytes are ``run``'s count (:func:`ampbench.distributed.comm.fsdp_unit_bytes`: the layout's dtypes), a ring's
``(n-1)/n x bytes / bus bandwidth + (n-1)`` hops each collective.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ampbench.distributed.comm import UnitBytes, fsdp_unit_bytes
from ampbench.distributed.strategy import Layout
from ampbench.distributed.units import FsdpSplit
from ampbench.errors import AmpbenchError
from ampbench.measure.gpus import Gpu
from ampbench.predict.accumulation import TRACED
from ampbench.predict.cost import MEASURED_HOST, PHASES, Compiled, Host, price
from ampbench.predict.trace import Op, Trace

INTERCONNECTS = ("nvlink", "pcie", "infiniband", "ethernet")
BUS_EFFICIENCY = 0.8
"""NCCL's ring all-reduce bus bandwidth over the link's per-direction peak (a prior: no measured collective fitted)."""
HOP_US = {"nvlink": 5.0, "pcie": 8.0, "infiniband": 10.0, "ethernet": 30.0}
"""Latency per ring step, microseconds (a prior)."""
NIC_GBS = {"infiniband": 25.0, "ethernet": 12.5}
"""InfiniBand: per GPU (one HDR 200 Gb/s NIC each); Ethernet: per machine (one 100 GbE port, shared)."""
COMPUTE = tuple(p for p in PHASES if p != "optimizer")
"""A step's phases but the optimizer's (under FSDP each rank steps its shard)."""
FIRST_BUCKET_BYTES = 2**20
BUCKET_BYTES = 25 * 2**20
"""DDP's defaults (``bucket_cap_mb=25``; its first bucket 1 MiB)."""


@dataclass(frozen=True)
class Fabric:
    gpus: int
    """GPUs per machine."""
    nodes: int
    interconnect: str
    bus_gbs: float
    """The ring's bus bandwidth, GB/s (its slowest link, at NCCL's efficiency)."""
    hop_s: float
    strategy: str = "ddp"
    """How the ranks share the training: ddp (every rank the whole model) or fsdp (FSDP2, parameters sharded)."""

    @property
    def world(self) -> int:
        return self.gpus * self.nodes

    def allreduce_s(self, nbytes: float) -> float:
        n = self.world
        if n <= 1 or nbytes <= 0:
            return 0.0
        return 2 * (n - 1) / n * nbytes / (self.bus_gbs * 1e9) + 2 * (n - 1) * self.hop_s

    def gather_s(self, nbytes: float) -> float:
        """A ring all-gather (or reduce-scatter) of a whole tensor of ``nbytes``: half an all-reduce."""
        n = self.world
        if n <= 1 or nbytes <= 0:
            return 0.0
        return (n - 1) / n * nbytes / (self.bus_gbs * 1e9) + (n - 1) * self.hop_s


def fabric(gpu: Gpu, gpus: int, nodes: int, interconnect: str | None, strategy: str = "ddp") -> Fabric:
    """The fabric ``gpus`` x ``nodes`` of ``gpu`` train over; ``interconnect`` names the slowest link the ring crosses
    (one machine: nvlink or pcie, default nvlink where the GPU has it; several: infiniband or ethernet, default
    infiniband). One line for what cannot be."""
    if gpus < 1 or nodes < 1:
        raise AmpbenchError(f"--gpus and --nodes must be >= 1, got {gpus} and {nodes}")
    if interconnect is not None and interconnect not in INTERCONNECTS:
        raise AmpbenchError(f"--interconnect {interconnect!r}: choose from {', '.join(INTERCONNECTS)}")
    intra_kind = "nvlink" if gpu.nvlink_gbs else "pcie"
    if nodes == 1:
        kind = interconnect or intra_kind
        if kind in NIC_GBS:
            raise AmpbenchError(f"--interconnect {kind} joins machines; one machine (--nodes 1) is nvlink or pcie")
    else:
        kind = interconnect or "infiniband"
        if kind not in NIC_GBS:
            raise AmpbenchError(f"--interconnect {kind} is within a machine; across --nodes {nodes} it is infiniband or "
                                "ethernet")
    if kind == "nvlink" and not gpu.nvlink_gbs:
        raise AmpbenchError(f"{gpu.key} has no NVLink (the catalogue's datasheet row): use --interconnect pcie")
    links = [gpu.nvlink_gbs / 2 if intra_kind == "nvlink" and kind != "pcie" else gpu.pcie_gbs or 0.0]
    if nodes > 1:
        links.append(NIC_GBS[kind] if kind == "infiniband" else NIC_GBS[kind] / gpus)
    return Fabric(gpus, nodes, kind, min(links) * BUS_EFFICIENCY, HOP_US[kind] * 1e-6, strategy)


def buckets(grad_bytes: int) -> list[int]:
    """DDP's buckets of ``grad_bytes`` in the order the backward fills them."""
    out, left = [], grad_bytes
    cap = FIRST_BUCKET_BYTES
    while left > 0:
        out.append(min(cap, left))
        left -= out[-1]
        cap = BUCKET_BYTES
    return out


@dataclass(frozen=True)
class DdpCost:
    step_s: float
    """Each rank's step: its one-GPU step plus the exposed communication."""
    single_s: float
    allreduce_s: float
    """All the buckets' all-reduces, end to end (hidden or not)."""
    exposed_s: float
    """Of it, what runs past the backward's end."""

    @property
    def scaling_efficiency(self) -> float:
        return self.single_s / self.step_s


def ddp_cost(trace: Trace, gpu: Gpu, tf32: bool, fab: Fabric, single_s: float | None = None,
             host: Host = MEASURED_HOST, compiled: Compiled | None = None, every_micro_batch: bool = False) -> DdpCost:
    """The step of ``trace`` (one rank's batch) under DDP on ``fab`` (``single_s``: its one-GPU step, where the caller
    priced it already), issued by ``host``, eager or ``compiled``.

    A step accumulating micro-batches (``Trace.accumulate`` N) reduces once, in the last micro-batch's backward
    (``no_sync`` before it), or -- ``every_micro_batch``: master-* modes
    (:func:`~ampbench.distributed.strategy.reduced_every_micro_batch`) -- in each one's, every time waiting on what
    runs past that backward's end; either way against the backward of one later micro-batch (its gradients added
    into the held ones)."""
    single = price(trace, gpu, tf32, host=host, compiled=compiled).step_s if single_s is None else single_s
    n = trace.accumulate
    one = micro_batch(trace, min(n, TRACED) - 1) if n > 1 else trace
    backward = price(one, gpu, tf32, phases=("backward",), host=host, compiled=compiled).step_s
    grad_bytes = trace.backward_grads_bytes or trace.grads_bytes
    done, end, total = 0, 0.0, 0.0
    for b in buckets(grad_bytes):
        done += b
        ready = backward * done / grad_bytes
        t = fab.allreduce_s(b)
        total += t
        end = max(end, ready) + t
    exposed = min(total, max(0.0, end - backward)) if fab.world > 1 else 0.0  # (never more than it all: rounding)
    times = n if every_micro_batch else 1
    return DdpCost(single + times * exposed, single, times * total, times * exposed)


def micro_batch(trace: Trace, micro: int) -> Trace:
    """One micro-batch's forward, loss and backward of an accumulated step's trace (:attr:`Op.micro` 0, 1 or 2), as a
    trace of its own (priced alone: no accumulation spelt out)."""
    return replace(trace, ops=[o for o in trace.ops if o.micro == micro], micro_batches=1, accumulate=1)


@dataclass(frozen=True)
class FsdpCost:
    step_s: float
    """Each rank's step: the forward and backward with the collectives they wait on, its shard's optimizer step."""
    single_s: float
    allgather_s: float
    """Every all-gather of the step, end to end (hidden or not)."""
    reduce_scatter_s: float
    """Every reduce-scatter of the step, end to end (hidden or not)."""
    exposed_s: float
    """Of the collectives, the time the compute waits on them."""
    comm_bytes: int
    """Bytes one rank sends a step (``run``'s ``comm_bytes_per_step``)."""
    units: int = 1
    """FSDP2 units: the root and the repeated blocks."""

    @property
    def scaling_efficiency(self) -> float:
        return self.single_s / self.step_s


def _gpu_s(trace: Trace, ops: list[Op], gpu: Gpu, tf32: bool, compiled: Compiled | None) -> float:
    """The GPU time of ``ops`` (some of the step's compute: the optimizer's left out)."""
    return price(replace(trace, ops=ops), gpu, tf32, phases=COMPUTE, compiled=compiled).gpu_s if ops else 0.0


@dataclass(frozen=True)
class UnitCompute:
    """The step's compute time by unit: the root's forward before and after the blocks (the loss with it), one block's
    forward and backward, the root's backward after and before the blocks', the engine's step."""

    pre_forward: float
    block_forward: float
    post_forward: float
    post_backward: float
    block_backward: float
    pre_backward: float
    step: float

    @classmethod
    def of(cls, trace: Trace, blocks: int, step_s: float, gpu: Gpu, tf32: bool, compiled: Compiled | None) -> UnitCompute:
        """Shares of ``step_s`` (the step's compute as priced: a host-bound step keeps its host time) by the GPU time of
        each part's ops; the blocks' forward ops are found by their forward hooks (:attr:`Op.in_block`), the backward
        split as the forward is (a block's backward is not told apart from the others': one class, the same work)."""
        compute = [o for o in trace.ops if o.phase in COMPUTE]
        fwd = [o for o in compute if o.phase in ("forward", "loss")]
        first = next((i for i, o in enumerate(fwd) if o.in_block), len(fwd)) if blocks else len(fwd)
        parts = {"pre": fwd[:first], "blocks": [o for o in fwd if o.in_block] if blocks else [],
                 "post": [o for o in fwd[first:] if not (o.in_block and blocks)],
                 "backward": [o for o in compute if o.phase == "backward"],
                 "step": [o for o in compute if o.phase == "step"]}
        t = {name: _gpu_s(trace, ops, gpu, tf32, compiled) for name, ops in parts.items()}
        total = sum(t.values())
        scale = step_s / total if total else 0.0
        forward = t["pre"] + t["blocks"] + t["post"]
        backward = {x: t["backward"] * (t[x] / forward if forward else float(x == "post")) for x in ("pre", "blocks",
                                                                                                     "post")}
        per = max(blocks, 1)
        return cls(t["pre"] * scale, t["blocks"] * scale / per, t["post"] * scale, backward["post"] * scale,
                   backward["blocks"] * scale / per, backward["pre"] * scale, t["step"] * scale)


def _timeline(b: UnitBytes, c: UnitCompute, collective: Callable[[float], float]) -> float:
    """When the step's compute and collectives end (before the optimizer), one network resource taking the collectives
    in the order FSDP2 issues them; ``collective(bytes)``: a ring all-gather's (or reduce-scatter's) time."""
    k = b.blocks
    net = collective(b.root_gather)  # forward: the root's all-gather, nothing before it
    end, began = net + c.pre_forward, net
    for _ in range(k):
        net = max(net, began) + collective(b.block_gather)  # (prefetched once the unit before began)
        began = max(end, net)
        end = began + c.block_forward
    end += c.post_forward
    net = max(net, end) + collective(b.root_regather)
    end = max(end, net)
    ready = {k - 1: net + collective(b.block_gather)} if k else {}  # backward: the last block, prefetched at its start
    net = ready.get(k - 1, net)
    end += c.post_backward
    for i in reversed(range(k)):
        began = max(end, ready[i])
        if i:  # (the next block's all-gather, prefetched as this one begins)
            net = max(net, began) + collective(b.block_gather)
            ready[i - 1] = net
        end = began + c.block_backward
        net = max(net, end) + collective(b.block_reduce)  # (its gradients, as its backward ends)
    end += c.pre_backward
    net = max(net, end) + collective(b.root_reduce)
    return max(end, net) + c.step


def fsdp_cost(trace: Trace, gpu: Gpu, tf32: bool, fab: Fabric, layout: Layout, host: Host = MEASURED_HOST,
              compiled: Compiled | None = None, single_s: float | None = None) -> FsdpCost:
    """The step of ``trace`` (one rank's batch, traced as one GPU runs the precision) under FSDP2 over ``fab`` with
    ``layout``'s dtypes, its units as ``run`` wraps the model (the root and each repeated block), issued by ``host``
    (``single_s``: its one-GPU step, where the caller priced it already).

    The timeline (:func:`_timeline`): one network resource, the collectives in the order FSDP2 issues them. Forward:
    the root's all-gather (nothing to hide it), then each block's, issued once the unit before it has begun computing
    (FSDP2 prefetches one unit ahead) -- a block computes once its all-gather is done and the unit before it has
    finished. Backward, blocks last to first: each block all-gathered again (resharded after forward), prefetched when
    the block after it begins its backward; its gradients reduce-scattered when its backward ends; the root's last,
    once the whole backward is done, before the step and the optimizer's shard. A reduce-scatter costs what an
    all-gather of the same bytes does (a ring's)."""
    single = price(trace, gpu, tf32, host=host, compiled=compiled).step_s if single_s is None else single_s
    optimizer = price(trace, gpu, tf32, phases=("optimizer",), host=host, compiled=compiled)
    n = fab.world
    shard = max(optimizer.host_s, optimizer.gpu_s / n)  # (each rank steps 1/N of the parameters: the same calls)
    split = trace.fsdp or FsdpSplit(0)
    b = fsdp_unit_bytes(layout, split)

    def timeline(part: Trace) -> tuple[float, float]:
        """(when ``part``'s compute and collectives end, its compute alone)."""
        compute = price(part, gpu, tf32, phases=COMPUTE, host=host, compiled=compiled).step_s
        return _timeline(b, UnitCompute.of(part, b.blocks, compute, gpu, tf32, compiled), fab.gather_s), compute

    accumulate = trace.accumulate
    if accumulate == 1:
        step, compute = timeline(trace)
    else:  # every micro-batch all-gathers and reduce-scatters as a step does; what runs once a step after the last
        first, later = timeline(micro_batch(trace, 0)), timeline(_sharded_accumulation(trace, n))
        once = replace(trace, ops=[o for o in trace.ops if o.micro >= TRACED], micro_batches=1, accumulate=1)
        last = price(once, gpu, tf32, phases=COMPUTE, host=host, compiled=compiled).step_s
        step = first[0] + (accumulate - 1) * later[0] + last
        compute = first[1] + (accumulate - 1) * later[1] + last
    ag = fab.gather_s
    return FsdpCost(step + shard, single,
                    accumulate * (ag(b.root_gather) + ag(b.root_regather) + 2 * b.blocks * ag(b.block_gather)),
                    accumulate * (ag(b.root_reduce) + b.blocks * ag(b.block_reduce)), max(0.0, step - compute),
                    accumulate * int((n - 1) / n * (b.gathered + b.reduced)) if n > 1 else 0, 1 + b.blocks)


def _sharded_accumulation(trace: Trace, world: int) -> Trace:
    """A micro-batch after the first under FSDP2: the first's forward, loss and backward -- its gradients made
    unsharded anew and reduce-scattered -- then each reduce-scattered shard added into the rank's sharded gradient
    (FSDP2's ``foreach_reduce``: one add per parameter), priced as one GPU's adds into its held gradients (a later
    micro-batch's in-place backward ops) at 1/``world`` of their bytes."""
    adds = [replace(o, bytes_read=o.bytes_read // world, bytes_written=o.bytes_written // world,
                    flops=o.flops // world, reads=tuple((k, n // world) for k, n in o.reads),
                    writes=tuple((k, n // world) for k, n in o.writes))
            for o in trace.ops if o.micro == min(trace.accumulate, TRACED) - 1 and o.phase == "backward"
            and not o.allocates]
    return replace(trace, ops=micro_batch(trace, 0).ops + adds, micro_batches=1, accumulate=1)


@dataclass(frozen=True)
class FsdpMemory:
    """What one rank holds of the step's state under FSDP2, as ``run`` shards the model."""

    weights: int
    """Its shard of the weights, and the units' parameters gathered whole while they compute: the root's (FSDP2
    keeps them through the backward) and two blocks' (the one computing and the one prefetched)."""
    gradients: int
    """Its shard of the gradients, and the root's and one block's whole before their reduce-scatter."""
    optimizer: int
    """Its shard of the optimizer's state (and of master-*'s fp32 masters: under FSDP the sharded fp32 parameters are
    them)."""

    @property
    def held(self) -> int:
        return self.weights + self.gradients + self.optimizer


def fsdp_memory(trace: Trace, layout: Layout, world: int, weights: int, gradients: int, optimizer: int) -> FsdpMemory:
    """One rank's share of the one-GPU ``weights``, ``gradients`` and ``optimizer`` bytes of ``trace`` over ``world``
    ranks, with what FSDP2 gathers whole at once (the units' all-gathered bytes; a unit's whole gradients taken at
    that size too). The one-GPU figures are sharded as they are: master-*'s half model copy is counted 1/N where FSDP2
    keeps none (a ceiling by 2 bytes an element over N)."""
    b = fsdp_unit_bytes(layout, trace.fsdp or FsdpSplit(0))
    root, block = b.root_gather, int(b.block_gather)
    return FsdpMemory(weights // world + root + 2 * block, gradients // world + root + block, optimizer // world)
