"""Peak memory of a cell, and where it goes: weights + grads + optimizer state vs activations.

GPU: the caching allocator's peaks (reset first) and NVML's view of the process. CPU: peak RSS
growth, read from the kernel's high-water mark (VmHWM), which Linux lets a process reset by writing
"5" to /proc/self/clear_refs; where that is not possible a sampling thread reads RSS instead. The
CPU baseline is the process after the workload is built and the runtime warmed up, less the
model's fp32 weights: growth = weights + everything training adds (data tensors excluded).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ampbench.execution.saved import listening
from ampbench.measure.host import RssPeak, rss  # noqa: F401  (rss: used by cells and train)
from ampbench.precision import MixedPrecision

OOM_MARKS = ("out of memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed", "cufft_alloc_failed",
             "cusolver_status_alloc_failed", "cusparse_status_alloc_failed")
"""How running out of GPU memory reads: torch's caching allocator raises OutOfMemoryError ("CUDA out of memory"),
but a library allocating its own workspace when the allocator has given everything away fails with its status
(cuBLAS's CUBLAS_STATUS_ALLOC_FAILED from cublasCreate/cublasLt workspaces, cuDNN's CUDNN_STATUS_ALLOC_FAILED;
torch raises these as RuntimeError with the status in the message): a max-batch trial that hits them did not fit."""


def is_oom(e: BaseException) -> bool:
    """Whether ``e`` says the device ran out of memory (a max-batch trial's miss, a cell's status oom)."""
    if isinstance(e, torch.OutOfMemoryError):
        return True
    return isinstance(e, RuntimeError) and any(m in str(e).lower() for m in OOM_MARKS)


class PeakMemory:
    """Peak memory from :meth:`start` on. GPU: allocator peaks; CPU: RSS high-water mark."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._host = RssPeak()

    def start(self, base_rss: int | None = None) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        self._host.start(base_rss)

    def restart(self) -> None:
        """The peak from here on, what is held now (weights, optimizer state) its floor: the allocator's peak set to
        what is allocated now (``reset_peak_memory_stats``), the RSS high-water mark reset over the same baseline."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        self._host.restart()

    def peak(self) -> dict[str, int | None]:
        """{allocated, reserved, cpu_rss_peak}: bytes at the peak (CPU: growth over the baseline)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return {"allocated": int(torch.cuda.max_memory_allocated(self.device)),
                    "reserved": int(torch.cuda.max_memory_reserved(self.device)), "cpu_rss_peak": None}
        grown = self._host.growth()
        return {"allocated": grown, "reserved": grown, "cpu_rss_peak": grown}


def warm_runtime(precision: str, make_optimizer: Any) -> None:
    """Run one tiny training step in ``precision`` with the workload's optimizer type, so one-time
    runtime costs (thread pools, oneDNN, the optimizer's first-step imports: ~90 MiB for Adam on
    CPU) are paid before the CPU RSS baseline is taken, not charged to the first cell's model."""

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
    mp = MixedPrecision(precision)
    model, opt = mp.setup(model, make_optimizer(model.parameters()))
    for _ in range(2):
        with mp.autocast():
            loss = model(torch.randn(2, 3, 8, 8)).float().square().mean()
        mp.backward(loss)
        mp.step(opt)


def storage_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that own storage behind ``t``: itself, a DTensor's local shard (FSDP2), or the inner
    tensors of a wrapper subclass (torchao's fp8 weights and casts), which has no storage of its own."""
    if hasattr(t, "to_local"):
        t = t.to_local()
    if is_traceable_wrapper_subclass(t):
        names, _ = t.__tensor_flatten__()  # type: ignore[attr-defined]
        inner = [getattr(t, n) for n in names]
        return [x for i in inner if isinstance(i, torch.Tensor) for x in storage_tensors(i)]
    return [t]


def storage_key(t: torch.Tensor) -> int:
    """Which storage ``t`` lives on: its address; on the meta device (``ampbench predict``'s traced step), where
    storages have no address, the storage object's identity (views and tied weights share it there too)."""
    st = t.untyped_storage()
    return int(st._cdata) if t.device.type == "meta" else int(st.data_ptr())


def tensor_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the storages behind ``tensors``, each once (a wrapper subclass by its inner tensors)."""
    seen: set[int] = set()
    total = 0
    for outer in tensors:
        if outer is None or not isinstance(outer, torch.Tensor):
            continue
        for t in storage_tensors(outer):
            key = storage_key(t) if t.numel() or t.device.type == "meta" else id(t)
            if key in seen:
                continue
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


@dataclass
class StateBytes:
    weights: int
    grads: int
    optimizer: int

    def as_row(self) -> dict[str, int]:
        return {"weights_bytes": self.weights, "grads_bytes": self.grads, "optimizer_bytes": self.optimizer}


def state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer, master_params: list[torch.Tensor],
                grad_buckets: int | None = None) -> StateBytes:
    """Weights/buffers, gradients, optimizer state (+ fp32 master weights and their grads), in bytes.

    ``grad_buckets``: bytes of buffers the gradients live in, as their owner reports them (a DDP model's
    all-reduce buckets, :func:`ampbench.distributed.wrap.ddp_bucket_bytes`): then they are the gradients'
    memory, whatever ``.grad`` shows at the moment it is read.

    Call between backward and step (the grads exist then), after a first step (Adam creates its
    state lazily). Optimizer state of master
    modes sits on the fp32 masters, which the optimizer holds in place of the model's parameters.
    """
    model_ids = {id(p) for p in model.parameters()}
    weights = module_bytes(model)
    grads = tensor_bytes(p.grad for p in model.parameters() if p.grad is not None) if grad_buckets is None else grad_buckets
    opt_tensors: list[torch.Tensor] = []
    for state in optimizer.state.values():
        opt_tensors.extend(v for v in state.values() if isinstance(v, torch.Tensor))  # step counters too: bytes are bytes
    for p in master_params:
        if id(p) not in model_ids:
            opt_tensors.append(p)
            if p.grad is not None:
                opt_tensors.append(p.grad)
    return StateBytes(weights, grads, tensor_bytes(iter(opt_tensors)))


def state_storages(model: nn.Module | None) -> set[int]:
    """The storages (by address) behind a model's parameters and buffers, wrapper subclasses and DTensor
    shards looked through: whatever autograd saves from these is the model's state, not an activation."""
    if model is None:
        return set()
    out = set()
    for t in [*model.parameters(), *model.buffers()]:
        if t is None:
            continue
        for x in storage_tensors(t):
            if x.numel():
                out.add(storage_key(x))
    return out


def _is_state(t: torch.Tensor, state: set[int]) -> bool:
    """A parameter, a view of one (``weight.t()``, which F.linear saves), or any tensor on a parameter's or
    buffer's storage. The type test catches what is a parameter only while it runs (FSDP2's unsharded
    weights, all-gathered in the forward and registered on the module for it)."""
    if isinstance(t, nn.Parameter) or isinstance(getattr(t, "_base", None), nn.Parameter):
        return True
    return any(x.numel() and storage_key(x) in state for x in storage_tensors(t))


@contextmanager
def saved_activations(model: nn.Module | None = None) -> Iterator[list[int]]:
    """Bytes autograd saves for backward inside the block: unique storages, the model's own state excluded.

    ``with saved_activations(model) as out: loss = model(x)`` -> ``out[0]`` bytes. This is the activation
    memory mixed precision halves; weights and optimizer state are what it does not (in amp-*).

    What is the model's state is decided by storage identity, not by Python type: ``F.linear`` saves
    ``weight.t()``, a plain tensor viewing the parameter's storage, which is already counted in
    ``weights_bytes`` (counting it here too made every Linear's fp32 weights "activations"). Under
    autocast the half copies of weights a GEMM saves are new storages: memory the step holds until
    backward that fp32 does not, so they count here.
    """
    state = state_storages(model)
    seen: dict[int, int] = {}
    result = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if not _is_state(t, state):
            for x in storage_tensors(t):
                seen.setdefault(storage_key(x), x.untyped_storage().nbytes())
        return t

    # (and what a selective checkpoint keeps in a cache of its own: told by :mod:`ampbench.execution.saved`)
    with listening(pack), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield result
    result[0] = sum(seen.values())


def model_sizes(model: nn.Module) -> dict[str, int]:
    """The model file's tensor bytes with floating tensors in fp32 and in 16-bit, counted as ``torch.save``
    writes them: each storage once (tied weights -- an embedding shared with the LM head -- are one
    tensor in the file, however many state_dict entries name it), headers aside."""
    fp32 = half = 0
    seen: set[int] = set()
    for t in model.state_dict(keep_vars=True).values():
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        for x in storage_tensors(t):
            st = x.untyped_storage()
            key = st.data_ptr() if st.nbytes() else id(x)
            if key in seen:
                continue
            seen.add(key)
            elements = st.nbytes() // x.element_size()
            size = x.element_size()
            fp32 += elements * (4 if x.is_floating_point() else size)
            half += elements * (2 if x.is_floating_point() else size)
    return {"model_bytes_fp32": fp32, "model_bytes_half": half}


def module_bytes(model: nn.Module) -> int:
    """Bytes of a module's parameters and buffers (unique storages)."""
    return tensor_bytes(iter([*model.parameters(), *model.buffers()]))
