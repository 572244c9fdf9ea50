"""Our own workloads measured on a real GPU, beside what ``ampbench predict`` says of them: the check no published
table gives (published tables time other people's models, in other people's loops).

The measurements are an ``ampbench export`` of runs made on a lent GPU by ``benchmarks/gpu_session.sh``
(``benchmarks/results/<gpu>/runs.json``, and ``runs_2.json`` of a later lease: compiled and CUDA-graph cells). Each ok
cell (closing baselines and repeats left out) is predicted again here, as ``ampbench predict`` would
(:func:`~ampbench.predict.rows.predict_target`: the same target, batch, precision, memory format and compile/CUDA-graph
execution, on the catalogue's entry for the GPU that ran it), and paired with its measurement. Nothing is fitted on
these rows: the kernel constants come from measured kernels (NeuSight's on 8 GPUs, OpenXLA's H100 GEMMs, the lent H200's
table: :mod:`predict_checks.fit`), the host's from a micro-benchmark on the lent machine's host
(``benchmarks/host_overhead.py``), none from a step checked here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from ampbench.command_options import PredictData
from ampbench.measure.gpus import Gpu, lookup
from ampbench.precision.optimizers import DIRECTLY
from ampbench.predict.cost import MEASURED_HOST
from ampbench.predict.rows import Machine, Question, predict_target
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta, build_target

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
KEPT_BATCHNORM_TAKES_HALF = "2026-11-27"
"""From this day a kept BatchNorm takes its half input (master-*): cells of models with BatchNorm measured before it
ran a cast around each norm, which the engine (and so a prediction) no longer has -- they are left out
(:func:`stale`), to be measured again."""
LENT: dict[str, str] = {"h200": "h200", "h200/truth": "h200", "h200/lease3": "h200", "h200/rest": "h200"}
"""Results folders of lent GPUs -> the catalogue key of the GPU that filled them (``measure/gpus.csv``)."""


@dataclass(frozen=True)
class MeasuredStep:
    """One cell measured on a GPU and predicted for it."""

    gpu: str
    workload: str
    preset: str
    precision: str
    batch_size: int
    memory_format: str
    measured_ms: float
    """The cell's median step (CUDA events)."""
    predicted_ms: float
    bound: str
    """What the prediction says sets the step: compute, memory or launch (the host)."""
    band: float
    """The error the prediction's row states (``predicted_error_pct`` / 100)."""
    measured_peak_bytes: int
    """``torch.cuda.max_memory_allocated`` over the cell."""
    predicted_peak_bytes: int
    compile: str = "off"
    cuda_graphs: str = "off"
    measured_j_per_sample: float | None = None
    """NVML's energy over the timed steps per sample (None where the run had no reading)."""
    predicted_j_per_sample: float | None = None
    energy_basis: str = ""
    """What the prediction's energy was priced at: measured power (a kernel table's) or TDP."""
    checkpointing: str = "off"
    grad_accum: int = 1
    """Micro-batches of ``batch_size`` the step accumulated (``run --grad-accum``)."""

    @property
    def error(self) -> float:
        """predicted / measured - 1: negative when predicted too fast."""
        return self.predicted_ms / self.measured_ms - 1

    @property
    def memory_error(self) -> float:
        return self.predicted_peak_bytes / self.measured_peak_bytes - 1

    @property
    def name(self) -> str:
        execution = "".join(f"-{axis}" for axis, on in (("compile", self.compile != "off"),
                                                           ("graphs", self.cuda_graphs == "on")) if on)
        execution += f"-{self.checkpointing}-checkpointing" if self.checkpointing != "off" else ""
        execution += f"-x{self.grad_accum}" if self.grad_accum != 1 else ""
        return f"{self.workload.rsplit(':', 1)[-1]}-{self.preset}-{self.precision}{execution}"


MOVED = {"src/ampbench/predict/references.py": "predict_checks/references.py"}
"""Model files the runs named that have moved since (the references left the product, 2026-11-27)."""


def _moved(spec: str | None) -> str | None:
    for old, new in MOVED.items():
        if spec and spec.startswith(old):
            return new + spec[len(old):]
    return spec


def _build(workload: str, preset: str, config: dict[str, Any]) -> Callable[[], Workload]:
    """The cell's workload as its run built it: the run's target and data options (``-o``, ``--input-shape``...)."""
    data = PredictData(input_shape=config["input_shape"], vocab_size=config["vocab_size"],
                       num_classes=config["num_classes"], num_outputs=config["num_outputs"], task=config["task"],
                       batches=config["batches"], loss=config["loss"], option=config["options"]).parsed()
    data = data.with_defaults(entry_options(workload, preset, config))
    user = workload.startswith("user:")
    return functools.partial(build_target, None if user else workload, _moved(config["model"]) if user else None, preset, data,
                             config["seed"], preset_given=False)


def entry_options(workload: str, preset: str, config: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The workload options a suite entry gave the run's cells of ``workload`` (the run's ``settings``, one per
    target; the GPU suite's lstm-lm trains at ``vocab=100000``), which the rows themselves do not carry."""
    targets = zip(config.get("workloads") or (), config.get("presets") or (), config.get("settings") or ())
    return next((tuple((str(k), v) for k, v in s.get("options") or ()) for w, p, s in targets
                 if w == workload and p == preset), ())


def load(folder: str, results: Path = RESULTS) -> tuple[Gpu, list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The catalogue GPU of a results folder, its ok measured cells and each run's identity config."""
    gpu = lookup(LENT[folder])
    assert gpu is not None, folder  # (a catalogue key of ours)
    configs: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    folder_path = results / folder
    for path in [folder_path / "runs.json", *sorted(folder_path.glob("runs_[0-9].json"))]:  # (a later lease's runs_2)
        data = json.loads(path.read_text())
        configs.update({r["run_id"]: r["config"]["identity"] for r in data["runs"]})
        rows += [r for r in data["rows"] if r["status"] == "ok" and not r["closing_baseline"] and not r["repeat_of"]]
    return gpu, rows, configs


def stale(row: dict[str, Any], build: Callable[[], Workload]) -> bool:
    """A master-* cell of a model with BatchNorm measured before :data:`KEPT_BATCHNORM_TAKES_HALF`: the engine it ran
    is not the one predicted."""
    if not row["precision"].startswith("master-") or str(row.get("created_at") or "") >= KEPT_BATCHNORM_TAKES_HALF:
        return False
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in build_meta(build).model.modules())


def lent() -> tuple[MeasuredStep, ...]:
    """Every lent GPU's steps the tables check: the first lease's H200 set, the real-scale suite of the second and
    third leases (the third's in all 8 modes, built ahead) and the fourth lease's cells (ResNet-50's fp16 modes,
    GPT-2 at 1,024 tokens, ResNet-50 NCHW at Lambda's batches, BERT-base checkpointed and accumulated)."""
    return steps() + steps("h200/truth") + steps("h200/lease3") + steps("h200/rest")


@functools.cache
def steps(folder: str = "h200") -> tuple[MeasuredStep, ...]:
    """Every ok cell of ``benchmarks/results/<folder>/runs.json`` beside its prediction (cached: 8-15 s of tracing a
    folder -- each precision traced once: no max batch)."""
    gpu, rows, configs = load(folder)
    groups: dict[tuple[str, str, int, str, str, int], list[dict[str, Any]]] = {}
    for r in rows:  # (a checkpointed or accumulated step is a cell of its own: priced as that step)
        groups.setdefault((r["workload"], r["preset"], r["batch_size"], r["memory_format"],
                           r.get("checkpointing") or "off", int(r.get("grad_accum") or 1)), []).append(r)
    out: list[MeasuredStep] = []
    for (workload, preset, batch, layout, checkpointing, n), measured in groups.items():
        build = _build(workload, preset, configs[measured[0]["run_id"]])
        measured = [r for r in measured if not stale(r, build)]
        if not measured:
            continue
        executions = tuple(dict.fromkeys((r.get("compile") or "off", r.get("cuda_graphs") or "off") for r in measured))
        # (the engine's fused optimizer step as those runs took it: directly, or -- before 2026-11-26 -- through
        # optimizer.step(), whose Python the host model prices apart)
        direct = all(DIRECTLY in (r.get("optimizer_impl") or "") for r in measured)
        question = Question(tuple(dict.fromkeys(r["precision"] for r in measured)), batch, layout == "channels_last",
                            preset, executions=executions, checkpointing=(checkpointing,), grad_accum=n)
        machine = Machine(gpu, host=replace(MEASURED_HOST, steps_directly=direct))
        predicted = {(p["precision"], p["compile"], p["cuda_graphs"]): p
                     for p in predict_target(workload, build, question, machine, max_batch=False)}
        for r in measured:
            execution = (r.get("compile") or "off", r.get("cuda_graphs") or "off")
            p = predicted[(r["precision"], *execution)]
            out.append(MeasuredStep(gpu.key, workload, preset, r["precision"], batch, layout, r["step_ms_p50"],
                                    p["predicted_step_ms"], p["predicted_bound"], p["predicted_error_pct"] / 100,
                                    r["peak_allocated_bytes"], p["predicted_peak_bytes"], *execution,
                                    r.get("joules_per_sample"), p.get("predicted_joules_per_sample"),
                                    str(p.get("predicted_energy_basis") or ""), checkpointing, n))
    return tuple(out)


AMP_MODES = ("amp-fp16", "amp-bf16")
BASES = ("fp32", "tf32")


def speedup_errors(steps: tuple[MeasuredStep, ...]) -> dict[str, float]:
    """Each workload's AMP speedup over fp32 and over TF32 (every pair both sides of which ran ok, one execution and
    layout), predicted over measured - 1, by ``workload amp/base``: the question a user asks of the suite."""
    cells = {(s.workload, s.precision, s.compile, s.cuda_graphs): s for s in steps}
    out: dict[str, float] = {}
    for (workload, precision, c, g), amp in cells.items():
        if precision not in AMP_MODES:
            continue
        for base in BASES:
            b = cells.get((workload, base, c, g))
            if b is not None:
                measured = b.measured_ms / amp.measured_ms
                out[f"{workload} {precision}/{base}"] = (b.predicted_ms / amp.predicted_ms) / measured - 1
    return out
