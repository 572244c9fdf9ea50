"""gpt2: a GPT-2 causal language model (Radford et al. 2019) trained on next-token prediction.

GPT-2 small (124M) at its 1024-token context, written as nanoGPT writes it: pre-norm blocks, fused QKV,
``scaled_dot_product_attention`` with the causal mask (flash attention on GPUs that have it), GELU (tanh), the LM head
tied to the token embedding, the vocabulary padded from 50,257 to 50,304 (a multiple of 64: Tensor Core tiles; nanoGPT
measured ~25 % faster steps), AdamW. The default GPU suite's language model.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.data.errors import DataError
from ampbench.workloads.base import PERPLEXITY, Workload, lm_loss, split
from ampbench.workloads.registry import register_workload


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    """Token + position embeddings, ``layers`` pre-norm blocks, a final LayerNorm, the LM head tied to the token
    embedding. GPT-2 small: 12 x 768, 12 heads, context 1024 (124.4M parameters with the padded vocabulary)."""

    def __init__(self, vocab: int = 50304, context: int = 1024, d: int = 768, layers: int = 12, heads: int = 12,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # weight tying (GPT-2, nanoGPT)
        for name, p in self.named_parameters():  # GPT-2's init: N(0, 0.02), residual projections scaled by depth
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T)
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab) logits


GPT2 = {"tiny": dict(vocab=512, context=32, d=32, layers=2, heads=2), "small": dict(vocab=8192, context=256, d=256,
        layers=4, heads=4), "paper": dict(vocab=50304, context=1024, d=768, layers=12, heads=12)}
GPT2_BATCH = {"tiny": 4, "small": 16, "paper": 16}


def gpt_model(preset: str) -> nn.Module:
    return GPT(**GPT2[preset])


@register_workload(
    "gpt2",
    description="GPT-2 causal language model (nanoGPT's GPT-2 small at its 1024-token context)",
    paper="GPT-2 small: 12 x 768, 12 heads, context 1024, vocabulary 50,257 padded to 50,304, tied LM head "
          "(124M parameters), AdamW lr 6e-4 wd 0.1, batch 16 x 1024 tokens",
    data="none (synthetic Markov text; a corpus: --model with --data-dir, or lstm-lm)",
    model=gpt_model,
)
def build_gpt2(preset: str, data_dir: Path | None, seed: int) -> Workload:
    if data_dir is not None:
        raise DataError("gpt2 trains on synthetic Markov text; it takes no --data-dir")
    cfg, batch = GPT2[preset], GPT2_BATCH[preset]
    seq = cfg["context"]
    g = torch.Generator().manual_seed(seed)
    n = 5 * batch  # (4 batches to train on, one to test: a throughput cell cycles over 4)
    x, y = synthetic.lm_tokens(n, seq, cfg["vocab"], g)
    train, test = split(x, y, batch)
    return Workload(
        name="gpt2", model=gpt_model(preset), train_data=train, test_data=test, loss_fn=lm_loss, metric=PERPLEXITY,
        make_optimizer=lambda p: torch.optim.AdamW(p, lr=6e-4 if preset == "paper" else 1e-3, weight_decay=0.1,
                                                   betas=(0.9, 0.95)),
        batch_size=batch, epochs={"tiny": 1, "small": 2, "paper": 1}[preset], preset=preset,
        description=f"GPT-2 {cfg['layers']}x{cfg['d']} context {seq} (synthetic Markov text)",
        notes={"perplexity_floor": math.log(4)},
    )
