"""A small zoo of model kinds, each as an ampbench Workload: what the oracle tests measure every figure on.

MLP, CNN with BatchNorm, transformer LM with a tied embedding/head, nn.TransformerEncoder (its attention's
``out_proj`` is a Linear subclass), LSTM, frozen layers, a model called with a dict of inputs. Sizes are
tiny (CPU, seconds) but every Linear has dimensions that are multiples of 16 where fp8 should convert it.
Built deterministically from a seed; ``build(name)`` returns a fresh Workload each call.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data.tensors import TensorData
from ampbench.workloads.base import Workload, lm_loss

BATCH = 16


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CnnBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 16, 16)
        return self.head(self.features(x).mean(dim=(2, 3)))


class TiedLm(nn.Module):
    """GPT-style: token + position embeddings, one pre-norm block, an LM head sharing the embedding's weight."""

    def __init__(self, vocab: int = 64, d: int = 32, seq: int = 16) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.tok.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
        b, t = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        x = x + self.mlp(self.ln(x))
        return self.lm_head(self.ln_f(x))


class Encoder(nn.Module):
    """nn.TransformerEncoder over feature sequences: 2 layers x (self_attn.out_proj, linear1, linear2) + a head:
    7 Linears, 2 of them nn.MultiheadAttention's out_proj (NonDynamicallyQuantizableLinear)."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 2, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, 16)
        return self.head(self.enc(x).mean(dim=1))


class Lstm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.head = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.emb(ids))
        return self.head(out[:, -1])


class Frozen(nn.Module):
    """A frozen feature layer (requires_grad False: no gradient, no optimizer state) under a trained head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(32, 64)
        self.body.requires_grad_(False)
        self.head = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


class DictInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.feats = nn.Linear(16, 32)
        self.ids = nn.Embedding(10, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, feats: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.feats(feats) + self.ids(ids)))


def _classes(x: tuple[torch.Tensor, ...], n: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, n, (x[0].shape[0],), generator=g)


def _data(kind: str, n: int, g: torch.Generator) -> TensorData:
    if kind == "mlp":
        x = (torch.randn(n, 32, generator=g),)
        return TensorData(x, _classes(x, 2, g))
    if kind == "cnn-bn":
        x = (torch.randn(n, 3, 16, 16, generator=g),)
        return TensorData(x, _classes(x, 4, g))
    if kind == "tied-lm":
        ids = torch.randint(0, 64, (n, 17), generator=g)
        return TensorData((ids[:, :-1],), ids[:, 1:])
    if kind == "encoder":
        x = (torch.randn(n, 8, 32, generator=g),)
        return TensorData(x, _classes(x, 16, g))
    if kind == "lstm":
        x = (torch.randint(0, 50, (n, 6), generator=g),)
        return TensorData(x, _classes(x, 3, g))
    if kind == "frozen":
        x = (torch.randn(n, 32, generator=g),)
        return TensorData(x, _classes(x, 4, g))
    if kind == "dict-input":
        x = (torch.randn(n, 16, generator=g), torch.randint(0, 10, (n,), generator=g))
        return TensorData(x, _classes(x, 4, g))
    raise KeyError(kind)


MODELS: dict[str, Callable[[], nn.Module]] = {
    "mlp": Mlp, "cnn-bn": CnnBn, "tied-lm": TiedLm, "encoder": Encoder, "lstm": Lstm, "frozen": Frozen,
    "dict-input": DictInput,
}
KINDS = tuple(MODELS)


def build(kind: str, seed: int = 0, n: int = 64) -> Workload:
    """A fresh Workload of this kind: same weights and data for the same seed."""
    torch.manual_seed(seed)
    model = MODELS[kind]()
    data = _data(kind, n, torch.Generator().manual_seed(seed + 1))
    extra = {}
    if kind == "tied-lm":
        extra = {"loss_fn": lm_loss, "metric": None}
    if kind == "dict-input":
        extra = {"input_names": ("feats", "ids")}
    return Workload(f"zoo:{kind}", model, data, data, batch_size=BATCH, **extra)  # type: ignore[arg-type]


def linear_layers(model: nn.Module) -> list[str]:
    """Every nn.Linear (subclasses included) of a model, by name: counted independently of the fp8 planner."""
    return [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
