"""Real-format readers: the real MNIST test set, and small files the tests write for the other formats."""

import gzip
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from ampbench.data.cifar import load_cifar10_dir
from ampbench.data.errors import DataError
from ampbench.data.idx import load_mnist_dir, read_idx
from ampbench.data.tabular import read_csv_table
from ampbench.data.tensors import TensorData
from ampbench.data.text import load_corpus

MNIST = Path(__file__).resolve().parents[3] / "shared" / "data" / "mnist"
needs_mnist = pytest.mark.skipif(not MNIST.is_dir(), reason=f"{MNIST} not present")


@needs_mnist
def test_real_mnist_test_set():
    splits = load_mnist_dir(MNIST)
    assert set(splits) == {"test"}
    x, y = splits["test"]
    assert x.shape == (10000, 1, 28, 28) and x.dtype == torch.uint8
    assert y.shape == (10000,) and int(y.min()) == 0 and int(y.max()) == 9
    assert torch.bincount(y).min() > 800  # every digit is there


def _write_idx(path: Path, arr: np.ndarray, code: int = 0x08, gz: bool = True) -> Path:
    raw = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)
    return path


def _mnist_dir(tmp_path: Path, n: int = 20, gz: bool = True) -> Path:
    rng = np.random.default_rng(0)
    _write_idx(tmp_path / "train-images-idx3-ubyte", rng.integers(0, 255, (n, 28, 28), dtype=np.uint8), gz=gz)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", rng.integers(0, 10, n, dtype=np.uint8), gz=gz)
    return tmp_path


@pytest.mark.parametrize("gz", [True, False])
def test_idx_written_gz_and_raw(tmp_path, gz):
    splits = load_mnist_dir(_mnist_dir(tmp_path, gz=gz))
    assert splits["train"][0].shape == (20, 1, 28, 28)


def test_truncated_idx_is_refused_with_the_file_name(tmp_path):
    path = _write_idx(tmp_path / "x-idx3-ubyte", np.zeros((4, 28, 28), np.uint8), gz=False)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match=r"x-idx3-ubyte: truncated: header says 4x28x28"):
        read_idx(path)


def test_bad_magic_and_corrupt_gzip(tmp_path):
    bad = tmp_path / "bad-idx1-ubyte"
    bad.write_bytes(b"\x12\x34\x08\x01" + b"\x00" * 8)
    with pytest.raises(DataError, match="bad IDX magic 12340801"):
        read_idx(bad)
    broken = tmp_path / "t10k-images-idx3-ubyte.gz"
    broken.write_bytes(gzip.compress(b"\x00" * 100)[:20])
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte.gz: cannot read"):
        read_idx(broken)


def test_wrong_dims_and_count_mismatch(tmp_path):
    _write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((5, 28, 28), np.uint8))
    _write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(4, np.uint8))
    with pytest.raises(DataError, match="5 images but .* 4 labels"):
        load_mnist_dir(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match="not train-labels-idx1-ubyte"):
        load_mnist_dir(tmp_path)


def test_empty_dir_says_what_is_expected(tmp_path):
    with pytest.raises(DataError, match="no MNIST IDX files"):
        load_mnist_dir(tmp_path)


def _cifar_pickles(d: Path, n: int = 6) -> None:
    rng = np.random.default_rng(0)
    for name in ["data_batch_1", "data_batch_2", "test_batch"]:
        batch = {b"data": rng.integers(0, 255, (n, 3072), dtype=np.uint8), b"labels": list(rng.integers(0, 10, n))}
        (d / name).write_bytes(pickle.dumps(batch))


def test_cifar_pickle_batches(tmp_path):
    _cifar_pickles(tmp_path)
    s = load_cifar10_dir(tmp_path)
    assert s["train"][0].shape == (12, 3, 32, 32) and s["test"][0].shape == (6, 3, 32, 32)


def test_cifar_binary_batches(tmp_path):
    d = tmp_path / "cifar-10-batches-bin"
    d.mkdir()
    rec = np.zeros((3, 3073), np.uint8)
    rec[:, 0] = [1, 2, 3]
    rec[1, 1] = 77
    (d / "test_batch.bin").write_bytes(rec.tobytes())
    s = load_cifar10_dir(tmp_path)
    x, y = s["test"]
    assert y.tolist() == [1, 2, 3] and int(x[1, 0, 0, 0]) == 77


def test_cifar_corrupt_files(tmp_path):
    (tmp_path / "test_batch.bin").write_bytes(b"\x00" * 3000)
    with pytest.raises(DataError, match="not a whole number of 3073-byte"):
        load_cifar10_dir(tmp_path)
    (tmp_path / "test_batch.bin").unlink()
    (tmp_path / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 10)), b"labels": [0, 1]}))
    with pytest.raises(DataError, match="expected \\(N, 3072\\)"):
        load_cifar10_dir(tmp_path)


def test_cifar_pickle_cannot_run_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (tmp_path / "test_batch").write_bytes(pickle.dumps({b"data": Evil()}))
    with pytest.raises(DataError, match="refusing to load builtins.print"):
        load_cifar10_dir(tmp_path)


def test_csv_table(tmp_path):
    p = tmp_path / "sales.csv"
    p.write_text("store,day,temp,target\nA,1,10.5,3.0\nB,2,12.0,4.0\nA,3,,5.0\n")
    t = read_csv_table(p)
    assert t.cat_names == ["store"] and t.cont_names == ["day", "temp"]
    assert t.cardinalities == [2] and t.categorical[:, 0].tolist() == [0, 1, 0]
    assert torch.isfinite(t.continuous).all() and t.target.shape == (3, 1)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,target\n1,2\n3\n")
    with pytest.raises(DataError, match="line 3 has 1 fields"):
        read_csv_table(bad)
    with pytest.raises(DataError, match=r"no target column 'y' \(columns: store, day, temp, target\); name the column "
                                        "to predict with -o target=NAME, e.g. -o target=target"):
        read_csv_table(p, target="y")


def test_csv_table_scales_its_continuous_columns_on_the_training_rows_alone(tmp_path):
    """The means and standard deviations were the whole file's: the held-out rows leaked into the training rows'
    scaling. Oracle: statistics' own, on the first 8 of 10 rows."""
    import statistics

    days = [1, 2, 3, 4, 5, 6, 7, 8, 50, 90]
    p = tmp_path / "sales.csv"
    p.write_text("day,target\n" + "".join(f"{d},{i}\n" for i, d in enumerate(days)))
    t = read_csv_table(p, held_out_fraction=0.2)
    mean, std = statistics.fmean(days[:8]), statistics.pstdev(days[:8])
    assert t.n_test == 2 and t.continuous[:, 0].tolist() == pytest.approx([(d - mean) / std for d in days])


def test_text_corpus(tmp_path):
    (tmp_path / "train.txt").write_text("the cat sat on the mat\n" * 30)
    streams, vocab = load_corpus(tmp_path, max_vocab=4)
    assert vocab[:2] == ["<unk>", "<eos>"] and len(vocab) == 4
    assert streams["train"].dtype == torch.int64 and len(streams["test"]) > 0
    with pytest.raises(DataError, match="no train.txt"):
        load_corpus(tmp_path / "missing", 10)


def test_tensor_batches_have_no_per_sample_python_and_cover_all():
    data = TensorData((torch.arange(10).float().unsqueeze(1),), torch.arange(10))
    seen = torch.cat([y for _, y in data.batches(3, shuffle=True, generator=torch.Generator().manual_seed(0))])
    assert sorted(seen.tolist()) == list(range(10))
    assert data.num_batches(3) == 4 and data.num_batches(3, drop_last=True) == 3


def test_corrupt_deflate_data_is_refused_with_the_file_name(tmp_path):
    good = gzip.compress(b"\x00\x00\x08\x01" + struct.pack(">I", 4000) + b"\x07" * 4000)
    broken = tmp_path / "t10k-labels-idx1-ubyte.gz"
    broken.write_bytes(good[:10] + b"\x07" + good[11:])  # a valid gzip header, then a reserved deflate block type
    with pytest.raises(zlib.error):  # what gzip itself raises for it
        gzip.decompress(broken.read_bytes())
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte.gz: cannot read .*corrupt or truncated"):
        read_idx(broken)


def test_csv_with_byte_order_mark_and_nan_cells(tmp_path):
    p = tmp_path / "excel.csv"
    p.write_bytes("\ufeffstore,temp,target\nA,10.5,3.0\nB,nan,4.0\nA,NaN,5.0\nB,12,6.0\n".encode())
    t = read_csv_table(p)  # the BOM is not part of "store"; nan cells are missing numbers, not categories
    assert t.cat_names == ["store"] and t.cont_names == ["temp"]
    assert torch.isfinite(t.continuous).all() and t.continuous[1, 0] == t.continuous[2, 0]  # both the column mean
    bad = tmp_path / "bad.csv"
    bad.write_text("x,target\n1,2\n2,nan\n")
    with pytest.raises(DataError, match="line 3 has 'nan'"):
        read_csv_table(bad)


@needs_mnist
@pytest.mark.parametrize("n, fraction, n_test", [(1000, None, 200), (1000, 0.1, 100), (37, None, 7)])
def test_a_small_single_split_trains_split_proportionally(tmp_path, n, fraction, n_test):
    from ampbench.workloads import create_workload

    x, y = load_mnist_dir(MNIST)["test"]
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", x[:n, 0].numpy())
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", y[:n].numpy().astype(np.uint8))
    wl = create_workload("mnist-cnn", "tiny", data_dir=tmp_path, val_fraction=fraction)
    assert (len(wl.train_data), len(wl.test_data)) == (n - n_test, n_test)


def test_val_fraction_is_checked(tmp_path):
    from ampbench.errors import AmpbenchError
    from ampbench.workloads import create_workload

    _mnist_dir(tmp_path)
    with pytest.raises(AmpbenchError, match="between 0 and 1"):
        create_workload("mnist-cnn", "tiny", data_dir=tmp_path, val_fraction=1.5)
    with pytest.raises(AmpbenchError, match="give --data-dir too"):
        create_workload("mnist-cnn", "tiny", val_fraction=0.3)
    with pytest.raises(AmpbenchError, match="conv-dummy does not hold out"):
        create_workload("conv-dummy", "tiny", data_dir=tmp_path, val_fraction=0.3)
    wl = create_workload("mnist-cnn", "tiny", data_dir=tmp_path, val_fraction=0.25)
    assert (len(wl.train_data), len(wl.test_data)) == (15, 5)
