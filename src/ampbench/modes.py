"""The precision modes as a table: each mode's name, the other names it answers to, and the facts about it that code
reading stored rows needs (``ampbench results``, ``report``, ``compare``, ``export``: check a row's precision, order a
table by it, let the advisor rank and qualify it) -- without running a mode.

Why apart from :mod:`ampbench.precision`'s recipes: the recipes import torch (~1.3 s of the 2 s ``ampbench results``
took on a 2-core AMD EPYC), and reading a store needs only these facts. The recipes say how a mode runs (dtypes, math,
loss scaling); this table says what a mode is called and how the advisor treats it. The registry refuses a recipe
this table does not list, or one whose dtypes and math disagree with its row here
(:func:`ampbench.precision.registry.register`), and a test holds the two in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.errors import AmpbenchError, suggest


@dataclass(frozen=True)
class Mode:
    name: str
    """Canonical name (``amp-fp16``)."""
    aliases: tuple[str, ...] = ()
    """Other accepted names, case-insensitive (apex ``O1``, Lightning ``16-mixed``, HF Trainer's ``fp16``/``bf16``,
    Keras' ``mixed_float16``)."""
    preference: int = 100
    """The advisor's tie-break among modes of equal speed and memory, lowest first: autocast first (no model changes;
    bf16 needs no loss scaling), then master weights, fp8, pure half, fp32 last."""
    fp8: bool = False
    """Whether the heavy ops run in fp8 (the recipe's ``math_mode``)."""
    half_weights: bool = False
    """Whether the parameters, and so the gradients the optimizer steps, are half with no fp32 copy (pure-*)."""
    needs_verdict: bool = False
    """Whether the advisor recommends the mode only with its own convergence verdict (parity with fp32), never on
    speed or memory alone: modes that change the numerics beyond autocast's."""


TABLE: tuple[Mode, ...] = (
    Mode("fp32", ("O0", "32-true", "32", "float32"), preference=10),
    Mode("tf32", preference=9),
    Mode("amp-fp16", ("O1", "16-mixed", "16", "fp16", "amp", "mixed_float16"), preference=1),
    Mode("amp-bf16", ("bf16-mixed", "bf16", "mixed_bfloat16"), preference=0),
    Mode("master-fp16", ("O2",), preference=3),
    Mode("master-bf16", preference=2),
    # (pure half: no fp32 copy of the weights -- updates below the half ulp are lost)
    Mode("pure-fp16", ("O3", "16-true", "float16"), preference=8, half_weights=True, needs_verdict=True),
    Mode("pure-bf16", ("bf16-true", "bfloat16"), preference=7, half_weights=True, needs_verdict=True),
    # (fp8: its scaling changes the numerics -- never recommended on speed alone)
    Mode("fp8-tensorwise", ("fp8",), preference=4, fp8=True, needs_verdict=True),
    Mode("fp8-rowwise", preference=5, fp8=True, needs_verdict=True),
    Mode("fp8-rowwise-gw-hp", preference=6, fp8=True, needs_verdict=True),
)
"""Every mode, in the order ``ampbench list`` shows and tables sort by."""

MODES: tuple[str, ...] = tuple(m.name for m in TABLE)
"""The canonical names, in order."""

_BY_NAME: dict[str, Mode] = {key.lower(): m for m in TABLE for key in (m.name, *m.aliases)}
assert len(_BY_NAME) == sum(1 + len(m.aliases) for m in TABLE), "two modes share a name or alias"


def find(name: str) -> Mode | None:
    """The mode a name or alias (case-insensitive) names; None for a name that is no mode (an imported row's)."""
    return _BY_NAME.get(str(name).strip().lower())


def mode(name: str) -> Mode:
    """The mode a name or alias names; AmpbenchError listing the valid names and their aliases."""
    found = find(name)
    if found is None:
        valid = ", ".join(f"{m.name} ({'/'.join(m.aliases)})" if m.aliases else m.name for m in TABLE)
        key = str(name).strip().lower()
        raise AmpbenchError(f"unknown precision {name!r}.{suggest(key, _BY_NAME)} Valid names (aliases): {valid}")
    return found


def resolve(name: str) -> str:
    """Canonical name for a name or alias (case-insensitive); AmpbenchError listing valid names."""
    return mode(name).name


def aliases_of(name: str) -> tuple[str, ...]:
    return mode(name).aliases


def is_fp8(name: str) -> bool:
    """Whether a mode (name or alias) computes in fp8; False for a name that is no mode (an imported row's)."""
    found = find(name)
    return found is not None and found.fp8


def advised_only_with_verdict(name: str) -> bool:
    """Whether the advisor needs a mode's own convergence verdict before recommending it (pure-*, fp8)."""
    found = find(name)
    return found is not None and found.needs_verdict


def half_gradients(name: str) -> bool:
    """Whether a mode's parameters, and so the gradients its optimizer steps, are half (pure-*); False for a name that
    is no mode (an imported row's)."""
    found = find(name)
    return found is not None and found.half_weights


def preference(name: str) -> int:
    """The advisor's tie-break rank of a mode (lower: preferred); names that are no mode rank last."""
    found = find(name)
    return found.preference if found is not None else 1000
