"""Class folders of images (torchvision's ImageFolder layout): labels, pixels, resizing, sampling, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ampbench.data.errors import DataError
from ampbench.data.imagefolder import is_image_folder, load_image_folder

COLOURS = {"cat": (200, 30, 30), "dog": (30, 200, 30), "fox": (30, 30, 200)}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own decoded-image cache (the folders of one test are not another's)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path.parent / f"{tmp_path.name}-cache"))  # (not in a data folder)


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _solid(h: int, w: int, colour: tuple[int, int, int]) -> np.ndarray:
    return np.broadcast_to(np.array(colour, np.uint8), (h, w, 3)).copy()


def _folder(root: Path, counts: dict[str, int], split: str | None = None, size: tuple[int, int] = (12, 16)) -> Path:
    for name, n in counts.items():
        for i in range(n):
            _save(root / (split or "") / name / f"{i}.png", _solid(*size, COLOURS[name]))
    return root


def test_train_and_val_folders_give_sorted_class_labels_and_exact_pixels(tmp_path: Path) -> None:
    _folder(tmp_path, {"dog": 3, "cat": 2, "fox": 4}, "train")
    _folder(tmp_path, {"cat": 1, "fox": 2}, "val")
    (tmp_path / "train" / ".ipynb_checkpoints").mkdir()  # (hidden: not a class)
    _save(tmp_path / "train" / ".ipynb_checkpoints" / "x.png", _solid(12, 16, (0, 0, 0)))
    assert is_image_folder(tmp_path)
    f = load_image_folder(tmp_path)
    assert f.classes == ["cat", "dog", "fox"]  # (sorted: torchvision's label order)
    x, y = f.splits["train"]
    assert x.dtype == torch.uint8 and tuple(x.shape) == (9, 3, 12, 16)
    assert torch.bincount(y).tolist() == [2, 3, 4]
    assert torch.bincount(f.splits["test"][1], minlength=3).tolist() == [1, 0, 2]
    for image, label in zip(x, y):  # (PNG is lossless: each image is its class's colour)
        colour = COLOURS[f.classes[int(label)]]
        assert torch.equal(image, torch.tensor(colour, dtype=torch.uint8)[:, None, None].expand(3, 12, 16))
    assert f.read == f.found == 12 and f.describe(tmp_path).startswith("12 images of 3 classes")


def test_the_shorter_side_is_resized_and_the_centre_cropped(tmp_path: Path) -> None:
    """A 60x20 image of three 20-pixel columns (red, green, blue) at 3,20,20: no resize (its shorter side is 20), the
    centre crop is the green block; at 3,10,10 the side halves and the crop is still green."""
    a = np.zeros((20, 60, 3), np.uint8)
    a[:, :20, 0] = a[:, 20:40, 1] = a[:, 40:, 2] = 255
    _save(tmp_path / "a" / "0.png", a)
    _save(tmp_path / "b" / "0.png", a)
    for side in (20, 10):
        x, _ = load_image_folder(tmp_path, (3, side, side)).splits["train"]
        inner = x[:, :, :, 1:-1]  # (bilinear: the columns at the block's edges blend)
        assert inner[:, 1].min() == 255 and inner[:, 0].max() == 0 and inner[:, 2].max() == 0


def test_channels_follow_the_images_or_the_shape_asked(tmp_path: Path) -> None:
    for i in range(2):
        _save(tmp_path / "a" / f"{i}.png", np.full((8, 8), 100, np.uint8))
        _save(tmp_path / "b" / f"{i}.png", np.full((8, 8), 200, np.uint8))
    grey = load_image_folder(tmp_path).splits["train"][0]
    assert tuple(grey.shape[1:]) == (1, 8, 8) and sorted(grey.flatten().unique().tolist()) == [100, 200]
    rgb = load_image_folder(tmp_path, (3, 8, 8)).splits["train"][0]
    assert tuple(rgb.shape[1:]) == (3, 8, 8) and torch.equal(rgb[:, 0], rgb[:, 2])  # (grey as RGB: equal channels)
    _save(tmp_path / "b" / "2.png", _solid(8, 8, (10, 20, 30)))
    assert load_image_folder(tmp_path).splits["train"][0].shape[1] == 3  # (one colour image: all RGB)


def test_images_of_different_sizes_need_a_shape(tmp_path: Path) -> None:
    _save(tmp_path / "a" / "0.png", _solid(10, 12, (1, 2, 3)))
    _save(tmp_path / "b" / "0.png", _solid(14, 12, (1, 2, 3)))
    with pytest.raises(DataError, match=r"the images differ in size \(12x1[04] in [ab]/0.png, 12x1[04] in [ab]/0.png\): "
                                        r"give --input-shape C,H,W"):
        load_image_folder(tmp_path)
    assert tuple(load_image_folder(tmp_path, (3, 6, 6)).splits["train"][0].shape) == (2, 3, 6, 6)
    with pytest.raises(DataError, match="C,H,W with C 1 \\(grey\\) or 3"):
        load_image_folder(tmp_path, (4, 6, 6))


def test_a_folder_past_the_memory_cap_is_read_as_a_seeded_sample_of_every_split(tmp_path: Path) -> None:
    _folder(tmp_path, {"cat": 20, "dog": 20}, "train", size=(4, 4))
    _folder(tmp_path, {"cat": 5, "dog": 5}, "val", size=(4, 4))
    budget = 10 * 3 * 4 * 4  # (ten images)
    a, b = (load_image_folder(tmp_path, max_bytes=budget) for _ in range(2))
    assert a.found == 50 and a.read == 8 + 2 < a.found  # (each split in proportion: 40 x 10 // 50, 10 x 10 // 50)
    assert torch.equal(a.splits["train"][1], b.splits["train"][1])  # (seeded)
    assert "10 of 50 images (a seeded sample)" in a.describe(tmp_path)


def test_one_split_comes_shuffled_so_the_held_out_part_holds_every_class(tmp_path: Path) -> None:
    from ampbench.data.splits import classification_splits

    _folder(tmp_path, {"cat": 10, "dog": 10, "fox": 10})
    f = load_image_folder(tmp_path)
    assert set(f.splits) == {"train"}
    _, test = classification_splits(tmp_path, lambda _: f.splits, 0.2)
    assert len(test) == 6 and len(set(test.targets.tolist())) >= 2  # (sorted, the last 6 were all "fox")


@pytest.mark.parametrize("make, said", [
    (lambda root: (root / "a").mkdir() or (root / "a" / "0.png").write_bytes(b"\x89PNG not really"),
     "a/0.png: not a readable image"),
    (lambda root: _save(root / "val" / "wolf" / "0.png", _solid(4, 4, (0, 0, 0))),
     "class 'wolf' is not one of"),
])
def test_bad_folders_are_one_line_naming_the_file(tmp_path: Path, make, said) -> None:
    _folder(tmp_path, {"cat": 2, "dog": 2}, "train" if "wolf" in said else None, size=(4, 4))
    make(tmp_path)
    with pytest.raises(DataError, match=said):
        load_image_folder(tmp_path)


def test_a_user_model_and_resnet50_train_on_a_folder(tmp_path: Path) -> None:
    from torch import nn

    from ampbench.errors import AmpbenchError
    from ampbench.workloads import build_target
    from ampbench.workloads.data_options import DataOptions
    from ampbench.workloads.tasks import DataSpec
    from ampbench.workloads.user import build_module_workload

    pets = _folder(tmp_path / "pets", {"cat": 6, "dog": 6, "fox": 6})
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 12 * 16, 3))
    wl = build_module_workload(model, "m.py:f", DataSpec(), data_dir=pets, val_fraction=0.5)
    assert len(wl.train_data) == len(wl.test_data) == 9 and "18 images of 3 classes" in wl.description
    pooled = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(12, 3))
    small = build_module_workload(pooled, "m.py:f", DataSpec.of("3,8,8", None, None, None, None), data_dir=pets)
    assert tuple(small.train_data.inputs[0].shape[1:]) == (3, 8, 8)  # (--input-shape: resized to it)
    resnet = build_target("resnet50", None, "tiny", DataOptions(data_dir=str(pets)))
    assert tuple(resnet.train_data.inputs[0].shape[1:]) == (3, 32, 32) and "3 classes" in resnet.description
    many = tmp_path / "many"
    for i in range(11):
        _save(many / f"c{i}" / "0.png", _solid(12, 16, (i, i, i)))
    with pytest.raises(AmpbenchError, match="has 11 classes; resnet50's head at preset tiny has 10"):
        build_target("resnet50", None, "tiny", DataOptions(data_dir=str(many)))


def test_a_folder_is_decoded_once_and_again_only_when_a_file_changes(tmp_path: Path, monkeypatch) -> None:
    """Every cell (and max-batch trial) builds its workload in a process of its own: each decoded the folder again."""
    from ampbench.data import imagefolder

    root = _folder(tmp_path / "pets", {"cat": 3, "dog": 3})
    decoded: list[Path] = []
    real = imagefolder._decode
    monkeypatch.setattr(imagefolder, "_decode", lambda image_mod, path, *a: decoded.append(path) or real(image_mod, path, *a))
    first = load_image_folder(root, (3, 8, 8))
    assert len(decoded) == 6
    again = load_image_folder(root, (3, 8, 8))
    assert len(decoded) == 6  # (from the cache)
    for split in first.splits:
        assert all(torch.equal(a, b) for a, b in zip(first.splits[split], again.splits[split]))
    assert again.classes == first.classes and again.found == first.found
    _save(root / "dog" / "0.png", _solid(12, 16, (1, 2, 3)))  # (a file changed: decoded again)
    changed = load_image_folder(root, (3, 8, 8))
    assert len(decoded) == 12 and not torch.equal(changed.splits["train"][0], first.splits["train"][0])
    load_image_folder(root, (3, 4, 4))  # (another shape: another key)
    assert len(decoded) == 18


def test_a_damaged_cache_is_decoded_again_and_only_the_latest_are_kept(tmp_path: Path, monkeypatch) -> None:
    from ampbench.data import imagefolder

    root = _folder(tmp_path / "pets", {"cat": 2, "dog": 2})
    load_image_folder(root, (3, 8, 8))
    (cached,) = imagefolder.cache_dir().glob("*.npz")
    cached.write_bytes(cached.read_bytes()[:100])  # (cut short, as by a kill mid-write of an older version)
    assert load_image_folder(root, (3, 8, 8)).read == 4
    for side in range(2, 2 + imagefolder.CACHE_KEEP + 2):
        load_image_folder(root, (3, side, side))
    assert len(list(imagefolder.cache_dir().glob("*.npz"))) == imagefolder.CACHE_KEEP
    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(imagefolder.np, "savez", full)  # (a cache that cannot be written: no error)
    assert load_image_folder(root, (3, 9, 9)).read == 4
    assert not list(imagefolder.cache_dir().glob("*.tmp.npz"))


def test_a_16_bit_grey_image_keeps_its_range(tmp_path: Path) -> None:
    """Pillow's conversion of a 16-bit PNG to 8 bits clips: a microscope's or a scanner's images read all white."""
    ramp = (np.arange(16 * 16).reshape(16, 16) * 256).astype(np.uint16)  # (0 .. 65280)
    for name in ("a", "b"):
        _save(tmp_path / name / "0.png", ramp)
    x, _ = load_image_folder(tmp_path).splits["train"]
    assert tuple(x.shape[1:]) == (1, 16, 16)
    assert torch.equal(x[0, 0], torch.from_numpy(np.rint(ramp / 257.0).astype(np.uint8)))


def test_mnist_cnn_and_resnext_read_class_folders_at_their_own_shape(tmp_path: Path) -> None:
    """mnist_png's layout (training/<digit>/*.png beside testing/<digit>/*.png) for mnist-cnn, a folder of CIFAR
    PNGs for resnext: each model's own input shape, its head's classes at most."""
    from ampbench.errors import AmpbenchError
    from ampbench.workloads import create_workload

    for split, n in (("training", 4), ("testing", 2)):
        for digit in range(3):
            for i in range(n):
                _save(tmp_path / "mnist_png" / split / str(digit) / f"{i}.png", np.full((28, 28), 80 * digit, np.uint8))
    mnist = create_workload("mnist-cnn", "tiny", tmp_path / "mnist_png")
    x, y = mnist.train_data.inputs[0], mnist.train_data.targets
    assert tuple(x.shape) == (12, 1, 28, 28) and len(mnist.test_data) == 6
    assert all(int(img.max()) == 80 * int(label) for img, label in zip(x, y))  # (each digit's grey, its label)
    cifar = _folder(tmp_path / "cifar", {"cat": 3, "dog": 3}, size=(40, 40))
    resnext = create_workload("resnext", "tiny", cifar)
    assert tuple(resnext.train_data.inputs[0].shape[1:]) == (3, 32, 32)
    for k in range(11):
        _save(tmp_path / "many" / f"c{k}" / "0.png", _solid(32, 32, (k, k, k)))
    with pytest.raises(AmpbenchError, match="has 11 classes; the model's head has 10"):
        create_workload("resnext", "tiny", tmp_path / "many")


def test_an_empty_class_folder_is_refused_and_a_zips_mac_folder_ignored(tmp_path: Path) -> None:
    """An empty class skipped would shift every later class's label (torchvision refuses it); macOS zips carry
    __MACOSX/<class>/._<image> resource forks, no images."""
    root = _folder(tmp_path / "a", {"cat": 2, "dog": 2})
    (root / "__MACOSX" / "cat").mkdir(parents=True)
    (root / "__MACOSX" / "cat" / "._0.png").write_bytes(b"\x00\x05\x16\x07 not an image")
    assert load_image_folder(root).classes == ["cat", "dog"]
    (root / "bird").mkdir()
    (root / "bird" / "notes.txt").write_text("no images yet")
    with pytest.raises(DataError, match="bird: a class folder with no images"):
        load_image_folder(root)
