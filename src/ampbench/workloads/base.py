"""What a workload is: model + batches + loss + metric (+ the optimizer and defaults of its recipe)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data.splits import VAL_FRACTION, held_out, split  # noqa: F401 (workloads build their splits with these)
from ampbench.data.tensors import TensorData
from ampbench.errors import AmpbenchError

PRESETS = ("tiny", "small", "paper")


@dataclass(frozen=True)
class Metric:
    """A metric accumulated over batches: ``fn`` returns (sum, count); ``finalize`` maps the mean."""

    name: str
    fn: Callable[[Any, torch.Tensor], tuple[torch.Tensor, int]]
    finalize: Callable[[float], float] = float
    higher_is_better: bool = True


def _accuracy(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    return (out.argmax(dim=1) == y).sum(), int(y.numel())


def _pixel_accuracy(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    return (out.argmax(dim=1) == y).sum(), int(y.numel())  # (B, K, H, W) vs (B, H, W)


def _squared_error(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    return ((out.float() - y) ** 2).sum(), int(y.numel())


def _token_nll(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    return F.cross_entropy(out.float().flatten(0, 1), y.flatten(), reduction="sum"), int(y.numel())


def _span_exact(out: tuple[torch.Tensor, torch.Tensor], y: torch.Tensor) -> tuple[torch.Tensor, int]:
    start, end = out
    return ((start.argmax(1) == y[:, 0]) & (end.argmax(1) == y[:, 1])).sum(), int(y.shape[0])


def _binary_accuracy(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    return ((out.squeeze(1) > 0).long() == y).sum(), int(y.numel())


def mse_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Regression loss, in fp32 whatever the output dtype."""
    return F.mse_loss(out.float(), y)


def lm_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy: logits (B, T, V), targets (B, T), in fp32."""
    return F.cross_entropy(out.float().flatten(0, -2), y.flatten())


ACCURACY = Metric("accuracy", _accuracy)
PIXEL_ACCURACY = Metric("pixel_accuracy", _pixel_accuracy)
RMSE = Metric("rmse", _squared_error, finalize=math.sqrt, higher_is_better=False)
PERPLEXITY = Metric("perplexity", _token_nll, finalize=lambda m: math.exp(min(m, 50.0)), higher_is_better=False)
SPAN_EXACT_MATCH = Metric("exact_match", _span_exact)
BINARY_ACCURACY = Metric("accuracy", _binary_accuracy)


def rmse_in_units(scale: float) -> Metric:
    """RMSE of a model trained on a target divided by ``scale``, in the target's own units."""
    return Metric("rmse", _squared_error, finalize=lambda m: math.sqrt(m) * scale, higher_is_better=False)


def standardised(y: torch.Tensor, n_train: int) -> tuple[torch.Tensor, Metric]:
    """The target around its training rows' mean in units of their standard deviation, and the RMSE that reads a
    model of it in the target's own units. Trained raw, a CSV's target in its own units (Rossmann's sales: thousands)
    left the MLP at an RMSE near the target's mean in every mode after 30 steps (its output starts near 0), and put
    amp-fp16's scaled gradients past fp16's range (13 of 30 steps skipped); fast.ai's Rossmann trains a scaled target
    too (log sales, a bounded output). The test rows' statistics are not used."""
    fit = y[:n_train]
    mean = float(fit.mean())
    std = float(fit.std()) if n_train > 1 else 0.0
    scale = std if math.isfinite(std) and std > 0 else 1.0  # (a constant target: centred only)
    return (y - mean) / scale, rmse_in_units(scale)


def adam(lr: float = 1e-3) -> Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]:
    return lambda params: torch.optim.Adam(params, lr=lr)


def sgd(lr: float, momentum: float = 0.9, weight_decay: float = 0.0) -> Callable[..., torch.optim.Optimizer]:
    return lambda params: torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)


def _identity(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return inputs


@dataclass
class Workload:
    """Everything needed to train and measure one experiment.

    ``call_model(model, inputs)`` (``model(*prepare(inputs))``) gives the output; ``loss_fn(output, targets)``
    the loss (computed in fp32: half modes cast outputs to fp32 first). Data are whole-split tensors (:class:`TensorData`).
    """

    name: str
    model: nn.Module
    train_data: TensorData
    test_data: TensorData | None = None
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] = F.cross_entropy
    metric: Metric | None = ACCURACY
    make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] = field(default_factory=adam)
    prepare: Callable[[tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]] = _identity
    """Per-batch input transform on the device (uint8 -> normalised float, upsampling)."""
    input_names: tuple[str, ...] | None = None
    """Keyword names of the inputs (a --batches dict): the model is called ``model(**dict(zip(names, inputs)))``."""
    batch_size: int = 32
    epochs: int = 1
    preset: str = "custom"
    description: str = ""
    notes: dict[str, Any] = field(default_factory=dict)
    """Published facts for reports (e.g. {"batch_size_fp16": 1000})."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, nn.Module):
            raise AmpbenchError(f"Workload {self.name!r}: model must be an nn.Module, got {type(self.model).__name__}")
        if not isinstance(self.train_data, TensorData):
            raise AmpbenchError(f"Workload {self.name!r}: train_data must be ampbench.data.TensorData")
        if self.batch_size < 1 or self.epochs < 1:
            raise AmpbenchError(f"Workload {self.name!r}: batch_size and epochs must be >= 1")

    def example_batch(self, batch_size: int = 2) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The first ``batch_size`` training samples, inputs prepared."""
        inputs, targets = next(self.train_data.subset(0, batch_size).batches(batch_size))
        return self.prepare(inputs), targets

    def call_model(self, model: nn.Module, inputs: tuple[torch.Tensor, ...], prepared: bool = False) -> Any:
        """The model's output for a batch's inputs: ``model(*prepare(inputs))``, or by keyword (``input_names``).

        Every place that runs a workload's model goes through here, so a workload's calling convention is
        defined once.
        """
        x = inputs if prepared else self.prepare(inputs)
        if self.input_names is not None:
            return model(**dict(zip(self.input_names, x)))
        return model(*x)


def image_prep(mean: float = 0.5, std: float = 0.25, size: int | None = None) -> Callable[..., tuple[torch.Tensor, ...]]:
    """uint8 (B, C, H, W) -> float normalised, optionally resized (CIFAR-10 32 -> 64 as in apex's run)."""

    def prep(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        x = inputs[0].float().div_(255.0).sub_(mean).div_(std)
        if size is not None and x.shape[-1] != size:
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        return (x, *inputs[1:])

    return prep


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG for the block (model init), restoring the caller's RNG state after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
