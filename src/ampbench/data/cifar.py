"""CIFAR-10: the python pickle batches (cifar-10-batches-py) and the binary version (cifar-10-batches-bin).

Pickles are read with a restricted unpickler that only builds plain containers and numpy arrays,
so a malicious file cannot run code.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
import torch

from ampbench.data.errors import DataError

TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCH = "test_batch"
_RECORD = 1 + 3 * 32 * 32


class _SafeUnpickler(pickle.Unpickler):
    _ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):  # type: ignore[override]
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_pickle_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            d = _SafeUnpickler(io.BytesIO(f.read()), encoding="bytes").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as e:
        raise DataError(f"{path}: not a readable CIFAR-10 pickle batch ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict):
        raise DataError(f"{path}: expected a dict with b'data' and b'labels', got {type(d).__name__}")
    data, labels = d.get(b"data", d.get("data")), d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise DataError(f"{path}: missing b'data' or b'labels' (keys: {sorted(map(str, d))})")
    data = np.asarray(data)
    labels = np.asarray(labels, dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3072 or data.shape[0] != labels.shape[0]:
        raise DataError(f"{path}: data has shape {data.shape} for {labels.shape[0]} labels, expected (N, 3072)")
    return data.astype(np.uint8).reshape(-1, 3, 32, 32), labels


def _read_binary_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    if not raw or len(raw) % _RECORD:
        raise DataError(f"{path}: {len(raw)} bytes is not a whole number of {_RECORD}-byte CIFAR-10 records "
                        "(truncated or not CIFAR-10 binary)")
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _RECORD)
    return arr[:, 1:].reshape(-1, 3, 32, 32), arr[:, 0].astype(np.int64)


def load_cifar10_dir(data_dir: str | Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{"train"/"test": (images uint8 (N,3,32,32), labels int64)} from either distribution format."""
    data_dir = Path(data_dir)
    for sub in ("", "cifar-10-batches-py", "cifar-10-batches-bin"):
        d = data_dir / sub if sub else data_dir
        if (d / TEST_BATCH).exists() or (d / TRAIN_BATCHES[0]).exists():
            reader, suffix = _read_pickle_batch, ""
        elif (d / (TEST_BATCH + ".bin")).exists() or (d / (TRAIN_BATCHES[0] + ".bin")).exists():
            reader, suffix = _read_binary_batch, ".bin"
        else:
            continue
        out = {}
        for split, names in (("train", TRAIN_BATCHES), ("test", [TEST_BATCH])):
            parts = [reader(d / (n + suffix)) for n in names if (d / (n + suffix)).exists()]
            if parts:
                x = np.concatenate([p[0] for p in parts])
                y = np.concatenate([p[1] for p in parts])
                if y.size and (y.min() < 0 or y.max() > 9):
                    raise DataError(f"{d}: CIFAR-10 labels outside 0-9")
                out[split] = (torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y))
        return out
    raise DataError(f"{data_dir}: no CIFAR-10 batches (data_batch_1..5 / test_batch, pickle or .bin)")
