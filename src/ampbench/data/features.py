"""A CSV of features and a label for a user's own model (an MLP on a Kaggle-style table): one float vector per row.

``train.csv`` [+ ``test.csv``] or one ``.csv`` in ``--data-dir``. The label column is ``-o label=NAME``, else the first
of label, target, class, y (any case), else the last column. Every other column is a feature: a numeric column is
standardised with its training rows' mean and standard deviation (a missing cell -- empty, NaN, NA, null, as pandas
writes them -- is that mean), a non-numeric one is one-hot encoded over the values of its training rows (a missing
cell its own value, a value the training rows lack all zeros), at most :data:`MAX_ONE_HOT` values a column. The model
takes the row's vector: ``--input-shape`` is its width, which the data says.

Classification (the default): the label's values in every row, sorted (numerically where all are numbers), are the
classes (a rare class the held-out part took whole is still one of them).
Regression (``--task regress`` or ``--num-outputs 1``): the label is a number, trained standardised on the training rows
(:func:`~ampbench.workloads.base.standardised`). One file is cut in two: for regression its last rows are held out
(rows in time order, as Rossmann's, are forecast), for classification a seeded sample of its rows (a file sorted by
its label held out one class).

Why not tabular-mlp's reader (:mod:`ampbench.data.tabular`): that model embeds categorical codes and takes the
continuous columns apart; a user's model takes one vector.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

from ampbench.data.errors import DataError
from ampbench.data.splits import held_out
from ampbench.data.tabular import column_scaler, is_missing, is_number, read_csv_header, read_csv_header_body

LABEL_NAMES = ("label", "target", "class", "y")
"""Label columns found by name (any case) where ``-o label=`` names none; else the last column."""
MAX_ONE_HOT = 64
"""Values a non-numeric column may take to be one-hot encoded (more: a name, an id, free text -- refused)."""


@dataclass
class FeatureTable:
    train_x: torch.Tensor  # (N, F) float32
    train_y: torch.Tensor  # (N,) int64 classes, or (N, 1) float32
    test_x: torch.Tensor
    test_y: torch.Tensor
    features: list[str]
    """Each feature's name: the column's, ``column=value`` for a one-hot one."""
    label: str
    classes: list[str] | None
    """The label's values (classification), in class order; None for regression."""
    source: str
    rows: int

    def describe(self) -> str:
        one_hot = sorted({f.split("=", 1)[0] for f in self.features if "=" in f})
        hot = f" ({', '.join(one_hot)} one-hot)" if one_hot else ""
        what = f"{len(self.classes)} classes" if self.classes is not None else "regression"
        return f"{self.source}: {self.rows:,} rows, {len(self.features)} features{hot}, label {self.label!r} ({what})"


def is_text_csv(path: Path, text: str | None) -> bool:
    """Whether the CSV is text for a token model: a ``text`` column (the text reader's), or ``-o text=`` given."""
    if text is not None:
        return True
    header = read_csv_header(path)  # (its first line: the file is read whole once, by its reader)
    return any(h.strip().lower() == "text" for h in header)


def _label_column(header: list[str], path: Path, label: str | None) -> str:
    if label is not None:
        if label not in header:
            raise DataError(f"{path}: no label column {label!r} (columns: {', '.join(header)}); -o label=NAME names it")
        return label
    return next((h for h in header if h.strip().lower() in LABEL_NAMES), header[-1])


def _sorted_values(values: set[str]) -> list[str]:
    return sorted(values, key=float) if all(is_number(v) for v in values) else sorted(values)


def read_feature_csv(data_dir: str | Path, label: str | None = None, regress: bool = False,
                     val_fraction: float | None = None, seed: int = 0) -> FeatureTable:
    """The feature table of the CSV(s) in ``data_dir`` (module docstring)."""
    data_dir = Path(data_dir)
    train_path, test_path = data_dir / "train.csv", data_dir / "test.csv"
    csvs = sorted(data_dir.glob("*.csv"))
    if train_path.is_file():
        header, train = read_csv_header_body(train_path)
        test_header, test = read_csv_header_body(test_path) if test_path.is_file() else (header, [])
        if test_header != header:
            raise DataError(f"{test_path}: its columns ({', '.join(test_header)}) are not train.csv's "
                            f"({', '.join(header)})")
        source = "train.csv + test.csv" if test else "train.csv"
        where = train_path
    elif len(csvs) == 1:
        header, train = read_csv_header_body(csvs[0])
        test, source, where = [], csvs[0].name, csvs[0]
    else:
        raise DataError(f"{data_dir}: {len(csvs)} .csv files; give train.csv [+ test.csv], or one .csv")
    name = _label_column(header, where, label)
    j = header.index(name)
    if not test:  # (one file: a part held out)
        n_test = held_out(len(train), val_fraction or 0.1, where)
        if not regress:
            random.Random(seed).shuffle(train)
        train, test = train[:-n_test], train[-n_test:]
    rows = len(train) + len(test)
    if regress:
        bad = next((r[j] for r in train + test if not is_number(r[j])), None)
        if bad is not None:
            raise DataError(f"{where}: label column {name!r} must be numeric for regression; it holds {bad!r}")
        train_y = torch.tensor([[float(r[j])] for r in train], dtype=torch.float32)
        test_y = torch.tensor([[float(r[j])] for r in test], dtype=torch.float32)
        classes = None
    else:
        # (every row's labels: a rare class the held-out sample took whole is still one of the model's outputs)
        classes = _sorted_values({r[j] for r in train + test})
        index = {c: i for i, c in enumerate(classes)}
        if len(classes) > 1000 and len(classes) > len(train) // 2:
            raise DataError(f"{where}: label column {name!r} has {len(classes):,} values in {len(train):,} rows: not "
                            "classes; name the label with -o label=NAME, or give --task regress for a number")
        train_y = torch.tensor([index[r[j]] for r in train], dtype=torch.int64)
        test_y = torch.tensor([index[r[j]] for r in test], dtype=torch.int64)
    features: list[str] = []
    train_cols: list[list[float]] = []
    test_cols: list[list[float]] = []
    for k, h in enumerate(header):
        if k == j:
            continue
        values = [r[k] for r in train]
        if all(is_number(v) or is_missing(v) for v in values):
            scaled = column_scaler(values)
            features.append(h)
            train_cols.append([scaled(v) for v in values])
            test_cols.append([scaled(r[k]) for r in test])
            continue
        levels = sorted({v.strip() if not is_missing(v) else "" for v in values})
        if len(levels) > MAX_ONE_HOT:
            raise DataError(f"{where}: column {h!r} has {len(levels):,} distinct non-numeric values: too many to "
                            f"one-hot encode (at most {MAX_ONE_HOT}); drop it, or for a text column give --vocab-size "
                            f"and -o text={h} (a text,label CSV for a token model)")
        for level in levels:
            features.append(f"{h}={level or '<missing>'}")
            train_cols.append([float((v.strip() if not is_missing(v) else "") == level) for v in values])
            test_cols.append([float((r[k].strip() if not is_missing(r[k]) else "") == level) for r in test])
    if not features:
        raise DataError(f"{where}: no feature column beside the label {name!r}")

    def matrix(cols: list[list[float]], n: int) -> torch.Tensor:
        return torch.tensor(cols, dtype=torch.float32).T.contiguous() if n else torch.zeros(0, len(cols))

    return FeatureTable(matrix(train_cols, len(train)), train_y, matrix(test_cols, len(test)), test_y, features,
                        name, classes, source, rows)
