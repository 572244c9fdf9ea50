"""Optimizer-state precision: Adam's two moments stored in fp32, bf16 (with stochastic rounding of the weights),
8-bit, 4-bit or fp8 -- torchao's low-precision optimizers, on the user's Adam/AdamW with its hyper-parameters.

Which states a precision mode has by default: those of the weights its optimizer steps (torch's Adam creates its
moments with ``zeros_like(param)``): fp32 in every mode that steps fp32 weights (fp32, tf32, amp-*, fp8-* and
master-*, whose optimizer steps the fp32 master copies), the half dtype in pure-* (no fp32 copy anywhere). A state
precision equal to a mode's own is that mode's default (the same cell, the same key); the others:

- ``8bit``: each moment as uint8 codes over a 256-entry dynamic map, an fp32 scale per block of 256 (torchao's
  ``Adam8bit``/``AdamW8bit``); every mode (master-*: the fp32 masters' moments).
- ``4bit``: 4-bit codes (two per byte) over a 16-entry map, an fp32 scale per block of 128 (``Adam(W)4bit``); every
  mode.
- ``fp8``: float8 e4m3 values, an fp32 scale per block of 256 (``Adam(W)Fp8``); every mode; on CUDA compute
  capability >= 8.9.
- ``bf16-sr``: bf16 moments, the bf16 weights updated with stochastic rounding (torchao's Adam base with
  ``bf16_stochastic_round=True``, as its ``_AdamW``); pure-bf16 only.
- ``bf16``: bf16 moments: pure-bf16's own (torch's Adam on bf16 weights). ``fp32``: the own of every other mode.

torchao quantizes a state tensor only when it has at least 4096 elements and a multiple of the block size (as
bitsandbytes does); smaller ones (biases, norms) stay plain in the weight's dtype: :func:`describe` says how many of
each a step held. The update itself runs in fp32 (torchao compiles it per parameter shape with ``torch.compile``: the
first steps are slow). Why these combinations and not others: ``bf16-sr`` rounds *the weights*, so it needs bf16
weights the optimizer steps (under master-bf16 it steps fp32 masters: nothing to round); ``fp32`` states beside half
weights and ``bf16`` states beside fp32 weights are layouts no optimizer here builds (master-* is the first, 8bit the
smaller-than-fp32 choice for the second).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

from ampbench.errors import ParameterError, suggest
from ampbench.precision.fp8 import import_torchao, torchao_problem
from ampbench.precision.registry import get

STATES = ("fp32", "bf16", "bf16-sr", "8bit", "4bit", "fp8")
"""The values of ``--optimizer-state`` (and ``MixedPrecision(optimizer_state=...)``)."""
INSTALL = "pip install 'ampbench[optim]' (torchao)"
_DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
_QUANTIZED = {"8bit": ("Adam8bit", "AdamW8bit"), "4bit": ("Adam4bit", "AdamW4bit"), "fp8": ("AdamFp8", "AdamWFp8")}
_ADAMS = (torch.optim.Adam, torch.optim.AdamW)


def check_name(state: str) -> str:
    """One of :data:`STATES`, else one line naming them (the parameter as the caller spells it: ``optimizer_state``
    in Python, ``--optimizer-state`` on the command line)."""
    if state not in STATES:
        raise ParameterError("optimizer_state", state, f"choose from {', '.join(STATES)}." + suggest(state, STATES))
    return state


def natural(precision: str) -> str:
    """The state precision ``precision`` has with the optimizer as built: the dtype of the weights it steps."""
    recipe = get(precision)
    if recipe.casts_model and not recipe.master_weights:  # pure-*: the optimizer steps the half weights themselves
        return _DTYPES.get(recipe.param_dtype, "fp32")
    return "fp32"


def effective(precision: str, state: str | None) -> str | None:
    """``state`` as a cell has it: None for the mode's own (:func:`natural`: the default cell), else ``state``."""
    if state is None or state == natural(precision):
        return None
    return check_name(state)


def refusal(precision: str, state: str | None, device: str | torch.device | None = None) -> str | None:
    """Why ``precision`` cannot keep its optimizer's states in ``state`` (on ``device``), in one line; None when it
    can (or when ``state`` is the mode's own)."""
    s = effective(precision, state)
    if s is None:
        return None
    name, own = get(precision).name, natural(precision)
    if s == "fp32":
        return (f"{name} steps {own} weights and torch's Adam keeps its states in the weights' dtype: fp32 states "
                f"need fp32 weights (master-{own}: fp32 master copies with fp32 states; or 8bit/4bit states here)")
    if s == "bf16":
        return (f"bf16 optimizer states come with bf16 weights (pure-bf16: torch's Adam keeps its states in the "
                f"weights' dtype); {name} steps {own} weights: for smaller states beside them use 8bit, 4bit or fp8")
    if s == "bf16-sr" and own != "bf16":
        why = " (its fp32 master copies: nothing to round)" if get(precision).master_weights else ""
        return (f"bf16-sr rounds bf16 weights stochastically: it needs pure-bf16 (bf16 weights, no master copy); "
                f"{name} steps {own} weights{why}")
    if s == "fp8" and device is not None and torch.device(device).type == "cuda":
        cc = torch.cuda.get_device_capability(torch.device(device))
        if cc < (8, 9):
            return f"fp8 optimizer states need compute capability >= 8.9 (Ada, Hopper or newer); this GPU is {cc[0]}.{cc[1]}"
    return None


def check(precision: str, state: str | None) -> None:
    """One mode's state (``train``, ``diagnose``): a known state that applies to ``precision``, torchao installed when
    it is not the mode's own; one line otherwise, before any data is built."""
    if state is None:
        return
    why = refusal(precision, check_name(state)) or missing_for([precision], [state])
    if why:
        raise ParameterError("optimizer_state", state, why)


def missing() -> str | None:
    """Why torchao's low-precision optimizers cannot be used here (None when they can)."""
    return torchao_problem("low-precision optimizers", INSTALL)


def missing_for(precisions: Iterable[str], states: Iterable[str | None]) -> str | None:
    """:func:`missing` when one of ``states`` is not the own state of one of ``precisions`` (torchao would build it),
    else None: a run, a prediction or a training asking only for states its modes have needs no torchao."""
    states = list(states)
    if any(effective(p, s) is not None for p in precisions for s in states):
        return missing()
    return None


def convert(optimizer: torch.optim.Optimizer, state: str) -> torch.optim.Optimizer:
    """``optimizer`` (torch's Adam or AdamW, not yet stepped) rebuilt as torchao's optimizer for ``state``, with the
    same parameter groups and hyper-parameters (lr, betas, eps, weight decay -- L2 for Adam, decoupled for AdamW --,
    amsgrad). ``state`` is an :func:`effective` one (not None)."""
    check_optimizer(optimizer, state)
    optim = import_torchao("torchao.optim", "low-precision optimizers", INSTALL)
    adamw = isinstance(optimizer, torch.optim.AdamW) or bool(optimizer.defaults.get("decoupled_weight_decay"))
    keys = ("lr", "betas", "eps", "weight_decay", "amsgrad")
    groups = [{"params": g["params"], **{k: _number(g[k]) for k in keys if k in g}} for g in optimizer.param_groups]
    d = {k: _number(optimizer.defaults[k]) for k in keys}
    if state == "bf16-sr":  # (torchao's unquantized base: block size inf keeps every state plain, in bf16 here)
        from torchao.optim.adam import _AdamBase  # lazy: torchao (imported quietly above)

        out = _AdamBase(groups, d["lr"], d["betas"], d["eps"], d["weight_decay"], d["amsgrad"],
                        block_size=float("inf"), bf16_stochastic_round=True, is_adamw=adamw)
    else:
        out = getattr(optim, _QUANTIZED[state][adamw])(groups, lr=d["lr"], betas=d["betas"], eps=d["eps"],
                                                       weight_decay=d["weight_decay"], amsgrad=d["amsgrad"])
    return _eager_under_dispatch_modes(out)


def _eager_under_dispatch_modes(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """``optimizer`` whose step runs torchao's update eagerly while a dispatch mode is active.

    torchao compiles its per-parameter update with ``torch.compile(fullgraph=True)``, and torch.compile refuses to
    compile under a (non-infra) ``TorchDispatchMode`` -- the modes that count a step's FLOPs, its host syncs, or trace
    it for ``ampbench predict`` -- so the step would raise there. Under such a mode the same function runs eagerly
    (the same fp32 arithmetic, op by op); the timed steps run under no mode, compiled as torchao runs them.
    ``TORCHDYNAMO_DISABLE=1`` is torch's switch that turns ``torch.compile`` into a no-op (read at each call, unlike
    ``torch._dynamo.config.disable``, under which a ``fullgraph`` compile raises); it is set for the step only. (An
    instance attribute: torch's step hooks live on the class's step, which this calls.)"""
    step = optimizer.step

    @functools.wraps(step)
    def step_(*args: Any, **kwargs: Any) -> Any:
        if not is_in_torch_dispatch_mode(include_infra_modes=False):
            return step(*args, **kwargs)
        with compile_as_no_op():
            return step(*args, **kwargs)

    optimizer.step = step_  # type: ignore[method-assign]
    return optimizer


@contextlib.contextmanager
def compile_as_no_op() -> Iterator[None]:
    """``torch.compile`` returns its function unchanged inside the block (``TORCHDYNAMO_DISABLE=1``, restored after):
    torchao's update runs op by op."""
    before = os.environ.get("TORCHDYNAMO_DISABLE")
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TORCHDYNAMO_DISABLE"]
        else:
            os.environ["TORCHDYNAMO_DISABLE"] = before


def is_torchao(optimizer: torch.optim.Optimizer) -> bool:
    """One of torchao's optimizers (what :func:`convert` builds)."""
    return type(optimizer).__module__.startswith("torchao.")


def check_optimizer(optimizer: torch.optim.Optimizer, state: str) -> None:
    """The optimizer a state precision can rebuild: torch's Adam or AdamW (exactly: a subclass may step otherwise),
    not stepped yet, without options torchao's have not (maximize, differentiable)."""
    cls = type(optimizer)
    if cls not in _ADAMS:
        where = "torch.optim" if cls.__module__.startswith("torch.optim.") else cls.__module__
        raise ParameterError("optimizer_state", state, f"applies to torch.optim.Adam and AdamW (torchao's "
                             f"low-precision Adam); this workload's optimizer is {where}.{cls.__name__}: use the "
                             "default optimizer state (leave the optimizer state out)")
    if optimizer.state:
        raise ParameterError("optimizer_state", state, "the optimizer has stepped already (it has state); build it "
                             "fresh, then set up")
    for flag in ("maximize", "differentiable"):
        if any(g.get(flag) for g in optimizer.param_groups):
            raise ParameterError("optimizer_state", state, f"torchao's Adam has no {flag}=True; build the optimizer "
                                 "without it or leave the optimizer state out")


def check_built(make_optimizer: Any, params: Any, precision: str, state: str | None) -> None:
    """The optimizer a workload builds (``make_optimizer(params)``; on meta parameters it costs nothing) can hold
    ``state``'s moments, where ``state`` is not ``precision``'s own: one line otherwise, before any progress."""
    if state is not None and effective(precision, state) is not None:
        check_optimizer(make_optimizer(params), state)


def _number(v: Any) -> Any:
    """A hyper-parameter as torchao takes it (a tensor lr or beta as its float)."""
    if isinstance(v, torch.Tensor):
        return float(v)
    if isinstance(v, tuple):
        return tuple(_number(x) for x in v)
    return v


def state_kind(t: torch.Tensor) -> str:
    """What one optimizer state tensor is stored as: 8bit, 4bit, fp8 (torchao's subclasses), else its dtype."""
    name = type(t).__name__
    if name.startswith("OptimState"):
        return {"OptimState8bit": "8bit", "OptimState4bit": "4bit", "OptimStateFp8": "fp8"}.get(name, name)
    return _DTYPES.get(t.dtype, str(t.dtype).replace("torch.", ""))


def describe(optimizer: torch.optim.Optimizer) -> str | None:
    """The optimizer's moment tensors by storage, e.g. "8bit x24, fp32 x38" (step counters left out); None before
    its first step."""
    kinds: Counter[str] = Counter()
    for s in optimizer.state.values():
        for k, v in s.items():
            if isinstance(v, torch.Tensor) and k != "step":
                kinds[state_kind(v)] += 1
    return ", ".join(f"{k} x{n}" for k, n in kinds.most_common()) or None
