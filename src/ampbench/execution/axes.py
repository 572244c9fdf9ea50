"""How a model is executed, apart from its precision: the axes ``--compile``, ``--memory-format``,
``--cuda-graphs`` and ``--checkpointing`` (activation checkpointing of the model's repeated blocks). Each is a
field of a cell and a column of its row, so that one change is measured at a time against the same fp32 eager
baseline (the defaults: today's cells).

What each (compile, cuda_graphs) pair runs, so that every pair is one well-defined change:

============  ===========  =============================================================================
compile       cuda_graphs  torch.compile call
============  ===========  =============================================================================
off           off          none (eager)
on            off          ``torch.compile(model)`` (mode "default": Inductor, no CUDA graphs)
max-autotune  off          ``mode="max-autotune-no-cudagraphs"`` (Inductor autotuning alone)
off           on           ``backend="cudagraphs"`` (dynamo's CUDA-graph backend over AOT graphs: the
                           launches captured and replayed, no Inductor fusion)
on            on           ``mode="reduce-overhead"`` (Inductor + CUDA graphs)
max-autotune  on           ``mode="max-autotune"`` (Inductor autotuning + CUDA graphs)
============  ===========  =============================================================================

CUDA graphs are captured by torch's cudagraph trees around the compiled forward and backward; the
optimizer step and ampbench's loss-scale bookkeeping stay eager (they read the inf check on the
host, which a captured graph cannot). A whole-step manual capture would need a step without host
syncs: not what users' AMP loops are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ampbench.errors import AmpbenchError, suggest

COMPILE_VALUES = ("off", "on", "max-autotune")
MEMORY_FORMATS = ("contiguous", "channels_last")
CUDA_GRAPHS_VALUES = ("off", "on")
CHECKPOINTING_VALUES = ("off", "blocks", "selective")
AXES: dict[str, tuple[str, ...]] = {"compile": COMPILE_VALUES, "memory_format": MEMORY_FORMATS,
                                    "cuda_graphs": CUDA_GRAPHS_VALUES, "checkpointing": CHECKPOINTING_VALUES}
"""Each axis and its values, the default first."""

_TORCH_COMPILE: dict[tuple[str, str], dict[str, str] | None] = {
    ("off", "off"): None,
    ("on", "off"): {"mode": "default"},
    ("max-autotune", "off"): {"mode": "max-autotune-no-cudagraphs"},
    ("off", "on"): {"backend": "cudagraphs"},
    ("on", "on"): {"mode": "reduce-overhead"},
    ("max-autotune", "on"): {"mode": "max-autotune"},
}


@dataclass(frozen=True)
class Execution:
    """One point on the execution axes. The default is eager, contiguous, no CUDA graphs."""

    # (a cell's key leaves an axis out at its default: cells of runs made before the axes existed keep their keys)
    compile: str = field(default="off", metadata={"cell": "default"})
    """off | on (torch.compile, default mode) | max-autotune."""
    memory_format: str = field(default="contiguous", metadata={"cell": "default"})
    """contiguous | channels_last (models taking 4-D (N, C, H, W) inputs: the model and those inputs)."""
    cuda_graphs: str = field(default="off", metadata={"cell": "default"})
    """off | on (CUDA only: the compiled forward/backward replayed as CUDA graphs)."""
    checkpointing: str = field(default="off", metadata={"cell": "default", "run": "default"})
    """off | blocks (each repeated block's activations recomputed in the backward) | selective (only what costs no
    FLOPs recomputed: the matmul, convolution and attention outputs kept) -- :mod:`ampbench.execution.checkpointing`."""

    def __post_init__(self) -> None:
        for axis, values in AXES.items():
            v = getattr(self, axis)
            if v not in values:
                raise AmpbenchError(f"--{axis.replace('_', '-')} {v!r}: choose from {', '.join(values)}."
                                    + suggest(str(v), values))

    @property
    def is_default(self) -> bool:
        return self == Execution()

    @property
    def compiled(self) -> bool:
        return self.torch_compile_kwargs() is not None

    def torch_compile_kwargs(self) -> dict[str, str] | None:
        """Keywords of the ``torch.compile`` call this point means (None: eager; table in the module docstring)."""
        kw = _TORCH_COMPILE[(self.compile, self.cuda_graphs)]
        return None if kw is None else dict(kw)

    def torch_compile_text(self) -> str | None:
        """``torch.compile(mode="reduce-overhead")``, for rows and reports (None when eager)."""
        kw = self.torch_compile_kwargs()
        return None if kw is None else "torch.compile(" + ", ".join(f'{k}="{v}"' for k, v in kw.items()) + ")"

    def changes(self) -> list[str]:
        """What differs from the default, in words used by reports: ["compile", "channels_last"]."""
        out = []
        if self.compile != "off":
            out.append("compile" if self.compile == "on" else "compile max-autotune")
        if self.memory_format != "contiguous":
            out.append(self.memory_format)
        if self.cuda_graphs != "off":
            out.append("cuda-graphs")
        if self.checkpointing != "off":
            out.append("checkpointing" if self.checkpointing == "blocks" else f"{self.checkpointing}-checkpointing")
        return out

    @property
    def label(self) -> str:
        """"eager" for the default, else the changes joined with '+' ("compile+channels_last")."""
        return "+".join(self.changes()) or "eager"

    def check_device(self, device: str) -> None:
        """CUDA graphs exist only on CUDA devices: refused elsewhere, with the reason."""
        if self.cuda_graphs == "on" and not device.startswith("cuda"):
            raise AmpbenchError(f"--cuda-graphs on needs a CUDA device, this run is on {device}: CUDA graphs capture "
                                "and replay GPU kernel launches, there are none to capture on a CPU; use --cuda-graphs "
                                "off (or leave it out)")

    def to_row(self) -> dict[str, Any]:
        return {axis: getattr(self, axis) for axis in AXES}

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Execution:
        """The execution a row (or cell dict) was measured with; rows from before these axes are the default."""
        return cls(**{axis: row.get(axis) or values[0] for axis, values in AXES.items()})


def parse_axis(value: str | None, axis: str) -> tuple[str, ...]:
    """'off,on' -> ('off', 'on'): the values asked for an axis, in the order given, no duplicates
    (None: the default alone). Unknown values are one line naming the valid ones."""
    values = AXES[axis]
    flag = "--" + axis.replace("_", "-")
    if value is None:
        return (values[0],)
    items = [v.strip().replace("-", "_") if axis == "memory_format" else v.strip() for v in value.split(",")]
    items = [v for v in items if v]
    if not items:
        raise AmpbenchError(f"{flag} is empty: give a comma-separated list of {', '.join(values)}")
    out: list[str] = []
    for v in items:
        if v not in values:
            raise AmpbenchError(f"{flag} {v!r}: choose from {', '.join(values)}." + suggest(v, values))
        if v not in out:
            out.append(v)
    return tuple(out)


def executions(compile: tuple[str, ...], memory_format: tuple[str, ...], cuda_graphs: tuple[str, ...],
               checkpointing: tuple[str, ...] = ("off",)) -> tuple[Execution, ...]:
    """Every combination of the axes' values (default first): each change alone and combined."""
    return tuple(Execution(c, m, g, k) for c in compile for m in memory_format for g in cuda_graphs
                 for k in checkpointing)


def strategy_label(row: dict[str, Any]) -> str:
    """"" for a one-process row, else "ddp x2" / "fsdp x4 (bf16 reduce)"."""
    if not row.get("strategy"):
        return ""
    reduce = f" ({row['grad_reduce_dtype']} reduce)" if row.get("grad_reduce_dtype") else ""
    return f"{row['strategy']} x{row.get('world_size') or '?'}{reduce}"


def display_name(row: dict[str, Any]) -> str:
    """How reports name a row's cell: its precision, with the execution when not eager, the strategy when
    distributed and the optimizer's state precision when not as built ("amp-bf16 · compile", "master-bf16 · fsdp x2",
    "amp-bf16 · 8bit optimizer states")."""
    ex = Execution.of(row)
    parts = [str(row.get("precision"))] + ([] if ex.is_default else [ex.label]) + (
        [strategy_label(row)] if row.get("strategy") else []) + (
        [f"{row['optimizer_state']} optimizer states"] if row.get("optimizer_state") else [])
    return " · ".join(parts)
