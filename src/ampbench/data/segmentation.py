"""Segmentation pairs from a folder: ``images/`` and ``masks/``, matched by file name (without extension).

Formats: ``.npy`` always (images (H, W), (H, W, C) or (C, H, W) -- channels first where the last side is not 1, 3
or 4 --, uint8 or float in [0, 1]; masks (H, W) integer class ids), ``.png`` when Pillow is installed (images grey
or RGB -- a 16-bit grey image scaled to 8 bits by its depth --, masks grey or palette = class ids).
A mask file that only holds 0 and 255 (a binary mask saved as an image) is read as classes 0 and 1. Every
image must have the size and channels of the first, every mask its image's size; a corrupt or
truncated file is a one-line :class:`DataError` naming it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ampbench.data.errors import DataError
from ampbench.data.imagefolder import eight_bit

EXTENSIONS = (".png", ".npy")
CHANNELS = (1, 3, 4)
"""An image's channel counts: grey, RGB, RGBA."""


@dataclass
class Segmentation:
    images: torch.Tensor  # (N, C, H, W) uint8
    masks: torch.Tensor  # (N, H, W) int64 class ids
    classes: int
    names: list[str]


def _files(folder: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.suffix.lower() in EXTENSIONS and p.is_file():
            if p.stem in out:
                raise DataError(f"{folder}: two files named {p.stem} ({out[p.stem].name}, {p.name}); keep one")
            out[p.stem] = p
    return out


def _png(path: Path, mask: bool) -> np.ndarray:
    try:
        image_mod = importlib.import_module("PIL.Image")
    except ImportError:
        raise DataError(f"{path}: reading PNG needs Pillow (pip install pillow), or save the arrays as .npy") from None
    try:
        with image_mod.open(path) as im:
            im.load()
            if mask:
                if im.mode not in ("L", "P", "I", "I;16", "1"):
                    raise DataError(f"{path}: a mask must be a grey or palette image of class ids, not mode {im.mode}")
                return np.asarray(im.convert("I") if im.mode in ("I;16", "1") else im)
            im = eight_bit(image_mod, im)  # (a 16-bit grey image: Pillow's conversion read it all white)
            return np.asarray(im if im.mode in ("L", "RGB") else im.convert("RGB"))
    except DataError:
        raise
    except Exception as e:  # PIL raises OSError / SyntaxError / ValueError for corrupt or truncated files
        raise DataError(f"{path}: cannot read as PNG ({type(e).__name__}: {e})") from None


def _npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:  # ValueError / OSError / EOFError for corrupt or truncated files
        raise DataError(f"{path}: cannot read as .npy ({type(e).__name__}: {e})") from None


def _read(path: Path, mask: bool) -> np.ndarray:
    return _png(path, mask) if path.suffix.lower() == ".png" else _npy(path)


def _image(path: Path) -> np.ndarray:
    a = _read(path, mask=False)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim == 3 and a.shape[0] in CHANNELS and a.shape[2] not in CHANNELS:
        a = a.transpose(1, 2, 0)  # (C, H, W), as a PyTorch pipeline saves its arrays
    if a.ndim != 3 or a.shape[2] not in CHANNELS:
        raise DataError(f"{path}: an image must be (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4; got shape "
                        f"{a.shape}")
    if a.dtype == np.uint8:
        return a
    if np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all() or a.min() < 0 or a.max() > 1:
            raise DataError(f"{path}: a float image must hold values in [0, 1]")
        return np.round(a * 255).astype(np.uint8)
    raise DataError(f"{path}: image dtype {a.dtype}; use uint8, or float in [0, 1]")


def _mask(path: Path) -> np.ndarray:
    a = _read(path, mask=True)
    if a.ndim != 2:
        raise DataError(f"{path}: a mask must be (H, W) class ids; got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise DataError(f"{path}: mask dtype {a.dtype}; use integer class ids")
    a = a.astype(np.int64)
    if a.size and a.min() < 0:
        raise DataError(f"{path}: mask has negative class ids")
    if a.size and a.max() == 255 and np.isin(a, (0, 255)).all():
        a = a // 255  # a binary mask saved as an image
    return a


def load_segmentation_dir(data_dir: str | Path, multiple_of: int = 1) -> Segmentation:
    """All pairs of ``data_dir/images`` and ``data_dir/masks``; sides must be multiples of ``multiple_of``."""
    data_dir = Path(data_dir)
    img_dir, mask_dir = data_dir / "images", data_dir / "masks"
    if not img_dir.is_dir() or not mask_dir.is_dir():
        raise DataError(f"{data_dir}: expected images/ and masks/ folders (files matched by name, .png or .npy)")
    images, masks = _files(img_dir), _files(mask_dir)
    if not images:
        raise DataError(f"{img_dir}: no .png or .npy files")
    missing = sorted(set(images) - set(masks))
    extra = sorted(set(masks) - set(images))
    if missing or extra:
        what = [f"no mask for {', '.join(missing[:5])}" if missing else "",
                f"no image for mask {', '.join(extra[:5])}" if extra else ""]
        raise DataError(f"{data_dir}: images and masks must match by name: {'; '.join(w for w in what if w)}")
    xs, ys = [], []
    first: tuple[int, ...] | None = None
    for name in images:
        x, y = _image(images[name]), _mask(masks[name])
        if first is None:
            first = x.shape
            h, w = x.shape[:2]
            if h % multiple_of or w % multiple_of:
                raise DataError(f"{images[name]}: {h}x{w} pixels; this model needs sides divisible by {multiple_of} "
                                f"(crop or resize to e.g. {h // multiple_of * multiple_of or multiple_of}x"
                                f"{w // multiple_of * multiple_of or multiple_of})")
        elif x.shape != first:
            raise DataError(f"{images[name]}: shape {x.shape} differs from the first image's {first}; all images "
                            "must have one size and channel count")
        if y.shape != x.shape[:2]:
            raise DataError(f"{masks[name]}: mask {y.shape[0]}x{y.shape[1]} does not match its image "
                            f"{x.shape[0]}x{x.shape[1]}")
        xs.append(x)
        ys.append(y)
    mask = torch.from_numpy(np.stack(ys))
    classes = max(int(mask.max()) + 1, 2)
    if classes > 256:
        raise DataError(f"{mask_dir}: class id {classes - 1} is implausibly large (at most 255); masks hold class ids")
    images_t = torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).contiguous()
    return Segmentation(images_t, mask, classes, list(images))
