"""Tensor Core friendliness: dimensions that are not multiples of 8 (16 for fp8) make cuBLAS/cuDNN
pad or fall back to slower kernels (NVIDIA, "Deep Learning Performance Guide: Matrix Multiplication",
Tensor Core requirements). Vocabulary-sized dimensions are best padded to a multiple of 64
(nanoGPT pads GPT-2's 50257 to 50304 for a measurable speed-up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ampbench.diagnose.findings import Finding
from ampbench.measure.step import device_batches
from ampbench.workloads.base import Workload

VOCAB_MIN = 1000
"""Embedding rows / output features at least this large are treated as a vocabulary (pad to 64)."""


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


class DimLint:
    """Collects the GEMM dimensions that miss ``multiple`` (64 for a vocabulary-sized one): what a framework's lint
    (PyTorch modules here, Keras layers in ampbench.frameworks.keras.diagnose) feeds with its layers' sizes."""

    def __init__(self, multiple: int = 8) -> None:
        self.multiple = multiple
        self.issues: list[dict[str, Any]] = []

    def check(self, where: str, what: str, n: int, vocab: bool = False, output: bool = False,
              data: bool = False) -> None:
        """``output``: the dimension is the model's output (its classes or targets: padded, not changed); ``data``:
        it is the data's (a feature vector's width: padded with zero features, not changed)."""
        m = max(64, self.multiple) if vocab else self.multiple
        if n % m:
            self.issues.append({"layer": where, "dim": what, "value": int(n), "multiple": m,
                                "padded": _round_up(int(n), m), **({"output": True} if output else {}),
                                **({"data": True} if data else {})})

    def batch(self, batch_size: int | None, gemm_rows: set[int] | None = None) -> list[dict[str, Any]]:
        """The issues, the batch size's last; the list. ``gemm_rows``: the row counts of the GEMMs one forward ran
        (None: not known) -- the batch is a GEMM dimension only where it is theirs: a transformer's are batch x
        sequence (BERT at batch 4 x 16 tokens: 64, a multiple of 8), a convolution's channels are its Tensor Core
        dimensions; so with them the batch is linted only where a GEMM's rows miss the multiple."""
        if batch_size is None or batch_size % self.multiple == 0:
            return self.issues
        if gemm_rows is None or any(m % self.multiple for m in gemm_rows):
            self.issues.append({"layer": "(batch)", "dim": "batch_size", "value": batch_size, "multiple": self.multiple,
                                "padded": _round_up(batch_size, self.multiple)})
        return self.issues


class _GemmOperands(TorchDispatchMode):
    """Records the storage of every floating tensor an op with a FLOP formula takes (``registry``: the FLOP counter's
    own -- mm, addmm, bmm, convolution, attention): at the dispatch level a GEMM is seen wherever it is called from
    (a function mode's handler runs popped: the Linear inside ``F.multi_head_attention_forward`` escapes it), and a
    weight's transposed or sliced view shares its data pointer."""

    def __init__(self, registry: dict[Any, Any]) -> None:
        super().__init__()
        self.registry = registry
        self.pointers: set[int] = set()
        self.rows: list[tuple[int, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func._overloadpacket in self.registry:
            self.pointers.update(t.data_ptr() for t in tree_leaves((args, kwargs))
                                 if isinstance(t, torch.Tensor) and t.is_floating_point())
            at = GEMM_ROWS.get(func._overloadpacket)
            if at is not None:  # (the left operand's rows: the batch's share of a GEMM; the weight gradient's K)
                a, b = args[at], args[at + 1]
                self.rows.append((int(a.shape[-2]), 2 * a.numel() * int(b.shape[-1])))
        return func(*args, **kwargs)


GEMM_ROWS = {torch.ops.aten.mm: 0, torch.ops.aten.addmm: 1, torch.ops.aten.bmm: 0, torch.ops.aten.baddbmm: 1}
"""The argument of each GEMM op whose rows (``shape[-2]``) the batch runs through: ``mm(a, b)``, ``addmm(bias, a,
b)``, ``bmm(a, b)``, ``baddbmm(c, a, b)``."""


SLIVER = 0.01
"""A Linear or convolution doing under this share of the forward's FLOPs is not linted: its GEMM is a sliver of the
step, padding it gains nothing measurable (a 2-class head on BERT was a warning on every GPU)."""


@dataclass(frozen=True)
class ForwardFacts:
    """What one forward of the model showed: the data pointers of the tensors passed to a GEMM, and the FLOPs of
    each module (by its name in the model) and of the whole forward."""

    gemm_pointers: set[int]
    module_flops: dict[str, int]
    total_flops: int
    gemm_rows: tuple[tuple[int, int], ...] = ()
    """(rows, FLOPs) of each of the forward's GEMMs (mm, addmm, bmm, baddbmm): where the batch is a GEMM dimension."""
    output_layers: frozenset[str] = frozenset()
    """The Linear layers whose output is the model's (the logits): their ``out_features`` are the task's classes or
    outputs, not a width to choose."""
    input_layers: frozenset[str] = frozenset()
    """The Linear layers that take the batch's own tensor (a table's rows): their ``in_features`` are the data's
    features, not a width to choose."""

    def rows_that_matter(self) -> set[int]:
        """The row counts of the GEMMs doing at least ``SLIVER`` of the forward's FLOPs (a classifier head on a BERT's
        pooled token, 4 rows at batch 4, is not why its step is slow)."""
        return {m for m, flops in self.gemm_rows if flops >= SLIVER * self.total_flops}


def forward_facts(wl: Workload, device: torch.device, batch_size: int) -> ForwardFacts:
    """One forward of ``wl`` (fp32, no grad, on one batch): which tensors reach a GEMM (an embedding's rows are a GEMM
    dimension only where its weight is one -- an output projection tied to it; a lookup is a gather, which Tensor
    Cores do not run), and each module's FLOPs (torch.utils.flop_counter)."""
    from torch.utils.flop_counter import FlopCounterMode  # lazy: torch.utils.flop_counter

    model = wl.model.to(device).float().eval()
    (inputs, _), = device_batches(wl.train_data, batch_size, 1, device)
    counter = FlopCounterMode(display=False)
    mode = _GemmOperands(counter.flop_registry)
    made: dict[int, str] = {}  # (an output's storage -> the Linear that wrote it)
    took: dict[str, int] = {}  # (a Linear -> the storage of its input)
    linears = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: made.update(
        {out.data_ptr(): name} if isinstance(out, torch.Tensor) else {})) for name, m in linears]
    hooks += [m.register_forward_pre_hook(lambda _m, args, name=name: took.update(
        {name: args[0].data_ptr()} if args and isinstance(args[0], torch.Tensor) else {})) for name, m in linears]
    batch = {t.data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()}
    try:
        with torch.no_grad(), counter, mode:
            output = wl.call_model(model, inputs)
    finally:
        for h in hooks:
            h.remove()
        model.train()
    root = type(model).__name__ + "."  # (the counter names a module "<root class>.<its name in the model>")
    flops = {k.removeprefix(root): sum(v.values()) for k, v in counter.get_flop_counts().items()}
    logits = getattr(output, "logits", output)  # (a Hugging Face model's output object)
    outputs = frozenset(made[t.data_ptr()] for t in tree_leaves(logits)
                        if isinstance(t, torch.Tensor) and t.data_ptr() in made)
    return ForwardFacts(mode.pointers, flops, int(counter.get_total_flops()), tuple(mode.rows), outputs,
                        frozenset(name for name, ptr in took.items() if ptr in batch))


def slivers(model: nn.Module, facts: ForwardFacts | None) -> list[str]:
    """The Linear and convolution layers doing under ``SLIVER`` of the forward's FLOPs (none without ``facts``)."""
    if facts is None or facts.total_flops <= 0:
        return []
    return [name for name, mod in model.named_modules() if isinstance(mod, (nn.Linear, nn.modules.conv._ConvNd))
            and facts.module_flops.get(name, 0) < SLIVER * facts.total_flops]


def lint_dims(model: nn.Module, batch_size: int | None = None, multiple: int = 8,
              facts: ForwardFacts | None = None) -> list[dict[str, Any]]:
    """Dimensions of Linear / Conv / Embedding / attention layers (and the batch) that miss ``multiple``.

    With ``facts`` (:func:`forward_facts`): an embedding's ``num_embeddings`` is checked only where its weight is a
    GEMM operand and no Linear shares it (a tied Linear's ``out_features`` is the same dimension, checked there) -- a
    lookup alone is a gather; a Linear or convolution doing under ``SLIVER`` of the forward's FLOPs is left out."""
    lint = DimLint(multiple)
    check = lint.check
    linear_weights = {m.weight.data_ptr() for m in model.modules() if isinstance(m, nn.Linear)}
    left_out = set(slivers(model, facts))
    for name, mod in model.named_modules():
        if name in left_out:
            continue
        if isinstance(mod, nn.Linear):
            check(name, "in_features", mod.in_features, data=facts is not None and name in facts.input_layers)
            output = facts is not None and name in facts.output_layers
            check(name, "out_features", mod.out_features, vocab=mod.out_features >= VOCAB_MIN, output=output)
        elif isinstance(mod, nn.modules.conv._ConvNd):
            if mod.groups == 1:
                for what, n in (("in_channels", mod.in_channels), ("out_channels", mod.out_channels)):
                    if n >= 16 or what == "out_channels":  # a 1/3-channel image input is expected
                        check(name, what, n)
        elif isinstance(mod, nn.Embedding):
            w = mod.weight.data_ptr()
            if facts is not None and w in facts.gemm_pointers and w not in linear_weights:
                check(name, "num_embeddings", mod.num_embeddings, vocab=mod.num_embeddings >= VOCAB_MIN)
            check(name, "embedding_dim", mod.embedding_dim)
        elif isinstance(mod, nn.MultiheadAttention):
            check(name, "embed_dim", mod.embed_dim)
            check(name, "head_dim", mod.head_dim)
        elif isinstance(mod, (nn.LSTM, nn.GRU, nn.RNN)):
            check(name, "hidden_size", mod.hidden_size)
            check(name, "input_size", mod.input_size)
    return lint.batch(batch_size, facts.rows_that_matter() if facts is not None else None)


def tensorcore_findings(issues: list[dict[str, Any]], on_gpu: bool, left_out: int = 0) -> list[Finding]:
    """``left_out``: the layers :func:`slivers` kept out of the lint (said where nothing else is)."""
    out = []
    for i in issues:
        if i["multiple"] == 64:  # a vocabulary-sized embedding / output layer
            fix = (f"pad the vocabulary {i['value']} → {i['padded']} (a multiple of 64); the extra rows are never "
                   "used as targets")
        elif i["dim"] == "batch_size":
            fix = f"use batch size {i['padded']} (or another multiple of {i['multiple']})"
        elif i.get("output"):  # (the model's logits: the task's classes, not a width to choose)
            fix = (f"the model's output layer: {i['value']} is its number of classes or outputs -- pad it to "
                   f"{i['padded']} and slice the extra outputs off before the loss (out[..., :{i['value']}]), or "
                   "leave it: it is one GEMM of the step")
        elif i.get("data"):  # (the batch's own features: the data's width, not a width to choose)
            fix = (f"the model's input layer: {i['value']} is the data's features a row -- pad each row with "
                   f"{i['padded'] - i['value']} zero features (F.pad(x, (0, {i['padded'] - i['value']}))) and the "
                   f"layer to in_features={i['padded']}, or leave it: it is one layer of the step")
        else:
            fix = f"make {i['dim']} {i['padded']} (a multiple of {i['multiple']}), e.g. pad the layer or change the width"
        out.append(Finding("warning" if on_gpu else "info", "tensorcore",
                           f"{i['layer']}.{i['dim']} = {i['value']} is not a multiple of {i['multiple']}",
                           ("" if on_gpu else "on a GPU (this run's device has no Tensor Cores): ")
                           + "Tensor Core GEMMs need multiples of 8 (fp16/bf16), 16 (fp8): others pad or fall back",
                           fix, i))
    if not issues:
        out.append(Finding("info", "tensorcore", "all GEMM dimensions are multiples of 8" + (
            f" (besides {left_out} layer{'s' if left_out > 1 else ''} doing under {SLIVER:.0%} of the forward's FLOPs, "
            "not checked)" if left_out else "")))
    return out
