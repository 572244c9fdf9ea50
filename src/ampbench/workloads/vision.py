"""Image workloads: mnist-cnn, conv-dummy, resnext (CIFAR-10 at 64x64), unet."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.data.cifar import load_cifar10_dir
from ampbench.data.errors import DataError
from ampbench.data.idx import load_mnist_dir
from ampbench.data.imagefolder import folder_splits, is_image_folder
from ampbench.data.segmentation import load_segmentation_dir
from ampbench.data.splits import classification_splits
from ampbench.data.tensors import TensorData
from ampbench.workloads.base import (
    BINARY_ACCURACY,
    PIXEL_ACCURACY,
    VAL_FRACTION,
    Workload,
    adam,
    held_out,
    image_prep,
    sgd,
    split,
)
from ampbench.workloads.registry import register_workload

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the usual MNIST normalisation
CIFAR_MEAN, CIFAR_STD = 0.4734, 0.2516


def image_classification_data(data_dir: Path | None, loader, shape: tuple[int, int, int], sizes: tuple[int, int],
                              seed: int, classes: int = 10, val_fraction: float | None = None
                              ) -> tuple[TensorData, TensorData]:
    """Real splits from ``data_dir`` when given -- the workload's own format (``loader``), or class folders of images
    (``mnist_png``'s ``training/0/*.png`` layout, a folder of CIFAR PNGs) resized and centre-cropped to ``shape``, at
    most ``classes`` of them --, else seeded learnable synthetic images (n_train, n_test)."""
    if data_dir is not None and is_image_folder(Path(data_dir)):
        return folder_splits(data_dir, shape, val_fraction, classes)[:2]
    real = classification_splits(data_dir, loader, val_fraction)
    if real is not None:
        return real
    n_train, n_test = sizes
    x, y = synthetic.class_images(n_train + n_test, classes, shape, torch.Generator().manual_seed(seed))
    return split(x, y, n_test)


# -- mnist-cnn -----------------------------------------------------------------------------------
class MnistCNN(nn.Module):
    """conv(1->c1,3x3,pad1)-ReLU-maxpool-conv(c1->c2,3x3,pad1)-ReLU-maxpool-Linear(c2*7*7->10)."""

    def __init__(self, c1: int = 420, c2: int = 1000, classes: int = 10, size: int = 28) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.fc = nn.Linear(c2 * (size // 4) ** 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, c1, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, c2, 7, 7)
        return self.fc(x.flatten(1))  # (B, 10)


MNIST_WIDTHS = {"tiny": (4, 8), "small": (16, 32), "paper": (420, 1000)}


def mnist_model(preset: str) -> nn.Module:
    return MnistCNN(*MNIST_WIDTHS[preset])


@register_workload(
    "mnist-cnn",
    description="small CNN on MNIST: the batch-grows-with-fp16 experiment",
    paper="conv(1->420)-conv(420->1000)-Linear(49000->10), Adam 1e-3, batch 590 (fp32) / 1000 (fp16), 3 epochs",
    data="MNIST/Fashion-MNIST IDX (.gz or raw), or class folders of images (mnist_png: training/0/*.png ..., "
         "read at 1x28x28); one split only (e.g. t10k) -> 80/20 (--val-fraction)",
    model=mnist_model,
)
def build_mnist(preset: str, data_dir: Path | None, seed: int, val_fraction: float | None = None) -> Workload:
    real = image_classification_data(data_dir, load_mnist_dir, (1, 28, 28), seed=seed, val_fraction=val_fraction,
                                     sizes={"tiny": (64, 32), "small": (8000, 2000), "paper": (60000, 10000)}[preset])
    batch, epochs = {"tiny": (16, 1), "small": (64, 4), "paper": (590, 3)}[preset]
    return Workload(
        name="mnist-cnn", model=mnist_model(preset), train_data=real[0], test_data=real[1],
        make_optimizer=adam(1e-3), prepare=image_prep(MNIST_MEAN, MNIST_STD), batch_size=batch, epochs=epochs,
        preset=preset, description="MNIST CNN" + (" (real data)" if data_dir else " (synthetic data)"),
        notes={"batch_size_fp32": 590, "batch_size_fp16": 1000} if preset == "paper" else {},
    )


# -- conv-dummy ----------------------------------------------------------------------------------
class ConvDummy(nn.Module):
    """Conv2D(128,k2)-Conv2D(128,k1)-Conv2D(128,k1)-Flatten-Dense(1), no activations (as the Keras run).

    The final sigmoid is applied in the loss (BCE with logits, in fp32): autocast refuses
    ``binary_cross_entropy`` on half inputs, and the Keras run kept the sigmoid in fp32.
    """

    def __init__(self, size: int = 256, channels: int = 128) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 2)
        self.conv2 = nn.Conv2d(channels, channels, 1)
        self.conv3 = nn.Conv2d(channels, channels, 1)
        self.dense = nn.Linear(channels * (size - 1) ** 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 3, S, S)
        x = self.conv3(self.conv2(self.conv1(x)))  # (B, 128, S-1, S-1)
        return self.dense(x.flatten(1))  # (B, 1) logits


CONV_DUMMY = {"tiny": (16, 8, 32), "small": (64, 32, 200), "paper": (256, 128, 800)}  # size, channels, images


def _bce_logits(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(out.float().squeeze(1), y.float())


@register_workload(
    "conv-dummy",
    description="three Conv2D layers on uniform-random images (the '3x faster, half the RAM' Keras run)",
    paper="800 random 256x256x3 images, binary labels; Conv2D(128,k2)-Conv2D(128,k1)-Conv2D(128,k1)-Dense(1)-"
          "sigmoid fp32; 10 epochs, batch 50",
    data="none (random by design)",
    model=lambda preset: ConvDummy(*CONV_DUMMY[preset][:2]),
)
def build_conv_dummy(preset: str, data_dir: Path | None, seed: int) -> Workload:
    if data_dir is not None:
        raise DataError("conv-dummy uses random images by design; it takes no --data-dir")
    size, channels, n = CONV_DUMMY[preset]
    g = torch.Generator().manual_seed(seed)
    x = synthetic.random_images(n, (3, size, size), g)
    y = torch.randint(0, 2, (n,), generator=g)
    return Workload(
        name="conv-dummy", model=ConvDummy(size, channels), train_data=TensorData((x,), y), test_data=None,
        loss_fn=_bce_logits, metric=BINARY_ACCURACY, make_optimizer=adam(1e-3),
        prepare=image_prep(0.5, 0.29), batch_size={"tiny": 8, "small": 50, "paper": 50}[preset],
        epochs={"tiny": 1, "small": 2, "paper": 10}[preset], preset=preset,
        description="random images (nothing to learn: a speed and memory test)",
    )


# -- resnext -------------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int, groups: int, base_width: int) -> None:
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = None
        if stride != 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNeXt(nn.Module):
    """ResNeXt (Xie et al. 2017) with torchvision's layout; 101 32x4d = layers (3, 4, 23, 3), groups 32, width 4."""

    def __init__(self, layers=(3, 4, 23, 3), groups: int = 32, width_per_group: int = 4, classes: int = 10,
                 base: int = 64, block: type[Bottleneck] = Bottleneck) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(base),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        blocks, inplanes = [], base
        for i, n in enumerate(layers):
            planes = base * 2**i
            for j in range(n):
                blocks.append(block(inplanes, planes, 2 if (j == 0 and i > 0) else 1, groups, width_per_group))
                inplanes = planes * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 64, 64)
        return self.fc(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))  # (B, classes)


RESNEXT = {"tiny": dict(layers=(1, 1, 1, 1), groups=4, width_per_group=4, base=16),
           "small": dict(layers=(1, 1, 2, 1), groups=8, width_per_group=4, base=32),
           "paper": dict(layers=(3, 4, 23, 3), groups=32, width_per_group=4, base=64)}


@register_workload(
    "resnext",
    description="ResNeXt on 10-class 64x64 images (CIFAR-10 upsampled), the apex O0-O3 comparison",
    paper="ResNeXt-101 32x4d, CIFAR-10 upsampled to 64x64, SGD (lr 0.1, momentum 0.9, wd 5e-4), batch 256",
    data="CIFAR-10 python pickle batches or binary .bin batches, or class folders of images (read at 3x32x32, up to "
         "10 classes; upsampled to 64x64 on the device); train or test batches only -> 80/20 (--val-fraction)",
    model=lambda preset: ResNeXt(**RESNEXT[preset]),
)
def build_resnext(preset: str, data_dir: Path | None, seed: int, val_fraction: float | None = None) -> Workload:
    size = {"tiny": 16, "small": 32, "paper": 64}[preset]
    real = image_classification_data(data_dir, load_cifar10_dir, (3, 32, 32), seed=seed, val_fraction=val_fraction,
                                     sizes={"tiny": (32, 16), "small": (2048, 512), "paper": (50000, 10000)}[preset])
    return Workload(
        name="resnext", model=ResNeXt(**RESNEXT[preset]), train_data=real[0], test_data=real[1],
        make_optimizer=sgd(0.1 if preset == "paper" else 0.05, 0.9, 5e-4),
        prepare=image_prep(CIFAR_MEAN, CIFAR_STD, size=size),
        batch_size={"tiny": 8, "small": 64, "paper": 256}[preset], epochs={"tiny": 1, "small": 2, "paper": 90}[preset],
        preset=preset, description=f"ResNeXt at {size}x{size}" + (" (real data)" if data_dir else " (synthetic)"),
    )


# -- unet ----------------------------------------------------------------------------------------
def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """UNet (Ronneberger et al. 2015), 4 down / 4 up levels, transposed-conv upsampling, padded convs."""

    def __init__(self, in_channels: int = 3, classes: int = 2, base: int = 64) -> None:
        super().__init__()
        ch = [base * 2**i for i in range(5)]  # 64, 128, 256, 512, 1024
        self.inc = _double_conv(in_channels, ch[0])
        self.downs = nn.ModuleList(_double_conv(ch[i], ch[i + 1]) for i in range(4))
        self.ups = nn.ModuleList(nn.ConvTranspose2d(ch[i + 1], ch[i], 2, stride=2) for i in reversed(range(4)))
        self.up_convs = nn.ModuleList(_double_conv(ch[i + 1], ch[i]) for i in reversed(range(4)))
        self.out = nn.Conv2d(ch[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W), H and W divisible by 16
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        y = skips.pop()
        for up, conv in zip(self.ups, self.up_convs):
            y = conv(torch.cat([skips.pop(), up(y)], dim=1))
        return self.out(y)  # (B, classes, H, W) logits


UNET = {"tiny": (8, 16, 16), "small": (16, 64, 256), "paper": (64, 256, 2000)}  # base, size, images


@register_workload(
    "unet",
    description="UNet segmentation (4 down / 4 up levels) on images with one bright rectangle",
    paper="UNet 64-1024 channels (~31M parameters, as milesial/Pytorch-UNet), 3 -> 2 classes, 256x256",
    data="images/ + masks/ folders, pairs matched by name (.npy; .png with Pillow), sides divisible by 16",
    model=lambda preset: UNet(base=UNET[preset][0]),
)
def build_unet(preset: str, data_dir: Path | None, seed: int, val_fraction: float | None = None) -> Workload:
    base, size, n = UNET[preset]
    if data_dir is not None:
        seg = load_segmentation_dir(data_dir, multiple_of=16)  # 4 poolings
        channels, classes = seg.images.shape[1], seg.classes
        train, test = split(seg.images, seg.masks, held_out(len(seg.masks), val_fraction or VAL_FRACTION, data_dir))
        about = (f"UNet on {data_dir}: {len(seg.masks)} images {seg.images.shape[2]}x{seg.images.shape[3]}x{channels}, "
                 f"{classes} classes")
    else:
        g = torch.Generator().manual_seed(seed)
        x, mask = synthetic.shapes_segmentation(n, size, 3, g)
        train, test = split(x, mask, max(n // 5, 2))
        channels, classes, about = 3, 2, f"UNet {size}x{size}"
    return Workload(
        name="unet", model=UNet(channels, classes, base=base), train_data=train, test_data=test, metric=PIXEL_ACCURACY,
        make_optimizer=adam(1e-3), prepare=image_prep(0.5, 0.25), batch_size={"tiny": 2, "small": 8, "paper": 16}[preset],
        epochs={"tiny": 1, "small": 2, "paper": 5}[preset], preset=preset, description=about,
    )
