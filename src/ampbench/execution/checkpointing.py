"""Activation checkpointing of a model's repeated blocks (``--checkpointing blocks``): each block's forward runs
under ``torch.utils.checkpoint`` (non-reentrant), so the backward recomputes the block's activations from its input
instead of holding them -- a forward of each block more, for the memory of one block's activations at a time.

The blocks are those FSDP2 shards as units (:func:`ampbench.distributed.units.blocks`: the children of an
``nn.ModuleList``/``nn.Sequential`` of two or more like submodules of several layers -- a transformer's layers, a
ResNet's bottlenecks), found the same way on every device and on the meta model ``predict`` traces. The block's
``forward`` is replaced on the instance (its parameters keep their names, so checkpoints, ``keep_fp32`` names and
FSDP2's units are unchanged) -- what ``torch.distributed``'s ``checkpoint_wrapper`` does with a wrapper module,
without the ``_checkpoint_wrapped_module`` prefix it puts in every parameter's name.

FLOPs: a step's model FLOPs (``flops_per_step``, and MFU on them, the PaLM paper's definition) leave the recompute
out; ``recomputed_flops_per_step`` is what it adds, counted on one forward of the checkpointed blocks.

Numerics: the recompute restores the RNG state (dropout draws the same masks) and the autocast state of the forward
(torch.utils.checkpoint's own), so a step's gradients are the eager step's; a block's BatchNorm layers keep their
running statistics through the recompute (momentum 0 there, their batch count restored: updated once a step, as
without checkpointing; a plain eager torch.utils.checkpoint updates them again in the recompute). Under torch.compile,
whose checkpoint takes no such context, none is needed: AOTAutograd's recompute reruns the forward's pure ops, the
buffers' update is the forward graph's alone (once a step: tested against the eager model without checkpointing).

``--checkpointing selective`` checkpoints the same blocks selectively (``torch.utils.checkpoint``'s selective
activation checkpointing, the policy torchtitan's "op" mode and Megatron's selective recompute take): the outputs of
the ops that cost FLOPs -- matmuls, convolutions, attention, fused RNN layers: :func:`saved_by_selective` -- are kept
from the forward, everything else (norms, activations, dropout, residual adds, casts) recomputed from them. The
recompute is memory-bound work only (no FLOPs: ``recomputed_flops_per_step`` 0), for a part of what ``blocks`` saves.
Those kept outputs are held by the checkpoint's own cache, not by autograd's saved tensors, so they are reported to
:func:`ampbench.measure.memory.saved_activations` as the forward makes them (:class:`_Kept`, through
:mod:`ampbench.execution.saved`): the split's activations
stay what the step holds.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from ampbench.distributed.units import blocks
from ampbench.errors import AmpbenchError
from ampbench.execution.axes import CHECKPOINTING_VALUES
from ampbench.execution.saved import counting_saved, note_saved

MARK = "_ampbench_checkpointed"


POLICIES = tuple(v for v in CHECKPOINTING_VALUES if v != "off")
"""The ``--checkpointing`` values that checkpoint (``off`` does not)."""

FLOP_OPS_OF_OURS = frozenset({"mkldnn_rnn_layer", "_cudnn_rnn", "fused_attention", "rnn_layer"})
"""Forward ops with FLOPs beyond torch's FLOP counter's: the fused RNN layers ampbench's FLOP count adds
(``measure.flop_formulas.custom_mapping``: cuDNN's and oneDNN's; a test holds that every forward op it counts is
kept) and ``predict``'s stand-ins for fused attention and RNN layers."""


@functools.cache
def selective_kept() -> frozenset[str]:
    """The ops whose outputs ``selective`` keeps: every forward op torch's FLOP counter counts (mm, addmm, bmm,
    baddbmm, convolutions, the fused attentions, ``_scaled_mm``) and :data:`FLOP_OPS_OF_OURS` -- with every
    ``_scaled_dot_product_*`` forward (:func:`saved_by_selective`), so the recompute costs no counted FLOP."""
    from torch.utils.flop_counter import flop_registry  # lazy: torch.utils.flop_counter

    return frozenset({op.__name__ for op in flop_registry if not op.__name__.endswith("_backward")} | FLOP_OPS_OF_OURS)


def saved_by_selective(op: Any) -> bool:
    """Whether ``--checkpointing selective`` keeps ``op``'s outputs (else it is recomputed in the backward)."""
    name = str(getattr(getattr(op, "_overloadpacket", op), "__name__", op))  # (an op or its packet: "mm")
    return name in selective_kept() or (name.startswith("_scaled_dot_product") and not name.endswith("_backward"))


def _policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if saved_by_selective(op) else CheckpointPolicy.PREFER_RECOMPUTE


class _Kept(TorchDispatchMode):
    """Around a selectively checkpointed forward while activations are counted (``run``'s memory step, ``predict``'s
    trace): the outputs the checkpoint keeps (:func:`saved_by_selective`), told to
    :func:`ampbench.execution.saved.note_saved` as they are made (the checkpoint holds them in a cache of its own,
    which autograd's saved-tensor hooks -- how ``run`` counts activations -- never see)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if saved_by_selective(func):
            note_saved(out)
        return out


def check_blocks(model: nn.Module, what: str, policy: str = "blocks") -> list[nn.Module]:
    """``model``'s repeated blocks; a model without any is refused in one line (``what``: the model, for the
    message; ``policy``: the ``--checkpointing`` value asked for) -- checked before a run, a training or a prediction
    starts."""
    found = blocks(model)
    if not found:
        raise AmpbenchError(f"--checkpointing {policy}: {what} has no repeated blocks to checkpoint (an nn.ModuleList or "
                            "nn.Sequential of two or more like submodules with layers of their own, e.g. a "
                            "transformer's layers or a ResNet's bottlenecks); use --checkpointing off")
    return found


def _statistics_kept(block: nn.Module) -> Callable[[], tuple[Any, Any]] | None:
    """``checkpoint``'s ``context_fn`` for a block holding BatchNorm layers that track running statistics: nothing
    around the forward; around the recompute, each layer's momentum 0 (its running mean and variance unchanged) and
    its batch count restored after, so the statistics are updated once a step, as without checkpointing. None for a
    block without such layers."""
    norms = [m for m in block.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not norms:
        return None

    @contextlib.contextmanager
    def recompute() -> Iterator[None]:
        saved = [(m, m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone()) for m in norms]
        for m in norms:
            m.momentum = 0.0
        try:
            yield
        finally:
            for m, momentum, count in saved:
                m.momentum = momentum
                if count is not None:
                    m.num_batches_tracked.copy_(count)

    return lambda: (contextlib.nullcontext(), recompute())


def _contexts(block: nn.Module, policy: str, keep_statistics: bool) -> Callable[[], tuple[Any, Any]] | None:
    """``checkpoint``'s ``context_fn`` for ``block`` under ``policy``: blocks -- :func:`_statistics_kept` (or None);
    selective -- torch's selective-checkpoint contexts (:func:`_policy`), with :class:`_Kept` around the forward and
    the statistics kept around the recompute where ``keep_statistics`` (under torch.compile, which takes the
    selective contexts alone and recomputes no buffer update, neither)."""
    statistics = _statistics_kept(block) if keep_statistics else None
    if policy == "blocks":
        return statistics
    if not keep_statistics:
        return functools.partial(create_selective_checkpoint_contexts, _policy)

    def both() -> tuple[Any, Any]:
        forward, recompute = create_selective_checkpoint_contexts(_policy)  # (the statistics' own saving and
        # restoring outside the recompute's mode, which admits only the ops the forward ran; the kept outputs told
        # only while activations are counted: another dispatch mode on every op otherwise)
        return (_joined(forward, *((_Kept(),) if counting_saved() else ())),
                _joined(*((statistics()[1],) if statistics else ()), recompute))

    return both


@contextlib.contextmanager
def _joined(*contexts: Any) -> Iterator[None]:
    """The contexts entered in order, left in reverse."""
    with contextlib.ExitStack() as stack:
        for c in contexts:
            stack.enter_context(c)
        yield


def checkpoint_blocks(model: nn.Module, what: str, keep_statistics: bool = True, policy: str = "blocks") -> int:
    """Checkpoint each of ``model``'s repeated blocks (in place; once); the number of blocks (none: refused,
    :func:`check_blocks`). ``policy``: blocks (each block's forward recomputed) or selective (what costs no FLOPs
    recomputed: :func:`saved_by_selective`). ``keep_statistics``: BatchNorm's running statistics not updated again in
    the recompute (:func:`_statistics_kept`; False under torch.compile, whose checkpoint takes only selective-checkpoint
    contexts -- and whose recompute does not update them again: no context needed)."""
    if policy not in POLICIES:
        raise AmpbenchError(f"--checkpointing {policy!r}: choose from off, {', '.join(POLICIES)}")
    found = check_blocks(model, what, policy)
    for block in found:
        if getattr(block, MARK, False):
            continue
        forward = block.forward
        context = _contexts(block, policy, keep_statistics)
        options: dict[str, Any] = {} if context is None else {"context_fn": context}

        uncached = _uncached(forward)

        @functools.wraps(forward)
        def run(*args: Any, _forward: Any = forward, _options: dict[str, Any] = options,
                _uncached: Callable[..., Any] | None = uncached, **kwargs: Any) -> Any:
            if _uncached is not None and torch.is_grad_enabled():
                args, kwargs = _uncached(args, kwargs)
            return checkpoint(_forward, *args, use_reentrant=False, **_options, **kwargs)

        block.forward = run  # type: ignore[method-assign]
        setattr(block, MARK, policy)
    return len(found)


CACHE_ARGUMENTS = ("cache", "layer_past", "past_key_value", "past_key_values")
"""A block's key/value-cache arguments (transformers' names): not passed to a checkpointed block."""


def _uncached(forward: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, Any]] | None:
    """For a block whose forward takes a key/value cache (:data:`CACHE_ARGUMENTS`, ``use_cache``: a transformers
    decoder layer): its arguments without the cache, so the block neither reads nor writes it -- a block that writes
    the cache while it runs would run otherwise when recomputed (the cache then holds this step's keys already; a
    selective checkpoint refuses the difference), which is why transformers' own gradient checkpointing passes
    ``use_cache=False`` and no cache the same way. A training forward of whole sequences reads no cache. None for a
    block without such arguments."""
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):
        return None
    names = [n for n in CACHE_ARGUMENTS if n in signature.parameters]
    if not names and "use_cache" not in signature.parameters:
        return None

    def without(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError:  # (a call the signature does not describe: left as it is)
            return args, kwargs
        for name in names:
            if bound.arguments.get(name) is not None:
                bound.arguments[name] = None
        if bound.arguments.get("use_cache"):
            bound.arguments["use_cache"] = False
        return bound.args, bound.kwargs

    return without


def checkpoint_policy(model: nn.Module) -> str:
    """The policy ``model``'s blocks are checkpointed with (:data:`POLICIES`), "off" where none is."""
    return next((str(getattr(m, MARK)) for m in model.modules() if getattr(m, MARK, False)), "off")


def checkpointed_names(model: nn.Module) -> list[str]:
    """The names of ``model``'s modules that run checkpointed (as ``named_modules`` says them)."""
    return [name for name, m in model.named_modules() if getattr(m, MARK, False)]


def compiled_batchnorm_doubt(model: nn.Module, compiled: bool) -> str | None:
    """Why a compiled step of ``model`` (its blocks checkpointed) may not compute what eager does: on a CPU whose ATen
    runs AVX2 kernels (an AVX2-only CPU, or ATEN_CPU_CAPABILITY=avx2), torch 2.13's Inductor computes a checkpointed
    block's BatchNorm forward otherwise than eager (seen here: the first loss differs; with LayerNorm, or compiled
    without checkpointing, it does not; on AVX-512 it matches) -- upstream, told in the row, not refused. None where
    that does not apply."""
    if not compiled or getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")() != "AVX2":
        return None
    checkpointed = [b for b in blocks(model) if getattr(b, MARK, False)]
    on_cpu = any(p.device.type == "cpu" for p in model.parameters())
    if not on_cpu or not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for b in checkpointed for m in b.modules()):
        return None
    return ("torch.compile of checkpointed blocks holding BatchNorm on a CPU running AVX2 kernels: torch's Inductor "
            "computed another forward than eager in ampbench's test (a torch bug; on AVX-512 kernels it matched): "
            "this cell's numbers may not be eager's model's")

