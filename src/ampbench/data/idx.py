"""MNIST / Fashion-MNIST IDX files (``.gz`` or raw), parsed and checked fully.

Format (LeCun's page): magic = 0x00 0x00 <dtype code> <ndim>, then ndim big-endian uint32 sizes,
then the data, row-major. We check the magic, the dtype code, the number of dims expected for
images (3) or labels (1), and that the payload is exactly as long as the header says.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from ampbench.data.errors import DataError

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

# (images, labels) file name stems for each split, as distributed.
SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:  # zlib.error: corrupt deflate data
        raise DataError(f"{path}: cannot read ({type(e).__name__}: {e}); the file is corrupt or truncated") from None


def read_idx(path: str | Path, expect_ndim: int | None = None) -> np.ndarray:
    """Read one IDX file into a numpy array; DataError naming the file on any inconsistency."""
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise DataError(f"{path}: {len(raw)} bytes, too short for an IDX header")
    zero1, zero2, code, ndim = raw[0], raw[1], raw[2], raw[3]
    if zero1 or zero2 or code not in _DTYPES:
        raise DataError(
            f"{path}: bad IDX magic {raw[:4].hex()} (expected 0000 + dtype code 08/09/0b/0c/0d/0e + ndim)"
        )
    if expect_ndim is not None and ndim != expect_ndim:
        raise DataError(f"{path}: IDX file has {ndim} dims, expected {expect_ndim}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: truncated IDX header ({len(raw)} bytes, need {header})")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(_DTYPES[code])
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    payload = len(raw) - header
    if payload != expected:
        what = "truncated" if payload < expected else "has trailing bytes"
        raise DataError(f"{path}: {what}: header says {'x'.join(map(str, dims))} "
                        f"({expected} bytes of data), file holds {payload}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)


def _find(data_dir: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz", stem.replace("-idx", ".idx")):
        if (data_dir / name).exists():
            return data_dir / name
    return None


def load_mnist_dir(data_dir: str | Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Splits found in ``data_dir``: {"train"/"test": (images uint8 (N,1,28,28), labels int64 (N,))}."""
    data_dir = Path(data_dir)
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for split, (img_stem, lbl_stem) in SPLITS.items():
        img_path, lbl_path = _find(data_dir, img_stem), _find(data_dir, lbl_stem)
        if img_path is None and lbl_path is None:
            continue
        if img_path is None or lbl_path is None:
            missing = img_stem if img_path is None else lbl_stem
            raise DataError(f"{data_dir}: found one file of the {split} split but not {missing}[.gz]")
        images = read_idx(img_path, expect_ndim=3)
        labels = read_idx(lbl_path, expect_ndim=1)
        if images.shape[0] != labels.shape[0]:
            raise DataError(f"{img_path} holds {images.shape[0]} images but {lbl_path} {labels.shape[0]} labels")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise DataError(f"{lbl_path}: labels outside 0-9 (min {labels.min()}, max {labels.max()})")
        out[split] = (
            torch.from_numpy(images.copy()).unsqueeze(1),  # (N, 1, H, W) uint8
            torch.from_numpy(labels.astype(np.int64)),
        )
    if not out:
        raise DataError(
            f"{data_dir}: no MNIST IDX files (expected {SPLITS['train'][0]}[.gz] and/or {SPLITS['test'][0]}[.gz])"
        )
    return out
