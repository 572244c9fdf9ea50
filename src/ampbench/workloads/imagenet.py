"""ImageNet-size image classifiers: resnet50 (ResNet-50 v1.5) and vit (ViT-B/16), at 224x224 with 1000 classes.

The models people train and the guides benchmark (NVIDIA's DeepLearningExamples ResNet-50 v1.5, timm's and
torchvision's ViT-B/16), written in plain PyTorch with torchvision's layouts (no torchvision needed): big enough that a
GPU's Tensor Cores, not its launch queue, set the step time -- the default GPU suite's vision entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.data.errors import DataError
from ampbench.data.imagefolder import folder_splits, is_image_folder
from ampbench.data.tensors import TensorData
from ampbench.workloads.base import Workload, image_prep, split
from ampbench.workloads.registry import register_workload

IMAGENET_MEAN, IMAGENET_STD = 0.449, 0.226  # the usual per-channel statistics, averaged over channels


def class_images_large(n: int, classes: int, shape: tuple[int, int, int], g: torch.Generator,
                       noise: float = 0.6, chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images (N, C, H, W) of many classes at a large size: a smooth per-class template (a coarse random grid,
    upsampled bilinearly) plus uniform noise of ``noise`` x the range, built ``chunk`` images at a time from the
    coarse grids -- ImageNet's 1000 templates at 224x224 in fp32 alone would be 600 MB. In uint8 and int16 throughout
    (a GPU suite's set is 0.2 G values, built in every cell). int64 labels (N,)."""
    c, h, w = shape
    coarse = (torch.rand(classes, c, max(h // 4, 2), max(w // 4, 2), generator=g) * 255).round_().to(torch.uint8)
    labels = torch.randint(0, classes, (n,), generator=g)
    out = torch.empty(n, c, h, w, dtype=torch.uint8)
    amplitude = round(noise * 127.5)
    for i in range(0, n, chunk):
        x = F.interpolate(coarse[labels[i:i + chunk]], size=(h, w), mode="bilinear", align_corners=False)
        out[i:i + chunk] = synthetic.with_noise(x, amplitude, g)
    return out, labels


def _imagenet_data(preset: str, seed: int, batch: int) -> tuple[TensorData, TensorData]:
    """Synthetic learnable images: ``(size, classes)`` of the preset, 4 batches to train on and one to test."""
    size, classes = IMAGE[preset]
    x, y = class_images_large(5 * batch, classes, (3, size, size), torch.Generator().manual_seed(seed))
    return split(x, y, batch)


IMAGE = {"tiny": (32, 10), "small": (64, 100), "paper": (224, 1000)}
"""Image side and classes per preset (paper: ImageNet's)."""


# -- resnet50 ------------------------------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (torchvision's): the stride on the 3x3 convolution."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)  # v1.5: stride here
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    """ResNet-50 v1.5 (25.56M parameters with 1000 classes): torchvision's ``resnet50`` layout. ``blocks`` and
    ``base`` shrink it for the tiny and small presets."""

    def __init__(self, classes: int = 1000, blocks: tuple[int, ...] = (3, 4, 6, 3), base: int = 64) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], base
        for i, n in enumerate(blocks):
            width = base * 2**i
            for j in range(n):
                layers.append(Bottleneck(cin, width, (1 if i == 0 else 2) if j == 0 else 1))
                cin = width * 4
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))  # (B, classes)


RESNET = {"tiny": dict(blocks=(1, 1, 1, 1), base=8), "small": dict(blocks=(1, 1, 2, 1), base=32),
          "paper": dict(blocks=(3, 4, 6, 3), base=64)}
RESNET_BATCH = {"tiny": 8, "small": 64, "paper": 256}


def resnet_model(preset: str) -> nn.Module:
    return ResNet50(IMAGE[preset][1], **RESNET[preset])


@register_workload(
    "resnet50",
    description="ResNet-50 v1.5 on ImageNet-size images (224x224, 1000 classes): the convnet every GPU guide times",
    paper="ResNet-50 v1.5 (torchvision layout, 25.6M parameters), 224x224, 1000 classes, SGD lr 0.1 momentum 0.9 "
          "wd 1e-4 (torchvision's reference recipe), batch 256 (NVIDIA DeepLearningExamples' per-GPU batch)",
    data="class folders of images (<class>/<image>, or train/ and val/ of them: ImageNet's layout), resized and "
         "centre-cropped to the preset's side, at most as many classes as its head; a single split -> 80/20 "
         "(--val-fraction); none: synthetic learnable images",
    model=resnet_model,
)
def build_resnet50(preset: str, data_dir: Path | None, seed: int, val_fraction: float | None = None) -> Workload:
    # (torchvision's recipe. The lent H200's amp-fp16 cells "diverged" at lr 0.256 and again at 0.1: not the rate but
    # torch's fused SGD, whose skipped first step left its momentum buffers uninitialised -- the engine now drops
    # them, precision/scaling.unstarted_momentum)
    return _imagenet_workload("resnet50", "ResNet-50 v1.5", resnet_model(preset), preset, data_dir, seed,
                              RESNET_BATCH[preset], 90, lambda p: torch.optim.SGD(
                                  p, lr=0.1 if preset == "paper" else 0.05, momentum=0.9, weight_decay=1e-4),
                              val_fraction)


def _imagenet_workload(name: str, what: str, model: nn.Module, preset: str, data_dir: Path | None, seed: int,
                       batch: int, paper_epochs: int, optimizer: Any, val_fraction: float | None = None) -> Workload:
    """An ImageNet-size classifier on synthetic learnable images, or on class folders of images in ``data_dir``
    (ImageNet's own layout) at the preset's side."""
    side, classes = IMAGE[preset]
    if data_dir is None:
        train, test = _imagenet_data(preset, seed, batch)
        said = f"{side}x{side} (synthetic)"
    else:
        if not is_image_folder(data_dir):
            raise DataError(f"{name} --data-dir {data_dir}: no class folders of images (<class>/<image>, or train/ and "
                            "val/ of them, as ImageNet comes)")
        train, test, said = folder_splits(data_dir, (3, side, side), val_fraction, classes,
                                          f"{name}'s head at preset {preset}",
                                          " (presets: tiny 10, small 100, paper 1000 classes)")
    return Workload(name=name, model=model, train_data=train, test_data=test, make_optimizer=optimizer,
                    prepare=image_prep(IMAGENET_MEAN, IMAGENET_STD), batch_size=batch,
                    epochs={"tiny": 1, "small": 2, "paper": paper_epochs}[preset], preset=preset,
                    description=f"{what} at {said}")


# -- vit -------------------------------------------------------------------------------------------------------------
class ViTBlock(nn.Module):
    """Pre-norm transformer block: LayerNorm, multi-head self-attention (scaled_dot_product_attention), LayerNorm, MLP
    with GELU."""

    def __init__(self, d: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, S, D)
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    """Vision Transformer (Dosovitskiy et al. 2021): 16x16 patches, a class token, learned positions, pre-norm blocks;
    ViT-B/16 = 12 blocks of width 768, 12 heads, MLP 3072 (86.6M parameters with 1000 classes)."""

    def __init__(self, size: int = 224, patch: int = 16, d: int = 768, depth: int = 12, heads: int = 12,
                 mlp: int = 3072, classes: int = 1000) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, d) * 0.02)
        self.blocks = nn.Sequential(*(ViTBlock(d, heads, mlp) for _ in range(depth)))
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W)
        x = self.patch(x).flatten(2).transpose(1, 2)  # (B, patches, D)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])  # (B, classes)


VIT = {"tiny": dict(patch=8, d=32, depth=2, heads=2, mlp=64), "small": dict(patch=8, d=256, depth=4, heads=4, mlp=1024),
       "paper": dict(patch=16, d=768, depth=12, heads=12, mlp=3072)}
VIT_BATCH = {"tiny": 8, "small": 64, "paper": 128}


def vit_model(preset: str) -> nn.Module:
    return ViT(IMAGE[preset][0], classes=IMAGE[preset][1], **VIT[preset])


@register_workload(
    "vit",
    description="Vision Transformer ViT-B/16 on ImageNet-size images (224x224, 1000 classes)",
    paper="ViT-B/16 (12x768, 12 heads, MLP 3072, 86.6M parameters), 224x224, 1000 classes, AdamW lr 1e-3 wd 0.05, "
          "batch 128 per GPU",
    data="class folders of images (<class>/<image>, or train/ and val/ of them: ImageNet's layout), resized and "
         "centre-cropped to the preset's side, at most as many classes as its head; a single split -> 80/20 "
         "(--val-fraction); none: synthetic learnable images",
    model=vit_model,
)
def build_vit(preset: str, data_dir: Path | None, seed: int, val_fraction: float | None = None) -> Workload:
    return _imagenet_workload("vit", "ViT", vit_model(preset), preset, data_dir, seed, VIT_BATCH[preset], 300,
                              lambda p: torch.optim.AdamW(p, lr=1e-3 if preset == "paper" else 3e-4, weight_decay=0.05),
                              val_fraction)
