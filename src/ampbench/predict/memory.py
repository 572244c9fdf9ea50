"""A traced step's GPU memory: the split ``ampbench run`` measures, the peak, and the largest batch that fits.

The split (weights, gradients, optimizer state with master copies, saved activations) is the traced step's own, read
as ``run`` reads a real one (:func:`ampbench.measure.memory.state_bytes`, :func:`~ampbench.measure.memory.
saved_activations`); on the CPU it equals ``run``'s to the byte (``tests/predict/test_memory.py``). The peak is what
the step holds at once, followed op by op (:attr:`ampbench.predict.trace.Op.live`: every storage from when it is made
to when the step drops it); a real CPU step followed the same way holds the same at its peak. What only a GPU adds
is named apart: cuBLAS's workspaces, the CUDA context and library handles (outside the caching allocator), the share
of the rest the allocator can fill before fragmentation fails an allocation, and -- where a kernel table of the GPU's
architecture measured them -- cuDNN's convolution workspaces, held with each op's output while it runs
(:meth:`MemoryModel.with_workspaces`).

The max batch comes from what grows with the batch only. Two traces at different batches give every batch-dependent
quantity as ``fixed + per_sample x batch`` (exactly: a step's tensors are linear in the batch): the saved activations
(whose fixed part -- autocast's half copies of the weights, kept for the backward -- must not be divided per sample)
and what the step holds after each op (the peak is the largest of these lines at that batch).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from dataclasses import dataclass

from ampbench.measure.gpus import Gpu
from ampbench.predict.trace import Op, Trace, peak_ops


def workspace_bytes(gpu: Gpu, inference: bool = False) -> int:
    """cuBLAS's workspaces, held beside the tensors: PyTorch keeps one per cuBLAS handle and stream (32 MiB from Hopper
    on, ``:4096:8``; 4 MiB x 2 + 16 KiB x 8 before: ``CublasHandlePool.cpp``), and a handle per thread -- a training
    step's forward runs on Python's thread, its backward on autograd's device thread: two. Seen on the lent H200:
    every small model's measured peak held its tensors, one predicted workspace and one more 32 MiB block (tabular-mlp,
    which has no convolution, to within 1-11%). An inference forward: one."""
    per_handle = 32 * 2**20 if gpu.capability >= (9, 0) else 4096 * 1024 * 2 + 16 * 1024 * 8
    return per_handle * (1 if inference else 2)


CONTEXT_BYTES = 512 * 2**20
"""CUDA context, cuBLAS and cuDNN handles: GPU memory the allocator cannot use."""
ALLOCATOR_MARGIN = 0.90
"""Share of the rest the caching allocator can fill before fragmentation fails an allocation."""


@dataclass(frozen=True)
class Line:
    """``fixed + per_sample x batch`` bytes."""

    fixed: float
    per_sample: float

    def at(self, batch: int) -> float:
        return self.fixed + self.per_sample * batch

    @staticmethod
    def through(b1: int, y1: float, b2: int, y2: float) -> Line:
        slope = max(0.0, (y2 - y1) / (b2 - b1))
        return Line(y1 - slope * b1, slope)


@dataclass(frozen=True)
class MemoryCost:
    weights: int
    gradients: int
    """The gradients where the optimizer steps from (master-* modes: on the fp32 masters, counted in ``optimizer``)."""
    optimizer: int
    """The optimizer's state plus, in master-* modes, the fp32 master weights and their gradients."""
    activations: int
    temporary: int
    """What the peak holds beyond the split (weights, gradients, optimizer state, saved activations) and the
    workspace: a training step followed op by op, the outputs alive at its peak beyond the saved activations (a
    loss's logits and their gradients) less the gradients not yet made then -- negative where the peak comes before
    the backward has made most of them; otherwise the largest op output of the forward and backward, and, in
    master-* modes, the half gradients the backward leaves before they move to the masters."""
    workspace: int
    """cuBLAS's workspace."""
    peak: int
    """weights + gradients + optimizer + activations + temporary + workspace."""
    context: int
    """CUDA context and handles: outside the allocator, not in ``peak``."""
    usable: int
    """What the caching allocator can fill: (GPU memory - context) x :data:`ALLOCATOR_MARGIN`."""
    max_batch: int | None
    """The largest batch whose peak fits ``usable`` (None: nothing grows with the batch)."""

    @property
    def fits(self) -> bool:
        return self.peak <= self.usable


class MemoryModel:
    """The memory of a step as a function of its batch, from two traces at different batches (``small`` at the batch
    asked for, ``large`` at another). ``large`` may be given as a function that traces it: it is traced only when a
    figure needs it (the largest batch; the memory at a batch other than ``small``'s) -- the peak at ``small``'s own
    batch is that trace's, followed op by op."""

    def __init__(self, small: Trace, large: Trace | Callable[[], Trace],
                 workspace_of: Callable[[Op], float] | None = None) -> None:
        if isinstance(large, Trace) and large.batch_size == small.batch_size:
            raise ValueError("two traces at different batch sizes are needed")
        self.trace = small
        self._large = large if isinstance(large, Trace) else functools.cache(large)  # (traced once, whoever asks)
        self._workspace_of = workspace_of
        self.held = small.weights_bytes + small.grads_bytes + small.optimizer_bytes
        self.in_flight = max(0, small.backward_grads_bytes - small.grads_bytes)

    @property
    def large(self) -> Trace:
        """The second trace (traced now if it was given as a function)."""
        if not isinstance(self._large, Trace):
            self._large = self._large()
            if self._large.batch_size == self.trace.batch_size:
                raise ValueError("two traces at different batch sizes are needed")
        return self._large

    @property
    def large_traced(self) -> Trace | None:
        """The second trace where it has been traced (None: no figure needed it)."""
        return self._large if isinstance(self._large, Trace) else None

    @functools.cached_property
    def activations(self) -> Line:
        small, large = self.trace, self.large
        return Line.through(small.batch_size, small.activation_bytes, large.batch_size, large.activation_bytes)

    @functools.cached_property
    def live(self) -> list[Line]:
        """What a training step holds after each op (plus its workspace, with :meth:`with_workspaces`), as a line in
        the batch (the ops of the two traces paired): the peak is the largest at a batch. Empty for traces that did
        not follow their storages (inference; a trace made by hand): the peak is then the split plus the largest
        temporary."""
        if not self._followed:
            return []
        return _envelope(_live_lines(self.trace, self.large, self._workspace_of))

    @functools.cached_property
    def temporaries(self) -> list[Line]:
        # (the largest temporary: only where the peak is not followed; an inference forward's peak already holds its
        # largest outputs: they are among the tensors it follows)
        if self.trace.inference or self._followed:
            return []
        return _envelope(_op_lines(self.trace, self.large, self._workspace_of))

    @property
    def _followed(self) -> bool:
        """The small trace followed its storages op by op (training traces do; inference ones and traces made by hand
        do not)."""
        return not self.trace.inference and self.trace.live_peak_bytes > 0

    def temporary_at(self, batch: int) -> float:
        return max((line.at(batch) for line in self.temporaries), default=0.0) + self.in_flight

    def peak_at(self, batch: int, workspace: int) -> float:
        if self._followed and batch == self.trace.batch_size:  # (the traced step's own peak: no second trace needed)
            return max(o.live + (self._workspace_of(o) if self._workspace_of else 0.0)
                       for o in peak_ops(self.trace.ops, self.trace.fusable)) + workspace
        if self.live:  # (the bytes alive at once, followed op by op)
            return max(line.at(batch) for line in self.live) + workspace
        return self.held + self.activations.at(batch) + self.temporary_at(batch) + workspace

    def max_batch(self, usable: float, workspace: int) -> int | None:
        if self.activations.per_sample <= 0 and all(line.per_sample <= 0 for line in [*self.temporaries, *self.live]):
            return None
        if self.peak_at(1, workspace) > usable:
            return 0
        lo, hi = 1, 2
        while self.peak_at(hi, workspace) <= usable:
            lo, hi = hi, hi * 2
        while hi - lo > 1:  # largest lo with peak(lo) <= usable
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.peak_at(mid, workspace) <= usable else (lo, mid)
        return lo

    def with_workspaces(self, workspace_of: Callable[[Op], float]) -> MemoryModel:
        """This step with each op's library workspace (``workspace_of``: bytes an op allocates beside its output while
        it runs -- cuDNN's, read from a GPU's measured kernels) held with its output: the temporaries become each op's
        output plus its workspace (the largest of them sets the peak). The second trace is shared (traced once)."""
        if self.trace.inference:
            return self
        return MemoryModel(self.trace, self._large, workspace_of)  # (the second trace's function: one, cached)

    def cost(self, gpu: Gpu, batch: int | None = None, max_batch: bool = True) -> MemoryCost:
        """The memory at ``batch`` (default: the small trace's) on ``gpu``; ``max_batch=False``: without the largest
        batch that fits where the step fits (a second trace saved), with it where it does not."""
        t = self.trace
        batch = batch or t.batch_size
        usable = int((gpu.memory_gib * 2**30 - CONTEXT_BYTES) * ALLOCATOR_MARGIN)
        activations = t.activation_bytes if batch == t.batch_size else round(self.activations.at(batch))
        workspace = workspace_bytes(gpu, t.inference)
        if self._followed:  # (the peak followed op by op; what it holds beyond the split is the rest)
            peak = round(self.peak_at(batch, workspace))
            temporary = peak - self.held - activations - workspace
        else:
            temporary = round(self.temporary_at(batch))
            peak = self.held + activations + temporary + workspace
        largest = self.max_batch(usable, workspace) if max_batch or peak > usable else None
        return MemoryCost(t.weights_bytes, t.grads_bytes, t.optimizer_bytes, activations, temporary, workspace,
                          peak, CONTEXT_BYTES, usable, largest)


MIN_TRACED_BATCH = 2
"""The smallest batch the memory model traces (a batch of one can skip ops: a reduction over a dimension of one)."""


def _paired(small: list[tuple[str, float]], large: list[tuple[str, float]], b1: int, b2: int,
            unpaired: Callable[[float], Line]) -> set[Line]:
    """Each op's figure as a line in the batch, the two traces' ops (``(name, figure)``, at batches ``b1`` and ``b2``)
    paired in order by name (a batch of 1 can skip an op -- a reduction over a dimension of one -- so the sequences
    are aligned, not zipped); an op of the small trace with no partner is ``unpaired(figure)``."""
    lines: set[Line] = set()
    paired: set[int] = set()
    for a, b, size in _matching_blocks(tuple(n for n, _ in small), tuple(n for n, _ in large)):
        for k in range(size):
            lines.add(Line.through(b1, small[a + k][1], b2, large[b + k][1]))
            paired.add(a + k)
    return lines | {unpaired(size) for i, (_, size) in enumerate(small) if i not in paired}


@functools.lru_cache(maxsize=256)
def _matching_blocks(small: tuple[str, ...], large: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    """The two op sequences' pairing (difflib's matching blocks: a, b, size), once per pair of sequences: the same
    two traces are paired for every GPU a prediction prices (their names do not change with the GPU; only the
    figures do), and difflib's matching took 42 of `predict --gpu all`'s 104 s, recomputed 2,358 times."""
    return tuple(tuple(m) for m in difflib.SequenceMatcher(None, small, large, autojunk=False).get_matching_blocks())


def _op_lines(small: Trace, large: Trace, workspace_of: Callable[[Op], float] | None = None) -> set[Line]:
    """Each forward/backward op's output (plus its workspace, given ``workspace_of``) as a line in the batch
    (:func:`_paired`); an op of the small trace with no partner grows in proportion to the batch."""
    def outputs(trace: Trace) -> list[tuple[str, float]]:
        return [(o.name, (o.bytes_written if o.allocates else 0) + (workspace_of(o) if workspace_of else 0.0))
                for o in trace.ops if o.phase in ("forward", "loss", "backward")]

    b1 = small.batch_size
    return _paired(outputs(small), outputs(large), b1, large.batch_size, lambda size: Line(0.0, size / b1))


def _live_lines(small: Trace, large: Trace, workspace_of: Callable[[Op], float] | None = None) -> set[Line]:
    """What the step holds after each op (plus the op's workspace, given ``workspace_of``: held with its output while
    it runs) as a line in the batch (:func:`_paired`); an op of the small trace with no partner keeps its bytes at
    every batch (it is few: an op a batch of 2 skips)."""
    def held(trace: Trace) -> list[tuple[str, float]]:
        return [(o.name, o.live + (workspace_of(o) if workspace_of else 0.0))
                for o in peak_ops(trace.ops, trace.fusable)]

    return _paired(held(small), held(large), small.batch_size, large.batch_size, lambda size: Line(size, 0.0))


def _envelope(lines: set[Line]) -> list[Line]:
    """The lines that are the largest somewhere on batch >= 1 (the rest never set the maximum)."""
    best_fixed = max(lines, key=lambda line: (line.at(1), line.per_sample), default=None)
    return [line for line in lines if best_fixed is None or line.per_sample > best_fixed.per_sample
            or line == best_fixed]
