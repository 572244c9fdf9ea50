"""Images in class folders, as torchvision's ``ImageFolder`` reads them (and ImageNet, Kaggle's image sets and most
people's own photos come): ``DIR/<class>/<image>``, or ``DIR/train/<class>/...`` beside ``DIR/val/<class>/...``
(``valid``, ``validation``, ``test`` or ``testing``; ``training`` for ``train``: mnist_png's layout).

Labels are the class folders' indices in sorted order (torchvision's). Each image is decoded with Pillow (a
dependency of matplotlib, so always here), its shorter side resized to the wanted side and its centre cropped to the
wanted shape -- torchvision's evaluation transform, ``Resize`` then ``CenterCrop``, which keeps the aspect ratio --
and held as uint8 (N, C, H, W); grey images become RGB where the wanted shape has 3 channels, and RGB images grey
where it has 1. Without a wanted shape the images' own is taken where they all share one (else one line asks for
``--input-shape C,H,W``).

The decoded images are held in memory: a folder holding more than :data:`MAX_IMAGE_BYTES` of them at the wanted
shape (ImageNet's 1.28M images at 224 px are 193 GB) is read as a seeded sample of its files, drawn from every split in
proportion, and the data says how many of how many it read.

Decoded once, read many times: every cell of a run builds its workload in its own process, and each max-batch trial
too -- 500x375 JPEGs decoded at 224 px in 2.9 ms each on this project's 2-core CPU: a 1 GiB sample (~7,100 images)
is ~20 s, each time. The decoded arrays are kept in ``$XDG_CACHE_HOME/ampbench/imagefolders/`` (default
``~/.cache``) under the key of what they were decoded from (the folder, every file's path, size and modification
time, the shape, the seed and the sample's budget): a file changed, added or removed is a new key. The
:data:`CACHE_KEEP` most recently used are kept.

Why not torchvision's ``ImageFolder``: torchvision is no dependency here (nor is it on every machine ampbench runs
on), and the harness trains from tensors held on the device (:class:`~ampbench.data.tensors.TensorData`), not a
DataLoader; the layout and the label order are torchvision's.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ampbench.data.errors import DataError
from ampbench.data.splits import classification_splits
from ampbench.data.tensors import TensorData

EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
"""Image files (torchvision's ``IMG_EXTENSIONS`` less the rare ``.ppm``/``.pgm``), any case."""
TRAIN_NAMES = ("train", "training")
TEST_NAMES = ("val", "valid", "validation", "test", "testing")
MAX_IMAGE_BYTES = 1 * 2**30
"""Decoded images held at most (uint8 at the wanted shape); past it a seeded sample of the files is read."""
CACHE_KEEP = 4
"""Decoded folders kept in the cache (the most recently used)."""
CACHE_VERSION = 1
"""Part of every cache key: a change of how images are decoded (resize, crop, channels) bumps it."""


@dataclass
class ImageFolder:
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]
    """{"train"[, "test"]: (uint8 images (N, C, H, W), int64 labels)}; one split when the folder holds one."""
    classes: list[str]
    found: int
    """Image files in the folder (every split)."""

    @property
    def read(self) -> int:
        return sum(len(y) for _, y in self.splits.values())

    def describe(self, data_dir: Path) -> str:
        c, h, w = next(iter(self.splits.values()))[0].shape[1:]
        sample = f"{self.read:,} of {self.found:,} images (a seeded sample)" if self.read < self.found else \
            f"{self.read:,} images"
        return f"{sample} of {len(self.classes)} classes from {data_dir}, at {c}x{h}x{w}"


def is_image_folder(data_dir: Path) -> bool:
    """Whether ``data_dir`` is laid out as class folders of images (either layout)."""
    try:
        return _layout(data_dir) is not None
    except DataError:
        return True  # (it is laid out so, and something in it is wrong: the read says what)


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in EXTENSIONS and p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def _class_folders(folder: Path) -> list[Path]:
    """The class folders: not hidden, nor a zip's ``__MACOSX`` (its ``._x.jpg`` files are no images)."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "__MACOSX")


def _layout(data_dir: Path) -> dict[str, Path] | None:
    """{"train": folder[, "test": folder]} of class folders, or None where ``data_dir`` is not laid out so."""
    if not data_dir.is_dir():
        return None
    train = next((data_dir / n for n in TRAIN_NAMES if (data_dir / n).is_dir()), None)
    test = next((data_dir / n for n in TEST_NAMES if (data_dir / n).is_dir()), None)
    if train is not None:
        if not any(_images_in(c) for c in _class_folders(train)):
            raise DataError(f"{train}: no class folders of images ({', '.join(EXTENSIONS)}) in it; lay it out as "
                            f"{train.name}/<class>/<image>")
        return {"train": train, **({"test": test} if test is not None else {})}
    folders = _class_folders(data_dir)
    if folders and any(p.suffix.lower() in EXTENSIONS for c in folders[:3] for p in c.iterdir()) \
            and any(_images_in(c) for c in folders):
        return {"train": data_dir}
    return None


def _pil() -> Any:
    try:
        return importlib.import_module("PIL.Image")
    except ImportError:  # pragma: no cover  (a dependency of matplotlib)
        raise DataError("reading image folders needs Pillow (pip install pillow)") from None


def _opened(image_mod: Any, path: Path) -> Any:
    try:
        return image_mod.open(path)
    except Exception as e:  # (PIL raises UnidentifiedImageError, OSError, SyntaxError for what it cannot read)
        raise DataError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None


def _short(path: Path) -> str:
    """An image as its class folder and name (``daisy/3.jpg``)."""
    return f"{path.parent.name}/{path.name}"


def _shape_of(image_mod: Any, files: list[Path]) -> tuple[int, int, int]:
    """The images' own (C, H, W) where ``files`` share a size (their headers read, not their pixels): 1 channel where
    every one is grey, else 3. (The images read after are held to that size as they are decoded.)"""
    sizes: dict[tuple[int, int], Path] = {}
    grey = True
    for f in files:
        with _opened(image_mod, f) as im:
            sizes.setdefault(im.size, f)
            grey = grey and im.mode in ("1", "L", "I", "I;16", "I;16B", "I;16L", "F")
        if len(sizes) > 1:
            (a, fa), (b, fb) = list(sizes.items())[:2]
            raise DataError(f"the images differ in size ({a[0]}x{a[1]} in {_short(fa)}, {b[0]}x{b[1]} in {_short(fb)}): give "
                            "--input-shape C,H,W to resize and centre-crop them to one (e.g. 3,224,224)")
    (w, h), = sizes
    return 1 if grey else 3, h, w


def _decode(image_mod: Any, path: Path, shape: tuple[int, int, int], own: Path | None = None) -> np.ndarray:
    """``path`` as uint8 (C, H, W): its shorter side resized to fit (H, W), its centre cropped to it. ``own``: the
    shape is the images' own, read from that file -- one of another size is refused, not resized."""
    c, h, w = shape
    with _opened(image_mod, path) as im:
        if own is not None and im.size != (w, h):
            raise DataError(f"the images differ in size ({w}x{h} in {_short(own)}, {im.width}x{im.height} in {_short(path)}): "
                            "give --input-shape C,H,W to resize and centre-crop them to one (e.g. 3,224,224)")
        try:
            scale = max(h / im.height, w / im.width)
            size = (max(w, round(im.width * scale)), max(h, round(im.height * scale)))
            im.draft("L" if c == 1 else "RGB", size)  # (a JPEG decoded at a reduced scale where it is far larger)
            im = eight_bit(image_mod, im).convert("L" if c == 1 else "RGB")
            scale = max(h / im.height, w / im.width)
            size = (max(w, round(im.width * scale)), max(h, round(im.height * scale)))
            if size != im.size:
                im = im.resize(size, image_mod.Resampling.BILINEAR)
            left, top = (im.width - w) // 2, (im.height - h) // 2
            arr = np.asarray(im.crop((left, top, left + w, top + h)), dtype=np.uint8)
        except DataError:
            raise
        except Exception as e:  # (a truncated or corrupt file fails when its pixels are read)
            raise DataError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None
    return arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)


def eight_bit(image_mod: Any, im: Any) -> Any:
    """A 16-bit or float grey image as 8-bit grey, its range scaled (Pillow's own conversion clips: a 16-bit PNG, as
    medical and microscope images come, read all white); other images as they are."""
    if im.mode not in ("I;16", "I;16B", "I;16L", "I", "F"):
        return im
    a = np.asarray(im, dtype=np.float64)
    top = 1.0 if im.mode == "F" and a.max(initial=0.0) <= 1.0 else \
        255.0 if a.max(initial=0.0) <= 255 else 65535.0 if im.mode.startswith("I;16") or a.max() <= 65535 else a.max()
    return image_mod.fromarray(np.clip(np.rint(a * (255.0 / top)), 0, 255).astype(np.uint8), "L")


def load_image_folder(data_dir: str | Path, shape: tuple[int, ...] | None = None, seed: int = 0,
                      max_bytes: int = MAX_IMAGE_BYTES) -> ImageFolder:
    """The class folders of ``data_dir`` as uint8 images at ``shape`` (C, H, W; C 1 or 3; None: the images' own), a
    seeded sample of them where all would pass ``max_bytes``. A single split comes shuffled (seeded): the split
    held out of it is then a sample of every class, not the last classes."""
    data_dir = Path(data_dir)
    layout = _layout(data_dir)
    if layout is None:
        raise DataError(f"{data_dir}: no class folders of images (<class>/<image>, or train/<class>/<image> beside "
                        "val/<class>/<image>)")
    if shape is not None and (len(shape) != 3 or shape[0] not in (1, 3)):
        raise DataError(f"--input-shape {','.join(map(str, shape))}: images from class folders are C,H,W with C 1 "
                        "(grey) or 3 (RGB), e.g. 3,224,224")
    listed = {split: {c: _images_in(c) for c in _class_folders(folder)} for split, folder in layout.items()}
    classes = [c.name for c in listed["train"]]
    empty = next((c for c, images in listed["train"].items() if not images), None)
    if empty is not None:  # (torchvision refuses it too: skipped, it would shift every later class's label)
        raise DataError(f"{empty}: a class folder with no images ({', '.join(EXTENSIONS)}); add its images or remove "
                        "it (labels are the class folders' indices in sorted order)")
    index = {c: i for i, c in enumerate(classes)}
    files: dict[str, list[tuple[Path, int]]] = {}
    for split, folder in layout.items():
        files[split] = []
        for c, images in listed[split].items():
            if not images:
                continue
            if c.name not in index:
                raise DataError(f"{c}: class {c.name!r} is not one of {layout['train']}'s classes "
                                f"({', '.join(classes[:8])}{', ...' if len(classes) > 8 else ''})")
            files[split] += [(p, index[c.name]) for p in images]
        if not files[split]:
            raise DataError(f"{folder}: no images in its class folders")
    rng = random.Random(seed)
    for split in files:
        rng.shuffle(files[split])  # (one split: the held-out part a sample of every class; a sample: drawn fairly)
    found = sum(len(f) for f in files.values())
    key = _cache_key(data_dir, files, shape, seed, max_bytes)
    cached = _cached(key, classes, found)
    if cached is not None:
        return cached
    image_mod = _pil()
    first = files["train"][0][0]
    own = None if shape is not None else first
    shape = tuple(shape) if shape is not None else _shape_of(image_mod, [p for f in files.values() for p, _ in f][:512])
    per_image = int(np.prod(shape))
    keep = max(max_bytes // per_image, 2 * len(files))
    if found > keep:  # (every split in proportion to its files, at least one each)
        files = {s: f[:max(1, len(f) * keep // found)] for s, f in files.items()}
    splits = {}
    for split, f in files.items():
        x = np.stack([_decode(image_mod, p, shape, own) for p, _ in f])
        splits[split] = (torch.from_numpy(np.ascontiguousarray(x)), torch.tensor([y for _, y in f], dtype=torch.int64))
    folder = ImageFolder(splits, classes, found)
    _keep(key, folder)
    return folder


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ampbench" / "imagefolders"


def _cache_key(data_dir: Path, files: dict[str, list[tuple[Path, int]]], shape: tuple[int, ...] | None, seed: int,
               max_bytes: int) -> str:
    listed = [[split, str(p.relative_to(data_dir)), st.st_size, st.st_mtime_ns, label]
              for split, f in sorted(files.items()) for p, label in f for st in (p.stat(),)]
    what = [CACHE_VERSION, str(data_dir.resolve()), list(shape) if shape else None, seed, max_bytes, listed]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:32]


def _cached(key: str, classes: list[str], found: int) -> ImageFolder | None:
    """The folder decoded under ``key`` before, or None (none, or a cache file that does not read: removed)."""
    path = cache_dir() / f"{key}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            splits = {s: (torch.from_numpy(np.ascontiguousarray(z[f"{s}_x"])), torch.from_numpy(z[f"{s}_y"]))
                      for s in ("train", "test") if f"{s}_x" in z}
            same = list(z["classes"]) == classes
    except Exception:  # (a cache file cut short by a kill, or damaged: decoded again)
        path.unlink(missing_ok=True)
        return None
    if not same or "train" not in splits:
        return None
    os.utime(path)  # (used: kept over the older ones)
    return ImageFolder(splits, classes, found)


def _keep(key: str, folder: ImageFolder) -> None:
    """``folder`` written under ``key`` (through a temporary file, renamed: a kill never leaves half of one), the
    :data:`CACHE_KEEP` most recently used kept. A cache that cannot be written is no error: the next read decodes."""
    d = cache_dir()
    tmp = d / f"{key}.{os.getpid()}.tmp.npz"
    try:
        d.mkdir(parents=True, exist_ok=True)
        arrays = {f"{s}_{k}": t.numpy() for s, (x, y) in folder.splits.items() for k, t in (("x", x), ("y", y))}
        np.savez(tmp, classes=np.array(folder.classes), **arrays)
        tmp.replace(d / f"{key}.npz")
        kept = sorted(d.glob("*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[CACHE_KEEP:]:
            if not old.name.endswith(".tmp.npz"):
                old.unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)


def folder_splits(data_dir: str | Path, shape: tuple[int, ...] | None, val_fraction: float | None = None,
                  classes: int | None = None, head: str = "the model's head", more: str = ""
                  ) -> tuple[TensorData, TensorData, str]:
    """(train, test, what they are) of the class folders in ``data_dir`` at ``shape``: its train and val folders, or
    its one split cut by ``val_fraction`` (:func:`~ampbench.data.splits.classification_splits`); at most ``classes``
    (the ``head``'s, ``more`` said after) where a model's head is fixed."""
    folder = load_image_folder(data_dir, shape)
    if classes is not None and len(folder.classes) > classes:
        raise DataError(f"{data_dir} has {len(folder.classes)} classes; {head} has {classes}{more}")
    train, test = classification_splits(Path(data_dir), lambda _: folder.splits, val_fraction)  # type: ignore[misc]
    return train, test, folder.describe(Path(data_dir))
