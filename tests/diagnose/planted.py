"""Tiny models, each with one planted problem, as Workload builders (also usable as --model factories)."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data.tensors import TensorData
from ampbench.workloads.base import Workload, sgd


def _data(n: int = 64, d: int = 16, classes: int = 4, seed: int = 0) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, classes, generator=g)
    return TensorData((x,), (x @ w).argmax(1))


class Hot(nn.Module):
    """fc2 multiplies by 1e5: its outputs reach ~1e5 > 65504 (then a LayerNorm brings them back)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        with torch.no_grad():
            self.fc2.weight.mul_(1e5)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.fc2(torch.relu(self.fc1(x)))))


class TiedHot(nn.Module):
    """A language-model-like head tied to its embedding (scaled by 300): the head's logits reach ~1e5 > 65504."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        with torch.no_grad():
            self.embed.weight.mul_(300)
        self.mid = nn.Linear(8, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.mid(self.embed(ids).mean(1)))


class TinyGrad(nn.Module):
    """Trained with its loss multiplied by 1e-9 (see tiny_grad): every gradient sits below 2^-24."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class _NaNBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x.clone()

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        return g * float("nan")


class _FaultyLinear(torch.autograd.Function):
    """A linear layer whose weight-gradient kernel is faulty in half precision, as oneDNN's AMX bf16 convolution
    backward was for a 3x3 stride-2 layer over a 1x1 input: every other half call writes inf into the gradient (fp32
    calls are right)."""

    calls = 0

    @staticmethod
    def forward(ctx, x, weight):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        x, weight = ctx.saved_tensors
        grad_w = g.t() @ x
        if grad_w.dtype != torch.float32:
            _FaultyLinear.calls += 1
            if _FaultyLinear.calls % 2:
                grad_w = grad_w.clone()
                grad_w[0, 0] = float("inf")
        return g @ weight, grad_w


class FaultyKernel(nn.Module):
    """``mid``'s weight gradient comes from a faulty half kernel (:class:`_FaultyLinear`)."""

    class Mid(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(32, 32) / 32**0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _FaultyLinear.apply(x, self.weight)

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.mid = self.Mid()
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.mid(torch.relu(self.fc1(x)))))


class Poisoned(nn.Module):
    """The forward is clean; the backward of ``block.poison`` returns NaN."""

    class Poison(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _NaNBackward.apply(x)

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.block = nn.Sequential(nn.ReLU(inplace=True), self.Poison(), nn.Linear(32, 32))
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.fc1(x)))


class Odd(nn.Module):
    """A 100-wide hidden layer, a BERT-sized 30522-token vocabulary looked up (a gather: no GEMM dimension), and a
    30522-token output layer tied to a second embedding (``tied``: its rows are the output GEMM's N)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30522, 64)
        self.fc = nn.Linear(64, 100)
        self.out = nn.Linear(100, 64)
        self.tied = nn.Embedding(30522, 64)
        self.head = nn.Linear(64, 30522, bias=False)
        self.head.weight = self.tied.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.out(torch.relu(self.fc(self.emb(x)))).mean(1)  # (per token: fc and out do 2.5% of the FLOPs each)
        return self.head(h + self.tied(x[:, 0]))


class SmallVocab(nn.Module):
    """A 100-token vocabulary, its output projection the embedding's own weight (``h @ emb.weight.T``: no Linear):
    not a multiple of 8, and too small to be padded to 64 like a real vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.emb(x).mean(1) @ self.emb.weight.T


class SquareNorm(nn.Module):
    """x / sqrt(mean(x^2)): x^2 overflows in fp16 for |x| > 256, the output itself is small. fp16-hostile."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6)


class Hostile(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.fc2 = nn.Linear(64, 64)
        self.scale = nn.Linear(64, 64)
        with torch.no_grad():
            self.scale.weight.mul_(3e4)  # activations ~ 3e3 (max ~2e4 < 65504): their squares overflow fp16
        self.rms = SquareNorm()
        self.fc3 = nn.Linear(64, 64)
        self.head = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        return self.head(torch.relu(self.fc3(self.rms(self.scale(h)))))


class NaiveSoftmax(nn.Module):
    """exp(x) / sum(exp(x)) without subtracting the max: exp overflows fp16 for x > 11 (inf / inf = NaN); its output,
    probabilities, is small. Keeping this module in fp32 is a fix that works."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)


class Overflowing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        with torch.no_grad():
            self.fc1.weight.mul_(8.0)  # logits up to ~20: exp fits fp32, not fp16
        self.soft = NaiveSoftmax()
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.soft(self.fc1(x)))


class Squared(nn.Module):
    """Its own forward squares fc1's output: |h| fits fp16, h * h does not (inf, then NaN out of the softmax). The
    module hooks can only name the model itself; the call that made it is ``h * h``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        with torch.no_grad():
            self.fc1.weight.mul_(400.0)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        return self.head(torch.softmax(h * h, dim=-1))


class Saturating(nn.Module):
    """Its own forward scales fc2's output past 65504 and a tanh absorbs the inf: amp-fp16 trains to another loss than
    fp32 with nothing non-finite, and no module's output is out of fp16's range for the activation hooks to see."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(torch.relu(self.fc1(x)) * 10000.0) * 50.0
        return self.head(torch.tanh(h / 1e6))  # (fp32: tanh of up to a few; fp16: inf past 65504, tanh 1)


DROPPED: list[tuple[nn.Module, torch.Tensor]] = []
"""Each training forward of a :class:`Dropped` copy: the copy and its dropout mask."""


class Dropped(Hot):
    """Hot with a dropout before fc2 (fc2's outputs reach ~1e5 > 65504 whatever the mask): each training forward's
    mask is kept in :data:`DROPPED`, so a test sees which masks each copy of it drew."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        if self.training:
            kept = F.dropout(torch.ones_like(h), 0.5) != 0
            DROPPED.append((self, kept))
            h = h * kept * 2
        return self.head(self.norm(self.fc2(h)))

def _wl(name: str, model: nn.Module, loss_scale: float = 1.0, batch: int = 32, data: TensorData | None = None) -> Workload:
    """SGD with lr 0.1 / loss_scale: a tiny loss factor shrinks the gradients, not the fp32 updates."""
    data = data or _data()
    return Workload(name, model, data, None, loss_fn=lambda out, y: F.cross_entropy(out.float(), y) * loss_scale,
                    make_optimizer=sgd(0.1 / loss_scale, momentum=0.0), batch_size=batch)


def hot() -> Workload:
    return _wl("hot", Hot())


def dropped() -> Workload:
    return _wl("dropped", Dropped())


def tied_hot() -> Workload:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 16, (64, 6), generator=g)
    return _wl("tied-hot", TiedHot(), data=TensorData((x,), torch.randint(0, 16, (64,), generator=g)))


def tiny_grad() -> Workload:
    return _wl("tiny-grad", TinyGrad(), loss_scale=1e-9)


def faulty_kernel() -> Workload:
    return _wl("faulty-kernel", FaultyKernel())


def poisoned() -> Workload:
    return _wl("poisoned", Poisoned())


def odd() -> Workload:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 30522, (64, 8), generator=g)
    return _wl("odd", Odd(), batch=30, data=TensorData((x,), torch.randint(0, 4, (64,), generator=g)))


def small_vocab() -> Workload:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 100, (64, 8), generator=g)
    return _wl("small-vocab", SmallVocab(), data=TensorData((x,), torch.randint(0, 4, (64,), generator=g)))


def conv() -> Workload:
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.Flatten(), nn.Linear(16 * 8 * 8, 4))
    g = torch.Generator().manual_seed(0)
    return _wl("conv", model, data=TensorData((torch.randn(64, 3, 8, 8, generator=g),),
                                               torch.randint(0, 4, (64,), generator=g)))


def hostile() -> Workload:
    return _wl("hostile", Hostile())


def launch_bound() -> Workload:
    model = nn.Sequential(*[m for _ in range(12) for m in (nn.Linear(8, 8), nn.ReLU())], nn.Linear(8, 4))
    return _wl("launch-bound", model, batch=2, data=_data(d=8))


def overflowing() -> Workload:
    return _wl("overflowing", Overflowing())


def small_grad() -> Workload:
    """Gradients around 2^-20: fp16 subnormals (some flushed) at loss scale 1, normal numbers at amp-fp16's 65536."""
    return _wl("small-grad", TinyGrad(), loss_scale=1e-4)


def squared() -> Workload:
    return _wl("squared", Squared())


def half_adam() -> Workload:
    """Adam with its default eps (1e-8, which is 0 in fp16): what the engine warns of when a pure-fp16 optimizer
    steps half weights."""
    wl = _wl("half-adam", nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    return dataclasses.replace(wl, make_optimizer=lambda params: torch.optim.Adam(params, lr=1e-3))


def conv_bn() -> Workload:
    """Convolutions with biases: the first's output goes straight into a BatchNorm (which cancels the bias: its
    gradient is zero up to rounding), the second's through a ReLU first (its bias counts)."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                          nn.ReLU(), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8 * 8 * 8, 4))
    g = torch.Generator().manual_seed(0)
    return _wl("conv-bn", model, data=TensorData((torch.randn(64, 3, 8, 8, generator=g),),
                                                  torch.randint(0, 4, (64,), generator=g)))


def saturating() -> Workload:
    return _wl("saturating", Saturating())
