"""A traced step as ``torch.compile`` runs it: the model's forward and backward turned into Inductor's kernels, the
rest (the loss, the engine's step, the optimizer) eager, as ``ampbench run``'s compiled cells run them
(:mod:`ampbench.execution.axes`).

Why our own: Inductor's scheduler decides its fusions while it generates Triton code for a GPU, which this machine has
neither; its CPU backend fuses for C++ loops, not for Triton. So the decisions are re-derived here from the traced data
flow (:attr:`~ampbench.predict.trace.Op.reads`/``writes``), with the rules Inductor follows for a GPU:

- **Kept as their own kernels** (Inductor calls the library, as eager does): matmuls and convolutions (cuBLAS, cuDNN),
  fused attention, RNN layers, multi-tensor ops, and the ops Inductor falls back to eager for (:data:`FALLBACK`).
- **Fused**: every other op -- elementwise, reductions, normalisations, softmax, casts, dropout's random mask,
  gathers -- joined to the ops whose outputs it reads (vertical fusion; the ops reading one input join through a
  common consumer), within one compiled graph (the forward, or the backward), where no library kernel lies on a path
  of data between them (a kernel cannot wait for a GEMM that waits for it: the two are joined only when as many
  library kernels lead to each). A fused group reads what comes from
  outside it and writes what is read outside it (later in the graph, by the other graph, by the loss or the
  optimizer) or what outlives the step (a buffer updated in place); what stays inside never reaches memory.
- **Kernels of a group**: one per reduction it holds (a reduction and the elementwise ops around it are one kernel;
  a normalisation's forward one, its backward and batch norm's forward two: a row reduction and a column one, or the
  statistics and then their use), at least one; each kernel after the first reads its input again. A reduction to a
  single value (a tensor's amax, as fp8's tensorwise scaling takes it) must finish before anything uses it over the
  tensor: the elementwise ops after it that read a tensor (the cast it scales) are a kernel more, reading it again.

Left out (a compiled step is predicted a little slower than Inductor makes it): the partitioner recomputing cheap
elementwise ops in the backward instead of saving them, horizontal fusion of independent ops, GEMM epilogues and
autotuned Triton GEMMs (``max-autotune``: priced as cuBLAS's), CUDA-graph trees' copies of the inputs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import replace

from ampbench.predict.trace import Op

EXTERN = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten.convolution_backward",
          "ampbench_predict.rnn_layer", "ampbench_predict.rnn_layer_backward", "ampbench_predict.fused_attention",
          "ampbench_predict.fused_attention_backward", "aten._scaled_mm"}
"""Library kernels a compiled graph calls as eager does."""
FALLBACK = {"aten.sort", "aten.topk", "aten.nonzero", "aten.embedding_dense_backward", "aten._embedding_bag",
            "aten._embedding_bag_backward", "aten.index_put", "aten.index_put_", "aten._index_put_impl_",
            "aten.scatter_add", "aten.scatter_add_", "aten.cumsum", "aten.multinomial", "aten.randperm"}
"""Ops Inductor runs as their own kernel (eager's, or a scatter of its own with atomic adds), fused with nothing."""
TWO_STAGE = {"aten.native_layer_norm_backward", "aten.native_batch_norm", "aten.native_batch_norm_backward",
             "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional", "aten.cudnn_batch_norm",
             "aten.cudnn_batch_norm_backward", "aten.native_group_norm", "aten.native_group_norm_backward",
             "aten._fused_rms_norm_backward"}
"""Normalisations Inductor computes in two kernels: a layer norm's backward (the input's gradient reduces over rows,
the weight's over columns), a batch or group norm's forward (the statistics, then their use) and backward."""
ONE_STAGE = {"aten.native_layer_norm", "aten._fused_rms_norm", "aten._softmax", "aten._log_softmax",
             "aten._softmax_backward_data", "aten._log_softmax_backward_data",
             "aten._native_batch_norm_legit_no_training"}
"""Ops with a reduction inside that Inductor makes one kernel (a persistent reduction over each row)."""
FUSED = "inductor.fused"
GLOBAL_MIN_BYTES = 64 * 1024
"""A reduction of at least this many bytes to one value is split across thread blocks: its users wait for all."""


def fusible(op: Op) -> bool:
    """Whether Inductor generates this op's code, fused with its neighbours (not a library call, not a fallback)."""
    return op.in_model and op.tensors <= 1 and op.name not in EXTERN and op.name not in FALLBACK \
        and not op.name.startswith(("aten._foreach", "aten._fused", "aten._amp_foreach"))


def stages(op: Op) -> int:
    """The reductions an op holds: the kernels it needs of a fused group (0: elementwise, fused into any)."""
    if op.name in TWO_STAGE:
        return 2
    return 1 if op.name in ONE_STAGE or op.reduces else 0


def compiled(ops: list[Op], outputs: Collection[int] = ()) -> list[Op]:
    """``ops`` with the model's own (``in_model``) fusible ops grouped into Inductor's kernels, one
    :data:`FUSED` op per group (its ``tensors``: the group's kernels) at its first op's place; everything else as
    traced. ``outputs``: the storages the model returns (written whoever reads them)."""
    parent = list(range(len(ops)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    graph = [(op.phase == "forward") for op in ops]  # (the forward graph and the backward graph are compiled apart)
    writer: dict[int, int] = {}
    depth: list[int] = []  # library kernels on the longest path of data to each op
    key_depth: dict[int, int] = {}
    for i, op in enumerate(ops):
        depth.append(max((key_depth.get(key, 0) for key, _ in op.reads), default=0))
        if fusible(op):
            for key, _ in op.reads:
                w = writer.get(key)
                if w is not None and fusible(ops[w]) and graph[w] == graph[i] and depth[w] == depth[i]:
                    parent[root(i)] = root(w)  # (equal depths: no library kernel between them, so no cycle)
        for key, _ in op.writes:
            writer[key] = i
            key_depth[key] = depth[i] + (0 if fusible(op) else 1)
    groups: dict[int, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        if fusible(op):
            groups[root(i)].append(i)
    first_touch: dict[int, int] = {}
    readers: dict[int, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        for key, _ in (*op.reads, *op.writes):
            first_touch.setdefault(key, i)
        for key, _ in op.reads:
            readers[key].append(i)
    for key in outputs:
        readers[key].append(len(ops))  # (read after the graph: by its caller)
    fused_at = {members[0]: _fused(ops, members, first_touch, readers) for members in groups.values()}
    grouped = {i for members in groups.values() for i in members}
    return [fused_at.get(i, op) for i, op in enumerate(ops) if i in fused_at or i not in grouped]


def _fused(ops: list[Op], members: list[int], first_touch: dict[int, int], readers: dict[int, list[int]]) -> Op:
    """One group's kernels: what it reads from outside, what it writes that is read outside or outlives it."""
    inside = set(members)
    made: set[int] = set()
    read: dict[int, int] = {}
    written: dict[int, int] = {}
    kernels, again = 0, 0
    waiting: list[int] = []  # (reductions to one value whose users over a tensor are not counted yet)
    for i in members:
        op = ops[i]
        n = stages(op)
        if waiting and op.bytes_read >= GLOBAL_MIN_BYTES and not n:  # (the pass after a whole-tensor reduction)
            kernels += 1
            again += max(ops[w].bytes_read for w in waiting)
            waiting = []
        for key, size in op.reads:
            if key not in made:
                read[key] = max(read.get(key, 0), size)
        if op.reduces and op.bytes_written <= 8 and op.bytes_read >= GLOBAL_MIN_BYTES:
            waiting.append(i)
        if n:
            if kernels:  # (a reduction after the group's first: its kernel reads its input again)
                again += op.bytes_read
            again += (n - 1) * op.bytes_read
            kernels += n
        for key, size in op.writes:
            made.add(key)
            outlives = key in read or first_touch[key] not in inside  # (a buffer from before it, written in place)
            if outlives or any(r > i and r not in inside for r in readers[key]):
                written[key] = max(written.get(key, 0), size)
    first = ops[members[0]]
    return replace(first, name=FUSED, flops=sum(ops[i].flops for i in members), bytes_read=sum(read.values()) + again,
                   bytes_written=sum(written.values()), tensors=max(1, kernels), gemm=None, conv=None, rnn=None,
                   reads=tuple(read.items()), writes=tuple(written.items()),
                   reduces=kernels > 0)
