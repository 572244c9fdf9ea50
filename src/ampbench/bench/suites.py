"""The default suites and what a run measures by default on each kind of device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.workloads.base import PRESETS

REFERENCE_GIB = 75.0
"""The GPU suite's batches are sized for a GPU of at least this much memory (an 80 GB H100: 79.6 GiB less the
context), fp32 -- the mode that holds the most -- included; a GPU with less trains each at a proportionally smaller
batch (:func:`sized_batch`)."""


@dataclass(frozen=True)
class SuiteEntry:
    workload: str
    preset: str
    native_only: bool = False
    """Run only the modes this device has math hardware for (and fp32): emulated ones would take hours."""
    batch: int | None = None
    """The batch it trains at (None: the workload's own); on a GPU, at :data:`REFERENCE_GIB` of memory or more."""
    memory_format: str | None = None
    """The layout it trains in (channels_last: how convnets are trained on GPUs); None: the run's."""
    options: tuple[tuple[str, Any], ...] = ()
    """The workload's options (``-o``) it runs with."""


@dataclass(frozen=True)
class EntrySettings:
    """What a suite entry sets for its cells where the user said nothing: batch (sized to the device's memory),
    memory format, workload options. A target the user named sets nothing."""

    batch: int | None = None
    memory_format: str | None = None
    options: tuple[tuple[str, Any], ...] = ()


def sized_batch(batch: int, memory_gib: float | None) -> int:
    """``batch`` on a device of ``memory_gib`` (None: a CPU, or not known): as given from :data:`REFERENCE_GIB` up,
    else scaled down in proportion, to a multiple of 8 where that leaves one (activations grow with the batch, the
    weights and optimizer state do not: proportional leaves room)."""
    if memory_gib is None or memory_gib >= REFERENCE_GIB:
        return batch
    b = int(batch * memory_gib / REFERENCE_GIB)
    return max(1, b // 8 * 8 if b >= 8 else b)


# CPU: finishes in a few minutes on 2 cores (fp16 convolutions are ~45x slower than fp32 on CPUs without
# AVX512-FP16/AMX-FP16, which is itself a finding). bert small is the GEMM-bound entry: what the CPU's
# half-precision hardware (AVX512-BF16, AMX) can do for a real model, next to ampbench hw's GEMM speedup; in
# emulated modes its matmuls run ~100x slower than fp32, so those are left out of it (and said so). GPU: models big
# enough to keep the GPU busy, so the ratios say something about real training.
CPU_SUITE = (SuiteEntry("mnist-cnn", "small"), SuiteEntry("tabular-mlp", "small"), SuiteEntry("bert", "tiny"),
             SuiteEntry("bert", "small", native_only=True))
# The models people train, at the sizes they train them: each keeps a GPU's Tensor Cores busy (predicted GPU-bound in
# every AMP mode on an H100: tests/bench/test_suites.py), so its ratios answer "how much faster on my GPU".
GPU_SUITE = (
    SuiteEntry("resnet50", "paper", batch=256, memory_format="channels_last"),  # ImageNet convnet, DLE's batch
    SuiteEntry("vit", "paper", batch=128),  # ViT-B/16
    SuiteEntry("bert", "paper", batch=128),  # BERT-base, seq 128
    SuiteEntry("gpt2", "paper", batch=16),  # GPT-2 small, 16 x 1024 tokens
    SuiteEntry("unet", "paper", batch=32, memory_format="channels_last"),  # 256x256 segmentation
    SuiteEntry("lstm-lm", "paper", batch=128, options=(("vocab", 100_000),)),  # bigLSTM's layers, 100k words
    SuiteEntry("wide-mlp", "paper", batch=4096),  # GEMM-bound MLP
)
# 7 workloads x (8 modes + closing fp32) = 63 cells; each costs its steps (GPU_STEPS + GPU_WARMUP + 3, and untimed ones
# filling energy's 2 s window) plus ~0.4 s of CUDA context, setup and teardown on the lent H200's host (4-5 s until the
# fork server imported torch._dynamo), its build overlapping the cell before (phases_s says where): ampbench predict
# --gpu h100-sxm prints the suite's expected time on that GPU (~4.0 min); the third H200 lease ran the 63 cells in
# ~9.1 min, each cell importing torch._dynamo.
CPU_STEPS, CPU_WARMUP = 20, 3
GPU_STEPS, GPU_WARMUP = 20, 3


def default_steps(device: str) -> tuple[int, int]:
    """(timed steps, warm-up steps) a cell runs on this kind of device unless told."""
    return (GPU_STEPS, GPU_WARMUP) if device.startswith("cuda") else (CPU_STEPS, CPU_WARMUP)


def check_preset(preset: str, flag: str = "--preset") -> str:
    """tiny | small | paper, else one line naming them (the one check every entry point uses)."""
    if preset not in PRESETS:
        raise AmpbenchError(f"{flag} {preset!r}: choose one of {', '.join(PRESETS)}")
    return preset


def with_presets(workloads: list[str], preset: str | None, device: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The workloads and their presets: given ones as :func:`named_entry` makes them, or the device's default suite."""
    entries = suite_entries(workloads, preset, device)
    return tuple(e.workload for e in entries), tuple(e.preset for e in entries)


NAMED_PRESET = {"cpu": "small", "cuda": "paper"}
"""The preset of a workload the user named without --preset: on a CPU the size it runs in seconds; on a GPU the size
people train it at (a small one is launch-bound there: ``--workloads resnet50`` on an H100 timed a 64-px ResNet of
2.3M parameters and answered "no mode helps")."""


def named_entry(workload: str, preset: str | None, device: str) -> SuiteEntry:
    """A workload the user named: at --preset, setting nothing; without one, on a CPU at small, on a GPU at the size
    people train it: its GPU suite entry (batch, layout, options; ``resnet50`` is ResNet-50 at batch 256,
    channels-last) or, outside the suite, its paper preset."""
    if preset is not None:
        return SuiteEntry(workload, preset)
    if not device.startswith("cuda"):
        return SuiteEntry(workload, NAMED_PRESET["cpu"])
    return next((e for e in GPU_SUITE if e.workload == workload), SuiteEntry(workload, NAMED_PRESET["cuda"]))


def named_note(workloads: list[str], preset: str | None, device: str, batch_given: bool = False,
               batches: list[int | None] | None = None) -> str | None:
    """What a GPU took for workloads named without --preset, as the run's header and predict's notes say it
    ("no --preset: resnet50 at paper, batch 256, channels_last -- ..."); None where nothing was taken (a CPU, a
    --preset, no named workload). The batch is the suite entry's at its reference memory, or ``batches``' (per
    workload: what a run sized it to on its GPU; None: none set)."""
    if not workloads or preset is not None or not device.startswith("cuda"):
        return None
    entries = [named_entry(w, None, device) for w in workloads]
    sizes = batches if batches is not None else [None if batch_given else e.batch for e in entries]
    sized = [f"{e.workload} at {e.preset}" + (f", batch {b}" if b else "")
             + (f", {e.memory_format}" if e.memory_format else "") for e, b in zip(entries, sizes)]
    them = "it" if len(entries) == 1 else "them"
    return (f"no --preset: {'; '.join(sized)} -- the size people train {them} at, as ampbench run on a GPU measures "
            f"{them} (--preset small: the size a CPU runs in seconds)")


def suite_entries(workloads: list[str], preset: str | None, device: str) -> tuple[SuiteEntry, ...]:
    """The targets as entries: named workloads as :func:`named_entry` makes them, or the device's default suite (with
    another --preset than an entry's: that entry at that preset, without its batch, layout and options)."""
    if preset is not None:
        check_preset(preset)
    if workloads:
        return tuple(named_entry(w, preset, device) for w in workloads)
    return _suite(device, preset)


def entry_settings(entry: SuiteEntry, memory_gib: float | None) -> EntrySettings:
    """What ``entry`` sets for its cells on a device of ``memory_gib`` (None: not a GPU)."""
    batch = sized_batch(entry.batch, memory_gib) if entry.batch is not None else None
    return EntrySettings(batch, entry.memory_format, entry.options)


def suite_settings(entries: tuple[SuiteEntry, ...], memory_gib: float | None, batch_given: bool = False,
                   format_given: bool = False) -> tuple[EntrySettings, ...]:
    """What the entries set on a device of ``memory_gib``, less what the user gave (--batch-size, --memory-format);
    empty when they set nothing (named targets: a run's and a prediction's keys stay as they were)."""
    out = tuple(EntrySettings(None if batch_given else s.batch, None if format_given else s.memory_format, s.options)
                for s in (entry_settings(e, memory_gib) for e in entries))
    return out if any(s != EntrySettings() for s in out) else ()


def _suite(device: str, preset: str | None) -> tuple[SuiteEntry, ...]:
    """The device's default suite; with --preset every entry at that preset (entries that become the same, once)."""
    suite = GPU_SUITE if device.startswith("cuda") else CPU_SUITE
    if preset is None:
        return suite
    out: list[SuiteEntry] = []
    for e in suite:
        entry = e if preset == e.preset else SuiteEntry(e.workload, preset, e.native_only)
        if all((o.workload, o.preset) != (entry.workload, entry.preset) for o in out):
            out.append(entry)
    return tuple(out)


def native_only_entries(workloads: list[str], preset: str | None, precisions_given: bool,
                        device: str) -> tuple[str, ...]:
    """The default suite's native-only entries ('workload:preset'), unless the user named workloads or modes."""
    if workloads or precisions_given:
        return ()
    return tuple(f"{e.workload}:{e.preset}" for e in _suite(device, preset) if e.native_only)
