"""Text classification from CSV files (``text,label`` columns, like the tweet-sentiment data the classic
mixed-precision benchmarks used), tokenized by a tokenizer built from the training text.

``data_dir`` holds ``train.csv`` and optionally ``test.csv``; else one ``*.csv`` whose last
``val_fraction`` (default 10%) of rows is held out. The text column is ``text`` and the label column label, sentiment,
target or class, unless named (the options ``text=NAME``, ``label=NAME``); labels are sorted (numerically when they
are all integers) and numbered from 0.
Tokenizers (seeded by nothing: built deterministically from the training text, no download):

- ``word``: lower-cased words and punctuation, the ``vocab_size - 3`` most frequent (ties by spelling);
- ``byte``: UTF-8 bytes (vocabulary 259);
- ``bpe``: byte-pair encoding trained with the ``tokenizers`` package (optional: ``pip install tokenizers``).

Ids 0, 1, 2 are [PAD], [UNK], [CLS]; every sequence is [CLS] + tokens, truncated/padded to ``seq_len``.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ampbench.data.errors import DataError
from ampbench.data.splits import held_out
from ampbench.data.tabular import read_csv_rows

PAD, UNK, CLS = 0, 1, 2
SPECIALS = ("[PAD]", "[UNK]", "[CLS]")
TOKENIZERS = ("word", "byte", "bpe")
LABEL_COLUMNS = ("label", "sentiment", "target", "class")
_WORD = re.compile(r"\w+|[^\w\s]")


@dataclass
class TextClassification:
    train_ids: torch.Tensor  # (N, seq) int64
    train_labels: torch.Tensor  # (N,) int64
    test_ids: torch.Tensor
    test_labels: torch.Tensor
    labels: list[str]
    tokenizer: str
    vocab_used: int
    """Distinct ids the tokenizer can produce (<= vocab_size)."""
    source: str

    def describe(self) -> str:
        return (f"{self.source}: {len(self.train_labels):,} + {len(self.test_labels):,} texts, {len(self.labels)} labels, "
                f"{self.tokenizer} tokenizer ({self.vocab_used:,} ids), seq {self.train_ids.shape[1]}")


def read_text_csv(path: Path, text: str | None = None, label: str | None = None) -> tuple[list[str], list[str]]:
    """(texts, labels) of a CSV with a header naming a text and a label column: ``text`` / ``label`` where given
    (compared case-insensitively), else ``text`` and the first of :data:`LABEL_COLUMNS` there."""
    rows = read_csv_rows(path)
    header = [h.strip().lower() for h in rows[0]]
    text_col = (text or "text").strip().lower()
    label_col = label.strip().lower() if label else next((c for c in LABEL_COLUMNS if c in header), None)
    missing = [what for what, col in (("text", text_col), ("label", label_col)) if col not in header]
    if missing:
        wanted = {"text": f"a text column {text_col!r}", "label": f"a label column {label_col!r}" if label_col
                  else f"a label column ({', '.join(LABEL_COLUMNS)})"}
        raise DataError(f"{path}: needs {' and '.join(wanted[m] for m in missing)}; the header has "
                        f"{', '.join(rows[0]) or 'nothing'}: name yours with "
                        + " ".join(f"-o {m}=NAME" for m in missing))
    ti, li = header.index(text_col), header.index(str(label_col))
    texts, labels = [], []
    for i, r in enumerate(rows[1:], start=2):
        if not r:
            continue  # a blank line
        if len(r) != len(header):
            raise DataError(f"{path}: line {i} has {len(r)} fields, the header has {len(header)}")
        label = r[li].strip()
        if not label:
            raise DataError(f"{path}: line {i} has no label")
        texts.append(r[ti])
        labels.append(label)
    if not texts:
        raise DataError(f"{path}: no data rows")
    return texts, labels


def _sorted_labels(labels: set[str]) -> list[str]:
    if all(re.fullmatch(r"-?\d+", v) for v in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def word_tokenizer(texts: list[str], vocab_size: int) -> tuple[Callable[[str], list[int]], int]:
    counts = Counter(w for t in texts for w in _WORD.findall(t.lower()))
    words = sorted(counts, key=lambda w: (-counts[w], w))[: max(vocab_size - len(SPECIALS), 0)]
    index = {w: i + len(SPECIALS) for i, w in enumerate(words)}
    return (lambda t: [index.get(w, UNK) for w in _WORD.findall(t.lower())]), len(index) + len(SPECIALS)


def byte_tokenizer(texts: list[str], vocab_size: int) -> tuple[Callable[[str], list[int]], int]:
    if vocab_size < 256 + len(SPECIALS):
        raise DataError(f"the byte tokenizer needs --vocab-size >= {256 + len(SPECIALS)} (got {vocab_size})")
    return (lambda t: [b + len(SPECIALS) for b in t.encode("utf-8")]), 256 + len(SPECIALS)


def bpe_tokenizer(texts: list[str], vocab_size: int) -> tuple[Callable[[str], list[int]], int]:
    try:
        tk = importlib.import_module("tokenizers")
    except ImportError:
        raise DataError("tokenizer=bpe needs the tokenizers package: pip install tokenizers "
                        "(or use tokenizer=word / tokenizer=byte)") from None
    tok = tk.Tokenizer(tk.models.BPE(unk_token=SPECIALS[UNK]))
    tok.normalizer = tk.normalizers.Lowercase()
    tok.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return (lambda t: tok.encode(t).ids), int(tok.get_vocab_size())


BUILDERS = {"word": word_tokenizer, "byte": byte_tokenizer, "bpe": bpe_tokenizer}


def encode(texts: list[str], tokenize: Callable[[str], list[int]], seq_len: int) -> torch.Tensor:
    out = torch.full((len(texts), seq_len), PAD, dtype=torch.int64)
    for i, t in enumerate(texts):
        ids = [CLS, *tokenize(t)][:seq_len]
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.int64)
    return out


def load_text_classification(data_dir: str | Path, seq_len: int, vocab_size: int, tokenizer: str = "word",
                             val_fraction: float | None = None, text: str | None = None,
                             label: str | None = None) -> TextClassification:
    data_dir = Path(data_dir)
    if tokenizer not in TOKENIZERS:
        raise DataError(f"tokenizer {tokenizer!r}: choose one of {', '.join(TOKENIZERS)}")
    if seq_len < 2:
        raise DataError(f"sequence length {seq_len}: need at least 2 ([CLS] and one token)")
    if vocab_size < len(SPECIALS) + 1:
        raise DataError(f"vocabulary {vocab_size}: need at least {len(SPECIALS) + 1} ids ([PAD], [UNK], [CLS], a token)")
    train_path, test_path = data_dir / "train.csv", data_dir / "test.csv"
    if train_path.is_file():
        train_t, train_l = read_text_csv(train_path, text, label)
        if test_path.is_file():
            test_t, test_l = read_text_csv(test_path, text, label)
        else:
            cut = len(train_t) - held_out(len(train_t), val_fraction or 0.1, train_path)
            train_t, test_t, train_l, test_l = train_t[:cut], train_t[cut:], train_l[:cut], train_l[cut:]
        source = str(data_dir)
    else:
        csvs = sorted(data_dir.glob("*.csv"))
        if len(csvs) != 1:
            raise DataError(f"{data_dir}: expected train.csv [test.csv] or a single .csv file, found "
                            f"{', '.join(p.name for p in csvs) or 'none'}")
        texts, labels = read_text_csv(csvs[0], text, label)
        cut = len(texts) - held_out(len(texts), val_fraction or 0.1, csvs[0])
        train_t, test_t, train_l, test_l = texts[:cut], texts[cut:], labels[:cut], labels[cut:]
        source = str(csvs[0])
    names = _sorted_labels(set(train_l) | set(test_l))
    if len(names) < 2:
        raise DataError(f"{source}: only one label ({names[0]}); classification needs at least 2")
    index = {v: i for i, v in enumerate(names)}
    tokenize, used = BUILDERS[tokenizer](train_t, vocab_size)
    return TextClassification(
        train_ids=encode(train_t, tokenize, seq_len), train_labels=torch.tensor([index[v] for v in train_l]),
        test_ids=encode(test_t, tokenize, seq_len), test_labels=torch.tensor([index[v] for v in test_l]),
        labels=names, tokenizer=tokenizer, vocab_used=used, source=source,
    )
