"""Apply an :class:`Execution` to a model, and read what torch.compile did (graphs, breaks, recompiles).

Order, which matters: ``model.to(device)`` -> :func:`prepare_model` (channels-last weights, before
``mp.setup`` so the fp32 master copies take the same layout and the engine's "no .to() after setup"
guard holds) -> ``mp.setup`` -> :func:`finish_model` (the channels-last input hook, then
``torch.compile`` over the set-up model, so the engine's casts and hooks are traced with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ampbench.errors import AmpbenchError
from ampbench.execution.axes import Execution
from ampbench.execution.checkpointing import checkpoint_blocks

CHANNELS_LAST_WORKLOADS = "mnist-cnn, resnext, conv-dummy, unet, or a --model taking (N, C, H, W) images"


def takes_4d_input(example_inputs: Any) -> bool:
    """Whether a model's (prepared) inputs include a floating 4-D tensor: what channels-last changes."""
    items = example_inputs.values() if isinstance(example_inputs, dict) else example_inputs
    if isinstance(items, torch.Tensor):
        items = (items,)
    return any(isinstance(t, torch.Tensor) and t.dim() == 4 and t.is_floating_point() for t in items)


def check_memory_format(execution: Execution, example_inputs: Any, what: str) -> None:
    """channels_last for a model without 4-D inputs is refused: it would change nothing and be reported as a change."""
    if execution.memory_format == "channels_last" and not takes_4d_input(example_inputs):
        shapes = ", ".join(str(tuple(t.shape)) for t in (example_inputs.values() if isinstance(example_inputs, dict)
                                                          else example_inputs) if isinstance(t, torch.Tensor))
        raise AmpbenchError(f"--memory-format channels_last: {what} takes no 4-D (N, C, H, W) image input (its inputs: "
                            f"{shapes or 'none'}); channels-last changes the layout of convolution models' activations: "
                            f"use it with {CHANNELS_LAST_WORKLOADS}")


def _to_channels_last(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
        return x.contiguous(memory_format=torch.channels_last)
    return x


def _channels_last_inputs(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Forward pre-hook: 4-D floating inputs handed to the model in channels-last layout (as a user's
    loop would convert its batches), after the workload's own input preparation."""
    return tuple(_to_channels_last(a) for a in args), {k: _to_channels_last(v) for k, v in kwargs.items()}


def prepare_model(model: nn.Module, execution: Execution, what: str = "this model") -> nn.Module:
    """Before ``mp.setup``: the weights' memory format and the checkpointed blocks (in place; ``what`` names the
    model in a refusal)."""
    if execution.memory_format == "channels_last":
        model.to(memory_format=torch.channels_last)
    if execution.checkpointing != "off":  # (before setup: FSDP2 then shards each checkpointed block as a unit)
        checkpoint_blocks(model, what, keep_statistics=not execution.compiled, policy=execution.checkpointing)
    return model


def finish_model(model: nn.Module, execution: Execution) -> nn.Module:
    """After ``mp.setup``: the channels-last input hook, then torch.compile. Returns the module to call
    (the compiled wrapper shares the set-up model's parameters; checkpoint the set-up model itself)."""
    if execution.memory_format == "channels_last":
        model.register_forward_pre_hook(_channels_last_inputs, with_kwargs=True)
    kwargs = execution.torch_compile_kwargs()
    if kwargs is None:
        return model
    return torch.compile(model, **kwargs)  # type: ignore[return-value]


def mark_step(execution: Execution) -> None:
    """Before each training step under CUDA graphs: tells cudagraph trees a new iteration begins, so
    the previous step's graph outputs may be overwritten (torch.compiler.cudagraph_mark_step_begin)."""
    if execution.cuda_graphs == "on":
        torch.compiler.cudagraph_mark_step_begin()


@dataclass(frozen=True)
class CompileCounts:
    """A snapshot of torch._dynamo's process-wide counters (subtract two to count what happened between)."""

    graphs: int = 0
    """Graphs dynamo compiled (each recompile is one more)."""
    breaks: int = 0
    """Graph breaks dynamo met."""
    cache_hits: int = 0
    """Inductor FX-graph cache hits (a compile served from the on-disk cache of an earlier process)."""
    cache_misses: int = 0
    cudagraph_skips: int = 0
    """Graphs Inductor compiled for CUDA graphs but ran without them (CPU tensors in the graph, mutated inputs,
    dynamic shapes, ...: torch/_inductor/cudagraph_utils.py log_cudagraph_skip_and_bump_counter)."""

    def __sub__(self, other: CompileCounts) -> CompileCounts:
        return CompileCounts(self.graphs - other.graphs, self.breaks - other.breaks,
                             self.cache_hits - other.cache_hits, self.cache_misses - other.cache_misses,
                             self.cudagraph_skips - other.cudagraph_skips)


def compile_counts() -> CompileCounts:
    # torch._dynamo.utils.counters is the only place dynamo reports these (torch.compiler has no public
    # counter API in 2.11-2.13); read defensively: a missing key is 0.
    from torch._dynamo.utils import counters  # lazy: torch._dynamo

    return CompileCounts(
        graphs=int(counters["stats"].get("unique_graphs", 0)),
        breaks=int(sum(counters["graph_break"].values())),
        cache_hits=int(counters["inductor"].get("fxgraph_cache_hit", 0)),
        cache_misses=int(counters["inductor"].get("fxgraph_cache_miss", 0)),
        cudagraph_skips=int(counters["inductor"].get("cudagraph_skips", 0)),
    )


def cuda_graphs_problem(execution: Execution, counts: CompileCounts) -> str | None:
    """Why a cell that asked for CUDA graphs cannot be reported as one: Inductor skipped them (silently: it runs
    those graphs without CUDA graphs and only bumps a counter), so the row's cuda_graphs=on would be wrong."""
    if execution.cuda_graphs != "on" or counts.cudagraph_skips <= 0:
        return None
    return (f"CUDA graphs were skipped: Inductor ran {counts.cudagraph_skips} compiled graph(s) of this cell without "
            "them (a CPU tensor in the graph, an input mutated in place, dynamic shapes...; TORCH_LOGS=cudagraphs "
            "says which): timed as cuda_graphs=on it would be a wrong number; run it with --cuda-graphs off")


def graph_break_reasons(limit: int = 3) -> list[str]:
    """The most frequent graph-break reasons dynamo recorded in this process (first line each)."""
    from torch._dynamo.utils import counters  # lazy: torch._dynamo

    top = sorted(counters["graph_break"].items(), key=lambda kv: -kv[1])[:limit]
    return [f"{str(reason).strip().splitlines()[0][:160]} (x{n})" for reason, n in top]


def graph_ran_compiled(loss: torch.Tensor) -> bool:
    """Whether the autograd graph behind ``loss`` went through torch.compile'd code: AOT autograd puts a
    ``CompiledFunctionBackward`` node in it for every compiled graph the forward ran. Dynamo falls back
    to eager without an error (past its recompile limit, or for a frame once called under a
    TorchDispatchMode such as the FLOP counter); a compiled cell checks it did not."""
    seen, todo = set(), [loss.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if type(fn).__name__.startswith("CompiledFunction"):
            return True
        todo.extend(f for f, _ in fn.next_functions)
    return False
