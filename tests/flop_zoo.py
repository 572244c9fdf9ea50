"""Models for the FLOP oracle: one per layer kind a FLOP counter must get right, each a Workload.

Dense, grouped, depthwise (MobileNet-style with pointwise 1x1), dilated, strided and transposed
convolutions (1-D, 2-D, 3-D), Linear, bmm/matmul, attention through ``scaled_dot_product_attention`` and
through ``nn.MultiheadAttention``, LSTM (2 layers, bidirectional) and GRU, embeddings (0 FLOPs). Functional
products sit in small modules of their own (``Attention``, ``Bilinear``) so the oracle, which walks modules,
sees them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data.tensors import TensorData
from ampbench.workloads.base import Workload

BATCH = 8


class Attention(nn.Module):
    """Multi-head self-attention by F.scaled_dot_product_attention (q, k, v from one Linear)."""

    def __init__(self, d: int = 32, heads: int = 4, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, t, d)


class Bilinear(nn.Module):
    """Tokens mixed by a learned (T, T) matrix through torch.matmul (a bmm), then a feature matmul (an mm)."""

    def __init__(self, t: int = 12, d: int = 32) -> None:
        super().__init__()
        self.mix = nn.Parameter(torch.randn(t, t) / t)
        self.w = nn.Parameter(torch.randn(d, d) / d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        return torch.matmul(torch.matmul(self.mix, x), self.w)


def _head(c: int, k: int = 4) -> nn.Sequential:
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, k))


def mobilenet() -> nn.Module:
    """Depthwise 3x3 + pointwise 1x1 blocks (MobileNet v1's shape), stride 2 in the middle."""
    def block(c_in: int, c_out: int, stride: int) -> list[nn.Module]:
        return [nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in), nn.ReLU(),
                nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
    return nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), *block(32, 64, 1), *block(64, 128, 2),
                         *block(128, 128, 1), _head(128))


class Recurrent(nn.Module):
    def __init__(self, cell: type[nn.RNNBase], **kwargs: object) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.rnn = cell(16, 24, batch_first=True, **kwargs)
        self.head = nn.Linear(24 * (2 if kwargs.get("bidirectional") else 1), 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.emb(ids))
        return self.head(out[:, -1])


class RawFeatureLstm(nn.Module):
    """An LSTM fed the data itself: its input needs no gradient (the first layer skips it)."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(10, 16, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


class Mha(nn.Module):
    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.need_weights = need_weights
        self.emb = nn.Embedding(40, 32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.head = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        y, _ = self.attn(x, x, x, need_weights=self.need_weights)
        return self.head(y.mean(1))


class Sequence(nn.Module):
    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 32)
        self.body = body
        self.head = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.emb(ids)).mean(1))


# name -> (model factory, input shape of one sample; ints = token ids below 40)
MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], bool]] = {
    "dense-conv": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3), _head(16)),
                   (3, 16, 16), False),
    "grouped-conv": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1, groups=4),
                                           _head(32)), (3, 16, 16), False),
    "depthwise": (mobilenet, (3, 32, 32), False),
    "dilated-strided": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1),
                                              nn.Conv2d(16, 16, 3, padding=2, dilation=2), _head(16)), (3, 20, 20), False),
    "transposed": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1),
                                         nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1, groups=2),
                                         nn.ConvTranspose2d(8, 8, 2, stride=2), _head(8)), (3, 12, 12), False),
    "conv1d-3d": (lambda: nn.Sequential(nn.Conv3d(2, 8, 3, padding=1, groups=2), nn.Flatten(2),
                                        nn.Conv1d(8, 8, 5, stride=2, groups=8), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                                        nn.Linear(8, 4)), (2, 6, 6, 6), False),
    "linear": (lambda: nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 4)),
               (20,), False),
    "matmul": (lambda: Sequence(Bilinear()), (12,), True),
    "sdpa": (lambda: Sequence(Attention()), (12,), True),
    "sdpa-causal": (lambda: Sequence(Attention(causal=True)), (12,), True),
    "mha": (lambda: Mha(need_weights=True), (12,), True),
    "mha-fused": (lambda: Mha(need_weights=False), (12,), True),
    "lstm": (lambda: Recurrent(nn.LSTM, num_layers=2, bidirectional=True), (9,), True),
    "gru": (lambda: Recurrent(nn.GRU, num_layers=2), (9,), True),
    "lstm-features": (RawFeatureLstm, (9, 10), False),
    "embedding": (lambda: nn.Sequential(nn.Embedding(40, 16), nn.Flatten(), nn.Linear(16 * 6, 3)), (6,), True),
}
KINDS = tuple(MODELS)


def build(kind: str, seed: int = 0, n: int = 32) -> Workload:
    factory, shape, ids = MODELS[kind]
    torch.manual_seed(seed)
    model = factory()
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randint(0, 40, (n, *shape), generator=g) if ids else torch.randn(n, *shape, generator=g)
    k = 4 if kind in ("dense-conv", "grouped-conv", "depthwise", "dilated-strided", "transposed", "conv1d-3d",
                      "linear") else 3
    data = TensorData((x,), torch.randint(0, k, (n,), generator=g))
    return Workload(f"flopzoo:{kind}", model, data, data, batch_size=BATCH)
