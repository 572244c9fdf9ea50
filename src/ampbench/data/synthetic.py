"""Seeded synthetic data that is *learnable* (a class-dependent signal), so convergence means something.

Every generator takes a ``torch.Generator`` so the same seed gives the same data on any machine.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

CHUNK_VALUES = 2**24
"""Values of noise drawn at a time by :func:`class_images` (64 MB of float32)."""


def class_images(n: int, classes: int, shape: tuple[int, int, int], g: torch.Generator,
                 noise: float = 0.6) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images (N, C, H, W): a smooth per-class template plus noise; int64 labels (N,).

    Built a chunk of images at a time, each image's template upsampled from its class's grid (a 224-pixel, 1000-class
    set built at once held 0.6 GB of templates and two float copies of the images: 7 s on a CPU core); the values are
    those of building it at once -- the generator draws one value per element in order, and a template is its grid
    upsampled whatever else is upsampled with it (a test holds both)."""
    c, h, w = shape
    coarse = torch.rand(classes, c, max(h // 4, 2), max(w // 4, 2), generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    out = torch.empty(n, c, h, w, dtype=torch.uint8)
    step = max(1, CHUNK_VALUES // (c * h * w))
    for i in range(0, n, step):  # (each image's template upsampled from its grid: no data-dependent op, meta builds)
        x = F.interpolate(coarse[labels[i:i + step]], size=(h, w), mode="bilinear", align_corners=False)
        x.add_(torch.rand(min(step, n - i), c, h, w, generator=g).sub_(0.5).mul_(noise))
        out[i:i + step] = x.clamp_(0, 1).mul_(255).round_()  # (in place: the same operations, no copies)
    return out, labels


def random_images(n: int, shape: tuple[int, int, int], g: torch.Generator) -> torch.Tensor:
    """Uniform random uint8 images (no signal: conv-dummy is random by design)."""
    return torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)


def random_bytes(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Uniform random uint8 of ``shape``: four bytes from each 32-bit draw of ``g``. (Our own: torch draws one
    32-bit number per element of any dtype, and a CPU generator draws serially -- a GPU suite's images are 10^8-10^9
    bytes, drawn in every cell's build.)"""
    n = 1
    for d in shape:
        n *= d
    words = torch.randint(-2**31, 2**31 - 1, ((n + 3) // 4,), dtype=torch.int32, generator=g)
    return words.view(torch.uint8)[:n].view(shape)


def with_noise(images: torch.Tensor, amplitude: int, g: torch.Generator) -> torch.Tensor:
    """uint8 ``images`` plus uniform integer noise in [-amplitude, amplitude], clamped to 0..255 (integer arithmetic:
    no float copy of the images; 128 noise levels, so that 127 x (2 amplitude + 2) stays in int16)."""
    if not 0 <= amplitude <= 128:
        raise ValueError(f"noise amplitude {amplitude} is not in 0..128")
    x = images.to(torch.int16)
    x += (random_bytes(tuple(images.shape), g) >> 1).to(torch.int16) * (2 * amplitude + 2) >> 7
    x -= amplitude
    return x.clamp_(0, 255).to(torch.uint8)


def shapes_segmentation(n: int, size: int, channels: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images with one bright axis-aligned rectangle (128..191) on a noisy background (0..63); mask = the
    rectangle (0/1, int64). Built in uint8 from the rectangle's rows and columns: a 2,000-image 256x256 set is 0.4 G
    values, drawn in every cell's build."""
    idx = torch.arange(size)
    lo = torch.randint(0, size // 2, (n, 2), generator=g)
    hi = lo + torch.randint(size // 8 + 1, size // 2 + 1, (n, 2), generator=g)
    rows = (idx >= lo[:, :1]) & (idx < hi[:, :1])  # (N, H)
    cols = (idx >= lo[:, 1:]) & (idx < hi[:, 1:])  # (N, W)
    mask = rows[:, :, None] & cols[:, None, :]  # (N, H, W)
    img = random_bytes((n, channels, size, size), g)
    img >>= 2
    img += mask.unsqueeze(1).to(torch.uint8) << 7
    return img, mask.long()


def token_classification(n: int, seq: int, vocab: int, classes: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Token ids whose class shows in the frequency of a class-specific token band; (ids, mask, labels)."""
    labels = torch.randint(0, classes, (n,), generator=g)
    ids = torch.randint(1000, vocab, (n, seq), generator=g)
    band = 100 + labels * 10  # class c favours tokens [100 + 10c, 110 + 10c)
    marked = torch.rand(n, seq, generator=g) < 0.3
    ids = torch.where(marked, band[:, None] + torch.randint(0, 10, (n, seq), generator=g), ids)
    lengths = torch.randint(seq // 2, seq + 1, (n,), generator=g)
    mask = torch.arange(seq)[None, :] < lengths[:, None]
    ids = torch.where(mask, ids, torch.zeros_like(ids))  # 0 = [PAD]
    return ids, mask.long(), labels


def token_spans(n: int, seq: int, vocab: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """SQuAD-style: the answer span is delimited by marker tokens 5 and 6; (ids, mask, (start, end))."""
    ids = torch.randint(1000, vocab, (n, seq), generator=g)
    start = torch.randint(1, seq // 2, (n,), generator=g)
    end = start + torch.randint(0, seq // 4, (n,), generator=g)
    rows = torch.arange(n)
    ids[rows, start - 1] = 5
    ids[rows, (end + 1).clamp(max=seq - 1)] = 6
    return ids, torch.ones(n, seq, dtype=torch.long), torch.stack([start, end], dim=1)


CHAIN_TOKENS = 4096
"""Tokens a chain of :func:`markov_tokens` walks before the next chain starts (a jump, as one in ten steps is)."""


def markov_tokens(n_tokens: int, vocab: int, g: torch.Generator) -> torch.Tensor:
    """A token stream from a sparse random Markov chain (each token has 4 likely successors, one step in ten a jump to
    a uniform token).

    A chain is sequential, so the stream is ``n_tokens // CHAIN_TOKENS`` chains (at least one) walked side by side,
    one position a step over all of them, and laid end to end: a chain's start is one more jump (1 in 4,096 tokens
    beside the chain's 1 in 10). Walked token by token a GPT-2-size stream (8.4 M tokens) took 10 s of every cell's
    build; this way 0.4-0.7 s, mostly the random draws.

    Made on the CPU whatever the default device: the walk reads its values, so a workload built under
    ``torch.device("meta")`` (``ampbench predict``) keeps its model on meta and only this stream on the CPU -- not the
    whole workload rebuilt there, a GPT-2's 124 M parameters initialised for a prediction."""
    cpu = torch.device("cpu")
    chains = max(1, n_tokens // CHAIN_TOKENS)
    length = -(-n_tokens // chains)
    succ = torch.randint(0, vocab, (vocab, 4), generator=g, device=cpu).numpy()
    choice = torch.randint(0, 4, (length, chains), generator=g, device=cpu).numpy()
    jump = (torch.rand(length, chains, generator=g, device=cpu) < 0.1).numpy()
    rand_tok = torch.randint(0, vocab, (length, chains), generator=g, device=cpu).numpy()
    jump[0] = True  # (each chain starts at a uniform token)
    out = np.empty((length, chains), dtype=np.int64)
    tok = rand_tok[0]
    for i in range(length):  # (numpy: half torch's host time for these small ops, measured on 2,048 chains)
        tok = np.where(jump[i], rand_tok[i], succ[tok, choice[i]])
        out[i] = tok
    return torch.from_numpy(np.ascontiguousarray(out.T).reshape(-1)[:n_tokens].copy())


def tabular(n: int, cardinalities: list[int], n_cont: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Categorical codes, continuous features and a target = sum of per-category effects + linear + noise."""
    cats = torch.stack([torch.randint(0, c, (n,), generator=g) for c in cardinalities], dim=1)
    cont = torch.randn(n, n_cont, generator=g)
    y = torch.zeros(n)
    for j, c in enumerate(cardinalities):
        y += torch.randn(c, generator=g)[cats[:, j]] * 0.3
    y += cont @ (torch.randn(n_cont, generator=g) * 0.3) + 0.1 * torch.randn(n, generator=g)
    return cats, cont, y.unsqueeze(1)


def class_features(n: int, classes: int, shape: tuple[int, ...], g: torch.Generator,
                   noise: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 samples of any shape: a per-class template (unit normal) plus Gaussian noise; int64 labels (N,)."""
    templates = torch.randn(classes, *shape, generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    return templates[labels] + noise * torch.randn(n, *shape, generator=g), labels


def regression_features(n: int, outputs: int, shape: tuple[int, ...], g: torch.Generator,
                        noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 samples of any shape (unit normal) and targets (N, outputs) = a fixed linear map of them + noise.

    The map is scaled so every target has unit variance before the noise: an untrained model's RMSE is ~1,
    a good one's approaches ``noise``.
    """
    x = torch.randn(n, *shape, generator=g)
    d = x[0].numel()
    w = torch.randn(d, outputs, generator=g) / d ** 0.5
    return x, x.flatten(1) @ w + noise * torch.randn(n, outputs, generator=g)


def _check_vocab(vocab: int, needed: int, what: str) -> None:
    if vocab < needed:
        raise ValueError(f"a vocabulary of {vocab} tokens is too small for {what} (need at least {needed})")


def class_tokens(n: int, shape: tuple[int, ...], vocab: int, classes: int, g: torch.Generator,
                 marked: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 token ids in [1, vocab) of any shape; the class shows in how often tokens of its own band appear.

    Class c favours ``band`` tokens starting at 1 + c x band (bands wrap around the vocabulary); id 0 is left
    for padding. Labels (N,).
    """
    _check_vocab(vocab, classes + 1, f"{classes} classes")
    band = max(1, min(10, (vocab - 1) // classes))
    labels = torch.randint(0, classes, (n,), generator=g)
    ids = torch.randint(1, vocab, (n, *shape), generator=g)
    offset = torch.randint(0, band, (n, *shape), generator=g)
    start = (labels * band).view(n, *([1] * len(shape)))
    favoured = 1 + (start + offset) % (vocab - 1)
    pick = torch.rand(n, *shape, generator=g) < marked
    return torch.where(pick, favoured, ids), labels


def regression_tokens(n: int, shape: tuple[int, ...], vocab: int, outputs: int, g: torch.Generator,
                      noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 token ids in [1, vocab); targets (N, outputs) = the mean of a per-token value table, standardised."""
    _check_vocab(vocab, 2, "regression")
    ids = torch.randint(1, vocab, (n, *shape), generator=g)
    table = torch.randn(vocab, outputs, generator=g)
    y = table[ids.flatten(1)].mean(dim=1)  # (N, outputs)
    y = (y - y.mean(0)) / y.std(0).clamp_min(1e-6)
    return ids, y + noise * torch.randn(n, outputs, generator=g)


def lm_tokens(n: int, seq: int, vocab: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, next-token targets), each (N, seq), cut from one Markov token stream (:func:`markov_tokens`)."""
    _check_vocab(vocab, 2, "a language model")
    stream = markov_tokens(n * seq + 1, vocab, g)
    return stream[:-1].view(n, seq), stream[1:].view(n, seq)
