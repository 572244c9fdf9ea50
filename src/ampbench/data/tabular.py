"""CSV tables for the tabular workload: categorical columns -> integer codes, numeric -> standardised floats.

A column is categorical when any value is not a number, or when named in ``categorical``. The
target column must be numeric (regression). Missing cells (empty, or NaN/NA/null/None as pandas
writes them): categorical -> their own code, numeric -> the column mean. A UTF-8 byte-order mark
(Excel's "CSV UTF-8") is read as such, not as part of the first column's name.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from ampbench.data.errors import DataError
from ampbench.data.splits import held_out


@dataclass
class Table:
    categorical: torch.Tensor  # (N, n_cat) int64 codes
    continuous: torch.Tensor   # (N, n_cont) float32, standardised
    target: torch.Tensor       # (N, 1) float32
    cardinalities: list[int]
    cat_names: list[str]
    cont_names: list[str]
    n_test: int = 0
    """The last rows, held out for testing (``held_out``): the continuous columns' statistics are the others'."""


MISSING = frozenset({"", "nan", "na", "n/a", "null", "none", "<na>", "#n/a", "-nan"})
"""Cells read as missing (compared lower-case, stripped): pandas' default na_values."""


def is_missing(s: str) -> bool:
    return s.strip().lower() in MISSING


def is_number(s: str) -> bool:
    try:
        return math.isfinite(float(s))
    except ValueError:
        return False


def column_scaler(fit: Iterable[str]) -> Callable[[str], float]:
    """A numeric column's cells standardised with the mean and (population) standard deviation of its ``fit`` cells --
    the training rows' (1 where they do not vary) --, a missing cell its mean (0): tabular-mlp's continuous columns
    and a feature table's numeric ones (:mod:`ampbench.data.features`)."""
    values = [float(v) for v in fit if not is_missing(v)]
    mean = sum(values) / len(values) if values else 0.0
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0
    std = std or 1.0

    def scaled(v: str) -> float:
        return 0.0 if is_missing(v) or not is_number(v) else (float(v) - mean) / std

    return scaled


def read_csv_rows(path: Path) -> list[list[str]]:
    """Every row of a UTF-8 CSV (a byte-order mark is fine): a header and at least one data row."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{path}: cannot read as UTF-8 CSV ({e})") from None
    if len(rows) < 2:
        raise DataError(f"{path}: needs a header row and at least one data row")
    return rows


def read_csv_header(path: Path) -> list[str]:
    """The header row of a UTF-8 CSV (a byte-order mark is fine), the rest unread."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{path}: cannot read as UTF-8 CSV ({e})") from None


def read_csv_header_body(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, data rows) of a UTF-8 CSV whose every row has the header's number of fields (one line naming the
    first that has not)."""
    rows = read_csv_rows(path)
    header, body = rows[0], rows[1:]
    for i, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise DataError(f"{path}: line {i} has {len(r)} fields, the header has {len(header)}")
    return header, body


def read_csv_table(path: str | Path, target: str = "target", categorical: list[str] | None = None,
                   held_out_fraction: float | None = None) -> Table:
    """The table of ``path``; ``held_out_fraction``: the share of its last rows held out for testing, whose values
    the continuous columns' means and standard deviations do not see (they were the whole file's: the test rows
    leaked into the training rows' scaling)."""
    path = Path(path)
    header, body = read_csv_header_body(path)
    if target not in header:
        raise DataError(f"{path}: no target column {target!r} (columns: {', '.join(header)}); name the column to "
                        f"predict with -o target=NAME, e.g. -o target={header[-1]}")
    cols = {h: [r[j] for r in body] for j, h in enumerate(header)}
    bad = next((i for i, v in enumerate(cols[target], start=2) if not is_number(v)), None)
    if bad is not None:
        raise DataError(f"{path}: target column {target!r} must be numeric (regression); line {bad} has "
                        f"{cols[target][bad - 2]!r}")
    forced = set(categorical or [])
    unknown = forced - set(header)
    if unknown:
        raise DataError(f"{path}: categorical columns {sorted(unknown)} not in the header")
    cat_names = [h for h in header if h != target and (h in forced or not all(is_number(v) or is_missing(v)
                                                                              for v in cols[h]))]
    cont_names = [h for h in header if h != target and h not in cat_names]
    cats, cards = [], []
    for h in cat_names:
        vocab = {v: i for i, v in enumerate(sorted(set(cols[h])))}
        cats.append([vocab[v] for v in cols[h]])
        cards.append(len(vocab))
    n_test = held_out(len(body), held_out_fraction, path) if held_out_fraction is not None else 0
    conts = []
    for h in cont_names:
        scaled = column_scaler(cols[h][:len(body) - n_test])
        conts.append([scaled(v) for v in cols[h]])
    n = len(body)
    return Table(
        categorical=torch.tensor(cats, dtype=torch.int64).T.contiguous() if cats else torch.zeros(n, 0, dtype=torch.int64),
        continuous=torch.tensor(conts, dtype=torch.float32).T.contiguous() if conts else torch.zeros(n, 0),
        target=torch.tensor([float(v) for v in cols[target]], dtype=torch.float32).unsqueeze(1),
        cardinalities=cards, cat_names=cat_names, cont_names=cont_names, n_test=n_test,
    )
