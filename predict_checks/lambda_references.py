"""One model on twelve GPUs: Lambda's published PyTorch ResNet-50 training throughput, FP32 and AMP, one GPU each
(held out: nothing is fitted on it). It checks what ``predict --gpu a,b,c`` answers -- how much faster one GPU is than
another, and how much AMP gives on each.

Source: Lambda's ``lambdal/deeplearning-benchmark`` repository, ``pytorch/pytorch-train-throughput-fp32.csv`` and
``-fp16.csv`` (commit 0551cb7, the ``resnet50`` column, images/s, the single-GPU rows; numbers only). The runs are
NVIDIA DeepLearningExamples' ``ConvNets`` ResNet-50 v1.5 as its ``main.py`` runs it (``pytorch/scripts/
config_v1/config_pytorch_<memory>GB.sh``): ``--data-backend synthetic`` (no data loading), ``--training-only``, the
default NCHW memory format, SGD with momentum; AMP is ``--amp --static-loss-scale 256`` (autocast fp16 and a gradient
scaler). "FP32" is PyTorch's default: cuDNN's convolutions in TF32 where the GPU has it (``allow_tf32`` is on for
cuDNN), the one linear layer in fp32. Each GPU ran the batch of the config for its memory size
(``pytorch-train-bs-fp32.csv``/``-fp16.csv``): 16 GB 128/256, 24 GB 224/448, 40 GB 360/720, 48 GB 496/928, 80 GB
640/1280 (FP32/AMP) -- the A10's and the H100 SXM's rows are not in those tables; their configs are the 24 GB and
80 GB ones.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

from ampbench.measure.gpus import lookup
from ampbench.predict.cost import price
from ampbench.predict.trace import trace_step
from ampbench.workloads.factory import build_meta
from predict_checks.references import resnet50_workload

BASELINE = "v100-16gb"
"""The GPU the ratios are over (the table's oldest data-centre GPU, as Lambda's own charts normalise)."""

BATCH = {16: (128, 256), 24: (224, 448), 40: (360, 720), 48: (496, 928), 80: (640, 1280)}
"""Memory size in GB -> (FP32 batch, AMP batch) of the config each GPU ran."""


@dataclass(frozen=True)
class Row:
    gpu: str
    """Our catalogue's key."""
    name: str
    """Lambda's row."""
    memory_gb: int
    fp32: float
    """Published images/s, "FP32" (TF32 convolutions from Ampere on)."""
    amp: float
    """Published images/s, AMP (fp16)."""

    def published(self, precision: str) -> float:
        return self.fp32 if precision == "fp32" else self.amp

    def batch(self, precision: str) -> int:
        return BATCH[self.memory_gb][0 if precision == "fp32" else 1]


ROWS = (
    Row("v100-16gb", "LambdaCloud V100 16GB", 16, 369.0, 833.0),
    Row("quadro-rtx-8000", "Quadro RTX 8000", 48, 274.0, 651.0),
    Row("rtx-3090", "RTX 3090", 24, 513.0, 905.0),
    Row("a10", "LambdaCloud A10", 24, 349.0, 638.0),
    Row("rtx-a6000", "RTX A6000", 48, 514.0, 916.0),
    Row("a100-40gb-pcie", "LambdaCloud A100 40GB PCIe", 40, 882.0, 1396.0),
    Row("a100-80gb-pcie", "A100 80GB PCIe", 80, 1014.0, 1527.0),
    Row("a100-80gb", "A100 80GB SXM4", 80, 1066.0, 1582.0),
    Row("rtx-4090", "RTX 4090", 24, 721.0, 1301.0),
    Row("rtx-6000-ada", "RTX 6000 Ada", 48, 647.0, 1146.0),
    Row("h100-pcie", "H100 80GB PCIe Gen5", 80, 1197.0, 1866.0),
    Row("h100-sxm", "H100 80GB SXM5", 80, 1753.0, 2616.0),
)
PRECISIONS = ("fp32", "amp-fp16")


def row(gpu: str) -> Row:
    return next(r for r in ROWS if r.gpu == gpu)


@functools.cache
def _trace(precision: str, batch: int):
    return trace_step(build_meta(resnet50_workload), precision, batch, channels_last=False)


@functools.cache
def predicted(gpu: str, precision: str) -> float:
    """Predicted images/s of ``gpu``'s row in ``precision``, at the batch it ran, NCHW; FP32 with cuDNN's TF32
    convolutions where the GPU has TF32 (PyTorch's default), fp32 matmuls."""
    card = lookup(gpu)
    assert card is not None, gpu
    r = row(gpu)
    batch = r.batch(precision)
    conv_tf32 = precision == "fp32" and "tf32" in card.tflops
    return batch / price(_trace(precision, batch), card, tf32=False, conv_tf32=conv_tf32).step_s


def ratio_error(gpu: str, precision: str) -> float:
    """The predicted speed of ``gpu`` over the baseline's in ``precision``, over the published one, less 1."""
    base = row(BASELINE)
    published = row(gpu).published(precision) / base.published(precision)
    return predicted(gpu, precision) / predicted(BASELINE, precision) / published - 1


def speedup_error(gpu: str) -> float:
    """The predicted AMP speedup over FP32 on ``gpu`` over the published one, less 1."""
    r = row(gpu)
    return (predicted(gpu, "amp-fp16") / predicted(gpu, "fp32")) / (r.amp / r.fp32) - 1


def errors() -> list[tuple[str, str, float]]:
    """Every row's samples/s error, ``(gpu, precision, predicted / published - 1)``: the bands' published steps."""
    return [(r.gpu, p, predicted(r.gpu, p) / r.published(p) - 1) for r in ROWS for p in PRECISIONS]


APART = 1.10
"""Two GPUs whose published speeds differ by at least this factor: a difference the ranking must get right."""


def ordering(precision: str) -> tuple[list[tuple[str, str]], int]:
    """What ``predict --gpu a,b,...`` is asked first, which is faster: the pairs of GPUs published at least
    :data:`APART` apart in ``precision`` that the predictions order the other way, and how many such pairs there are."""
    wrong, pairs = [], 0
    for a, b in itertools.combinations(ROWS, 2):
        pa, pb = a.published(precision), b.published(precision)
        if max(pa, pb) / min(pa, pb) < APART:
            continue
        pairs += 1
        if (pa > pb) != (predicted(a.gpu, precision) > predicted(b.gpu, precision)):
            wrong.append((a.gpu, b.gpu))
    return wrong, pairs
