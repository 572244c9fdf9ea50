"""Published single-GPU training results the predictions are checked against, with the models they ran, written
here in plain PyTorch (no torchvision, no apex): ResNet-50 v1.5, ResNeXt101-32x4d, SE-ResNeXt101-32x4d,
EfficientNet-B0 and -B4, and BERT-large pretraining at sequence 128.

Sources: NVIDIA DeepLearningExamples, PyTorch, README "Training performance" tables, 1 GPU:
- ``ConvNets/resnet50v1.5``: DGX A100 80GB, TF32 938 img/s, AMP 2470 img/s; DGX-1 V100 16GB, FP32 367 img/s, AMP
  1200 img/s. Batches and memory formats from the repository's ``ConvNets/configs.yml`` (what ``launch.py`` runs):
  A100 256 for both; V100 112 in FP32, 256 in AMP; AMP in NHWC (channels-last) on both. DALI data loading.
- ``ConvNets/resnext101-32x4d`` and ``ConvNets/se-resnext101-32x4d`` (pytorch-21.03): DGX A100 80GB, TF32 456 / 395
  img/s, AMP 1211 / 855 img/s; DGX-1 V100 16GB, FP32 147 / 132 img/s, AMP 587 / 443 img/s. configs.yml: batch 128 on
  the A100 in both precisions, on the V100 64 in FP32 and 128 (SE: 112) in AMP; AMP in NHWC. The models as DLE's
  ``image_classification/models/resnet.py`` builds them (grouped 3x3 convolutions of 32 groups; SE: 1x1 convolutions
  to 16 channels and back, the residual added by ``torch.addcmul``). Held out: no grouped convolution is among the
  kernels the constants are fitted on.
- ``ConvNets/efficientnet`` (pytorch-21.03): EfficientNet-B0 / -B4 on DGX A100 80GB, TF32 1078 / 157 img/s, AMP 2489 /
  331 img/s; DGX-1 V100 16GB, FP32 655 / 83 img/s, AMP 1301 / 204 img/s. configs.yml: B0 at 224 pixels, batch 256 on
  the A100 in both precisions, on the V100 64 in FP32 and 128 in AMP; B4 at 380 pixels, A100 64 TF32 and 128 AMP,
  V100 16 FP32 and 32 AMP; AMP in NHWC; RMSprop. Their data backend is PyTorch's loader with AutoAugment on the CPU:
  the fastest cells (B0 AMP) may be bounded by it, which a GPU step's prediction does not price (8 A100s scaled AMP
  6.7x, TF32 7.6x).
- ``LanguageModeling/BERT``: pretraining phase 1 (sequence 128) on A100, TF32 317 seq/s, AMP 580 seq/s, as quoted by
  the first predict issue (34), at the batches the second (42) says the runs used: TF32 128, FP16 256 (LAMB; the
  masked-LM head on the 20 masked positions of each sequence).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ampbench.data.tensors import TensorData
from ampbench.measure.gpus import lookup
from ampbench.predict.cost import price
from ampbench.predict.trace import trace_inference, trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta
from ampbench.workloads.imagenet import Bottleneck, ResNet50  # noqa: F401  (Bottleneck: the tests' block)
from ampbench.workloads.vision import Bottleneck as ResNeXtBottleneck
from ampbench.workloads.vision import ResNeXt


@dataclass(frozen=True)
class Reference:
    name: str
    gpu: str
    batch_size: dict[str, int]
    """precision -> the batch the published run used."""
    baseline: str
    """The precision the speedup is over (tf32 on an A100, fp32 on a V100)."""
    samples_per_s: dict[str, float]
    """precision -> published samples/s."""
    channels_last: dict[str, bool]
    source: str
    build: Callable[[], Workload]
    grouped: bool = False
    """The model has convolutions of several groups (grouped, depthwise): its errors are the grouped networks' band
    (:func:`predict_checks.error_bands.compute`), not every row's."""

    def speedup(self, precision: str) -> float:
        return self.samples_per_s[precision] / self.samples_per_s[self.baseline]


# ---- ResNet-50 v1.5 -----------------------------------------------------------------------------------------------
# (the model is the resnet50 workload's: torchvision's layout)
def resnet50_workload() -> Workload:
    model = ResNet50()
    data = TensorData((torch.empty(256, 3, 224, 224),), torch.zeros(256, dtype=torch.long))
    return Workload("resnet50-v1.5", model, data, loss_fn=F.cross_entropy,
                    make_optimizer=lambda p: torch.optim.SGD(p, lr=0.256, momentum=0.875, weight_decay=3.05e-5),
                    batch_size=256, preset="imagenet")



# ---- ResNeXt101-32x4d and SE-ResNeXt101-32x4d, as DeepLearningExamples builds them ---------------------------------
class SqueezeExcitation(nn.Module):
    """DLE's ``SqueezeAndExcitation`` (``image_classification/models/common.py``): average pool, 1x1 convolutions to 16
    channels and back (with biases), ReLU between, a sigmoid gate."""

    def __init__(self, channels: int, squeeze: int = 16) -> None:
        super().__init__()
        self.squeeze, self.expand = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.expand(F.relu(self.squeeze(F.adaptive_avg_pool2d(x, 1)))))


class SEBottleneck(ResNeXtBottleneck):
    """DLE's ``Bottleneck`` with SE (``models/resnet.py``): the product's ResNeXt block (torchvision's layout, which
    DLE's 1x1, grouped 3x3 with the stride, 1x1 to ``planes`` x 2 is), the SE gate on its output, the residual added
    by ``torch.addcmul`` (their fused SE)."""

    def __init__(self, inplanes: int, planes: int, stride: int, groups: int, base_width: int) -> None:
        super().__init__(inplanes, planes, stride, groups, base_width)
        self.se = SqueezeExcitation(planes * 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        residual = x if self.downsample is None else self.downsample(x)
        return F.relu(torch.addcmul(residual, out, self.se(out)))


class DLEResNeXt101(ResNeXt):
    """DLE's ``resnext101-32x4d`` / ``se-resnext101-32x4d``: layers (3, 4, 23, 3), widths (128, 256, 512, 1024),
    expansion 2, cardinality 32, a 64-wide 7x7 stem -- the resnext workload's model at its paper size with 1,000
    classes (torchvision's ResNeXt-101 32x4d), with SE blocks where asked."""

    def __init__(self, se: bool = False, classes: int = 1000) -> None:
        super().__init__(classes=classes, block=SEBottleneck if se else ResNeXtBottleneck)


def _resnext_workload(se: bool) -> Workload:
    data = TensorData((torch.empty(128, 3, 224, 224),), torch.zeros(128, dtype=torch.long))
    return Workload(f"{'se-' if se else ''}resnext101-32x4d", DLEResNeXt101(se), data, loss_fn=F.cross_entropy,
                    make_optimizer=lambda p: torch.optim.SGD(p, lr=0.128, momentum=0.875, weight_decay=6.1e-5),
                    batch_size=128, preset="imagenet")


def resnext_workload() -> Workload:
    return _resnext_workload(False)


def se_resnext_workload() -> Workload:
    return _resnext_workload(True)


# ---- EfficientNet-B0 and -B4, as DeepLearningExamples builds them ----------------------------------------------------
def _conv_bn_silu(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride=stride, padding=(k - 1) // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)]
    return nn.Sequential(*layers, nn.SiLU(inplace=True)) if act else nn.Sequential(*layers)


class MBConv(nn.Module):
    """DLE's ``MBConvBlock`` (``models/efficientnet.py``): 1x1 expansion (where the ratio is not 1), depthwise k x k,
    SE gate (1x1 convolutions to a quarter of the block's input channels and back, SiLU between: DLE's
    ``SequentialSqueezeAndExcitation``), 1x1 projection; the residual with stochastic depth where the shape allows."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int, survival: float) -> None:
        super().__init__()
        hidden = cin * expand
        self.expand = _conv_bn_silu(cin, hidden, 1) if expand != 1 else None
        self.depthwise = _conv_bn_silu(hidden, hidden, k, stride, groups=hidden)
        squeeze = max(1, int(cin * 0.25))
        self.se_squeeze, self.se_expand = nn.Conv2d(hidden, squeeze, 1), nn.Conv2d(squeeze, hidden, 1)
        self.proj = _conv_bn_silu(hidden, cout, 1, act=False)
        self.residual, self.survival = stride == 1 and cin == cout, survival

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depthwise(x if self.expand is None else self.expand(x))
        h = h * torch.sigmoid(self.se_expand(F.silu(self.se_squeeze(F.adaptive_avg_pool2d(h, 1)))))
        h = self.proj(h)
        if not self.residual:
            return h
        if self.training and self.survival < 1.0:  # (stochastic depth: each sample's branch kept with that probability)
            keep = torch.empty(h.shape[0], 1, 1, 1, device=h.device, dtype=h.dtype).bernoulli_(self.survival)
            return torch.addcmul(x, h, keep, value=1.0 / self.survival)
        return x + h


class DLEEfficientNet(nn.Module):
    """DLE's ``efficientnet-b0`` (width and depth 1.0) and ``efficientnet-b4`` (1.4, 1.8): stem 3x3/2, seven stages of
    MBConv blocks, 1x1 to 1,280 features (scaled), dropout, a linear classifier; stochastic depth down to 0.8."""

    STAGES = ((3, 1, 1, 1, 16), (3, 2, 2, 6, 24), (5, 2, 2, 6, 40), (3, 2, 3, 6, 80), (5, 1, 3, 6, 112),
              (5, 2, 4, 6, 192), (3, 1, 1, 6, 320))
    """(kernel, stride, repeats, expansion, channels) of B0."""

    def __init__(self, width: float = 1.0, depth: float = 1.0, dropout: float = 0.2, classes: int = 1000) -> None:
        super().__init__()

        def w(c: int) -> int:  # (DLE's _scale_width: to a multiple of 8, never more than 10 % down)
            scaled = c * width
            rounded = max(8, int(scaled + 4) // 8 * 8)
            return rounded + 8 if rounded < 0.9 * scaled else rounded

        self.stem = _conv_bn_silu(3, w(32), 3, stride=2)
        repeats = [math.ceil(r * depth) for _, _, r, _, _ in self.STAGES]
        blocks, cin, done = [], w(32), 0
        for (k, stride, _, e, c), n in zip(self.STAGES, repeats):
            for i in range(n):
                survival = 1.0 - 0.2 * done / sum(repeats)
                blocks.append(MBConv(cin, w(c), k, stride if i == 0 else 1, e, survival))
                cin, done = w(c), done + 1
        self.blocks = nn.Sequential(*blocks)
        self.features = _conv_bn_silu(cin, w(1280), 1)
        self.dropout, self.fc = nn.Dropout(dropout), nn.Linear(w(1280), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(self.blocks(self.stem(x)))
        return self.fc(self.dropout(F.adaptive_avg_pool2d(h, 1).flatten(1)))


def _efficientnet_workload(b4: bool) -> Workload:
    side, batch = (380, 64) if b4 else (224, 256)
    model = DLEEfficientNet(1.4, 1.8, 0.4) if b4 else DLEEfficientNet()
    data = TensorData((torch.empty(batch, 3, side, side),), torch.zeros(batch, dtype=torch.long))
    return Workload(f"efficientnet-{'b4' if b4 else 'b0'}", model, data, loss_fn=F.cross_entropy,
                    make_optimizer=lambda p: torch.optim.RMSprop(p, lr=0.08, alpha=0.9, eps=0.01, momentum=0.9,
                                                                 weight_decay=1e-5),
                    batch_size=batch, preset="imagenet")


def efficientnet_b0_workload() -> Workload:
    return _efficientnet_workload(False)


def efficientnet_b4_workload() -> Workload:
    return _efficientnet_workload(True)

# ---- a user's model made of nn.MultiheadAttention -------------------------------------------------------------------
class MHAEncoder(nn.Module):
    """Six ``nn.TransformerEncoderLayer`` blocks (d 512, 8 heads, ffn 2048, batch-first) over (B, S, 512) features,
    mean-pooled into a linear classifier: the kind of model on which predictions once had AMP slower than TF32 (the
    matmuls inside ``F.multi_head_attention_forward`` escaped the trace's autocast). No published figure exists for it;
    it is measured beside its prediction on a lent GPU (``benchmarks/gpu_session.sh lease``):
    ``--model predict_checks/references.py:MHAEncoder --input-shape 128,512 --num-classes 10``."""

    def __init__(self, classes: int = 10, d: int = 512, heads: int = 8, layers: int = 6, ffn: int = 2048) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(1))


# ---- BERT-large pretraining (sequence 128) ------------------------------------------------------------------------
class BertLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int, p: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / (d // self.heads) ** 0.5  # the README's unfused attention
        ctx = torch.matmul(self.drop(torch.softmax(scores, dim=-1)), v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.drop(self.proj(ctx)))
        return self.ln2(x + self.drop(self.fc2(F.gelu(self.fc1(x)))))


class BertPretraining(nn.Module):
    def __init__(self, vocab: int = 30528, d: int = 1024, layers: int = 24, heads: int = 16, ffn: int = 4096,
                 seq: int = 128, p: float = 0.1) -> None:
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.Embedding(2, d)
        self.ln, self.drop = nn.LayerNorm(d, eps=1e-12), nn.Dropout(p)
        self.layers = nn.ModuleList(BertLayer(d, heads, ffn, p) for _ in range(layers))
        self.mlm_dense, self.mlm_ln = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.pool, self.nsp = nn.Linear(d, d), nn.Linear(d, 2)

    def forward(self, ids: torch.Tensor, masked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.ln(self.tok(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids))))
        for layer in self.layers:
            x = layer(x)
        h = torch.gather(x, 1, masked.unsqueeze(-1).expand(-1, -1, x.shape[-1]))  # the masked positions only
        h = self.mlm_ln(F.gelu(self.mlm_dense(h)))
        mlm = F.linear(h, self.tok.weight, self.mlm_bias)  # tied to the token embedding
        nsp = self.nsp(torch.tanh(self.pool(x[:, 0])))
        return mlm, nsp


def _bert_loss(out: tuple[torch.Tensor, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
    mlm, nsp = out
    return F.cross_entropy(mlm.float().flatten(0, 1), targets[:, :-1].flatten()) + F.cross_entropy(nsp.float(),
                                                                                                   targets[:, -1])


def bert_large_workload(batch: int = 64, seq: int = 128, masked: int = 20) -> Workload:
    model = BertPretraining(seq=seq)
    ids = torch.zeros(batch, seq, dtype=torch.long)
    where = torch.zeros(batch, masked, dtype=torch.long)
    data = TensorData((ids, where), torch.zeros(batch, masked + 1, dtype=torch.long))
    return Workload("bert-large-pretraining", model, data, loss_fn=_bert_loss,
                    make_optimizer=lambda p: torch.optim.AdamW(p, lr=6e-3, weight_decay=0.01),
                    batch_size=batch, preset="seq128")


_RN50_SOURCE = ("NVIDIA DeepLearningExamples PyTorch ConvNets/resnet50v1.5 README, training performance, {}, 1 GPU; "
                "batch and memory format: ConvNets/configs.yml")
_DLE_GPUS = {"a100-80gb": ("tf32", "DGX A100 (A100 80GB)"), "v100-16gb": ("fp32", "DGX-1 (V100 16GB)")}
"""DLE's single-GPU tables: the baseline each GPU's rows are over (TF32 on the A100, FP32 on the V100), its platform."""


def _dle_convnet(name: str, folder: str, gpu: str, batches: tuple[int, int], published: tuple[float, float],
                 build: Callable[[], Workload]) -> Reference:
    """A DLE ConvNets README's one-GPU row of a network with grouped or depthwise convolutions (pytorch-21.03): its
    baseline and AMP batches and img/s, AMP in NHWC as configs.yml runs it."""
    base, platform = _DLE_GPUS[gpu]
    return Reference(name, gpu, dict(zip((base, "amp-fp16"), batches)), base, dict(zip((base, "amp-fp16"), published)),
                     {base: False, "amp-fp16": True},
                     f"NVIDIA DeepLearningExamples PyTorch ConvNets/{folder} README, training performance (pytorch-21.03 "
                     f"container), {platform}, 1 GPU; batch and memory format: ConvNets/configs.yml", build, grouped=True)


REFERENCES: tuple[Reference, ...] = (
    Reference("ResNet-50 v1.5", "a100-80gb", {"tf32": 256, "amp-fp16": 256}, "tf32", {"tf32": 938.0, "amp-fp16": 2470.0},
              {"tf32": False, "amp-fp16": True}, _RN50_SOURCE.format("DGX A100 (A100 80GB)"), resnet50_workload),
    Reference("ResNet-50 v1.5", "v100-16gb", {"fp32": 112, "amp-fp16": 256}, "fp32", {"fp32": 367.0, "amp-fp16": 1200.0},
              {"fp32": False, "amp-fp16": True}, _RN50_SOURCE.format("DGX-1 (V100 16GB)"), resnet50_workload),
    Reference("BERT-large pretraining, seq 128", "a100-80gb", {"tf32": 128, "amp-fp16": 256}, "tf32",
              {"tf32": 317.0, "amp-fp16": 580.0}, {"tf32": False, "amp-fp16": False},
              "NVIDIA DeepLearningExamples PyTorch LanguageModeling/BERT README, pre-training phase 1, A100, 1 GPU "
              "(figures as quoted by predict issues 34 and 42)", bert_large_workload),
    # (held out since 2026-12-08: the first published steps of grouped-convolution networks the model is checked on;
    # then depthwise convolutions, SiLU, SE gates, stochastic depth)
    _dle_convnet("ResNeXt101-32x4d", "resnext101-32x4d", "a100-80gb", (128, 128), (456.0, 1211.0), resnext_workload),
    _dle_convnet("ResNeXt101-32x4d", "resnext101-32x4d", "v100-16gb", (64, 128), (147.0, 587.0), resnext_workload),
    _dle_convnet("SE-ResNeXt101-32x4d", "se-resnext101-32x4d", "a100-80gb", (128, 128), (395.0, 855.0),
                 se_resnext_workload),
    _dle_convnet("SE-ResNeXt101-32x4d", "se-resnext101-32x4d", "v100-16gb", (64, 112), (132.0, 443.0),
                 se_resnext_workload),
    _dle_convnet("EfficientNet-B0", "efficientnet", "a100-80gb", (256, 256), (1078.0, 2489.0), efficientnet_b0_workload),
    _dle_convnet("EfficientNet-B0", "efficientnet", "v100-16gb", (64, 128), (655.0, 1301.0), efficientnet_b0_workload),
    _dle_convnet("EfficientNet-B4", "efficientnet", "a100-80gb", (64, 128), (157.0, 331.0), efficientnet_b4_workload),
    _dle_convnet("EfficientNet-B4", "efficientnet", "v100-16gb", (16, 32), (83.0, 204.0), efficientnet_b4_workload),
)


def resnet50_amp_a100_over_v100(predict: Callable[[Reference], dict[str, float]]) -> tuple[float, float]:
    """DeepLearningExamples' ResNet-50 v1.5, one setup on two GPUs (AMP, batch 256, channels-last): (predicted,
    published) A100 80GB samples/s over V100 16GB's -- the published 2470 over 1200 img/s."""
    a100, v100 = (next(r for r in REFERENCES if r.name.startswith("ResNet") and r.gpu == g)
                  for g in ("a100-80gb", "v100-16gb"))
    return (predict(a100)["amp-fp16"] / predict(v100)["amp-fp16"],
            a100.samples_per_s["amp-fp16"] / v100.samples_per_s["amp-fp16"])


def predicted(ref: Reference) -> dict[str, float]:
    """Predicted samples/s per precision of ``ref``, each at its published batch and memory format on its GPU."""
    gpu = lookup(ref.gpu)
    assert gpu is not None, ref.gpu  # (a table entry of ours)
    out = {}
    for precision, batch in ref.batch_size.items():
        engine = "fp32" if precision == "tf32" else precision
        trace = trace_step(build_meta(ref.build), engine, batch, channels_last=ref.channels_last[precision])
        out[precision] = batch / price(trace, gpu, tf32=precision == "tf32").step_s
    return out


# ---- inference: ResNet-50 v1.5 forwards per batch ----------------------------------------------------------------
INFERENCE_SOURCE = ("NVIDIA DeepLearningExamples PyTorch ConvNets/resnet50v1.5 README, inference performance (pytorch-21.03 "
                    "container), 'Latency Avg' per batch: NVIDIA DGX-1 (1x V100 16GB) and NVIDIA T4, FP32 and mixed "
                    "precision (mixed precision in channels-last, as the repository's configs run AMP)")
INFERENCE_LATENCY_MS: dict[tuple[str, str], dict[int, float]] = {
    ("v100-16gb", "fp32"): {1: 10.37, 8: 11.5, 16: 16.07, 32: 29.37, 64: 55.4, 128: 109.26, 256: 214.48},
    ("v100-16gb", "amp-fp16"): {1: 12.78, 8: 13.65, 16: 14.0, 32: 15.84, 64: 23.18, 128: 43.55, 256: 84.14},
    ("t4", "fp32"): {1: 10.7, 8: 22.41, 16: 39.77, 32: 77.62, 64: 152.73, 128: 309.26, 256: 635.98},
    ("t4", "amp-fp16"): {1: 12.96, 8: 12.82, 16: 15.8, 32: 29.54, 64: 57.41, 128: 114.24, 256: 225.95},
}
"""Published ResNet-50 inference latency (ms per batch). Below batch 16 the published figures sit on a floor of
10-13 ms in both precisions, on both GPUs -- the benchmark loop's own time, not the GPU's (a forward of one image
is about 2 ms of kernels): predictions, which leave the data pipeline out, are checked where the GPU dominates."""


def predicted_inference_ms(gpu: str, precision: str, batch: int) -> float:
    """Predicted latency of a ResNet-50 v1.5 inference forward at ``batch`` (channels-last for the half modes)."""
    card = lookup(gpu)
    assert card is not None, gpu
    trace = trace_inference(build_meta(resnet50_workload), precision, batch, channels_last=precision != "fp32")
    return price(trace, card, tf32=False).step_s * 1e3
