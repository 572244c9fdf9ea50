"""Pricing a step from a GPU's own measured kernels (``ampbench hw --calibrate``) where a table of its architecture
exists: each op's modelled time corrected by what the table measured for kernels of its kind.

The kernel models (:mod:`ampbench.predict.kernels`) know how a kernel's time grows with its shape -- tiles, waves,
bytes -- but their efficiencies are a fit over many GPUs' kernels, a compromise no one GPU runs exactly. A
calibration table says what this architecture's kernels really do. For every measured case this module computes
``measured / modelled`` on the table's own GPU; an op of a traced step is priced at its model's time on the target GPU
times the ratio of the measured cases nearest to it (same kind, dtype, direction and layout; nearest in log shape,
inverse-distance weighted). So:

- on the GPU that measured the table, a kernel at a measured shape is priced at its measured time;
- between shapes, the model interpolates (its waves and tiles) and the table sets the level;
- on another GPU of the same architecture (an H200's table for an H100), the model scales by SMs, clocks and
  bandwidth, as Habitat scales a measured kernel -- the ratio (the kernel's efficiency) carries over;
- an op with no measured neighbour of its kind keeps the model's time (said in the row's notes).

Kinds: GEMM (``mm``/``bmm`` by dtype), convolution (forward, data gradient, weight gradient by dtype and layout;
dense 1x1, dense windowed, grouped and depthwise apart), fused attention and a fused LSTM layer (forward and backward:
the backward is the measured forward-and-backward less the forward), normalisations (layer, batch, group: forward and
backward) and softmax, elementwise ops, the fused optimizer. Tables of other architectures are not used (their
efficiencies differ: a Hopper table says nothing of an Ampere card).

How good the interpolation is, measured: every case priced from the others alone (leave-one-out), per kind
(:meth:`KernelTable.leave_one_out`); the error band of a row priced this way is built from it.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ampbench.measure.gpus import Gpu, for_device
from ampbench.measure.kernel_power import IDLE, REPLAY, issue_us, power_key
from ampbench.predict import kernels
from ampbench.predict.kernels import ELEMENT, Calibration, Conv, calibration

TABLES_DIR = Path(__file__).with_name("calibration")
"""The kernel tables shipped with ampbench (``<gpu key>.csv``: what a lent GPU measured, committed)."""
NEIGHBOURS = 3


@dataclass(frozen=True)
class Point:
    """A measured case: where it sits (log shape) and its measured / modelled time on the table's GPU."""

    where: tuple[float, ...]
    ratio: float
    label: str


def _logs(*values: float) -> tuple[float, ...]:
    return tuple(math.log2(max(float(v), 1.0)) for v in values)


def conv_family(c: Conv) -> str:
    """dense1 (a GEMM), dense (a windowed dense layer), grouped, depthwise: families whose kernels differ."""
    if c.groups > 1:
        return "depthwise" if c.groups == c.c == c.k else "grouped"
    return "dense1" if c.r == c.s == 1 else "dense"


def _conv_of(shape: dict[str, Any]) -> Conv:
    s, size, kernel, stride = shape, int(shape["size"]), int(shape["kernel"]), int(shape["stride"])
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    return Conv(int(s["batch"]), int(s["cin"]), size, size, int(s["cout"]), kernel, kernel, stride, int(s["groups"]),
                out, out)


DIRECTIONS = {"conv_fwd": "fwd", "conv_dgrad": "dgrad", "conv_wgrad": "wgrad"}


def _conv_io(c: Conv, element: int) -> float:
    """A convolution's input and output bytes (what its workspace is counted per)."""
    return float(element * (c.n * c.c * c.h * c.w + c.n * c.k * c.p * c.q))


def _nearest(pts: list[Point], where: tuple[float, ...]) -> list[tuple[float, Point]]:
    """The :data:`NEIGHBOURS` points nearest ``where`` in log shape, nearest first, with their distances."""
    return sorted(((math.dist(p.where, where), p) for p in pts), key=lambda dp: dp[0])[:NEIGHBOURS]


def _nearest_mean(pts: list[Point], where: tuple[float, ...]) -> float:
    """The inverse-distance weighted mean of the nearest points' ratios (arithmetic: a workspace may be 0)."""
    dist = _nearest(pts, where)
    if dist[0][0] < 1e-9:
        return dist[0][1].ratio
    weights = [1.0 / d for d, _ in dist]
    return sum(w * p.ratio for w, (_, p) in zip(weights, dist)) / sum(weights)


def _own_layout_first(op: Any) -> tuple[str, str]:
    """The table's layouts to look a convolution or batch norm up in: its own first, the other where the table timed
    only that."""
    return ("nchw", "nhwc") if op.nchw else ("nhwc", "nchw")


def _conv_where(c: Conv) -> tuple[float, ...]:
    g, m, n, k = c.gemm()
    return _logs(m, n, k, g)


NORM_FAMILY = (("layer_norm", "layer_norm"), ("batch_norm", "batch_norm"), ("group_norm", "group_norm"),
               ("rms_norm", "layer_norm"))


def norm_family(name: str) -> str | None:
    return next((fam for key, fam in NORM_FAMILY if key in name), None)


@dataclass
class KernelTable:
    """A GPU's measured kernels as ratios to the model on that GPU, by kind (see the module's docstring)."""

    gpu: Gpu
    """The GPU that measured it."""
    source: str
    """What it is: the GPU, when and with what software (a row's ``predicted_kernels``)."""
    points: dict[tuple[str, ...], list[Point]] = field(default_factory=dict)
    power_w: dict[str, float] = field(default_factory=dict)
    """The board's power running each kind of kernel (``gemm/bf16``, ``conv/fp16``, ``elementwise/fp32`` and ``idle``:
    :func:`ampbench.measure.calibrate.power_pass`), on the table's GPU; empty for a table without replay power."""
    workspace: dict[tuple[str, ...], list[Point]] = field(default_factory=dict)
    """Per convolution kind (direction, dtype, layout, family): what each measured case allocated beyond its result
    (cuDNN's workspace), as bytes per byte of its input and output (``ratio``); tables before the column: none."""
    host_us: dict[str, float] = field(default_factory=dict)
    """The table's host's time to issue one call of each kind (``gemm``, ``conv``, ``norm``...), microseconds: the
    median of the kind's single-call cases (a GEMM, a convolution's forward or either gradient, an op's forward; the
    forward+backward cases' autograd left out), where the sweep timed the issue (:func:`ampbench.measure.calibrate.
    issue_us`: CUDA tables from 2026-11-28); empty for an older table."""
    _memo: dict[tuple[Any, ...], float | None] = field(default_factory=dict, repr=False)
    """Ratios looked up (a step prices the same kernel shape many times, every precision and GPU again)."""

    @classmethod
    def of(cls, table: dict[str, Any], gpu: Gpu, cal: Calibration | None = None) -> KernelTable:
        """From a calibration table (:func:`ampbench.measure.calibrate.sweep`'s, or read back from its CSV)."""
        cal = cal or calibration()
        env = table.get("env") or {}
        when = str(table.get("created_at") or env.get("time") or "")[:10]
        name = env.get("device_name") or table.get("device_name") or gpu.name
        source = (f"{name}'s kernels as {env['source']}" if env.get("source") else
                  f"{name}'s measured kernels ({when}; torch {env.get('torch', '?')}, cuDNN {env.get('cudnn', '?')})")
        out = cls(gpu, source)
        if table.get("power_basis") == REPLAY and IDLE in (table.get("power") or {}):
            out.power_w = {k: float(v["mean_power_w"]) for k, v in table["power"].items() if v.get("mean_power_w")}
        rows = [r for r in table["kernels"] if r.get("us")]
        issued: dict[str, list[float]] = {}
        for r in rows:
            host = issue_us(r)
            if host:
                issued.setdefault(r["kind"], []).append(host)
        out.host_us = {k: statistics.median(v) for k, v in issued.items()}
        fwd: dict[tuple[Any, ...], float] = {}
        for r in rows:  # (the forward of each fwd_bwd case: the backward is the difference; a plain GEMM's time)
            if r["op"].endswith("_fwd") or (r["kind"] in ("gemm", "bmm") and not r.get("layout")):
                fwd[(r["op"].removesuffix("_fwd"), r["dtype"], r.get("layout", ""), _key(r["shape"]))] = r["us"] * 1e-6
        for r in rows:
            for key, where, modelled, measured in out._cases(r, fwd, cal):
                if modelled > 0 and measured > 0:
                    out.points.setdefault(key, []).append(Point(where, measured / modelled, f"{r['op']} {r['shape']}"))
            if r["kind"] == "conv" and r.get("workspace_bytes") is not None:
                c = _conv_of(r["shape"])
                key = ("conv", DIRECTIONS[r["op"]], r["dtype"], r.get("layout") or "nhwc", conv_family(c))
                out.workspace.setdefault(key, []).append(
                    Point(_conv_where(c), r["workspace_bytes"] / _conv_io(c, ELEMENT.get(r["dtype"], 4)),
                          f"{r['op']} {r['shape']}"))
        return out

    def _cases(self, r: dict[str, Any], fwd: dict[tuple[Any, ...], float], cal: Calibration
               ) -> Iterable[tuple[tuple[str, ...], tuple[float, ...], float, float]]:
        """(key, where, modelled s, measured s) of one measured row (a fwd_bwd row: its backward)."""
        g, kind, op, dtype, shape = self.gpu, r["kind"], r["op"], r["dtype"], r["shape"]
        t = r["us"] * 1e-6
        element = ELEMENT.get(dtype, 4)
        if kind in ("gemm", "bmm"):
            b, m, n, k = int(shape["batch"]), int(shape["m"]), int(shape["n"]), int(shape["k"])
            layout = r.get("layout") or ""
            if not layout:
                yield ("gemm", dtype), _logs(m, n, k, b), kernels.gemm_s(g, cal, b, m, n, k, dtype, element), t
            else:  # (a transposed operand: what it cost over the plain case of the same shape, which it needs)
                plain = fwd.get((op, dtype, "", _key(shape)))
                if plain is not None:
                    yield ("gemm_layout", dtype, layout), _logs(m, n, k, b), plain, t
        elif kind == "conv":
            c = _conv_of(shape)
            direction = DIRECTIONS[op]
            modelled = kernels.conv_s(g, cal, c, dtype, element, r.get("layout") == "nchw")
            yield ("conv", direction, dtype, r.get("layout") or "nhwc", conv_family(c)), _conv_where(c), modelled, t
        elif kind == "attention":
            base = op.rsplit("_", 1)[0] if op.endswith("_fwd") else op.rsplit("_", 2)[0]
            causal = base.endswith("causal")
            # (modelled as price_op prices a traced op of this shape: the forward's FLOPs counted whole -- the causal
            # half left out by the pricing, once -- and the backward at twice them, its traced count; the row's own
            # ``flops`` column is the causal half. Until 2026-11-29 the half was taken twice and the backward modelled
            # at 2.5x: a causal kernel was priced at twice its measured time, every backward at 0.8x it.)
            flops = 4.0 * shape["batch"] * shape["heads"] * shape["seq"] ** 2 * shape["dim"]
            moved = 4 * shape["batch"] * shape["heads"] * shape["seq"] * shape["dim"] * element
            where = _attention_where(flops, causal)
            if op.endswith("_fwd"):
                yield ("attention", "fwd", dtype), where, _attention_s(g, cal, flops, moved, dtype, causal), t
            else:
                f = fwd.get((base, dtype, r.get("layout", ""), _key(shape)))
                if f is not None:
                    yield (("attention", "bwd", dtype), where,
                           _attention_s(g, cal, BACKWARD_FLOPS * flops, 2 * moved, dtype, causal), t - f)
        elif kind == "rnn":
            steps, batch, inputs, hidden = (int(shape[k]) for k in ("seq", "batch", "inputs", "hidden"))
            rnn = (steps, batch, inputs, 4 * hidden, hidden)
            where = _logs(batch, hidden, inputs, steps)
            if op.endswith("_fwd"):
                yield ("rnn", "fwd", dtype), where, _rnn_s(g, cal, rnn, dtype, False), t
            else:
                f = fwd.get(("lstm", dtype, r.get("layout", ""), _key(shape)))
                if f is not None:
                    yield ("rnn", "bwd", dtype), where, _rnn_s(g, cal, rnn, dtype, True), t - f
        elif kind in ("norm", "softmax"):
            family = "softmax" if kind == "softmax" else norm_family(op) or "layer_norm"
            elements = math.prod(int(v) ** (2 if k == "size" else 1) for k, v in shape.items() if k != "groups")
            reduction = "softmax" if kind == "softmax" else "norm"
            where, layout = _logs(elements), r.get("layout") or ""  # (a batch norm's: NCHW and NHWC kernels differ)
            if op.endswith("_fwd"):
                yield (("norm", family, "fwd", dtype, layout), where,
                       kernels.reduction_s(g, cal, 2 * elements * element, reduction), t)
            else:
                f = fwd.get((op.rsplit("_", 2)[0], dtype, r.get("layout", ""), _key(shape)))
                if f is not None:  # (the backward reads the output's gradient and the input, writes the input's)
                    yield (("norm", family, "bwd", dtype, layout), where,
                           kernels.reduction_s(g, cal, 3 * elements * element, reduction), t - f)
        elif kind in ("elementwise", "optimizer"):
            cast = CAST_CASES.get(op[:-4]) if kind == "elementwise" else None  # (a dtype cast: its own kind, below)
            yield (kind, *((cast,) if cast else ())), _logs(r["bytes"]), kernels.streaming_s(g, cal, r["bytes"]), t

    # -- lookups ---------------------------------------------------------------------------------------------------
    def ratio(self, key: tuple[str, ...], where: tuple[float, ...], exclude: str | None = None) -> float | None:
        """The measured / modelled ratio at ``where`` for kernels of ``key``: the geometric mean of the nearest
        cases', weighted by inverse distance (a case at ``where`` itself: its own ratio). None without a case."""
        if exclude is None:
            memo = (key, where)
            if memo not in self._memo:
                self._memo[memo] = self._ratio(key, where, None)
            return self._memo[memo]
        return self._ratio(key, where, exclude)

    def _ratio(self, key: tuple[str, ...], where: tuple[float, ...], exclude: str | None) -> float | None:
        pts = [p for p in self.points.get(key, []) if p.label != exclude]
        if not pts:
            return None
        dist = _nearest(pts, where)
        if dist[0][0] < 1e-9:
            return dist[0][1].ratio
        weights = [1.0 / d for d, _ in dist]
        return math.exp(sum(w * math.log(p.ratio) for w, (_, p) in zip(weights, dist)) / sum(weights))

    def ratio_for(self, op: Any, mode: str) -> float | None:
        """The measured / modelled ratio of a traced op (:class:`ampbench.predict.trace.Op`) computing in ``mode``
        (its GEMMs' math: tf32 for an fp32 op where TF32 is on), or None where the table has no kernel of its kind."""
        name, backward = op.name, "backward" in op.name
        if op.conv is not None and op.products:
            c = op.conv
            directions = ("fwd",) if not backward else ("dgrad", "wgrad") if op.products >= 2 else ("wgrad",)
            found = []
            for d in directions:
                r = None
                for layout in _own_layout_first(op):
                    r = self.ratio(("conv", d, mode, layout, conv_family(c)), _conv_where(c))
                    if r is not None:
                        break
                if r is None:
                    return None
                found.append(r)
            return sum(found) / len(found)
        if name.startswith("ampbench_predict.rnn_layer") and op.rnn is not None:
            steps, batch, inputs, _gates, recurrent = op.rnn
            return self.ratio(("rnn", "bwd" if backward else "fwd", mode), _logs(batch, recurrent, inputs, steps))
        if op.gemm is not None and op.flops:
            b, m, n, k = op.gemm
            where = _logs(m, n, k, b)
            ratio = self.ratio(("gemm", mode), where)
            layout = op.gemm_layout
            if ratio is not None and layout not in ("", "nn"):  # (times what its layout cost the nearest timed ones)
                ratio *= self.ratio(("gemm_layout", mode, layout), where) or 1.0
            return ratio
        if name.startswith("ampbench_predict.fused_attention"):
            work = op.flops / BACKWARD_FLOPS if backward else op.flops  # (the points' FLOPs: the forward's)
            return self.ratio(("attention", "bwd" if backward else "fwd", mode), _attention_where(work, op.causal))
        moved = op.bytes_read + op.bytes_written
        element = ELEMENT.get(op.dtype, 4)
        family = "softmax" if "softmax" in name else norm_family(name) if "norm" in name else None
        if family is not None:
            elements = moved / element / (3 if backward else 2)
            dtype = op.dtype if op.dtype in ("fp16", "bf16") else "fp32"
            if family == "batch_norm" and dtype == "fp16" and op.weight_dtype == "fp16":
                # (pure-fp16: PyTorch's _select_batch_norm_backend takes cuDNN for a half input only with fp32
                # weights, as the table's cases have them, and never for bf16; with fp16 weights it runs its own
                # kernel, the one bf16 runs on: the table's bf16 batch norm is that kernel at the same element size)
                dtype = "bf16"
            direction = "bwd" if backward else "fwd"
            # (a batch norm's layout first, the other where the table timed only that; other norms have none. Until
            # 2026-11-29 a batch norm's two layouts shared one key and position: a traced one, a few bytes off the
            # case's, got a mean of both -- the H200 ran NCHW half batch norms 1.9-2.5x slower than channels-last)
            layouts = ("",) if family != "batch_norm" else _own_layout_first(op)
            return next((r for layout in layouts if (r := self.ratio(("norm", family, direction, dtype, layout),
                                                                      _logs(elements))) is not None), None)
        if op.phase == "optimizer":
            return self.ratio(("optimizer",), _logs(moved))
        direction = cast_direction(op)
        if direction is not None:  # (the H200 cast half to fp32 at half an add's rate of the same bytes: its own kind)
            cast = self.ratio(("elementwise", direction), _logs(moved))
            if cast is not None:
                return cast
        return self.ratio(("elementwise",), _logs(moved))

    def workspace_for(self, op: Any, mode: str) -> float:
        """Bytes a traced convolution (forward, or its backward's products) allocates beside its result while it runs,
        computing in ``mode``: the nearest measured cases' workspace per byte of their input and output (inverse
        distance weighted, in log shape), times the op's; the largest of its directions (one runs after another).
        0 where the table measured none of its kind (another op, or a table from before the column)."""
        if op.conv is None or not op.products:
            return 0.0
        c = op.conv
        directions = ("fwd",) if "backward" not in op.name else ("dgrad", "wgrad") if op.products >= 2 else ("wgrad",)
        per_byte = []
        for d in directions:
            for layout in _own_layout_first(op):
                pts = self.workspace.get(("conv", d, mode, layout, conv_family(c)))
                if pts:
                    per_byte.append(_nearest_mean(pts, _conv_where(c)))
                    break
        return max(per_byte, default=0.0) * _conv_io(c, ELEMENT.get(op.dtype, 4))

    def host_extra_us(self, op: Any, mode: str) -> float:
        """What issuing a traced op costs its host beyond the per-op figure (:class:`ampbench.predict.cost.Host`),
        microseconds: its kind's issue time less the mean of a GEMM's and an elementwise op's -- the mix the per-op
        figure was measured on (:mod:`ampbench.measure.host_ops`: Linear + ReLU layers). A convolution's cuDNN plan
        lookup, an LSTM's descriptors, a norm's checks cost more than that mix; a kind cheaper than it less (negative).
        0 where the table timed no issue of the op's kind or of the mix; the optimizer's step is priced apart."""
        base = [self.host_us.get(k) for k in ("gemm", "elementwise")]
        kind = power_kind(op, mode)[0]
        if op.phase == "optimizer" or kind not in self.host_us or None in base:
            return 0.0
        return self.host_us[kind] - sum(base) / 2  # type: ignore[arg-type]

    def power_for(self, op: Any, mode: str, gpu: Gpu) -> float | None:
        """The board power of ``gpu`` running a traced op computing in ``mode``: the table's reading for its kind and
        dtype (another card of the architecture: scaled by the ratio of the two boards' TDPs, and never above the
        target's TDP); None where the table read no kernel of its kind."""
        watts = self.power_w.get(power_key(*power_kind(op, mode)))
        return None if watts is None else self._scaled_w(watts, gpu)

    def idle_w(self, gpu: Gpu) -> float | None:
        """The board's power between kernels (the host issuing, a collective waited on)."""
        watts = self.power_w.get(IDLE)
        return None if watts is None else self._scaled_w(watts, gpu)

    def highest_w(self, gpu: Gpu) -> float | None:
        """The highest reading of a kernel (what an op of a kind the sweep did not read is priced at: an upper bound)."""
        readings = [w for k, w in self.power_w.items() if k != IDLE]
        return self._scaled_w(max(readings), gpu) if readings else None

    def _scaled_w(self, watts: float, gpu: Gpu) -> float:
        if gpu.tdp_w and self.gpu.tdp_w and not gpu.same_card(self.gpu):
            return min(watts * gpu.tdp_w / self.gpu.tdp_w, gpu.tdp_w)
        return watts

    def leave_one_out(self) -> dict[str, float]:
        """Per kind, the median |error| of each measured case priced from the others alone (the interpolation's
        error; a kind with one case is left out)."""
        errors: dict[str, list[float]] = {}
        for key, pts in self.points.items():
            for p in pts:
                r = self.ratio(key, p.where, exclude=p.label)
                if r is not None and len(pts) > 1:
                    errors.setdefault(key[0], []).append(abs(r / p.ratio - 1.0))
        return {k: statistics.median(v) for k, v in errors.items() if v}


def power_kind(op: Any, mode: str) -> tuple[str, str]:
    """The (kind, dtype) of the sweep's power readings a traced op is priced at: its GEMMs' math for matmuls,
    convolutions, attention and RNNs, its tensors' dtype for the memory-bound rest, fp32 for the optimizer."""
    name = op.name
    dtype = op.dtype if op.dtype in ("fp16", "bf16") else "fp32"
    if op.phase == "optimizer":
        return "optimizer", "fp32"
    if op.conv is not None and op.products:
        return "conv", mode
    if name.startswith("ampbench_predict.rnn_layer"):
        return "rnn", mode
    if name.startswith("ampbench_predict.fused_attention"):
        return "attention", mode
    if op.gemm is not None and op.flops:
        return ("bmm" if op.gemm[0] > 1 else "gemm"), mode
    if "softmax" in name:
        return "softmax", dtype
    if "norm" in name:
        return "norm", dtype
    return "elementwise", dtype


CASTS = ("aten._to_copy", "aten.copy_")
CAST_CASES = {"to_fp32": "widen", "to_half": "narrow"}
"""The sweep's cast cases (``calibrate.elementwise_case``) -> the direction they time: a half tensor to fp32 (the
H200's table), fp32 to the half type (sweeps from 2026-11-29 on)."""


def cast_direction(op: Any) -> str | None:
    """``widen`` (half to fp32: twice the bytes written as read) or ``narrow`` (fp32 to half: half) for a traced copy
    that converts a tensor's dtype (autocast's and master-*'s casts), else None. Each is priced from the table's casts
    of its own direction only: a table without them prices it as any elementwise op."""
    if op.name not in CASTS or op.bytes_read <= 0:
        return None
    return {2.0: "widen", 0.5: "narrow"}.get(op.bytes_written / op.bytes_read)


def _key(shape: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(shape.items()))


BACKWARD_FLOPS = 2
"""A traced attention backward's FLOPs over its forward's (:func:`ampbench.measure.flop_formulas.sdpa_backward_flops`:
four products of the forward's two; the flash kernels' recomputation of the scores is not counted)."""


def _attention_where(forward_flops: float, causal: bool) -> tuple[float, ...]:
    """Where an attention kernel sits in the table: its forward's FLOPs counted whole (a traced op knows its FLOPs, not
    its shape) and whether it is causal, one apart (a causal and a full kernel of one shape are two cases)."""
    return (*_logs(forward_flops), float(causal))


def _attention_s(gpu: Gpu, cal: Calibration, work: float, moved: float, mode: str, causal: bool) -> float:
    """The model's fused attention, as :func:`ampbench.predict.cost.price_op` prices it (``work`` counted whole: the
    causal half is left out here, as there)."""
    compute = kernels.attention_compute_s(gpu, cal, work / (2 if causal else 1), mode)
    return max(compute, kernels.memory_s(gpu, cal, moved)) + cal.kernel_us * 1e-6


def _rnn_s(gpu: Gpu, cal: Calibration, rnn: tuple[int, int, int, int, int], mode: str, backward: bool) -> float:
    """The model's fused RNN layer (one direction), as :func:`ampbench.predict.cost._rnn` prices its arithmetic."""
    return kernels.rnn_compute_s(gpu, cal, rnn, mode, backward) + cal.kernel_us * 1e-6


# -- which table prices which GPU --------------------------------------------------------------------------------------
@cache
def shipped() -> dict[str, Path]:
    """The committed tables: GPU key -> CSV (``<key>.csv``, or gzipped: ``<key>.csv.gz``)."""
    if not TABLES_DIR.is_dir():
        return {}
    paths = sorted([*TABLES_DIR.glob("*.csv"), *TABLES_DIR.glob("*.csv.gz")])
    return {p.name.removesuffix(".gz").removesuffix(".csv"): p for p in paths}


def _text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


@cache
def _load(path: str) -> dict[str, Any]:
    from ampbench.measure.calibrate import from_csv  # lazy: torch (the sweep's module)

    return from_csv(_text(Path(path)))


@cache
def _header(path: str) -> dict[str, str]:
    """A shipped table's environment lines (``# key: value``) without its rows: which card measured it, and its
    ``scope`` (``card``: it prices that card alone)."""
    out: dict[str, str] = {}
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:  # (the lines before the rows alone)
        for line in f:
            if not line.startswith("#"):
                break
            key, sep, value = line[2:].rstrip("\n").partition(": ")
            if sep:
                out[key] = value
    return out


CARD_ONLY = "card"
"""A table's ``scope`` when it prices only the card that measured it (its rows of the same peaks: SXM and PCIe,
:meth:`~ampbench.measure.gpus.Gpu.same_card`), not the other cards of its architecture: the
kernels others published for their cards (NeuSight's, ``predict_checks/neusight.py``: fp32 forwards only, timed one
at a time on cards some of which are power-capped), whose ratios to the model carry that card's clocks and power cap
-- an L4's would price an RTX 4090's fp32 kernels at a 72 W card's efficiency."""


_STORED: list[dict[str, Any]] = []


@contextlib.contextmanager
def stored_tables(tables: list[dict[str, Any]]) -> Iterator[None]:
    """Inside, :func:`table_for` also considers these tables (a store's ``ampbench hw --calibrate`` tables: ``predict
    --db``)."""
    global _STORED
    before, _STORED = _STORED, list(tables)
    try:
        yield
    finally:
        _STORED = before


def table_for(gpu: Gpu, stored: list[dict[str, Any]] | None = None) -> KernelTable | None:
    """The kernel table that prices ``gpu``: its own (the newest stored one of its card, else the shipped one), else
    one of a GPU of the same architecture (compute capability), its own card's first -- but a table of
    :data:`CARD_ONLY` scope prices its own card alone; None without one. ``stored``: tables of a store (default:
    those :func:`stored_tables` gives)."""
    candidates: list[tuple[int, Gpu, dict[str, Any] | str]] = []
    for t in _STORED if stored is None else stored:
        card = for_device(t.get("device_name"))
        if card is not None and _prices(card, gpu, (t.get("env") or {}).get("scope")):
            candidates.append((0 if card.same_card(gpu) else 2, card, t))
    for path in shipped().values():  # (their headers only: a table's rows are read once it is the one chosen)
        header = _header(str(path))
        card = for_device(header.get("device_name"))
        if card is not None and _prices(card, gpu, header.get("scope")):
            candidates.append((1 if card.same_card(gpu) else 3, card, str(path)))
    if not candidates:
        return None
    best = min(c[0] for c in candidates)
    _, card, table = [c for c in candidates if c[0] == best][-1]  # (stored ones oldest first: the newest)
    return _table_of(_load(table) if isinstance(table, str) else table, card)


def _prices(card: Gpu, gpu: Gpu, scope: str | None) -> bool:
    """Whether a table measured on ``card`` may price ``gpu``: one of its architecture, its own card alone where the
    table's ``scope`` says so."""
    return card.capability == gpu.capability and (card.same_card(gpu) or scope != CARD_ONLY)


_TABLES: dict[int, tuple[dict[str, Any], KernelTable]] = {}


def _table_of(table: dict[str, Any], card: Gpu) -> KernelTable:
    """A table's ratios, computed once per table object (a prediction prices every target from it; the object is kept
    with them, so its id is never another's)."""
    cached = _TABLES.get(id(table))
    if cached is None or cached[0] is not table:
        cached = _TABLES[id(table)] = (table, KernelTable.of(table, card))
    return cached[1]
