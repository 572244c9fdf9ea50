"""What ampbench writes for TensorBoard (``--tensorboard DIR``), in event files of its own writer (no TensorFlow import).

- ``train``: one TensorBoard run; per step the loss, loss scale, found-inf and skipped steps (``train/...``), per
  epoch the epoch's loss, samples/s, learning rate, memory and the test loss/metric (``epoch/...``).
- ``run``: one TensorBoard run per cell, ``DIR/<run id>/<workload>_<preset>/<cell>``, so the cells of a workload
  sit side by side: their convergence curves share tags (``converge/loss``, per seed ``converge/loss/seed_S``,
  ``converge/loss_scale/seed_S``) and overlay; the cell's figures are scalars at step 0 (``throughput/...``,
  ``memory/...``, ``ratio/...`` once the run is derived) and its identity and status a text (``cell``). The values
  are the stored row's.
- ``diagnose``: the gradient and activation histograms of the ``gradients`` / ``activations`` checks, on a log2
  axis (x = log2 |value|: fp16 flushes what lies left of -24, overflows right of 16): the underflow picture.

The ``tensorboard`` package is an optional extra (``pip install 'ampbench[tensorboard]'``): :func:`open_dir`
says so in one line, and refuses a DIR it cannot write, before any work starts.
"""

from __future__ import annotations

import math
import os
import re
import socket
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ampbench.cells import CellId
from ampbench.errors import AmpbenchError

EXTRA = "pip install 'ampbench[tensorboard]'"


def require() -> None:
    """The tensorboard package is importable (AmpbenchError naming the extra otherwise)."""
    try:
        import tensorboard  # noqa: F401  (lazy: tensorboard)
        from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: F401  (lazy: tensorboard)
    except ImportError:
        raise AmpbenchError(f"--tensorboard needs the tensorboard package: {EXTRA} (or pip install tensorboard)") from None


def open_dir(path: Path | str, flag: str = "--tensorboard") -> Path:
    """Check before work starts that TensorBoard files can be written under ``path`` (created if missing)."""
    require()
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise AmpbenchError(f"{flag} {p}: is a file; give a directory (TensorBoard writes one folder per run in it)")
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".ampbench-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise AmpbenchError(f"{flag} {p}: cannot write there ({e.strerror or type(e).__name__}); give a writable "
                            "directory") from None
    return p


class EventWriter:
    """An event file of TensorBoard's format in ``logdir``: scalars, texts and raw histograms, as
    ``torch.utils.tensorboard.SummaryWriter`` writes them (simple_value scalars, the text plugin's tensor, a
    HistogramProto).

    Our own because torch's writer imports TensorFlow whenever it is installed (through tensorboard's
    ``compat.tf``, which the event file writer uses for its file I/O): measured here +9 s and ~480 MB of RSS in a
    PyTorch run, TensorFlow's log lines in the output, and that memory in the run's RSS figures. The record
    framing is tensorboard's own RecordWriter over a plain file, whose CRC is pure Python: nothing here imports
    TensorFlow. Writes are synchronous (a handful of values per cell or epoch)."""

    _count = 0

    def __init__(self, logdir: Path | str) -> None:
        from tensorboard.compat.proto.event_pb2 import Event  # lazy: tensorboard
        from tensorboard.summary.writer.record_writer import RecordWriter  # lazy: tensorboard

        Path(logdir).mkdir(parents=True, exist_ok=True)
        EventWriter._count += 1
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{EventWriter._count}"
        self._file = RecordWriter(open(Path(logdir) / name, "wb"))  # noqa: SIM115 (closed by close())
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event: Any) -> None:
        self._file.write(event.SerializeToString())

    def _summary(self, value: Any, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event  # lazy: tensorboard
        from tensorboard.compat.proto.summary_pb2 import Summary  # lazy: tensorboard

        self._write(Event(wall_time=time.time(), step=int(step), summary=Summary(value=[value])))

    def add_scalar(self, tag: str, value: float, step: int = 0) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary  # lazy: tensorboard

        self._summary(Summary.Value(tag=tag, simple_value=float(value)), step)

    def add_text(self, tag: str, text: str, step: int = 0) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata  # lazy: tensorboard
        from tensorboard.compat.proto.tensor_pb2 import TensorProto  # lazy: tensorboard
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto  # lazy: tensorboard
        from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData  # lazy: tensorboard

        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
            plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
        tensor = TensorProto(dtype="DT_STRING", string_val=[text.encode("utf-8")],
                             tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        self._summary(Summary.Value(tag=tag + "/text_summary", metadata=meta, tensor=tensor), step)

    def add_histogram_raw(self, tag: str, min: float, max: float, num: int, sum: float, sum_squares: float,
                          bucket_limits: list[float], bucket_counts: list[int], global_step: int = 0) -> None:
        from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary  # lazy: tensorboard

        hist = HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares, bucket_limit=bucket_limits,
                              bucket=bucket_counts)
        self._summary(Summary.Value(tag=tag, histo=hist), global_step)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def writer(path: Path | str) -> EventWriter:
    return EventWriter(path)


def safe_name(text: str) -> str:
    """A path component from a label (``hf:bert-base`` -> ``hf_bert-base``)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_")[:80] or "_"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -- train ----------------------------------------------------------------------------------------------------------
class TrainLogger:
    """``ampbench train --tensorboard DIR``: called by :func:`ampbench.frameworks.torch.train.train` after each step and epoch."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._w: Any = None

    @property
    def w(self) -> Any:  # (created at the first value: under torchrun only rank 0 logs, the others write no file)
        if self._w is None:
            self._w = writer(self.path)
        return self._w

    def step(self, global_step: int, scalars: Mapping[str, float]) -> None:
        for tag, v in scalars.items():
            if _finite(v):
                self.w.add_scalar(f"train/{tag}", v, global_step)

    def epoch(self, epoch: int, scalars: Mapping[str, float | None]) -> None:
        for tag, v in scalars.items():
            if _finite(v):
                self.w.add_scalar(f"epoch/{tag}", v, epoch)
        self.w.flush()

    def close(self) -> None:
        if self._w is not None:
            self._w.close()


# -- run ------------------------------------------------------------------------------------------------------------
THROUGHPUT_KEYS = ("samples_per_s", "step_ms_p50", "step_ms_p90", "first_step_ms", "flops_per_step",
                   "max_batch", "max_batch_samples_per_s")
MEMORY_KEYS = ("peak_allocated_bytes", "peak_reserved_bytes", "cpu_rss_peak_bytes", "activation_bytes", "weights_bytes",
               "grads_bytes", "optimizer_bytes")
RATIO_KEYS = ("speedup_vs_fp32", "memory_saving_vs_fp32", "max_batch_ratio_vs_fp32")
"""Derived keys (the key ``max_batch_vs_fp32`` named none: no max-batch ratio was ever written)."""
DERIVED_THROUGHPUT_KEYS = ("mfu",)
"""Logged from the derived row: null where ``ampbench hw`` measured a GEMM above the device's peak (``mfu_note``)."""


def cell_dir(root: Path, row: Mapping[str, Any]) -> Path:
    """``root/<run id>/<workload>_<preset>/<cell>``: a workload's cells are sibling runs (their curves overlay)."""

    cid = CellId.of(row)
    group = safe_name(f"{cid.workload}_{cid.preset}")
    setting = cid.setting.describe(with_batch=False)
    name = cid.precision + (f" b{cid.batch_size}" if cid.batch_size else "") + (f" {setting}" if setting != "eager" else "")
    if row.get("repeat"):
        name += f" repeat {row['repeat']}" + (" closing" if row.get("closing_baseline") else "")
    return root / safe_name(str(row.get("run_id") or "run")) / group / safe_name(name)


class RunLogger:
    """``ampbench run --tensorboard DIR``: each stored row as a TensorBoard run of its own (see the module doc)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.written: list[Path] = []

    def cell(self, row: Mapping[str, Any]) -> Path:
        path = cell_dir(self.root, row)
        w = writer(path)
        try:
            status = row.get("status")
            facts = {"status": status, "reason": row.get("reason") or "", "device": row.get("device"),
                     "device_name": row.get("device_name"), "batch_size": row.get("batch_size"),
                     "measures": ",".join(row.get("measures") or []), "cell_key": row.get("cell_key")}
            w.add_text("cell", "\n".join(f"- **{k}**: {v}" for k, v in facts.items()), 0)
            for group, keys in (("throughput", THROUGHPUT_KEYS), ("memory", MEMORY_KEYS)):
                for k in keys:
                    if _finite(row.get(k)):
                        w.add_scalar(f"{group}/{k}", row[k], 0)
            conv = row.get("converge") or {}
            steps = conv.get("curve_steps") or []
            for seed, losses, scales in zip(conv.get("seeds") or [], conv.get("losses") or [],
                                            conv.get("loss_scales") or []):
                for s, v in zip(steps, losses):
                    if _finite(v):
                        w.add_scalar(f"converge/loss/seed_{seed}", v, s)
                for s, v in zip(steps, scales):
                    if _finite(v):
                        w.add_scalar(f"converge/loss_scale/seed_{seed}", v, s)
            for s, v in zip(steps, mean_curve(conv.get("losses") or [])):
                if _finite(v):
                    w.add_scalar("converge/loss", v, s)
            for seed, skipped in zip(conv.get("seeds") or [], conv.get("skipped_steps") or []):
                w.add_scalar(f"converge/skipped_steps/seed_{seed}", skipped, conv.get("steps") or 0)
            if _finite(row.get("metric")):
                w.add_scalar("converge/metric", row["metric"], conv.get("steps") or 0)
        finally:
            w.close()
        self.written.append(path)
        return path

    def ratios(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """The derived ratios (vs fp32) of a finished run, and its MFU as read through the store, into each cell's
        run."""
        for row in rows:
            found = {f"ratio/{k}": row[k] for k in RATIO_KEYS if _finite(row.get(k))}
            found.update({f"throughput/{k}": row[k] for k in DERIVED_THROUGHPUT_KEYS if _finite(row.get(k))})
            if found:
                w = writer(cell_dir(self.root, row))
                for tag, v in found.items():
                    w.add_scalar(tag, v, 0)
                w.close()


def mean_curve(curves: list[list[float]]) -> list[float]:
    """The mean over seeds at each point (NaN where a seed is non-finite: a diverged seed shows as a gap)."""
    if not curves:
        return []
    n = min(len(c) for c in curves)
    return [sum(c[i] for c in curves) / len(curves) for i in range(n)]


# -- diagnose -------------------------------------------------------------------------------------------------------
def add_log2_histogram(w: Any, tag: str, counts: list[int], zeros: int, lo: int, step: int = 0) -> None:
    """A log2 |value| histogram (bin k = [2^(lo+k), 2^(lo+k+1))) as TensorBoard's raw histogram; exact zeros
    (which have no log2) left out, counted in the scalar ``zeros/<tag>``."""
    total = sum(counts)
    if total:
        nonzero = [i for i, c in enumerate(counts) if c]
        centers = [lo + i + 0.5 for i in range(len(counts))]
        w.add_histogram_raw(tag, min=float(lo + nonzero[0]), max=float(lo + nonzero[-1] + 1), num=total,
                            sum=sum(c * x for c, x in zip(counts, centers)),
                            sum_squares=sum(c * x * x for c, x in zip(counts, centers)),
                            bucket_limits=[float(lo + i + 1) for i in range(len(counts))], bucket_counts=counts,
                            global_step=step)
    w.add_scalar(f"zeros/{tag}", zeros, step)


def write_diagnosis(path: Path | str, details: Mapping[str, Any]) -> Path:
    """The histograms of a diagnosis's ``gradients`` and ``activations`` details (what it stored)."""
    from ampbench.diagnose.ranges import HIST_LO  # lazy: torch

    w = writer(path)
    try:
        g = details.get("gradients")
        if g:
            lo = int(g["bins_log2"][0]) if g.get("bins_log2") else HIST_LO
            add_log2_histogram(w, "gradients/all_params", g["param_histogram"], g["param_zeros"], lo)
            add_log2_histogram(w, "gradients/all_activation_grads", g["activation_grad_histogram"],
                           g["activation_grad_zeros"], lo)
            for p in g.get("params", []):
                add_log2_histogram(w, f"gradients/params/{p['name']}", p["histogram"], p["zeros"], lo)
            for layer in g.get("layers", []):
                add_log2_histogram(w, f"gradients/activation_grads/{layer['name']}", layer["histogram"], layer["zeros"], lo)
            for k in ("max_abs", "recommended_scale", "fp16_underflow_at_recommended_scale"):
                if _finite(g.get(k)):
                    w.add_scalar(f"gradients/{k}", g[k], 0)
            for k, v in (g.get("overall") or {}).items():
                w.add_scalar(f"gradients/share/{k}", v, 0)
        for a in details.get("activations") or []:
            if "histogram" in a:
                add_log2_histogram(w, f"activations/{a['name']}", a["histogram"], a["zeros"], HIST_LO)
            w.add_scalar(f"activations/max_abs/{a['name']}", a["max_abs"], 0)
    finally:
        w.close()
    return Path(path)
