"""fp8 training through torchao's float8 (``torchao.float8.convert_to_float8_training``).

Each fp8 mode is the amp-bf16 recipe (autocast bf16, fp32 weights, no loss scaling) with the eligible
``nn.Linear`` layers swapped for torchao's ``Float8Linear``: their matmuls (forward, grad input, grad
weight) run on fp8 operands with per-tensor or per-row scales, everything else as in amp-bf16.

- ``fp8-tensorwise``: one dynamic scale per tensor (e4m3 everywhere); torchao's default recipe and
  its fastest on H100, the one whose FSDP2 all-gather can move fp8 weights. ``fp8`` is its alias.
- ``fp8-rowwise``: one scale per row (finer, more robust to outliers; slower than tensorwise).
- ``fp8-rowwise-gw-hp``: rowwise, with the grad-weight matmul kept in high precision (bf16): torchao's
  most conservative recipe for convergence.

Which layers: ours, not torchao's ``_auto_filter_for_recipe`` (experimental, private, and silent), so
every skipped layer has a reason in the record: not an ``nn.Linear``; a weight dimension not a multiple
of 16 (fp8 GEMM hardware requirement); named in ``fp8_skip`` (a substring of its name, like
torchtitan's ``filter_fqns``); too small to gain (``filter="auto"``: torchao's H100 thresholds for the
recipe; ``filter="dims"`` keeps only the hardware rule). torchao is an optional extra (``ampbench[fp8]``).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from ampbench.errors import AmpbenchError, ParameterError
from ampbench.precision.amp import AutocastRecipe
from ampbench.precision.registry import is_fp8, register
from ampbench.quiet_imports import torchao_quiet

TORCHAO_MIN = (0, 18)
"""torchao 0.18 is the first with the three recipes by name; it needs torch >= 2.11."""
TORCH_MIN_FOR_TORCHAO = (2, 11)
FILTERS = ("auto", "dims")
INSTALL = "pip install 'ampbench[fp8]' (torchao)"


def check_filter(value: str) -> str:
    """``auto`` or ``dims``, else a one-line error (``fp8_filter``; ``--fp8-filter`` on the command line)."""
    if value not in FILTERS:
        raise ParameterError("fp8_filter", value, "choose auto (multiple-of-16 dims and torchao's size thresholds) "
                             "or dims (only the multiple-of-16 rule)")
    return value


@dataclass(frozen=True)
class Fp8Options:
    """What an fp8 mode converts (the options the fp8 recipes are built with; checked at construction).

    ``skip``: Linear layers kept in bf16, by a substring of their name (``--fp8-skip head,lm_head``).
    ``filter``: ``auto`` (multiple-of-16 dims and torchao's size thresholds) or ``dims`` (the dims rule only).
    """

    skip: tuple[str, ...] = ()
    filter: str = "auto"

    def __post_init__(self) -> None:
        skip = (self.skip,) if isinstance(self.skip, str) else tuple(self.skip)
        object.__setattr__(self, "skip", tuple(x.strip() for s in skip for x in s.split(",") if x.strip()))
        check_filter(self.filter)

    @classmethod
    def from_strings(cls, skip: str | None, filter: str | None) -> Fp8Options:
        """``--fp8-skip a,b`` / ``--fp8-filter dims`` as the CLI gives them (None: the default)."""
        if filter is not None:
            check_filter(filter)
        return cls(tuple((skip or "").split(",")), filter or "auto")

    @classmethod
    def for_modes(cls, precisions: Sequence[str], skip: str | None, filter: str | None) -> Fp8Options | None:
        """The options given for these modes (None when none was given); refused unless an fp8 mode is among them."""
        if skip is None and filter is None:
            return None
        check_applies(precisions, True)
        return cls.from_strings(skip, filter)


def check_applies(precisions: Sequence[str], given: bool) -> None:
    """--fp8-skip/--fp8-filter apply to the fp8 modes only: one line when given without one."""

    if given and not any(is_fp8(p) for p in precisions):
        raise AmpbenchError("--fp8-skip/--fp8-filter apply to the fp8 modes (fp8-tensorwise, fp8-rowwise, "
                            "fp8-rowwise-gw-hp); none is asked for")


def _version(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def torchao_problem(what: str = "float8 training", install: str = INSTALL) -> str | None:
    """Why torchao (for ``what``: its float8 training, its low-precision optimizers) cannot be used here (None when
    it can), from the installed package's metadata: no import, so listing modes and planning a run stay fast and
    quiet."""
    if _version(torch.__version__)[:2] < TORCH_MIN_FOR_TORCHAO:
        return f"torchao's {what} needs torch >= 2.11; this is torch {torch.__version__}"
    try:
        found = importlib.util.find_spec("torchao") is not None
        version = importlib.metadata.version("torchao") if found else ""
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        found, version = False, ""
    if not found:
        return f"torchao is not installed; {install}"
    if version and _version(version)[:2] < TORCHAO_MIN:
        return f"torchao {version} is too old for its {what} here (need >= 0.18); {install}"
    return None


def import_float8() -> Any:
    """``torchao.float8``, imported quietly (:func:`import_torchao`)."""
    return import_torchao("torchao.float8")


def import_torchao(module: str, what: str = "float8 training", install: str = INSTALL) -> Any:
    """A torchao module, imported quietly: torchao logs a warning for each CUDA/CUTLASS extension it cannot load
    (every CPU machine) and torch warns about a deprecated pytree registration in it. One line (an AmpbenchError)
    when torchao is missing, too old or built for another torch."""
    problem = torchao_problem(what, install)
    if problem:
        raise AmpbenchError(problem)
    try:
        with torchao_quiet():
            return importlib.import_module(module)
    except Exception as e:  # a torchao built for another torch
        raise AmpbenchError(f"torchao does not import ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
                            f"{install}") from None


def _too_small(recipe: str, out_features: int, in_features: int) -> bool:
    """torchao's auto-filter thresholds (torchao/float8 README performance tables, H100): N = out, K = in."""
    n, k = out_features, in_features
    if recipe == "tensorwise":
        return k <= 4096 and n <= 1024
    return n <= 2048 or k <= 1024 or (n <= 4096 and k <= 2048)  # rowwise (and rowwise with hp grad weight)


@dataclass
class Fp8Layers:
    """Which ``nn.Linear`` layers a model's fp8 conversion took, and why the others were left in bf16."""

    converted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Per skipped layer whose reason is its dims: (the reason without them, its dims), which groups the layers one
    reason leaves out in :meth:`summary`."""

    @property
    def total(self) -> int:
        return len(self.converted) + len(self.skipped)

    def skip(self, name: str, why: str, kind: str | None = None, dims: str = "") -> None:
        self.skipped[name] = why
        if kind is not None:
            self.kinds[name] = (kind, dims)

    def summary(self) -> str:
        """'3/5 converted; skipped: head (dims 10x64 not multiples of 16)'; layers one reason leaves out are said
        together ('10 layers too small to gain (...): layers.0.qkv 192x64, ..., +6 more'): a BERT's twelve
        blocks were twelve copies of the reason."""
        text = f"{len(self.converted)}/{self.total} converted"
        if not self.skipped:
            return text
        groups: dict[str, list[str]] = {}
        for name, why in self.skipped.items():
            groups.setdefault(self.kinds[name][0] if name in self.kinds else why, []).append(name)
        parts = []
        for why, names in groups.items():
            if len(names) == 1:
                parts.append(f"{names[0]} ({self.skipped[names[0]]})")
                continue
            shown = ", ".join(f"{n} {self.kinds[n][1]}" if n in self.kinds else n for n in names[:4])
            parts.append(f"{len(names)} layers {why}: {shown}" + (f", +{len(names) - 4} more" if len(names) > 4 else ""))
        return f"{text}; skipped: " + "; ".join(parts)


def _attention_projections(model: nn.Module) -> dict[str, str]:
    """Linear layers owned by an nn.MultiheadAttention (its ``out_proj``), by name -> the attention's class."""
    out = {}
    for name, mod in model.named_modules():
        if isinstance(mod, nn.MultiheadAttention):
            for child, sub in mod.named_children():
                if isinstance(sub, nn.Linear):
                    out[f"{name}.{child}" if name else child] = type(mod).__name__
    return out


def plan_layers(model: nn.Module, recipe: str, skip: Sequence[str] = (), filter: str = "auto") -> Fp8Layers:
    """Decide, per ``nn.Linear`` of ``model`` (subclasses included: every one is converted or skipped with a
    reason), whether it becomes a Float8Linear."""
    check_filter(filter)
    names = {n for n, _ in model.named_modules()}
    unknown = [s for s in skip if not any(s in n for n in names)]
    if unknown:
        examples = ", ".join(sorted(names - {""})[:5])
        raise ParameterError("fp8_skip", unknown, f"matches no layer name (e.g. {examples})")
    plan = Fp8Layers()
    attention = _attention_projections(model)
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Linear):
            continue
        n, k = mod.weight.shape
        if name in attention:
            plan.skip(name, f"{attention[name]}'s output projection: its weight is used by "
                            "F.multi_head_attention_forward directly, never through the layer's forward")
        elif type(mod) is not nn.Linear:  # subclasses (and torchao's own) keep their behaviour
            plan.skip(name, f"a subclass of nn.Linear ({type(mod).__name__}) with behaviour of its own")
        elif name == "":
            plan.skip("(the model)", "the model itself is one nn.Linear: wrap it in a module to convert it")
        elif any(s in name for s in skip):
            plan.skip(name, "--fp8-skip")
        elif n % 16 or k % 16:
            plan.skip(name, f"dims {n}x{k} not multiples of 16", "with dims not multiples of 16", f"{n}x{k}")
        elif filter == "auto" and _too_small(recipe, n, k):
            plan.skip(name, f"{n}x{k} too small to gain (torchao's {recipe} threshold; --fp8-filter dims converts it)",
                      f"too small to gain (torchao's {recipe} threshold; --fp8-filter dims converts them)", f"{n}x{k}")
        else:
            plan.converted.append(name)
    return plan


def _cast_input_to_autocast_dtype(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Float8Linear casts its input to the autocast dtype only under CUDA autocast (it asks
    ``torch.is_autocast_enabled()`` without a device); on CPU the input stayed fp32 and the
    rowwise-with-hp-grad-weight backward failed on mixed dtypes. This makes CPU behave as CUDA."""
    x = args[0] if args else None
    if isinstance(x, torch.Tensor) and x.is_floating_point() and torch.is_autocast_enabled("cpu") and x.device.type == "cpu":
        dtype = torch.get_autocast_dtype("cpu")
        if x.dtype != dtype:
            return (x.to(dtype), *args[1:])
    return None


class _Fp8(AutocastRecipe):
    compute_dtype = torch.bfloat16
    math_mode = "fp8"
    in_cpu_defaults = False
    fp8_recipe: ClassVar[str]

    def __init__(self, options: Fp8Options | None = None, fsdp_all_gather: bool = False) -> None:
        self.options = options or Fp8Options()
        self.layers: Fp8Layers | None = None
        self.fsdp_all_gather = fsdp_all_gather
        """FSDP2 fp8-tensorwise: the converted weights keep torchao's fp8 all-gather wrapper (the engine says)."""

    def convert_module(self, module: nn.Module, keep_fp32: Sequence[str | type[nn.Module]]) -> nn.Module:
        try:
            float8 = import_float8()
        except AmpbenchError as e:
            raise AmpbenchError(f"{self.name}: {e}") from None
        plan = plan_layers(module, self.fp8_recipe, self.options.skip, self.options.filter)
        chosen = set(plan.converted)
        if chosen:
            # pad_inner_dim: CUDA's torch._scaled_mm needs mat1's columns and both of mat2's dims divisible by 16
            # (aten/src/ATen/native/cuda/Blas.cpp, "mat1 shape ... must be divisible by 16"; torchao's
            # Float8LinearConfig.pad_inner_dim docstring). The converted layers' N and K are (plan_layers' dims rule),
            # but the grad-weight GEMM's inner dim is the token count M = batch x sequence: any batch, a max-batch
            # trial at 33 or BERT's pooler would crash there. torchao zero-pads that inner dim (exact: zeros add
            # nothing to the products), a copy of the operand only when it is not a multiple of 16.
            config = dataclasses.replace(float8.Float8LinearConfig.from_recipe_name(self.fp8_recipe), pad_inner_dim=True)
            if self.fsdp_all_gather:
                config = dataclasses.replace(config, enable_fsdp_float8_all_gather=True)
            float8.convert_to_float8_training(module, module_filter_fn=lambda m, fqn: fqn in chosen, config=config)
            for name, mod in module.named_modules():
                if name in chosen:
                    mod.register_forward_pre_hook(_cast_input_to_autocast_dtype)
        self.layers = plan
        return module


@register
class Fp8Tensorwise(_Fp8):
    name = "fp8-tensorwise"
    summary = "amp-bf16 with eligible Linear layers in fp8 (torchao, per-tensor scales; extra ampbench[fp8])"
    fp8_recipe = "tensorwise"


@register
class Fp8Rowwise(_Fp8):
    name = "fp8-rowwise"
    summary = "amp-bf16 with eligible Linear layers in fp8 (torchao, per-row scales)"
    fp8_recipe = "rowwise"


@register
class Fp8RowwiseGwHp(_Fp8):
    name = "fp8-rowwise-gw-hp"
    summary = "fp8-rowwise with the grad-weight matmul kept in bf16 (torchao's most conservative recipe)"
    fp8_recipe = "rowwise_with_gw_hp"
