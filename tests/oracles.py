"""Second, independent computations of the figures a row carries (the oracle tests compare them with the row).

Each oracle takes another route than the code it checks:
- activations: walk the autograd graph after the forward and read every node's saved tensors (the
  ``_saved_*`` attributes of built-in nodes, ``saved_tensors`` of custom Functions), instead of catching
  them with saved-tensor hooks while they are saved;
- model file size: ``torch.save`` to a buffer and the sizes of the storage records in the zip it writes;
- weights, gradients, optimizer state: element counts times dtype sizes over the tensors by identity,
  not storages by address;
- FLOPs: the textbook formulas (2 x M x N x K per matmul, forward and backward);
- skipped steps: a hand-written loop with torch.amp.GradScaler.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import torch
from torch import nn


def _state_addresses(model: nn.Module) -> set[int]:
    out = set()
    for t in [*model.parameters(), *model.buffers()]:
        out.add(t.untyped_storage().data_ptr())
    return out


def _tensors(value: Any) -> list[torch.Tensor]:
    """Plain tensors in a saved value; a wrapper tensor subclass (torchao's fp8 tensors) by its inner tensors."""
    if isinstance(value, torch.Tensor):
        flatten = getattr(type(value), "__tensor_flatten__", None)
        if flatten is not None and type(value) is not torch.Tensor and not isinstance(value, nn.Parameter):
            names, _ = value.__tensor_flatten__()
            return [t for n in names for t in _tensors(getattr(value, n))]
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def graph_saved_bytes(loss: torch.Tensor, model: nn.Module) -> int:
    """Bytes of the unique storages the autograd graph of ``loss`` holds for backward, the model's own
    parameters and buffers left out (they are counted as weights)."""
    state = _state_addresses(model)
    seen: dict[int, int] = {}
    todo, visited = [loss.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in visited:
            continue
        visited.add(id(node))
        names = [a for a in dir(node) if a.startswith("_saved_")]
        if hasattr(node, "saved_tensors") and not names:  # a custom autograd.Function's ctx
            names = ["saved_tensors"]
        for name in names:
            try:
                value = getattr(node, name)
            except RuntimeError:  # a saved tensor already freed (not the case before backward)
                continue
            for t in _tensors(value):
                st = t.untyped_storage()
                if st.data_ptr() in state:
                    continue
                seen[st.data_ptr()] = st.nbytes()
        todo.extend(fn for fn, _ in node.next_functions)
    return sum(seen.values())


def torch_save_bytes(model: nn.Module, dtype: torch.dtype | None = None) -> int:
    """Tensor bytes ``torch.save(model.state_dict())`` writes: the sizes of the zip's storage records
    (``archive/data/N``), with floating tensors first cast to ``dtype`` when given (on a copy)."""
    state = model.state_dict()
    if dtype is not None:
        import copy

        m = copy.deepcopy(model)
        for t in [*m.parameters(), *m.buffers()]:
            if t.is_floating_point():
                t.data = t.data.to(dtype)
        state = m.state_dict()
    buf = io.BytesIO()
    torch.save(state, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        return sum(info.file_size for info in z.infolist() if "/data/" in info.filename)


def unique(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    out, ids = [], set()
    for t in tensors:
        if id(t) not in ids:
            ids.add(id(t))
            out.append(t)
    return out


def elements_bytes(tensors: list[torch.Tensor]) -> int:
    """numel x element size over distinct tensor objects."""
    return sum(t.numel() * t.element_size() for t in unique(tensors))


def adam_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Adam's two moments per stepped parameter, in the parameter's dtype, plus its step counter
    (a float32 scalar tensor), from the parameters' sizes (not from the state's tensors)."""
    total = 0
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p in optimizer.state:
                total += 2 * p.numel() * p.element_size() + 4
    return total


def linear_flops(batch: int, layers: list[tuple[int, int]], first_needs_input_grad: bool = False) -> int:
    """One training step's matmul FLOPs of a stack of Linear layers ((in, out) each) on ``batch`` rows:
    forward 2·B·in·out, backward the same for the weight's gradient and again for the input's gradient
    (not for the first layer, whose input needs none)."""
    total = 0
    for i, (fan_in, fan_out) in enumerate(layers):
        mm = 2 * batch * fan_in * fan_out
        total += mm * (3 if i > 0 or first_needs_input_grad else 2)
    return total


def gradscaler_skipped_steps(model: nn.Module, batches: list[tuple[Any, torch.Tensor]], loss_fn: Any, steps: int,
                             lr: float = 1e-3) -> tuple[int, float]:
    """(steps skipped, final scale) of the textbook amp-fp16 loop on CPU: torch.autocast + torch.amp.GradScaler."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler("cpu")
    skipped = 0
    for i in range(steps):
        inputs, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_fn(model(*inputs), y)
        scaler.scale(loss).backward()
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped += scaler.get_scale() < before
    return skipped, scaler.get_scale()


def textbook_flops(model: nn.Module, inputs: tuple[Any, ...], loss_fn: Any, targets: torch.Tensor) -> tuple[int, int]:
    """(FLOPs, of which convolutions) of one training step, counted by hand per layer from module attributes
    and the shapes a forward pass shows its hooks -- not from the ops torch dispatches.

    2 x multiply-adds per product; backward = the weight's gradient (when the weight trains) + the input's
    gradient (when the input needs one: not for data, nor for an RNN's zero initial state). Embeddings,
    norms, activations and the loss count 0. Knows Conv*/ConvTranspose*, Linear, nn.MultiheadAttention
    (self-attention), LSTM/GRU/RNN and tests/flop_zoo's Attention and Bilinear modules.
    """
    from tests import flop_zoo

    totals = {"all": 0, "conv": 0}

    def add(macs_fwd: int, weight_grad: bool, input_grad: bool, conv: bool = False) -> None:
        flops = 2 * macs_fwd * (1 + int(weight_grad) + int(input_grad))
        totals["all"] += flops
        if conv:
            totals["conv"] += flops

    def hook(m: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        x = args[0]
        if isinstance(m, nn.modules.conv._ConvNd):
            per_point = (m.out_channels if m.transposed else m.in_channels) // m.groups
            points = x.numel() // m.in_channels if m.transposed else out.numel() // m.out_channels
            add(points * m.out_channels * per_point * int(torch.tensor(m.kernel_size).prod()) if not m.transposed
                else points * m.in_channels * per_point * int(torch.tensor(m.kernel_size).prod()),
                m.weight.requires_grad, x.requires_grad, conv=True)
        elif isinstance(m, nn.Linear):
            add(x.numel() // m.in_features * m.in_features * m.out_features, m.weight.requires_grad, x.requires_grad)
        elif isinstance(m, flop_zoo.Attention):  # q·kᵀ and p·v over every head: B·T·T·d each; q, k, v all need grads
            b, t, d = x.shape
            add(2 * b * t * t * d, True, True)
        elif isinstance(m, flop_zoo.Bilinear):
            b, t, d = x.shape
            add(b * t * t * d, True, x.requires_grad)  # mix (T, T) @ x
            add(b * t * d * d, True, True)  # (.) @ w: its input depends on mix, which trains
        elif isinstance(m, nn.MultiheadAttention):
            b, t, e = x.shape  # batch_first self-attention
            add(b * t * e * 3 * e, True, x.requires_grad)  # in_proj
            add(2 * b * t * t * e, True, True)  # scores and weighted values: both operands need gradients
            add(b * t * e * e, True, True)  # out_proj
        elif isinstance(m, nn.RNNBase):
            gates = {"LSTM": 4, "GRU": 3}.get(m.mode, 1)
            batch = x.shape[0] if m.batch_first else x.shape[1]
            tokens = x.numel() // m.input_size
            dirs = 2 if m.bidirectional else 1
            h = m.hidden_size
            for layer in range(m.num_layers):
                fan_in = m.input_size if layer == 0 else h * dirs
                for _ in range(dirs):
                    fwd = tokens * gates * h * (fan_in + h)
                    grad_in = tokens * gates * h * fan_in if (layer > 0 or x.requires_grad) else 0
                    grad_h = (tokens - batch) * gates * h * h  # the zero initial state needs no gradient
                    totals["all"] += 2 * (2 * fwd + grad_in + grad_h)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        out = model(*inputs)
    finally:
        for hd in handles:
            hd.remove()
    loss_fn(out, targets).backward()  # (the backward the counts describe; its gradients are not used)
    model.zero_grad(set_to_none=True)
    return totals["all"], totals["conv"]
