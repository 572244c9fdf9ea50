"""The HTML report fits a 1280 px window (no sideways scrolling) with predictions on 1, 5 and every catalogued GPU, a CPU run's
environment and two presets of one workload; its charts' legends overlap nothing (rendered in headless Chromium,
the charts' layout read back from matplotlib)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.transforms import Bbox

from ampbench.measure.gpus import lookup, predictable
from ampbench.predict.rows import Machine, Question, predict_target
from ampbench.report import charts, write_report
from ampbench.store import Store
from ampbench.workloads import create_workload
from ampbench.workloads.factory import build_meta
from tests.report.chromium import Chromium, find_chromium
from tests.report.conftest import _row

CHROMIUM = find_chromium()
CPU_ENV = {"device": "cpu", "torch": "2.13", "tf32_matmul": False, "tf32_cudnn": False, "hostname": "vm",
           "cpu_half_hardware": {"avx512_bf16": True, "amx_bf16": False, "avx512_fp16": False, "amx_fp16": False},
           "cpu_peak": {"flops_per_cycle": {"fp32": 32}, "text": "fp32 0.166, bf16 0.332 (2 core(s) x 2.60 GHz "
                        "(nominal clock from /proc/cpuinfo (no cpufreq here, e.g. a virtual machine: turbo can run "
                        "above it, so measured rates can exceed this peak)) x FLOPs/cycle/core fp32 32 (AVX-512 FMA), "
                        "bf16 64 (AVX512-BF16), fp16 32 (none: converted to fp32 (at most the fp32 rate)))"}}


def _store(tmp_path: Path, gpus: list[str]) -> Store:
    s = Store(tmp_path / "r.db")
    earlier = s.create_run({"identity": {}}, device="cpu", device_name="AMD EPYC", hostname="vm").run_id
    for precision, sps in (("fp32", 990.0), ("amp-bf16", 1500.0)):  # (the report's "Since run" section: its tables fit)
        s.add(_row(earlier, "bert", precision, sps, device="cpu", device_name="AMD EPYC", preset="tiny", env=CPU_ENV,
                   cell_key=f"bert-tiny-{precision}", samples_per_s_noise=0.01, weights_bytes=10 * 2**10,
                   grads_bytes=10 * 2**10, optimizer_bytes=20 * 2**10, activation_bytes=5 * 2**10,
                   measures=["throughput", "memory"]))
    run = s.create_run({"identity": {}}, device="cpu", device_name="AMD EPYC", hostname="vm").run_id
    for preset, amp in (("tiny", 1300.0), ("small", 800.0)):  # (bert tiny and bert small: named apart)
        for precision, sps in (("fp32", 1000.0), ("amp-bf16", amp), ("fp8-rowwise", 900.0), ("amp-bf16 8bit", 950.0)):
            name, state = (precision.split()[0], "8bit") if " " in precision else (precision, None)
            s.add(_row(run, "bert", name, sps, device="cpu", device_name="AMD EPYC", preset=preset, env=CPU_ENV,
                       cell_key=f"bert-{preset}-{precision}", optimizer_state=state, peak_allocated_bytes=40 * 2**10,
                       weights_bytes=10 * 2**10, grads_bytes=10 * 2**10, optimizer_bytes=20 * 2**10,
                       activation_bytes=5 * 2**10, measures=["throughput", "memory"]))
    rows: list[dict[str, Any]] = []
    traces: dict[Any, Any] = {}
    for g in gpus:
        rows += predict_target("tabular-mlp", lambda: build_meta(lambda: create_workload("tabular-mlp", "tiny")),
                               Question(("fp32", "amp-bf16", "fp8-rowwise"), 16), Machine(lookup(g)), traces=traces)
    s.add_predictions(rows)
    return s


def _extent(handle: Any, renderer: Any, dpi: float) -> Any:
    """A legend mark's box as drawn: a scatter's markers, whose own extent matplotlib leaves empty, by their size."""
    if isinstance(handle, PathCollection):
        (x, y), = handle.get_offset_transform().transform(handle.get_offsets())
        half = math.sqrt(float(handle.get_sizes()[0])) * dpi / 72 / 2
        return Bbox([[x - half, y - half], [x + half, y + half]])
    return handle.get_window_extent(renderer)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here")
@pytest.mark.parametrize("n", [1, 5, 0])
def test_the_report_never_scrolls_sideways_at_1280_px(tmp_path: Path, n: int) -> None:
    """``n`` GPUs predicted (0: the whole catalogue)."""
    gpus = [g.key for g in predictable()][-n:] if n else [g.key for g in predictable()]
    store = _store(tmp_path, gpus)
    path = write_report(store, tmp_path / "report.html")
    with Chromium(CHROMIUM) as browser:  # type: ignore[arg-type]
        page = browser.load(path, {"scroll": "document.documentElement.scrollWidth", "inner": "window.innerWidth",
                                   "text": "document.body.innerText",
                                   # (the recommended mode in one line: "amp-" over "bf16" in a narrow column was two)
                                   "use_lines": "Math.max(...[...document.querySelectorAll('h2 + table "
                                                "td:nth-child(2) span')].map(s => s.getClientRects().length))"})
    v = page.values
    assert v["scroll"] <= v["inner"] == 1280, f"{v['scroll']} px wide with {n} GPUs"
    assert "bert (tiny)" in v["text"] and "bert (small)" in v["text"]  # (the recommendations name the preset)
    assert f"Since run {store.runs()[0].run_id}" in v["text"] and "now fails" not in v["text"]
    assert v["use_lines"] == 1


def test_chart_legends_overlap_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every legend clear of the axes' data area, its label and title, and its entries clear of each other: on the
    memory chart of KiB-sized CPU rows, on "Which GPU" charts of 2 GPUs and of every catalogued one."""
    figures: list[Any] = []
    real = charts._to_uri
    monkeypatch.setattr(charts, "_to_uri", lambda fig: figures.append(fig) or real(fig))
    cpu = [{"status": "ok", "precision": p, "device": "cpu", "peak_allocated_bytes": 40 * 2**10, "weights_bytes": 10 * 2**10,
            "grads_bytes": 10 * 2**10, "optimizer_bytes": 20 * 2**10, "activation_bytes": 5 * 2**10, "workload": "w"}
           for p in ("fp32", "amp-bf16")]
    charts.memory_chart(cpu, "w (tiny): memory")
    modes = {m: {g.key: (1000.0 * (i + 1) * (1 + j), 1.0 + j) for i, g in enumerate(predictable())}
             for j, m in enumerate(("fp32", "amp-bf16", "fp8-rowwise"))}
    charts.gpu_chart(["h100-sxm", "a100-80gb"], {m: {g: v for g, v in per.items() if g in ("h100-sxm", "a100-80gb")}
                                                 for m, per in modes.items()}, "two GPUs")
    del modes["fp8-rowwise"]["t4"]  # (a mode a GPU cannot run)
    charts.gpu_chart([g.key for g in predictable()], modes, "every GPU")
    assert len(figures) == 3
    for fig in figures:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent(renderer)
        for other in (ax.get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer),
                      ax.title.get_window_extent(renderer)):
            assert not legend.overlaps(other), (legend, other)
        boxes = [t.get_window_extent(renderer) for t in ax.get_legend().get_texts()]
        boxes += [_extent(h, renderer, fig.dpi) for h in ax.get_legend().legend_handles]
        # (each entry's mark and text clear of every other's: a 400-point peak marker lay over the entry below it)
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    big = figures[2]
    assert len(big.axes[0].get_yticklabels()) == charts.GPU_CHART_TOP  # (the 12 fastest; the table has them all)
    assert f"fastest of {len(predictable())} GPUs" in big.axes[0].get_title(loc="left")
    assert figures[0].axes[0].get_xlabel() == "memory (KiB)"  # (KiB-sized bars are bars)
    colours = {charts._color(m) for m in ("fp32", "fp8-rowwise", "fp8-tensorwise", "amp-bf16 8bit")}
    assert len(colours) == 4  # (none takes fp32's grey)
