"""README's my_lm.py:build: a language model over a 32,000-token vocabulary (--input-shape 128 --task lm)."""

import torch
from torch import nn


class Lm(nn.Module):
    def __init__(self, vocab: int = 32000, d: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mix = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.mix(self.emb(ids))))


def build():
    return Lm()
