"""A training step with gradient accumulation (``ampbench train --grad-accum N``) priced from a trace of three of its
micro-batches (:func:`ampbench.predict.trace.trace_step` with ``micro_batches=3``): the first micro-batch's ops, the
second's -- a forward and backward like the first's, its gradients added into those the first left (master-* modes:
the first's half gradients copied into the fp32 masters' buffers first) --, the third's N - 2 times -- what every
later micro-batch runs (master-* modes: the previous half gradients added into the masters' ones) --, then what runs
once a step (the last move to the masters, the unscale and inf check, the optimizer).

Every micro-batch from the third runs what the third ran, so three traced micro-batches price any N without tracing
N; their peak is the step's (the gradients of the micro-batches before held through each one's forward and backward).
:func:`accumulated` marks a trace with its N (``Trace.accumulate``); :func:`step_ops` spells out the step's ops for
the pricing, which past :data:`LINEAR_FROM` micro-batches prices two and extends them linearly (each micro-batch more
adds the same time, held by a test against the ops spelt out) -- 512 micro-batches of a transformer's ~300 ops each,
spelt out, took minutes to price.
"""

from __future__ import annotations

from dataclasses import replace

from ampbench.predict.trace import Op, Trace

TRACED = 3
"""The micro-batches a trace of an accumulated step holds (:func:`ampbench.predict.trace.trace_step`)."""

LINEAR_FROM = 5
"""Past this many micro-batches a step is priced from its steps of this many and one fewer, extended linearly."""

_SPACE = 1 << 40
"""Storage numbers of a repeated micro-batch's new tensors are moved by this much per repetition: each repetition
makes storages of its own (what a compiled graph fuses along reads each repetition's own outputs)."""


def accumulated(trace: Trace, micro_batches: int) -> Trace:
    """``trace`` (:data:`TRACED` micro-batches traced) as the step of ``micro_batches`` (>= 2) micro-batches
    (``Trace.accumulate``; its ops spelt out by :func:`step_ops`). A trace of one micro-batch is returned as it is
    (``micro_batches`` must then be 1)."""
    if trace.micro_batches == 1:
        if micro_batches != 1:
            raise ValueError(f"a trace of one micro-batch prices a step without accumulation: trace {TRACED} "
                             f"(trace_step(..., micro_batches={TRACED})) to price {micro_batches}")
        return trace
    if trace.micro_batches != TRACED or micro_batches < 2:
        raise ValueError(f"a trace of {trace.micro_batches} micro-batches prices an accumulation of 2 or more from "
                         f"one of {TRACED}, got {micro_batches}")
    return replace(trace, accumulate=micro_batches)


def step_ops(trace: Trace) -> list[Op]:
    """The ops of ``trace``'s step in the order a GPU runs them: as traced without accumulation; with it
    (``Trace.accumulate`` N), the first micro-batch's and the second's once, the third's N - 2 times (each repetition
    with storages of its own), then what runs once a step."""
    if trace.micro_batches == 1:
        return trace.ops
    first, second, later = ([o for o in trace.ops if o.micro == m] for m in range(TRACED))
    rest = [o for o in trace.ops if o.micro >= TRACED]
    made = {key for o in later if o.allocates for key, _ in o.writes}  # (a later micro-batch's own storages)
    ops = first + second
    for r in range(trace.accumulate - 2):
        ops += later if r == 0 else [_moved(o, made, r * _SPACE) for o in later]
    return ops + rest


def _moved(op: Op, made: set[int], by: int) -> Op:
    """``op`` with the storages its micro-batch made numbered apart (``by`` more)."""
    return replace(op, reads=tuple((k + by if k in made else k, b) for k, b in op.reads),
                   writes=tuple((k + by if k in made else k, b) for k, b in op.writes))
