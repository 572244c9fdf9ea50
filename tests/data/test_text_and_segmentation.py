"""Readers beyond images: text classification CSVs (word/byte/bpe tokenizers), segmentation folders, a text
corpus for user LMs; every one on small files the tests write, corrupt ones included (one line, the file named)."""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ampbench.data.errors import DataError
from ampbench.data.segmentation import load_segmentation_dir
from ampbench.data.textcsv import CLS, PAD, UNK, load_text_classification, read_text_csv
from ampbench.errors import AmpbenchError
from ampbench.frameworks.torch.train import TrainConfig, train
from ampbench.workloads import create_user_workload, create_workload

M = str(Path(__file__).parents[1] / "workloads" / "user_models.py")
POS, NEG = ["love", "great", "happy", "awesome"], ["hate", "awful", "sad", "terrible"]
FILLER = ["the", "a", "today", "my", "this", "movie", "day", "was", "so", "really"]


def write_tweets(path: Path, n: int = 120, label_col: str = "sentiment", seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", label_col])
        for i in range(n):
            label = ["negative", "positive"][i % 2]
            words = list(rng.choice(FILLER, 6)) + list(rng.choice(POS if i % 2 else NEG, 2))
            rng.shuffle(words)
            w.writerow([i, " ".join(words), label])
    return path


def test_text_csv_word_tokenizer(tmp_path: Path) -> None:
    write_tweets(tmp_path / "tweets.csv")
    t = load_text_classification(tmp_path, seq_len=12, vocab_size=8, tokenizer="word")
    assert t.labels == ["negative", "positive"] and len(t.train_labels) == 108 and len(t.test_labels) == 12
    assert t.train_ids.shape == (108, 12) and t.train_ids.dtype == torch.int64
    assert (t.train_ids[:, 0] == CLS).all() and int(t.train_ids.max()) < 8  # capped vocabulary: the rest is [UNK]
    assert (t.train_ids == UNK).any() and (t.train_ids[:, 9:] == PAD).all()  # 8 words + [CLS], padded to 12
    again = load_text_classification(tmp_path, seq_len=12, vocab_size=8, tokenizer="word")
    assert torch.equal(t.train_ids, again.train_ids)  # deterministic


def test_text_csv_train_and_test_files_byte_tokenizer(tmp_path: Path) -> None:
    write_tweets(tmp_path / "train.csv", 40, label_col="label")
    write_tweets(tmp_path / "test.csv", 10, label_col="label", seed=1)
    t = load_text_classification(tmp_path, seq_len=64, vocab_size=300, tokenizer="byte")
    assert len(t.train_labels) == 40 and len(t.test_labels) == 10 and t.vocab_used == 259
    assert int(t.train_ids.max()) < 259
    with pytest.raises(DataError, match="byte tokenizer needs --vocab-size >= 259"):
        load_text_classification(tmp_path, seq_len=64, vocab_size=100, tokenizer="byte")


@pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed")
def test_text_csv_bpe_tokenizer_is_deterministic(tmp_path: Path) -> None:
    write_tweets(tmp_path / "tweets.csv")
    a = load_text_classification(tmp_path, seq_len=16, vocab_size=60, tokenizer="bpe")
    b = load_text_classification(tmp_path, seq_len=16, vocab_size=60, tokenizer="bpe")
    assert torch.equal(a.train_ids, b.train_ids) and int(a.train_ids.max()) < 60 and a.vocab_used <= 60


@pytest.mark.parametrize("content,expect", [
    ("text,stars\nhello,1\n", r"needs a label column \(label, sentiment, target, class\); the header has text, stars: "
                               "name yours with -o label=NAME"),
    ("review,stars\nhello,1\n", r"needs a text column 'text' and a label column \(label, sentiment, target, class\); "
                                 "the header has review, stars: name yours with -o text=NAME -o label=NAME"),
    ("text,label\nhello,1\nbye\n", "line 3 has 1 fields, the header has 2"),
    ("text,label\nhello,\n", "line 2 has no label"),
    ("text,label\n", "needs a header row and at least one data row"),
    ("text,label\nhello,a\nbye,a\nyo,a\n", "only one label"),
])
def test_text_csv_problems_are_one_line(tmp_path: Path, content: str, expect: str) -> None:
    (tmp_path / "data.csv").write_text(content)
    with pytest.raises(DataError, match=expect):
        load_text_classification(tmp_path, seq_len=8, vocab_size=50)


def test_text_csv_not_utf8_and_ambiguous_files(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_bytes(b"text,label\n\xff\xfe\xfa,1\n")
    with pytest.raises(DataError, match="bad.csv: cannot read as UTF-8 CSV"):
        read_text_csv(tmp_path / "bad.csv")
    (tmp_path / "other.csv").write_text("text,label\na,1\n")
    with pytest.raises(DataError, match="expected train.csv"):
        load_text_classification(tmp_path, seq_len=8, vocab_size=50)


def test_bert_and_user_token_models_train_on_a_text_csv(tmp_path: Path) -> None:
    write_tweets(tmp_path / "tweets.csv", 200)
    bert = create_workload("bert", "tiny", tmp_path, tokenizer="word", seq_len=12)
    assert bert.test_data is not None and len(bert.test_data) == 20 and len(bert.train_data.inputs) == 2
    ids, mask = bert.train_data.inputs
    assert torch.equal(mask, (ids != PAD).long())
    user = create_user_workload(f"{M}:token_transformer", input_shape="12", vocab_size=300, data_dir=tmp_path,
                                preset="tiny")
    assert "2 labels" in user.description and "word tokenizer" in user.description
    r = train(user, TrainConfig(precision="amp-bf16", epochs=4))
    assert r.test_metric is not None and r.test_metric >= 0.8  # the label words are in the text


def test_a_text_csv_s_columns_named_with_options(tmp_path: Path) -> None:
    """A reviews CSV (review, stars) was refused with no way round but renaming its columns: -o text=NAME and
    -o label=NAME name them, for bert and for a user's token model; the tokens are those of the same table with
    the default names (the oracle)."""
    named = tmp_path / "named"
    named.mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    write_tweets(plain / "tweets.csv", 60)
    with open(plain / "tweets.csv") as f:
        rows = list(csv.reader(f))
    with open(named / "reviews.csv", "w", newline="") as f:
        csv.writer(f).writerows([["id", "Review", "stars"], *rows[1:]])
    want = load_text_classification(plain, seq_len=12, vocab_size=50)
    got = load_text_classification(named, seq_len=12, vocab_size=50, text="review", label="Stars")
    assert torch.equal(got.train_ids, want.train_ids) and torch.equal(got.test_labels, want.test_labels)
    assert got.labels == want.labels
    bert = create_workload("bert", "tiny", named, seq_len=12, text="Review", label="stars")
    assert torch.equal(bert.train_data.inputs[0], create_workload("bert", "tiny", plain, seq_len=12).train_data.inputs[0])
    user = create_user_workload(f"{M}:token_transformer", input_shape="12", vocab_size=300, data_dir=named,
                                preset="tiny", options={"text": "Review", "label": "stars"})
    assert "2 labels" in user.description
    with pytest.raises(DataError, match=r"needs a label column 'grade'; the header has id, Review, stars: name yours "
                                        "with -o label=NAME"):
        create_workload("bert", "tiny", named, seq_len=12, text="Review", label="grade")
    with pytest.raises(AmpbenchError, match="bert text=...: it applies to a text CSV; give --data-dir too"):
        create_workload("bert", "tiny", None, text="Review")


def test_user_lm_trains_on_a_text_corpus(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text("\n".join("the cat sat on the mat and the dog ran" for _ in range(60)))
    wl = create_user_workload(f"{M}:causal_lm", input_shape="16", vocab_size=64, task="lm", data_dir=tmp_path,
                              preset="tiny")
    x, y = wl.train_data.inputs[0], wl.train_data.targets
    assert x.shape[1] == 16 and torch.equal(x[1:, 0], y[:-1, -1]) and "corpus" in wl.description
    with pytest.raises(AmpbenchError, match="give --task lm"):
        create_user_workload(f"{M}:mlp", input_shape="20", num_classes=3, data_dir=tmp_path, preset="tiny")


def _seg_pairs(root: Path, n: int = 10, size: tuple[int, int] = (32, 48)) -> Path:
    from PIL import Image

    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        mask = np.zeros(size, np.uint8)
        y0, x0 = rng.integers(0, size[0] // 2), rng.integers(0, size[1] // 2)
        mask[y0:y0 + size[0] // 3, x0:x0 + size[1] // 3] = 255
        img = (rng.random((*size, 3)) * 80).astype(np.uint8)
        img[mask > 0] += 120
        if i % 2:  # PNG (a 0/255 mask as image editors save it) and .npy (class ids) side by side
            Image.fromarray(img).save(root / "images" / f"p{i}.png")
            Image.fromarray(mask).save(root / "masks" / f"p{i}.png")
        else:
            np.save(root / "images" / f"p{i}.npy", img)
            np.save(root / "masks" / f"p{i}.npy", (mask > 0).astype(np.int64))
    return root


def test_segmentation_folder_png_and_npy(tmp_path: Path) -> None:
    seg = load_segmentation_dir(_seg_pairs(tmp_path), multiple_of=16)
    assert seg.images.shape == (10, 3, 32, 48) and seg.images.dtype == torch.uint8
    assert seg.masks.shape == (10, 32, 48) and seg.classes == 2 and set(seg.masks.unique().tolist()) == {0, 1}
    wl = create_workload("unet", "tiny", tmp_path)
    assert wl.test_data is not None and len(wl.test_data) == 2 and "2 classes" in wl.description
    r = train(wl, TrainConfig(precision="fp32", epochs=1))
    assert r.test_metric is not None


def test_segmentation_npy_images_saved_channels_first_read_as_channels_last(tmp_path: Path) -> None:
    """A PyTorch pipeline's (C, H, W) arrays were refused ("an image must be (H, W) or (H, W, C)"): read as the same
    images saved (H, W, C) (the oracle); a shape that is neither still says what is valid."""
    hwc = _seg_pairs(tmp_path / "hwc", n=4)
    chw = _seg_pairs(tmp_path / "chw", n=4)
    for f in (chw / "images").glob("*.npy"):
        np.save(f, np.load(f).transpose(2, 0, 1))
        assert np.load(f).shape == (3, 32, 48)
    a, b = load_segmentation_dir(hwc), load_segmentation_dir(chw)
    assert torch.equal(a.images, b.images) and torch.equal(a.masks, b.masks)
    np.save(chw / "images" / "p0.npy", np.zeros((2, 32, 48), np.uint8))
    with pytest.raises(DataError, match=r"p0.npy: an image must be \(H, W\), \(H, W, C\) or \(C, H, W\) with C in 1, 3, "
                                        r"4; got shape \(2, 32, 48\)"):
        load_segmentation_dir(chw)


def test_a_16_bit_png_image_keeps_its_range(tmp_path: Path) -> None:
    """A 16-bit grey PNG (a microscope's, a scanner's) read all white through Pillow's conversion to RGB."""
    from PIL import Image

    root = _seg_pairs(tmp_path, n=2)
    ramp = (np.arange(32 * 48).reshape(32, 48) * 40).astype(np.uint16)
    for f in (root / "images").glob("*"):
        f.unlink()
        Image.fromarray(ramp).save(root / "images" / f"{f.stem}.png")
    seg = load_segmentation_dir(root)
    assert torch.equal(seg.images[0, 0], torch.from_numpy(np.rint(ramp / 257.0).astype(np.uint8)))


def test_segmentation_problems_name_the_file(tmp_path: Path) -> None:
    root = _seg_pairs(tmp_path / "a", n=4)
    (root / "masks" / "p1.png").unlink()
    with pytest.raises(DataError, match="no mask for p1"):
        load_segmentation_dir(root)
    root = _seg_pairs(tmp_path / "b", n=4)
    (root / "images" / "p1.png").write_bytes((root / "images" / "p1.png").read_bytes()[:40])
    with pytest.raises(DataError, match=r"p1.png: cannot read as PNG"):
        load_segmentation_dir(root)
    root = _seg_pairs(tmp_path / "c", n=4)
    (root / "images" / "p0.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(DataError, match=r"p0.npy: cannot read as .npy"):
        load_segmentation_dir(root)
    root = _seg_pairs(tmp_path / "d", n=4)
    np.save(root / "masks" / "p0.npy", np.zeros((16, 16), np.int64))
    with pytest.raises(DataError, match="mask 16x16 does not match its image 32x48"):
        load_segmentation_dir(root)
    root = _seg_pairs(tmp_path / "e", n=4)
    np.save(root / "images" / "p2.npy", np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(DataError, match="differs from the first image"):
        load_segmentation_dir(root)
    with pytest.raises(DataError, match="sides divisible by 16"):
        load_segmentation_dir(_seg_pairs(tmp_path / "f", n=2, size=(30, 48)), multiple_of=16)
    with pytest.raises(DataError, match="expected images/ and masks/"):
        load_segmentation_dir(tmp_path)


def test_unet_corrupt_folder_is_one_line_exit_2(tmp_path: Path) -> None:
    root = _seg_pairs(tmp_path, n=4)
    (root / "masks" / "p3.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    r = subprocess.run([sys.executable, "-m", "ampbench", "train", "unet", "--data-dir", str(root), "--preset", "tiny"],
                       capture_output=True, text=True, env=dict(os.environ, COLUMNS="200"), timeout=120)
    assert r.returncode == 2 and "p3.png: cannot read as PNG" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
