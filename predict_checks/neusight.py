"""NeuSight's published GPU measurements (``references/neusight/``, MIT; its README says how each was taken), read
as cases the kernel models price: one measured kernel each, with its GPU (a key of our catalogue), its op class and
its shape.

All of it is fp32 with TF32 off (PyTorch 2.1, CUDA 12.1, cuDNN 8.9.2, ``cudnn.benchmark``), CUDA-event timed.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ampbench.data.tensors import TensorData
from ampbench.measure.gpus import Gpu, lookup
from ampbench.predict import kernels
from ampbench.predict.cost import price
from ampbench.predict.kernels import Calibration, Conv
from ampbench.predict.measured_kernels import CARD_ONLY
from ampbench.predict.trace import trace_inference, trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta

ROOT = Path(__file__).resolve().parents[1] / "references" / "neusight"
"""The vendored copy (the repository's ``references/neusight``)."""

DEVICES: dict[str, str] = {
    "Tesla P4": "p4", "Tesla P100-PCIE-16GB": "p100-16gb", "Tesla T4": "t4", "Tesla V100-PCIE-32GB": "v100-32gb-pcie",
    "NVIDIA A100-PCIE-40GB": "a100-40gb-pcie", "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA L4": "l4", "NVIDIA A100-SXM4-40GB": "a100-40gb",
}
"""NeuSight's device names (as the driver reports them) -> our catalogue's keys."""
FOLDERS: dict[str, str] = {"Tesla_P4": "Tesla P4", "Tesla_P100-PCIE-16GB": "Tesla P100-PCIE-16GB",
                           "Tesla_T4": "Tesla T4", "Tesla_V100-PCIE-32GB": "Tesla V100-PCIE-32GB",
                           "NVIDIA_A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB", "NVIDIA_A100_80GB_PCIe": "NVIDIA A100 80GB PCIe",
                           "NVIDIA_H100_80GB_HBM3": "NVIDIA H100 80GB HBM3", "NVIDIA_L4": "NVIDIA L4",
                           "NVIDIA_A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB"}

FIT_GPUS = ("p4", "p100-16gb", "t4", "v100-32gb-pcie", "a100-40gb-pcie", "a100-80gb-pcie", "h100-sxm", "l4")
"""The GPUs the constants are fitted on: all of them (the kernels fit; whole steps check)."""
PREVIOUSLY_FITTED = ("p4", "p100-16gb", "t4", "v100-32gb-pcie")
"""The last release's fitting GPUs (the others checked its kernels): docs/predict.md compares the two."""
CHECK_GPUS: tuple[str, ...] = ()
"""GPUs whose kernels only check the constants: none now (the checks are whole steps)."""
OP_CLASSES = ("linear", "bmm", "conv", "elementwise", "layernorm", "softmax")
BINARY = {"add", "mul", "div", "pow"}
"""Elementwise ops of two tensors (the ``...u`` forms take a scalar)."""


@dataclass(frozen=True)
class Case:
    gpu: str
    op_class: str
    shape: str
    measured_s: float
    price: Callable[[Gpu, Calibration], float]

    def predicted_s(self, cal: Calibration) -> float:
        spec = lookup(self.gpu)
        assert spec is not None, self.gpu
        return self.price(spec, cal)

    def error(self, cal: Calibration) -> float:
        """predicted / measured - 1."""
        return self.predicted_s(cal) / self.measured_s - 1


def _rows(root: Path, name: str) -> Iterator[dict[str, str]]:
    with gzip.open(root / "kernels" / f"{name}.csv.gz", "rt") as f:
        yield from csv.DictReader(f)


def _gemm(b: int, m: int, n: int, k: int) -> Callable[[Gpu, Calibration], float]:
    return lambda gpu, cal: kernels.gemm_s(gpu, cal, b, m, n, k, "fp32", 4)


def _conv(conv: Conv) -> Callable[[Gpu, Calibration], float]:
    return lambda gpu, cal: kernels.conv_s(gpu, cal, conv, "fp32", 4)


def _stream(nbytes: int) -> Callable[[Gpu, Calibration], float]:
    return lambda gpu, cal: kernels.streaming_s(gpu, cal, nbytes)


def _reduce(nbytes: int, kind: str) -> Callable[[Gpu, Calibration], float]:
    return lambda gpu, cal: kernels.reduction_s(gpu, cal, nbytes, kind)


def kernel_cases(root: Path = ROOT) -> list[Case]:
    """Every measured kernel on a GPU of our catalogue."""
    cases: list[Case] = []
    for name, op_class in (("linear", "linear"), ("bmm", "bmm")):
        for r in _rows(root, name):
            b, m, n, k = (int(r[x]) for x in "BMNK")
            if name == "linear":  # nn.Linear on (B, M, K): one GEMM of (B*M) x K -> N
                m, b = b * m, 1
            cases.append(Case(DEVICES[r["Device"]], op_class, f"{b}x{m}x{n}x{k}", float(r["Latency"]) * 1e-3,
                              _gemm(b, m, n, k)))
    for r in _rows(root, "conv"):
        n, c, k = int(r["B"]), int(r["Input_Channel"]), int(r["Output_Channel"])
        size, kernel, stride, pad = int(r["Input_Size"]), int(r["Kernel_Szie"]), int(r["Stride"]), int(r["Padding"])
        out = (size + 2 * pad - kernel) // stride + 1
        conv = Conv(n, c, size, size, k, kernel, kernel, stride, 1, out, out)
        cases.append(Case(DEVICES[r["Device"]], "conv", f"{n}x{c}x{size}->{k}", float(r["Latency"]) * 1e-3,
                          _conv(conv)))
    for r in _rows(root, "elem"):
        elements = int(r["B"]) * int(r["H"])
        tensors = 3 if r["OPName"] in BINARY else 2
        cases.append(Case(DEVICES[r["Device"]], "elementwise", f"{r['OPName']} {r['B']}x{r['H']}",
                          float(r["Latency"]) * 1e-3, _stream(4 * elements * tensors)))
    for name, op_class, kind in (("ln", "layernorm", "norm"), ("softmax", "softmax", "softmax")):
        for r in _rows(root, name):
            elements = int(r["B"]) * int(r["H"])
            cases.append(Case(DEVICES[r["Device"]], op_class, f"{r['B']}x{r['H']}", float(r["Latency"]) * 1e-3,
                              _reduce(8 * elements, kind)))
    return cases


LEFT_OUT = {"switchxl4": "Switch Transformer (an encoder-decoder mixture of experts): its source builds it for "
                         "conditional generation with a router; not rebuilt here",
            "switch4": "as switchxl4"}
"""Measured models the step references leave out, and why."""


@dataclass(frozen=True)
class Step:
    """A measured training step (forward + backward of a Hugging Face model, fp32, no optimizer) or inference step."""

    gpu: str
    model: str
    kind: str
    """train or inf."""
    seq: int
    batch: int
    forward_ms: float
    backward_ms: float
    total_ms: float

    @property
    def name(self) -> str:
        return f"{self.model} seq {self.seq} batch {self.batch}"


def steps(root: Path = ROOT, kind: str = "train") -> list[Step]:
    """The single-GPU steps of ``kind`` (train: ``<model>-train-<seq>-<batch>.json``; the 4-GPU ``-dp4``/``-tp4``/
    ``-pp4`` runs and the ``-fusion`` inference runs left out)."""
    out = []
    for folder in sorted((root / "steps").iterdir()):
        device = FOLDERS.get(folder.name)
        if device is None or DEVICES.get(device) is None:
            continue
        for f in sorted(folder.glob(f"*-{kind}-*.json")):
            parts = f.stem.split("-")
            if len(parts) != 4 or parts[0] in LEFT_OUT:
                continue
            data = json.loads(f.read_text())
            out.append(Step(DEVICES[device], parts[0], parts[1], int(parts[2]), int(parts[3]), data["fw_latency"],
                            data["bwall_latency"], data["e2e_latency"]))
    return out


def model_config(name: str, root: Path = ROOT) -> dict[str, object]:
    """The Hugging Face config a step's model was built from."""
    return json.loads((root / "models" / f"{name}.json").read_text())


def their_errors(root: Path = ROOT, kind: str = "train") -> dict[tuple[str, str, int], dict[str, float]]:
    """NeuSight's own published |error| in % per (GPU, model, batch) of the training steps (``kind`` inf: the
    inference forwards), per method (Roofline, Habitat, Li et al., NeuSight)."""
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    names = {"BERT-Large": "bert_large", "GPT2-Large": "gpt2_large", "GPT3-XL": "gpt3_xl", "OPT-1.3B": "opt_13",
             "GPT3-2.7B": "gpt3_27", "SwitchTrans": "switchxl4"}
    lines = (root / "their-errors" / f"nvidia_{kind}.csv").read_text().splitlines()
    device = None
    header: list[str] = []
    batches: list[str] = []
    for line in lines:
        cells = line.split(",")
        if len(cells) == 1 and cells[0].strip():
            device = FOLDERS.get(cells[0].strip())
        elif cells[0] == "Model":
            header = []
            for c in cells[1:]:
                header.append(c or header[-1])
        elif cells[0] == "Batch":
            batches = cells[1:]
        elif device and header and cells[0]:
            for model, batch, value in zip(header, batches, cells[1:]):
                if value and model in names:
                    key = (DEVICES[device], names[model], int(batch))
                    out.setdefault(key, {})[cells[0]] = float(value)
    return out


class _HFLogits(nn.Module):
    """A Hugging Face LM returning its token logits (BERT's pretraining model: the masked-LM head's)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.inner(input_ids=ids)
        return out.prediction_logits if hasattr(out, "prediction_logits") else out.logits


def _token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


def step_workload(step: Step, root: Path = ROOT) -> Callable[[], Workload]:
    """A builder of the workload a measured step ran, as its source's scripts build it: the Hugging Face model from
    its config (``AutoModelForPreTraining`` for BERT -- ``AutoModelForSequenceClassification`` for its inference --,
    ``AutoModelForCausalLM`` otherwise; eager attention; dropout on in training), token ids of shape (batch, seq), the
    logits' cross-entropy against the ids (not timed by the source: its backward is). Needs transformers; nothing is
    downloaded."""
    import transformers  # lazy: transformers (dev extra; the GPU image has it)

    config = dict(model_config(step.model, root))
    config.pop("architectures", None)
    kind = config.pop("model_type")

    def build() -> Workload:
        cfg = transformers.AutoConfig.for_model(kind, **config)
        cfg._attn_implementation = "eager"
        auto = transformers.AutoModelForCausalLM
        if kind == "bert":  # (the source's inference runs BERT with a sequence classification head)
            auto = transformers.AutoModelForSequenceClassification if step.kind == "inf" else \
                transformers.AutoModelForPreTraining
        model = _HFLogits(auto.from_config(cfg, attn_implementation="eager"))
        ids = torch.ones(step.batch, step.seq, dtype=torch.long)
        return Workload(f"{step.model}-seq{step.seq}", model, TensorData((ids,), ids), loss_fn=_token_loss,
                        make_optimizer=lambda p: torch.optim.SGD(p, lr=0.0), batch_size=step.batch, preset="neusight")

    return build


@dataclass(frozen=True)
class StepError:
    step: Step
    predicted_ms: float
    predicted_forward_ms: float
    theirs: dict[str, float]
    """NeuSight's published |error| in % for this row, per method."""

    @property
    def error(self) -> float:
        return self.predicted_ms / self.step.total_ms - 1


def _traced(kind: str, root: Path, gpus: Collection[str] | None) -> Iterator[tuple[Step, Any, Gpu]]:
    """Each measured step of ``kind`` (train, inf) on ``gpus`` (None: all), its model traced as the source ran it
    (once per model, sequence and batch: a training step, or the forward alone in eval mode) and its GPU."""
    traces: dict[tuple[str, int, int], Any] = {}
    for st in steps(root, kind):
        if gpus is not None and st.gpu not in gpus:
            continue
        key = (st.model, st.seq, st.batch)
        if key not in traces:
            wl = build_meta(step_workload(st, root))
            traces[key] = trace_step(wl, "fp32", st.batch) if kind == "train" else trace_inference(wl, "fp32", st.batch)
        spec = lookup(st.gpu)
        assert spec is not None
        yield st, traces[key], spec


def step_errors(root: Path = ROOT, gpus: Collection[str] | None = None) -> list[StepError]:
    """Each measured single-GPU training step (forward + backward, fp32, TF32 off) beside its prediction: the model
    rebuilt from its config on meta, traced as the source ran it, priced without the loss's forward and the optimizer
    (the source times neither)."""
    theirs = their_errors(root)
    out = []
    for st, trace, spec in _traced("train", root, gpus):
        total = price(trace, spec, tf32=False, phases=("forward", "backward")).step_s
        forward = price(trace, spec, tf32=False, phases=("forward",)).step_s
        out.append(StepError(st, total * 1e3, forward * 1e3, theirs.get((st.gpu, st.model, st.batch), {})))
    return out


def inference_errors(root: Path = ROOT, gpus: Collection[str] | None = None) -> list[tuple[Step, float]]:
    """Each measured inference forward (fp32, TF32 off; the source's ``-inf-`` steps) beside its prediction: predicted
    / measured - 1, the model traced as the source ran it (eval mode, no loss)."""
    return [(st, price(trace, spec, tf32=False).step_s * 1e3 / st.forward_ms - 1)
            for st, trace, spec in _traced("inf", root, gpus)]


STEP_PAIRS = (("a100-80gb-pcie", "h100-sxm"), ("v100-32gb-pcie", "a100-80gb-pcie"), ("v100-32gb-pcie", "h100-sxm"),
              ("v100-32gb-pcie", "l4"), ("a100-80gb-pcie", "l4"), ("h100-sxm", "l4"))
"""Pairs of GPUs whose steps NeuSight measured in one setup (same model, sequence, batch): across-GPU checks."""


def pair_errors(errors: Collection[StepError], x: str, y: str) -> list[float]:
    """Per step measured on both ``x`` and ``y``: the predicted ratio of their step times over the measured one, less
    1 (what ``predict --gpu x,y`` answers: how much faster one is)."""
    on_x = {(e.step.model, e.step.seq, e.step.batch): e for e in errors if e.step.gpu == x}
    out = []
    for e in errors:
        other = on_x.get((e.step.model, e.step.seq, e.step.batch))
        if e.step.gpu == y and other is not None:
            out.append((e.predicted_ms / other.predicted_ms) / (e.step.total_ms / other.step.total_ms) - 1)
    return out


# ---- NeuSight's kernels of one GPU as a kernel table (``ampbench hw --calibrate``'s shape) -------------------------
def kernel_table(gpu: str, root: Path = ROOT) -> dict[str, Any]:
    """NeuSight's measured kernels of ``gpu`` (a key of our catalogue) as a calibration table that
    :class:`~ampbench.predict.measured_kernels.KernelTable` reads: its ``nn.Linear`` forwards as fp32 GEMMs, its
    ``torch.bmm``, its dense 3x3 convolutions' forwards (NCHW), its elementwise ops, layer norms and softmaxes, all
    forward and fp32, timed one at a time. Scoped to its own card (:data:`~ampbench.predict.measured_kernels.CARD_ONLY`).

    ``benchmarks/neusight_tables.py`` prices NeuSight's whole steps of each GPU from it, beside the fitted model, and
    ``--write`` ships the tables of the GPUs without one of their own measuring (docs/predict.md)."""
    device = {v: k for k, v in DEVICES.items()}[gpu]
    rows: list[dict[str, Any]] = []

    def add(kind: str, op: str, shape: dict[str, int], latency_ms: str, nbytes: float = 0.0, layout: str = "") -> None:
        rows.append({"kind": kind, "op": op, "dtype": "fp32", "layout": layout, "shape": shape,
                     "us": float(latency_ms) * 1e3, "bytes": nbytes, "flops": 0.0, "tflops": None, "gbps": None,
                     "calls": 0, "timer": "cuda_events", "error": "", "workspace_bytes": None, "host_us": None})

    for name, kind in (("linear", "gemm"), ("bmm", "bmm")):
        for r in _rows(root, name):
            if r["Device"] == device:
                b, m, n, k = (int(r[x]) for x in "BMNK")
                shape = {"batch": 1, "m": b * m, "n": n, "k": k} if name == "linear" else {"batch": b, "m": m, "n": n,
                                                                                            "k": k}
                add(kind, "mm" if name == "linear" else "bmm", shape, r["Latency"])
    for r in _rows(root, "conv"):  # (every one 3x3, stride 1, padded 1: the table's shapes assume kernel // 2)
        if r["Device"] == device and int(r["Padding"]) == int(r["Kernel_Szie"]) // 2:
            add("conv", "conv_fwd", {"batch": int(r["B"]), "cin": int(r["Input_Channel"]),
                                     "cout": int(r["Output_Channel"]), "kernel": int(r["Kernel_Szie"]),
                                     "size": int(r["Input_Size"]), "stride": int(r["Stride"]), "groups": 1},
                r["Latency"], layout="nchw")
    for r in _rows(root, "elem"):
        if r["Device"] == device:
            elements = int(r["B"]) * int(r["H"])
            add("elementwise", f"{r['OPName']}_fwd", {"elements": elements}, r["Latency"],
                4.0 * elements * (3 if r["OPName"] in BINARY else 2))
    for name, kind, op in (("ln", "norm", "layer_norm_fwd"), ("softmax", "softmax", "softmax_fwd")):
        for r in _rows(root, name):
            if r["Device"] == device:
                add(kind, op, {"rows": int(r["B"]), "cols": int(r["H"])}, r["Latency"])
    env = {"device_name": device, "torch": "2.1.0", "cuda": "12.1", "cudnn": "8902", "scope": CARD_ONLY,
           "source": "NeuSight published them (fp32 forwards, TF32 off, each timed alone; PyTorch 2.1.0, CUDA 12.1, "
                     "cuDNN 8.9.2; references/neusight, MIT)"}
    return {"env": env, "device_name": device, "kernels": rows, "created_at": "published", "power": {},
            "power_basis": ""}
