"""The synthetic generators built in integer arithmetic (the GPU suite's image sets, drawn in every cell's build):
checked against float computations of the same definitions."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.workloads.imagenet import class_images_large


def test_random_bytes_are_uniform_and_seeded() -> None:
    a = synthetic.random_bytes((7, 1001), torch.Generator().manual_seed(3))
    b = synthetic.random_bytes((7, 1001), torch.Generator().manual_seed(3))
    assert a.dtype == torch.uint8 and a.shape == (7, 1001) and torch.equal(a, b)
    big = synthetic.random_bytes((256 * 4000,), torch.Generator().manual_seed(0))
    counts = torch.bincount(big.long(), minlength=256).double()
    assert counts.min() > 0.9 * 4000 and counts.max() < 1.1 * 4000  # every byte value, evenly (chi^2-free bound)


@pytest.mark.parametrize("base", [0, 40, 128, 250])
def test_noise_is_uniform_within_its_amplitude_and_clamped(base: int) -> None:
    n, amp = 200_000, 76
    x = synthetic.with_noise(torch.full((n,), base, dtype=torch.uint8), amp, torch.Generator().manual_seed(1))
    ref = (base + torch.arange(-amp, amp + 1)).clamp(0, 255)  # the values uniform noise of +-amp can give
    assert x.dtype == torch.uint8
    assert int(x.min()) == int(ref.min()) and int(x.max()) == int(ref.max())
    if base - amp > 0 and base + amp < 255:  # unclamped: centred, the spread of a uniform over +-amp
        assert abs(x.double().mean().item() - base) < 0.5
        assert x.double().std().item() == pytest.approx(amp / 3**0.5, rel=0.03)
    with pytest.raises(ValueError, match="amplitude"):
        synthetic.with_noise(x, 200, torch.Generator())


def test_segmentation_mask_is_the_bright_rectangle() -> None:
    g = torch.Generator().manual_seed(5)
    img, mask = synthetic.shapes_segmentation(40, 64, 3, g)
    assert img.shape == (40, 3, 64, 64) and img.dtype == torch.uint8 and mask.shape == (40, 64, 64)
    assert mask.dtype == torch.int64 and set(mask.unique().tolist()) <= {0, 1}
    inside = mask.bool().unsqueeze(1).expand_as(img)
    assert int(img[inside].min()) >= 128 and int(img[~inside].max()) <= 63
    for m in mask:  # one axis-aligned rectangle per image: its bounding box is all ones
        ys, xs = torch.nonzero(m, as_tuple=True)
        box = m[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        assert bool(box.all()) and int(m.sum()) == box.numel() and box.shape[0] >= 64 // 8 + 1


def test_class_images_are_their_class_template_plus_noise() -> None:
    """Each image is its label's coarse grid upsampled (a float reference of the same definition) within the noise:
    the signal a model learns is there, and a nearest-template rule reads every label back."""
    g = torch.Generator().manual_seed(2)
    x, y = class_images_large(96, 10, (3, 32, 32), g, noise=0.6, chunk=40)
    coarse = (torch.rand(10, 3, 8, 8, generator=torch.Generator().manual_seed(2)) * 255).round()
    templates = F.interpolate(coarse, size=(32, 32), mode="bilinear", align_corners=False)
    diff = x.double() - templates[y].double()
    assert diff.abs().max() <= round(0.6 * 127.5) + 1  # the noise's amplitude (+1: uint8 interpolation's rounding)
    assert abs(diff.mean().item()) < 3.0
    dist = ((x.double().flatten(1)[:, None] - templates.double().flatten(1)[None]) ** 2).sum(-1)
    assert torch.equal(dist.argmin(1), y)


@pytest.mark.parametrize("n, classes, chunk_images", [(37, 1000, 5), (64, 3, 64), (10, 10, 3)])
def test_class_images_chunked_are_the_images_built_at_once(monkeypatch: pytest.MonkeyPatch, n: int, classes: int,
                                                           chunk_images: int) -> None:
    """Oracle: the definition built at once (every class's template, the noise in one draw) gives the same bytes
    and labels as the chunked build of only the classes drawn -- here in chunks that split the set unevenly."""
    shape = (3, 20, 24)
    monkeypatch.setattr(synthetic, "CHUNK_VALUES", chunk_images * 3 * 20 * 24)
    x, y = synthetic.class_images(n, classes, shape, torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    coarse = torch.rand(classes, 3, 5, 6, generator=g)
    templates = F.interpolate(coarse, size=(20, 24), mode="bilinear", align_corners=False)
    labels = torch.randint(0, classes, (n,), generator=g)
    whole = templates[labels] + 0.6 * (torch.rand(n, *shape, generator=g) - 0.5)
    assert torch.equal(y, labels) and x.dtype == torch.uint8
    assert torch.equal(x, (whole.clamp(0, 1) * 255).round().to(torch.uint8))


def test_class_images_build_on_meta() -> None:
    """predict builds workloads on the meta device: the generator has no data-dependent op."""
    with torch.device("meta"):
        x, y = synthetic.class_images(9, 1000, (3, 16, 16), torch.Generator())
    assert x.shape == (9, 3, 16, 16) and y.shape == (9,) and x.dtype == torch.uint8


@pytest.mark.parametrize("n", [1, 50, 4095, 4096 * 3 + 17])
def test_markov_tokens_are_chains_walked_one_token_at_a_time(n: int) -> None:
    """The stream walked side by side over its chains is the one walked token by token, chain after chain, from the
    same draws (a plain loop over Python lists: the oracle); every chain starts at a uniform token."""
    vocab = 37
    got = synthetic.markov_tokens(n, vocab, torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    chains = max(1, n // synthetic.CHAIN_TOKENS)
    length = -(-n // chains)
    succ = torch.randint(0, vocab, (vocab, 4), generator=g).tolist()
    choice = torch.randint(0, 4, (length, chains), generator=g).tolist()
    jump = (torch.rand(length, chains, generator=g) < 0.1).tolist()
    rand_tok = torch.randint(0, vocab, (length, chains), generator=g).tolist()
    want: list[int] = []
    for c in range(chains):
        tok = rand_tok[0][c]
        for i in range(length):
            tok = tok if i == 0 else rand_tok[i][c] if jump[i][c] else succ[tok][choice[i][c]]
            want.append(tok)
    assert got.dtype == torch.int64 and got.tolist() == want[:n]


def test_markov_tokens_follow_their_successor_table() -> None:
    """~90 % of a stream's steps go to one of the token's 4 successors (a jump lands on one by chance 4 / vocab), and
    the seed makes the stream."""
    vocab, n = 1000, 200_000
    stream = synthetic.markov_tokens(n, vocab, torch.Generator().manual_seed(0))
    succ = torch.randint(0, vocab, (vocab, 4), generator=torch.Generator().manual_seed(0))
    follows = (succ[stream[:-1]] == stream[1:, None]).any(1).double().mean().item()
    expected = 0.9 + 0.1 * 4 / vocab - (n // synthetic.CHAIN_TOKENS) / n * 0.9  # (a chain's start: a jump)
    assert abs(follows - expected) < 5 * (expected * (1 - expected) / n) ** 0.5
    assert torch.equal(stream, synthetic.markov_tokens(n, vocab, torch.Generator().manual_seed(0)))
    assert not torch.equal(stream, synthetic.markov_tokens(n, vocab, torch.Generator().manual_seed(1)))
