"""The models README.md and docs/your-model.md name as m.py:... (small, one per shape): tests/test_docs.py runs
every documented command against them."""

import torch
from torch import nn
from torch.nn import functional as F


def build():
    """--input-shape 20 --num-classes 2."""
    return mlp()


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2))


def cnn():
    """--input-shape 3,224,224 --num-classes 1000."""
    return nn.Sequential(nn.Conv2d(3, 8, 16, stride=16), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 1000))


class Encoder(nn.Module):
    """Token ids (any vocabulary up to 30522) -> 2 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30522, 32)
        self.head = nn.Linear(32, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids).mean(dim=1))


def encoder():
    return Encoder()


def reg():
    """--input-shape 16,80 --num-outputs 3."""
    return nn.Sequential(nn.Flatten(), nn.Linear(16 * 80, 3))


class Gpt(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, 50257)."""

    def __init__(self, vocab: int = 50257, d: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.emb(ids)))


def gpt():
    return Gpt()


class TwoTower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.feats = nn.Linear(8, 32)
        self.ids = nn.Embedding(10, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, feats: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.feats(feats) + self.ids(ids)))


def two_tower():
    return TwoTower()


def make_batch(batch_size, generator):
    ids = torch.randint(0, 10, (batch_size,), generator=generator)
    feats = torch.randn(batch_size, 8, generator=generator)
    y = (ids % 2) * 2 + (feats[:, 0] > 0).long()
    return {"feats": feats, "ids": ids}, y  # model(feats=..., ids=...)


def loss(output, targets):
    return F.cross_entropy(output, targets)


my_loss = loss
