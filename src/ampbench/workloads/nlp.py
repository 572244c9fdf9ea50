"""Language workloads: bert (encoder, classification / SQuAD-style span heads) and lstm-lm."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.data.errors import DataError
from ampbench.data.tensors import TensorData
from ampbench.data.text import load_corpus, windows
from ampbench.data.textcsv import PAD, load_text_classification
from ampbench.errors import AmpbenchError
from ampbench.workloads.base import ACCURACY, PERPLEXITY, SPAN_EXACT_MATCH, Workload, adam, lm_loss, split
from ampbench.workloads.registry import register_workload

# -- bert ----------------------------------------------------------------------------------------
BERT_SIZES = {  # layers, hidden, heads, intermediate (Devlin et al. 2019, Table 1 / the released configs)
    "tiny": (2, 64, 2, 128),
    "small": (4, 256, 4, 1024),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
BERT_VOCAB = 30522  # bert-base-uncased WordPiece vocabulary


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, inter: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in = nn.Linear(hidden, inter)
        self.ffn_out = nn.Linear(inter, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)  # (B, nh, T, hs)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                             dropout_p=self.dropout.p if self.training else 0.0)
        x = self.attn_norm(x + self.dropout(self.attn_out(ctx.transpose(1, 2).reshape(b, t, h))))  # post-LN
        return self.ffn_norm(x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(x)))))


class Bert(nn.Module):
    """BERT encoder + pooler, with a classification head (``task="cls"``) or a span head (``task="span"``)."""

    def __init__(self, layers: int, hidden: int, heads: int, inter: int, vocab: int = BERT_VOCAB,
                 max_pos: int = 512, task: str = "cls", num_labels: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.task = task
        self.word = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, inter, dropout) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, num_labels if task == "cls" else 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor):  # ids, mask: (B, T)
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device)
        x = self.word(ids) + self.position(pos)[None] + self.token_type(torch.zeros_like(ids))
        x = self.dropout(self.emb_norm(x))  # (B, T, H)
        attn_mask = mask[:, None, None, :].bool()  # (B, 1, 1, T): True = attend
        for layer in self.layers:
            x = layer(x, attn_mask)
        if self.task == "cls":
            return self.head(self.dropout(torch.tanh(self.pooler(x[:, 0]))))  # (B, num_labels)
        start, end = self.head(x).unbind(dim=-1)  # (B, T) each
        return start, end


def _span_loss(out: tuple[torch.Tensor, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    start, end = out
    return (F.cross_entropy(start.float(), y[:, 0]) + F.cross_entropy(end.float(), y[:, 1])) / 2


def bert_size(preset: str, size: str | None, task: str = "cls") -> str:
    """The BERT size for ``preset`` (or the one asked for), checked along with ``task``."""
    size = size or {"tiny": "tiny", "small": "small", "paper": "base"}[preset]
    if size not in BERT_SIZES:
        raise AmpbenchError(f"bert size {size!r}: choose one of {', '.join(BERT_SIZES)}")
    if task not in ("cls", "span"):
        raise AmpbenchError(f"bert task {task!r}: choose cls (classification) or span (SQuAD-style)")
    return size


def bert_vocab(preset: str, size: str) -> int:
    """WordPiece's 30522 for the real sizes and the paper preset; 2048 for the small test models."""
    return BERT_VOCAB if preset == "paper" or size in ("base", "large") else 2048


def bert_model(preset: str, size: str | None = None, task: str = "cls", seq_len: int | None = None,
               vocab: int | None = None, num_labels: int = 2) -> Bert:
    size = bert_size(preset, size, task)
    return Bert(*BERT_SIZES[size], vocab=vocab or bert_vocab(preset, size), task=task, num_labels=num_labels)


@register_workload(
    "bert",
    description="BERT encoder fine-tuning: classification (task=cls) or SQuAD-style spans (task=span)",
    paper="BERT-base (12x768, ~110M) seq 128; options size=large (24x1024, ~340M), task=span, seq_len=384/512; "
          "vocab 30522, AdamW 2e-5",
    data="text,label CSV: train.csv [test.csv] or one .csv (task=cls; tokenizer=word|byte|bpe; text=NAME, "
         "label=NAME: its columns)",
    model=lambda preset, size=None, task="cls", seq_len=None, tokenizer=None, text=None, label=None: bert_model(
        preset, size, task),
)
def build_bert(preset: str, data_dir: Path | None, seed: int, size: str | None = None, task: str = "cls",
               seq_len: int | None = None, tokenizer: str | None = None, val_fraction: float | None = None,
               text: str | None = None, label: str | None = None) -> Workload:
    for name, given in (("tokenizer", tokenizer), ("text", text), ("label", label)):
        if given is not None and data_dir is None:
            raise AmpbenchError(f"bert {name}=...: it applies to a text CSV; give --data-dir too")
    seq = int(seq_len or {"tiny": 16, "small": 64, "paper": 128 if task == "cls" else 384}[preset])
    if not 8 <= seq <= 512:
        raise AmpbenchError(f"bert seq_len {seq} must be between 8 and 512")
    if data_dir is not None:
        if task != "cls":
            raise DataError("bert --data-dir reads text classification (a text,label CSV): use task=cls")
        # the vocabulary is the model's: read the text before building the model, which needs its labels
        read = load_text_classification(data_dir, seq_len=seq, vocab_size=bert_vocab(preset, bert_size(preset, size)),
                                        tokenizer=tokenizer or "word", val_fraction=val_fraction, text=text, label=label)
        model = bert_model(preset, size, task, num_labels=len(read.labels))
        train = TensorData((read.train_ids, (read.train_ids != PAD).long()), read.train_labels)
        test = TensorData((read.test_ids, (read.test_ids != PAD).long()), read.test_labels)
        loss_fn, metric, about = F.cross_entropy, ACCURACY, f"on {read.describe()}"
    else:
        model = bert_model(preset, size, task)
        vocab = model.word.num_embeddings
        g = torch.Generator().manual_seed(seed)
        n = {"tiny": 32, "small": 2048, "paper": 8192}[preset]
        if task == "cls":
            ids, mask, y = synthetic.token_classification(n, seq, vocab, 2, g)
            loss_fn, metric = F.cross_entropy, ACCURACY
        else:
            ids, mask, y = synthetic.token_spans(n, seq, vocab, g)
            loss_fn, metric = _span_loss, SPAN_EXACT_MATCH
        train, test = split((ids, mask), y, n // 8)
        about = f"{task} seq {seq}"
    return Workload(
        name="bert", model=model, train_data=train, test_data=test, loss_fn=loss_fn, metric=metric,
        make_optimizer=lambda p: torch.optim.AdamW(p, lr=2e-5 if preset == "paper" else 1e-4),
        batch_size={"tiny": 4, "small": 32, "paper": 32}[preset], epochs={"tiny": 1, "small": 2, "paper": 2}[preset],
        preset=preset, description=f"BERT-{size or preset} {about}",
    )


# -- lstm-lm -------------------------------------------------------------------------------------
# (vocab, embed, hidden, projection, layers, seq, batch). paper: the "bigLSTM" of Micikevicius et al. 2018
# (mixed precision training, section 4.4): 2 layers of 8192 cells projected to 1024, 793k-word vocabulary.
LSTM = {"tiny": (256, 32, 64, 0, 2, 16, 8), "small": (10000, 256, 512, 0, 2, 35, 32),
        "paper": (793471, 1024, 8192, 1024, 2, 20, 128)}


class LSTMLanguageModel(nn.Module):
    """Embedding -> multi-layer LSTM (optional projection) -> full softmax over the vocabulary."""

    def __init__(self, vocab: int, embed: int, hidden: int, proj: int, layers: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True, proj_size=proj,
                            dropout=dropout if layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.decoder = nn.Linear(proj or hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T)
        x = self.drop(self.embed(tokens))  # (B, T, E)
        # (under amp-fp16 on CPU the engine gives nn.LSTM a kernel fallback: ampbench.precision.fallbacks)
        out = self.lstm(x)[0]  # (B, T, P)
        return self.decoder(self.drop(out))  # (B, T, V)


@register_workload(
    "lstm-lm",
    description="word-level multi-layer LSTM language model with a large-vocabulary softmax",
    paper="bigLSTM: 2x8192 LSTM cells projected to 1024, 793,471-word vocabulary, seq 20, batch 128 "
          "(full softmax here; the paper sampled 8192 classes)",
    data="plain-text corpus: train.txt [valid.txt|test.txt]; option vocab=N caps its vocabulary (synthetic: its size)",
    model=lambda preset, vocab=None: LSTMLanguageModel(int(vocab or LSTM[preset][0]), *LSTM[preset][1:5]),
)
def build_lstm_lm(preset: str, data_dir: Path | None, seed: int, vocab: int | None = None,
                  val_fraction: float | None = None) -> Workload:
    """``vocab``: the vocabulary (the preset's by default; the default GPU suite runs the bigLSTM's layers with 100k
    words: the full 793k softmax alone is 1.6B parameters, 26 GB in fp32 with Adam's state)."""
    default_vocab, embed, hidden, proj, layers, seq, batch = LSTM[preset]
    if not str(vocab or default_vocab).isdigit():
        raise AmpbenchError(f"lstm-lm vocab={vocab}: give a number of words, e.g. -o vocab=100000")
    vocab = int(vocab or default_vocab)
    if vocab < 2:
        raise AmpbenchError(f"lstm-lm vocab={vocab}: a language model needs at least 2 words")
    if data_dir is not None:
        streams, words = load_corpus(data_dir, max_vocab=vocab, held_out=val_fraction or 0.1)
        vocab = len(words)
        train, test = windows(streams["train"], seq), windows(streams["test"], seq)
    else:
        g = torch.Generator().manual_seed(seed)
        n_tokens = {"tiny": 2000, "small": 200_000, "paper": 1_000_000}[preset]
        stream = synthetic.markov_tokens(n_tokens, vocab, g)
        train, test = windows(stream, seq).split_off(max(len(stream) // seq // 10, 1))
    return Workload(
        name="lstm-lm", model=LSTMLanguageModel(vocab, embed, hidden, proj, layers), train_data=train,
        test_data=test, loss_fn=lm_loss, metric=PERPLEXITY, make_optimizer=adam(1e-3), batch_size=batch,
        epochs={"tiny": 1, "small": 2, "paper": 1}[preset], preset=preset,
        description=f"LSTM LM vocab {vocab}" + (" (corpus)" if data_dir else " (synthetic Markov text)"),
        notes={"perplexity_floor": math.log(4)},
    )
