"""A CSV of features and a label for a user's model: one float vector a row (oracles: the file's own numbers)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
import torch

from ampbench.data.errors import DataError
from ampbench.data.features import MAX_ONE_HOT, is_text_csv, read_feature_csv

ROWS = [  # age, city, income (the label: found by name? no -- "income" is none of label/target/class/y: the last)
    ("25", "Paris", "low"), ("40", "Rome", "high"), ("", "Paris", "high"), ("33", "NA", "low"),
    ("51", "Rome", "high"), ("29", "Oslo", "low"),
]


def _csv(path: Path, header: str, rows: list[tuple[str, ...]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
    return path


def test_numbers_are_standardised_on_the_training_rows_and_words_one_hot(tmp_path: Path) -> None:
    _csv(tmp_path / "train.csv", "age,city,income", ROWS)
    _csv(tmp_path / "test.csv", "age,city,income", [("60", "Lima", "high")])
    t = read_feature_csv(tmp_path)
    assert t.label == "income" and t.classes == ["high", "low"]
    assert t.features == ["age", "city=<missing>", "city=Oslo", "city=Paris", "city=Rome"]
    ages = [25.0, 40.0, 33.0, 51.0, 29.0]
    mean, std = statistics.fmean(ages), statistics.pstdev(ages)
    expected_age = [(a - mean) / std for a in (25, 40)] + [0.0] + [(a - mean) / std for a in (33, 51, 29)]
    assert t.train_x[:, 0].tolist() == pytest.approx(expected_age)  # (the missing age: the mean, 0)
    assert t.train_x[:, 1:].tolist() == [[0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1],
                                         [0, 1, 0, 0]]
    assert t.train_y.tolist() == [1, 0, 0, 1, 0, 1] and t.test_y.tolist() == [0]
    assert t.test_x[0, 0].item() == pytest.approx((60 - mean) / std)  # (the training rows' statistics)
    assert t.test_x[0, 1:].tolist() == [0, 0, 0, 0]  # (Lima: in no training row)
    assert t.describe() == "train.csv + test.csv: 7 rows, 5 features (city one-hot), label 'income' (2 classes)"


@pytest.mark.parametrize("header, label, found", [
    ("a,Target,b", None, "Target"), ("a,b,label", None, "label"), ("y,a,b", None, "y"), ("a,b,c", None, "c"),
    ("a,b,c", "a", "a"),
])
def test_the_label_column_is_named_found_by_name_or_the_last(tmp_path: Path, header, label, found) -> None:
    _csv(tmp_path / "d.csv", header, [("1", "2", "3"), ("4", "5", "6"), ("7", "8", "9")] * 4)
    assert read_feature_csv(tmp_path, label).label == found


def test_regression_holds_out_the_last_rows_and_classification_a_seeded_sample(tmp_path: Path) -> None:
    rows = [(str(i), "a" if i < 15 else "b", str(i * 10)) for i in range(20)]
    _csv(tmp_path / "d.csv", "x,group,label", rows)
    reg = read_feature_csv(tmp_path, regress=True, val_fraction=0.2)
    assert reg.classes is None and reg.test_y.flatten().tolist() == [160.0, 170.0, 180.0, 190.0]
    sorted_by_label = [(str(i), str(i % 3), "a" if i < 10 else "b") for i in range(20)]
    _csv(tmp_path / "d.csv", "x,group,label", sorted_by_label)
    cls = read_feature_csv(tmp_path, val_fraction=0.2)
    assert len(cls.test_y) == 4 and len(set(cls.test_y.tolist())) == 2  # (held out as they came: all "b")
    assert cls.test_y.tolist() == read_feature_csv(tmp_path, val_fraction=0.2).test_y.tolist()  # (seeded)


@pytest.mark.parametrize("rows, regress, said", [
    ([(f"name{i}", str(i % 2)) for i in range(2 * MAX_ONE_HOT)], False, "too many to one-hot encode"),
    ([("1", "cat"), ("2", "dog")] * 5, True, "must be numeric for regression; it holds 'cat'"),
])
def test_bad_tables_are_one_line(tmp_path: Path, rows, regress, said) -> None:
    _csv(tmp_path / "d.csv", "name,label", rows)
    with pytest.raises(DataError, match=said):
        read_feature_csv(tmp_path, regress=regress)


def test_a_test_label_no_training_row_has_is_a_class_and_two_loose_csvs_are_refused(tmp_path: Path) -> None:
    _csv(tmp_path / "train.csv", "x,label", [("1", "a"), ("2", "b")])
    _csv(tmp_path / "test.csv", "x,label", [("3", "c")])
    t = read_feature_csv(tmp_path)  # (was refused: a class whose one row the held-out sample took failed the read)
    assert t.classes == ["a", "b", "c"] and t.test_y.tolist() == [2]
    _csv(tmp_path / "other" / "a.csv", "x,label", [("1", "a")])
    _csv(tmp_path / "other" / "b.csv", "x,label", [("1", "a")])
    with pytest.raises(DataError, match="2 .csv files; give train.csv"):
        read_feature_csv(tmp_path / "other")


def test_a_text_csv_is_told_by_its_text_column_or_the_option(tmp_path: Path) -> None:
    assert is_text_csv(_csv(tmp_path / "a.csv", "Text,label", [("hi there", "1")]), None)
    assert not is_text_csv(_csv(tmp_path / "b.csv", "review,label", [("hi there", "1")]), None)
    assert is_text_csv(tmp_path / "b.csv", "review")


def test_a_user_mlp_trains_on_a_table_and_says_rmse_in_the_labels_units(tmp_path: Path) -> None:
    from torch import nn

    from ampbench.errors import AmpbenchError
    from ampbench.workloads.tasks import DataSpec
    from ampbench.workloads.user import build_module_workload

    rows = [(str(i % 7), "a" if i % 2 else "b", str(1000 + 37 * i)) for i in range(50)]
    _csv(tmp_path / "houses.csv", "rooms,city,price", rows)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    wl = build_module_workload(model, "m.py:f", DataSpec.of(task="regress"), data_dir=tmp_path, val_fraction=0.2)
    assert tuple(wl.train_data.inputs[0].shape[1:]) == (3,) and "houses.csv: 50 rows, 3 features" in wl.description
    # oracle: predicting 0 (the training rows' mean, standardised) scores the test prices' RMSE around that mean
    prices = [1000 + 37 * i for i in range(50)]
    mean = statistics.fmean(prices[:40])
    want = math.sqrt(statistics.fmean([(p - mean) ** 2 for p in prices[40:]]))
    total, n = wl.metric.fn(torch.zeros(10, 1), wl.test_data.targets)
    assert wl.metric.finalize(float(total) / n) == pytest.approx(want, rel=1e-5)
    regress = DataSpec.of(task="regress")
    with pytest.raises(AmpbenchError, match="the batch is the --data-dir data's \\(houses.csv: 50 rows, 3 features"):
        build_module_workload(nn.Linear(5, 1), "m.py:f", regress, data_dir=tmp_path)
    with pytest.raises(AmpbenchError, match="--input-shape 5 does not match the data in .*: 3 features a row "
                                            "\\(rooms, city=a, city=b\\)"):
        build_module_workload(nn.Linear(5, 1), "m.py:f", DataSpec.of(input_shape="5", task="regress"),
                              data_dir=tmp_path)
