"""Charts as self-contained SVG data URIs (matplotlib, text drawn as paths: no fonts, no requests).

Each function returns ``data:image/svg+xml;base64,...`` for an ``<img>``: an image cannot run
scripts, so labels taken from user input (model names) cannot inject anything into the page.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from ampbench.execution.axes import display_name
from ampbench.report.numbers import bytes_unit, unit_bytes

matplotlib.rcParams["svg.fonttype"] = "path"
matplotlib.rcParams["svg.hashsalt"] = "ampbench"  # deterministic ids

# One colour per precision, the same in every chart (colour-blind friendly Okabe-Ito palette).
COLORS = {"fp32": "#555555", "tf32": "#999999", "amp-fp16": "#0072B2", "amp-bf16": "#009E73",
          "master-fp16": "#56B4E9", "master-bf16": "#8FD694", "pure-fp16": "#D55E00", "pure-bf16": "#E69F00",
          "fp8-tensorwise": "#CC79A7", "fp8-rowwise": "#A0457E", "fp8-rowwise-gw-hp": "#E3A8CC", "fp8": "#CC79A7"}
VARIANT_SHADES = ("#F0E442", "#7F3C8D", "#11A579", "#3969AC", "#E73F74", "#80BA5A")
"""Colours of modes not in :data:`COLORS` (a mode with an optimizer state, "amp-bf16 8bit"; a new recipe): one each,
in the order first drawn, never fp32's grey."""
_VARIANTS: dict[str, str] = {}
PARTS = (("weights_bytes", "weights", "#4C72B0"), ("grads_bytes", "grads", "#DD8452"),
         ("optimizer_bytes", "optimizer state + masters", "#937860"), ("activation_bytes", "activations", "#55A868"))


def _color(p: str) -> str:
    if p in COLORS:
        return COLORS[p]
    if p not in _VARIANTS:
        _VARIANTS[p] = VARIANT_SHADES[len(_VARIANTS) % len(VARIANT_SHADES)]
    return _VARIANTS[p]


def _to_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": "ampbench"})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _fig(height: float = 2.8, width: float = 7.5) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", alpha=0.3)
    return fig, ax


def throughput_chart(rows: list[dict[str, Any]], title: str) -> str:
    """Horizontal bars: samples/s per precision, labelled with the speedup vs fp32; with repeats,
    whiskers from the slowest to the fastest repeat."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("samples_per_s")]
    fig, ax = _fig(height=0.45 * len(ok) + 1.0)
    names = [display_name(r) for r in ok]
    vals = [r["samples_per_s"] for r in ok]
    ax.barh(names, vals, color=[_color(n) for n in names])
    ax.invert_yaxis()
    spans = [[x for x in r.get("samples_per_s_repeats") or [] if x] for r in ok]
    ends = [max([v, *xs]) for v, xs in zip(vals, spans)]
    if any(len(xs) > 1 for xs in spans):
        lo = [v - min(xs) if len(xs) > 1 else 0.0 for v, xs in zip(vals, spans)]
        hi = [max(xs) - v if len(xs) > 1 else 0.0 for v, xs in zip(vals, spans)]
        ax.errorbar(vals, range(len(ok)), xerr=[lo, hi], fmt="none", ecolor="black", elinewidth=1, capsize=3)
    for i, r in enumerate(ok):
        sp = r.get("speedup_vs_fp32")
        ax.text(ends[i], i, f"  {vals[i]:,.0f}" + (f"  ({sp:.2f}x)" if isinstance(sp, float) else ""), va="center",
                fontsize=8)
    ax.set_xlim(0, max(ends) * 1.35 if ends else 1)
    repeats = max((len(xs) for xs in spans), default=0)
    ax.set_xlabel("training throughput (samples/s, higher is better)"
                  + (f"; median of {repeats} repeats, whiskers: slowest-fastest" if repeats > 1 else ""))
    ax.set_title(title, loc="left", fontsize=10)
    return _to_uri(fig)


def memory_chart(rows: list[dict[str, Any]], title: str) -> str:
    """Stacked bars of weights / grads / optimizer / activations (MiB), with the measured peaks as markers."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("peak_allocated_bytes") is not None]
    fig, ax = _fig(height=0.5 * len(ok) + 1.6)
    names = [display_name(r) for r in ok]
    unit = bytes_unit([sum(r.get(k) or 0 for k, _, _ in PARTS) for r in ok] + [r["peak_allocated_bytes"] for r in ok]
                      + [r.get("peak_reserved_bytes") for r in ok])
    size = unit_bytes(unit)
    left = [0.0] * len(ok)
    for key, label, color in PARTS:
        vals = [(r.get(key) or 0) / size for r in ok]
        ax.barh(names, vals, left=left, color=color, label=label, height=0.6)
        left = [a + b for a, b in zip(left, vals)]
    peaks = [r["peak_allocated_bytes"] / size for r in ok]
    cpu = all(str(r.get("device", "")).startswith("cpu") for r in ok)
    # (the peaks: a tall tick on each bar; in the legend a tick of the text's height, which a 400-point marker is not:
    # it lay over the entry below it)
    markers = [(peaks, names, "black", "peak RSS growth (CPU: approximate)" if cpu else "peak allocated (measured)")]
    with_reserved = [(n, r["peak_reserved_bytes"] / size) for n, r in zip(names, ok) if r.get("peak_reserved_bytes")]
    if any(abs(v - r["peak_allocated_bytes"] / size) > 0.5 * 2**20 / size for (_, v), r in zip(with_reserved, ok)):
        markers.append(([v for _, v in with_reserved], [n for n, _ in with_reserved], "#CC0000", "peak reserved"))
    for xs, ys, color, _ in markers:
        ax.scatter(xs, ys, marker="|", s=400, color=color, zorder=3)
    ax.invert_yaxis()
    ax.set_xlabel(f"memory ({unit})")  # (the unit the largest figure fills: KiB-sized CPU models are bars too)
    _legend_above(ax, title, 3, [Line2D([], [], color=c, marker="|", linestyle="none", markersize=7, label=label)
                                 for _, _, c, label in markers])
    return _to_uri(fig)


def _legend_above(ax: Any, title: str, ncol: int, extra: list[Any] | None = None) -> None:
    """The title, and the legend between it and the bars: clear of the axis label and of the bars (``extra``:
    handles drawn for the legend alone)."""
    handles, _ = ax.get_legend_handles_labels()
    handles += extra or []
    rows = -(-len(handles) // ncol)
    ax.set_title(title, loc="left", fontsize=10, pad=8 + 12 * rows)
    ax.legend(handles=handles, fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False, ncol=ncol,
              borderaxespad=0.2)


def bars(labels: list[str], values: list[float], xlabel: str, title: str,
         fmt: str | Callable[[float], str] = "{:,.0f}") -> str:
    """Horizontal bars, each labelled with its value (``fmt``: a format string or a function, e.g. three significant
    digits: "{:.3g}" wrote 1.0003 J as "1" beside 0.337)."""
    fig, ax = _fig(height=0.45 * len(labels) + 1.0)
    ax.barh(labels, values, color=[_color(n) for n in labels])
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v, i, "  " + (fmt(v) if callable(fmt) else fmt.format(v)), va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.3 if values else 1)
    ax.set_xlabel(xlabel)
    ax.set_title(title, loc="left", fontsize=10)
    return _to_uri(fig)


GPU_CHART_TOP = 12
"""GPUs a "Which GPU" chart draws: the fastest, by their best mode (the table beside it has every one)."""


def gpu_chart(gpus: list[str], modes: dict[str, dict[str, tuple[float, float | None]]], title: str,
              top: int = GPU_CHART_TOP) -> str:
    """Predicted samples/s per precision per GPU (``modes``: mode -> GPU -> (samples/s, speedup over that GPU's
    fp32)), grouped by GPU, each bar labelled with its speedup; a mode a GPU cannot run marked "not run". More than
    ``top`` GPUs: the ``top`` fastest (by their best mode), said in the title."""
    best = {g: max((per[g][0] for per in modes.values() if g in per), default=0.0) for g in gpus}
    shown = sorted(gpus, key=lambda g: -best[g])[:top] if len(gpus) > top else list(gpus)
    if len(shown) < len(gpus):
        title += f"\n(the {len(shown)} fastest of {len(gpus)} GPUs; every one in the table)"
    n = max(1, len(modes))
    fig, ax = _fig(height=0.28 * len(shown) * n + 0.3 * len(shown) + 1.0)
    height = 0.8 / n
    peak = max((v for per in modes.values() for g, (v, _) in per.items() if g in shown), default=1.0)
    for j, (mode, per) in enumerate(modes.items()):
        offset = (j - (n - 1) / 2) * height
        drawn = [(i, g) for i, g in enumerate(shown) if g in per]
        ax.barh([i + offset for i, _ in drawn], [per[g][0] for _, g in drawn], height=height * 0.9,
                color=_color(mode), label=mode)
        for i, g in drawn:
            x = per[g][1]
            ax.text(per[g][0], i + offset, f"  {per[g][0]:,.0f}" + (f" ({x:.2f}x)" if x is not None else ""),
                    va="center", fontsize=7)
        for i, g in enumerate(shown):  # (a missing bar is a fact: said, not left blank)
            if g not in per:
                ax.text(0, i + offset, "  not run", va="center", fontsize=6, color="#888888")
    ax.set_yticks(range(len(shown)), shown)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlim(0, peak * 1.45)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("predicted samples/s (x that GPU's fp32)")
    if n > 1:  # (above the bars, under the title: clear of the axis label)
        _legend_above(ax, title, min(n, 6))
    else:
        ax.set_title(title, loc="left", fontsize=10)
    return _to_uri(fig)


def loss_curves(rows: list[dict[str, Any]], title: str) -> str | None:
    """Training loss per precision: mean over seeds with the min-max band."""
    conv = [r for r in rows if r.get("converge") and r["converge"].get("losses")]
    if not conv:
        return None
    fig, ax = _fig(height=3.4)
    ax.grid(axis="y", alpha=0.3)
    for r in conv:
        c = r["converge"]
        steps = c.get("curve_steps") or list(range(1, len(c["losses"][0]) + 1))
        curves = [x for x in c["losses"] if x]
        n = min(len(x) for x in curves)
        mean = [sum(x[i] for x in curves) / len(curves) for i in range(n)]
        lo = [min(x[i] for x in curves) for i in range(n)]
        hi = [max(x[i] for x in curves) for i in range(n)]
        color = _color(r["precision"])
        ax.plot(steps[:n], mean, color=color, lw=1.4, label=f"{r['precision']} ({len(curves)} seeds)")
        if len(curves) > 1:
            ax.fill_between(steps[:n], lo, hi, color=color, alpha=0.15, lw=0)
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss")
    ax.set_title(title, loc="left", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    return _to_uri(fig)


def scale_chart(rows: list[dict[str, Any]], title: str) -> str | None:
    """Loss-scale trajectory (log2) of the modes that scale (fp16)."""
    conv = [r for r in rows if r.get("converge") and any(any(s != 1.0 for s in x) for x in r["converge"].get("loss_scales", []))]
    if not conv:
        return None
    fig, ax = _fig(height=2.6)
    ax.grid(axis="y", alpha=0.3)
    for r in conv:
        c = r["converge"]
        scales = c["loss_scales"][0]
        steps = (c.get("curve_steps") or list(range(1, len(scales) + 1)))[:len(scales)]
        ax.plot(steps, [math.log2(s) if s > 0 else 0 for s in scales], color=_color(r["precision"]), lw=1.2,
                label=f"{r['precision']} (seed {c['seeds'][0]}; skipped steps: {c['skipped_steps'][0]})")
    ax.set_xlabel("training step")
    ax.set_ylabel("log2(loss scale)")
    ax.set_title(title, loc="left", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    return _to_uri(fig)
