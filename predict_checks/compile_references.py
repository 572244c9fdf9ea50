"""Published torch.compile gains to check compiled predictions against: Hugging Face Transformers' "Optimize inference
using torch.compile()" (docs/source/en/perf_torch_compile.md, 2023), inference latency of four image classifiers with
and without ``torch.compile(model)`` (default mode: Inductor, no CUDA graphs), torch 2.0.1, fp32, under
``torch.no_grad()``, mean of 300 forwards, on an A100, a V100 and a T4 at batches 1, 4 and 16.

The setup, as rebuilt here: the models from their Transformers configs (no weights: nothing is computed) --
google/vit-base-patch16-224, microsoft/beit-base-patch16-224-pt22k-ft22k (BEiT-base with relative position bias and
layer scale, 21,841 classes, mean pooling: the fine-tuned BEiT's settings), facebook/convnext-large-224 and
microsoft/resnet-50 --, called on a (B, 3, 224, 224) batch; fp32 with torch 2.0's defaults: cuDNN's convolutions in
TF32 on the A100, matmuls in fp32; ``nn.Linear`` as torch 2.0.1 ran it (:class:`Torch201Linear`: ConvNeXt's linear
layers on 4-D inputs were a matmul and a separate bias add in its eager, which compiled fuses). The GPUs as the
catalogue's A100 40GB SXM, V100 16GB SXM2 and T4 (the guide does not say which A100 or V100).

Which rows check the model: at batch 1 the published latency is its host's (ResNet-50 takes 6.5 ms at batch 1 and
7.0 at 16 on the A100: Python, and torch 2.0's Triton launcher at ~40 us a kernel, not the GPU), so a row is checked
where the GPU sets it, by the published figures alone: its eager latency at least twice the same model's at batch 1
on the same GPU. Nothing is fitted on any of these rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from ampbench.data import TensorData
from ampbench.measure.gpus import lookup
from ampbench.predict.cost import Compiled, price
from ampbench.predict.trace import Trace, trace_inference
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta
from ampbench.workloads.user import OutputLogits

SOURCE = ("Hugging Face Transformers docs, 'Optimize inference using torch.compile()' (perf_torch_compile.md): "
          "torch 2.0.1, default mode, fp32, mean of 300 forwards")
GPUS = {"A100": "a100-40gb", "V100": "v100-16gb", "T4": "t4"}
"""The guide's GPU names -> the catalogue's keys (assumed: the A100 and V100 variants are not named)."""
PUBLISHED: dict[tuple[str, int], dict[str, tuple[float, float]]] = {
    ("A100", 1): {"vit": (9.325, 7.584), "beit": (11.282, 8.448), "convnext": (10.410, 10.208),
                  "resnet": (6.531, 4.124)},
    ("A100", 4): {"vit": (14.832, 14.499), "beit": (13.205, 13.048), "convnext": (22.940, 21.631),
                  "resnet": (6.657, 4.268)},
    ("A100", 16): {"vit": (40.944, 40.010), "beit": (41.854, 41.048), "convnext": (82.258, 75.561),
                   "resnet": (7.018, 5.024)},
    ("V100", 1): {"vit": (10.495, 6.00), "beit": (11.347, 7.234), "convnext": (11.623, 10.412),
                  "resnet": (6.484, 3.820)},
    ("V100", 4): {"vit": (15.181, 14.501), "beit": (15.171, 14.753), "convnext": (29.574, 27.085),
                  "resnet": (6.109, 4.731)},
    ("V100", 16): {"vit": (52.209, 51.633), "beit": (53.938, 53.581), "convnext": (109.682, 100.771),
                   "resnet": (14.857, 12.089)},
    ("T4", 1): {"vit": (16.520, 15.786), "beit": (16.464, 15.710), "convnext": (32.932, 30.845),
                "resnet": (6.031, 4.321)},
    ("T4", 4): {"vit": (43.653, 43.626), "beit": (52.007, 51.354), "convnext": (119.259, 105.580),
                "resnet": (13.039, 11.388)},
    ("T4", 16): {"vit": (163.914, 160.907), "beit": (188.978, 187.976), "convnext": (422.886, 388.078),
                 "resnet": (44.114, 37.604)},
}
"""(GPU, batch) -> model -> (eager ms, compiled ms), as published."""
GAIN_GOAL = 0.05
"""A checked row's predicted gain (eager over compiled) within 5% of the published one."""



def _model(name: str) -> nn.Module:
    import transformers as tf  # lazy: transformers (only these checks build its models)

    configs: dict[str, Callable[[], nn.Module]] = {
        "vit": lambda: tf.ViTForImageClassification(tf.ViTConfig(num_labels=1000)),
        "beit": lambda: tf.BeitForImageClassification(tf.BeitConfig(
            num_labels=21841, use_relative_position_bias=True, layer_scale_init_value=0.1, use_mean_pooling=True)),
        "convnext": lambda: tf.ConvNextForImageClassification(tf.ConvNextConfig(
            depths=[3, 3, 27, 3], hidden_sizes=[192, 384, 768, 1536], num_labels=1000)),
        "resnet": lambda: tf.ResNetForImageClassification(tf.ResNetConfig(num_labels=1000)),
    }
    with torch.device("meta"):
        return OutputLogits(configs[name]())  # (called as the guide calls it, with its pixels: its logits)


def workload(name: str) -> Callable[[], Workload]:
    """The guide's model ``name`` (vit, beit, convnext, resnet) as a workload of 224 x 224 images."""
    def build() -> Workload:
        data = TensorData((torch.empty(1, 3, 224, 224),), torch.zeros(1, dtype=torch.long))
        return Workload(f"hf-{name}", _model(name), data)
    return build


class Torch201Linear(TorchFunctionMode):
    """``F.linear`` with a bias as torch 2.0.1 ran it: ``addmm`` for a 2-D input and a contiguous 3-D one (flattened),
    any other input (ConvNeXt's channels-last 4-D blocks) ``matmul`` then ``add_(bias)``: the bias a kernel of its own,
    a pass over the output. Later torch flattens every contiguous input into ``addmm`` (``_flatten_nd_linear``), which
    is what the trace sees under today's torch. The 2.0-era rule is functorch's ``linear_hack``, its copy of
    ``at::native::linear`` kept "in sync with pytorch/pytorch" (torch's own 2.0.1 source is not among the stored
    references). The two differ by 72 bias passes in ConvNeXt-large's eager forward, which Inductor folds into the
    GELU and the layer scale."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if bias is not None and not (x.dim() == 2 or (x.dim() == 3 and x.is_contiguous())):
                return torch.matmul(x, weight.t()).add_(bias)
        return func(*args, **kwargs)


@functools.cache
def _trace(name: str, batch: int) -> Trace:
    with Torch201Linear():
        return trace_inference(build_meta(workload(name)), "fp32", batch)


@dataclass(frozen=True)
class CompileRow:
    gpu: str
    """The guide's name (A100, V100, T4)."""
    model: str
    batch: int
    eager_ms: float
    compiled_ms: float
    predicted_eager_ms: float
    predicted_compiled_ms: float

    @property
    def checked(self) -> bool:
        """Whether the GPU sets this row (:func:`checked`)."""
        return checked(self.gpu, self.model, self.batch)

    @property
    def gain(self) -> float:
        return self.eager_ms / self.compiled_ms

    @property
    def predicted_gain(self) -> float:
        return self.predicted_eager_ms / self.predicted_compiled_ms

    @property
    def gain_error(self) -> float:
        """predicted gain / published gain - 1."""
        return self.predicted_gain / self.gain - 1

    @property
    def compiled_error(self) -> float:
        return self.predicted_compiled_ms / self.compiled_ms - 1

    @property
    def eager_error(self) -> float:
        return self.predicted_eager_ms / self.eager_ms - 1


def checked(gpu: str, model: str, batch: int) -> bool:
    """Whether the GPU sets a published row: its eager latency at least twice the same model's at batch 1 on the same
    GPU (the published figures alone say so)."""
    return PUBLISHED[(gpu, batch)][model][0] >= 2 * PUBLISHED[(gpu, 1)][model][0]


def rows(only_checked: bool = True) -> list[CompileRow]:
    """The published rows (the checked ones, or all) beside their predictions (eager, and compiled as Inductor's
    default mode runs it)."""
    out = []
    for (gpu_name, batch), models in PUBLISHED.items():
        gpu = lookup(GPUS[gpu_name])
        assert gpu is not None, gpu_name
        ampere = gpu.capability >= (8, 0)
        for model, (eager, compiled) in models.items():
            if only_checked and not checked(gpu_name, model, batch):
                continue
            trace = _trace(model, batch)
            e = price(trace, gpu, tf32=False, conv_tf32=ampere).step_s * 1e3
            c = price(trace, gpu, tf32=False, conv_tf32=ampere, compiled=Compiled(fuse=True, graphs=False)).step_s
            out.append(CompileRow(gpu_name, model, batch, eager, compiled, e, c * 1e3))
    return out
