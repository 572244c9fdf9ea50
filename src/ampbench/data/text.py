"""Plain-text corpus for the LSTM language model: words split on whitespace, one <eos> per line.

``data_dir`` holds train.txt (required) and valid.txt / test.txt (optional; else the last 10% of
train.txt, or ``held_out``, is held out). Words outside the ``max_vocab`` most frequent become <unk>.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import torch

from ampbench.data.errors import DataError
from ampbench.data.tensors import TensorData

UNK, EOS = "<unk>", "<eos>"


def _read_words(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read as UTF-8 text ({e})") from None
    words = []
    for line in text.splitlines():
        toks = line.split()
        if toks:
            words += [*toks, EOS]
    return words


def load_corpus(data_dir: str | Path, max_vocab: int, held_out: float = 0.1) -> tuple[dict[str, torch.Tensor], list[str]]:
    """({"train": ids, "test": ids}, vocabulary) as 1-D int64 token streams."""
    data_dir = Path(data_dir)
    train_path = data_dir / "train.txt"
    if not train_path.exists():
        raise DataError(f"{data_dir}: no train.txt (a plain-text corpus: train.txt [valid.txt] [test.txt])")
    train = _read_words(train_path)
    if len(train) < 100:
        raise DataError(f"{train_path}: only {len(train)} tokens; need at least 100")
    held = next((data_dir / n for n in ("test.txt", "valid.txt") if (data_dir / n).exists()), None)
    if held is not None:
        test = _read_words(held)
    else:
        cut = int(len(train) * (1.0 - held_out))
        train, test = train[:cut], train[cut:]
    counts = Counter(train)
    vocab = [UNK, EOS] + [w for w, _ in counts.most_common() if w not in (UNK, EOS)][: max_vocab - 2]
    index = {w: i for i, w in enumerate(vocab)}

    def encode(words: list[str]) -> torch.Tensor:
        return torch.tensor([index.get(w, 0) for w in words], dtype=torch.int64)

    return {"train": encode(train), "test": encode(test)}, vocab


def windows(stream: torch.Tensor, seq: int) -> TensorData:
    """A token stream cut into (inputs, next-token targets) sequences of ``seq`` tokens."""
    n = (len(stream) - 1) // seq
    if n < 1:
        raise DataError(f"corpus of {len(stream)} tokens is shorter than one sequence of {seq}")
    x = stream[: n * seq].view(n, seq)
    y = stream[1: n * seq + 1].view(n, seq)
    return TensorData((x,), y)
