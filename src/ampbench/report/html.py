"""One self-contained HTML report: inline CSS, charts as SVG data URIs, no scripts, no requests.

A Content-Security-Policy meta tag forbids every fetch but inline styles and ``data:`` images, so
even a future template mistake cannot make the page phone home. Every string that came from a
user or a run (model names, labels, error reasons) goes through :func:`html.escape`.
"""

from __future__ import annotations

import html
from typing import Any

import ampbench
from ampbench.cpuinfo import half_math_claim
from ampbench.execution.axes import Execution, display_name
from ampbench.report import charts, convergence
from ampbench.report.accumulation import accumulated_text, accumulation_cost
from ampbench.report.advisor import Advice, advise, batch_ratio_text, group_labels, workload_groups
from ampbench.report.compare import compare_table
from ampbench.report.console import (
    compile_note,
    fmt_bytes,
    has_eager_speedups,
    has_savings,
    has_speedups,
    measured_energy_text,
    memory_text,
    speedup_text,
)
from ampbench.report.gpu_comparison import (
    accumulation_splits,
    chart_data,
    compared_cells,
    energy_text,
    fp32_unfit,
    ratio_text,
    unfit_note,
    usd_text,
)
from ampbench.report.gpu_comparison import advice as gpu_advice
from ampbench.report.gpu_comparison import memory_text as predicted_memory_text
from ampbench.report.numbers import SHOWN, sig
from ampbench.report.predictions import latest as latest_predictions
from ampbench.report.predictions import table as predictions_table
from ampbench.report.run_diff import TABLE as DIFF_TABLE
from ampbench.report.run_diff import cell_line, header_lines, summary_line, verdict_tone
from ampbench.store.derive import converge_tone, memory_basis
from ampbench.store.row_keys import framework_of, names_frameworks

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

VERDICT_CLASS = {"good": "ok", "unsure": "dim", "bad": "bad"}
"""A convergence verdict's tone (:func:`~ampbench.store.derive.converge_tone`) -> its CSS class."""

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f; margin: 0 auto;
       max-width: 1100px; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 36px 0 8px; border-bottom: 2px solid #ddd; }
h3 { font-size: 15px; margin: 20px 0 6px; } .sub { color: #666; }
table { border-collapse: collapse; margin: 6px 0 12px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e5e5e5; text-align: right; vertical-align: top; }
td { white-space: nowrap; } td.l { white-space: normal; } td.l:first-child { white-space: nowrap; }
.env td { white-space: normal; } .env td:last-child { overflow-wrap: anywhere; } .nb { white-space: nowrap; }
th { white-space: normal; }
th { background: #f5f5f7; font-weight: 600; } td:first-child, th:first-child { text-align: left; }
td.l, th.l { text-align: left; } .env td { text-align: left; } .env td:first-child { color: #666; }
.ok { color: #1a7f37; } .bad { color: #c62828; } .dim { color: #888; } .good { color: #1a7f37; font-weight: 600; }
.advice { background: #f0f7f2; border-left: 4px solid #1a7f37; padding: 8px 14px; margin: 8px 0; }
.advice.none { background: #fdf3f2; border-color: #c62828; }
img.chart { max-width: 100%; display: block; margin: 4px 0 10px; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 24px; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
@media print { body { max-width: none; padding: 0; } h2 { break-before: page; } img.chart { break-inside: avoid; } }
"""


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(v: Any, spec: str = ",.1f", suffix: str = "") -> str:
    return "–" if not isinstance(v, (int, float)) else format(v, spec) + suffix


def _ratio(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "–"
    cls = "good" if v >= 1.05 else "bad" if v < 0.95 else ""
    return f'<span class="{cls}">{v:.2f}x</span>'


def _batch_ratio(row: dict[str, Any]) -> str:
    """The max batch over fp32's, with its bound (">=1.85x": the mode's search stopped at its limit)."""
    text = batch_ratio_text(row)
    if text is None:
        return "–"
    v = row["max_batch_ratio_vs_fp32"]
    cls = "good" if v >= 1.05 and row.get("max_batch_ratio_bound") != "<=" else \
        "bad" if v < 0.95 and row.get("max_batch_ratio_bound") != ">=" else ""
    return f'<span class="{cls}">{e(text)}</span>'


def _speedup(row: dict[str, Any]) -> str:
    text, verdict = speedup_text(row)
    if text == "-":
        return "–"
    cls = {"faster": "good", "slower": "bad"}.get(verdict, "")
    return f'<span class="{cls}">{e(text)}</span>'


def _saving(v: Any, row: dict[str, Any] | None = None) -> str:
    if not isinstance(v, (int, float)):
        note = (row or {}).get("memory_saving_vs_fp32_note")
        return f'– <span class="dim">({e(note)})</span>' if note else "–"
    return f'<span class="good">{v:.0%} less</span>' if v >= SHOWN else (
        f'<span class="bad">{-v:.0%} more</span>' if v <= -SHOWN else "same")


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Cells are already-escaped HTML."""
    head = "".join(f'<th class="{"l" if i < left else ""}">{h}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(uri: str | None, alt: str) -> str:
    return f'<img class="chart" alt="{e(alt)}" src="{uri}">' if uri else ""


def _env_table(row: dict[str, Any]) -> str:
    env = row.get("env") or {}
    items = [("device", f"{row.get('device_name')} ({row.get('device')})")]
    if env.get("capability"):
        items.append(("compute capability", env["capability"]))
        items.append(("driver / CUDA / cuDNN", f"{env.get('driver', '?')} / {env.get('cuda')} / {env.get('cudnn')}"))
        if env.get("sm_clock_max_mhz"):
            items.append(("clocks / power limit", f"SM {env.get('sm_clock_mhz')}/{env.get('sm_clock_max_mhz')} MHz, "
                                                  f"{env.get('power_limit_w')} W"))
    else:
        hw = env.get("cpu_half_hardware") or {}
        peak = env.get("cpu_peak") or {}
        items.append(("CPU half-precision hardware", ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in hw.items())))
        items.append(("what it means", half_math_claim(hw, peak.get("flops_per_cycle"))))
        if peak.get("tflops"):
            items.append(("theoretical peak TFLOP/s", ", ".join(f"{k} {v:.3g}" for k, v in peak["tflops"].items())
                          + f" ({peak.get('source')})"))
        items.append(("threads", env.get("torch_threads")))
    if env.get("backend_version"):  # a framework over a backend (Keras): its version and its backend's, not torch's
        fw = env.get("framework")
        items.append((f"{env.get('framework')} / backend / ampbench / python",
                      f"{env.get(f'{fw}_version')} / {env.get(f'{fw}_backend')} {env.get('backend_version')} / "
                      f"{env.get('ampbench')} / {env.get('python')}"))
    else:
        items.append(("torch / ampbench / python", f"{env.get('torch')} / {env.get('ampbench')} / {env.get('python')}"))
    over = env.get("tf32_override_env") or {}
    items.append(("TF32 flags in the fp32 baseline", f"matmul {env.get('tf32_matmul')}, cuDNN {env.get('tf32_cudnn')}"
                  + (f"; override env {over}" if over else "")))
    items.append(("host", env.get("hostname")))
    return '<table class="env">' + "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in items) + "</table>"


def _advice_html(a: Advice) -> str:
    combo = (f'<br><b>Fastest combination: {e(a.combination)}</b> — {e(a.combination_evidence)}'
             if a.combination is not None else "")
    if a.least_memory is not None:
        combo += f"<br><b>Least memory</b> — {e(a.least_memory.removeprefix('least memory: '))}"
    if a.distributed is not None:
        combo += f"<br><b>Distributed</b> — {e(a.distributed)}"
    if a.optimizer_states is not None:
        combo += f"<br><b>Optimizer states</b> — {e(a.optimizer_states)}"
    for said in (a.half_type, a.energy, a.data):
        if said is not None:
            head, _, rest = said.partition(":")
            combo += f"<br><b>{e(head.capitalize())}</b> — {e(rest.strip())}"
    if a.recommended is None:
        return f'<div class="advice none"><b>No recommendation</b> — {e(a.evidence)}{combo}</div>'
    return (f'<div class="advice"><b>Use {e(a.recommended)}</b> <span class="sub">({e(a.label)})</span><br>'
            f"{e(a.reason)}{combo}</div>")  # (the reason: the box says "Use X" already)


def _env_of(rows: list[dict[str, Any]]) -> str:
    """A workload's environment table: its fp32 cell's (the baseline), else its first row's."""
    base = next((r for r in rows if r["precision"] == "fp32" and r.get("status") == "ok"), None)
    return _env_table(base or rows[0])


def _workload_section(rows: list[dict[str, Any]], advice: Advice, anchor: str,
                      diagnoses: list[dict[str, Any]] | None = None, env: str = "") -> str:
    """``env``: the workload's environment table (:func:`_env_of`) in its section ("": the page shows the one every
    workload shares, once)."""
    first = rows[0]
    title = (f"{first['workload']} ({first.get('preset')}, batch {first.get('batch_size') or '?'}"
             f"{accumulated_text(first)}) · {framework_of(first)}")
    out = [f'<h2 id="{anchor}">{e(title)}</h2>', _advice_html(advice)]
    if env:
        out.append(env)
    ok = [r for r in rows if r.get("status") == "ok"]
    axes = any(not Execution.of(r).is_default for r in rows)
    # (columns where a row has something to say: a run all at channels_last had two columns of "–")
    eager = axes and has_eager_speedups(rows)
    compiled = axes and any(compile_note(r) for r in rows)
    if ok:
        out.append("<h3>Training speed</h3>")
        speedups = has_speedups(ok)  # (no column of "–" in a run without fp32)
        out.append(_img(charts.throughput_chart(ok, "Throughput per precision" + (" (ratio vs fp32)" if speedups else "")),
                        "throughput chart"))
        tf32 = any(r.get("speedup_vs_tf32") is not None for r in ok)
        energy = any(r.get("joules_per_sample") is not None for r in ok)
        fw = names_frameworks(ok)  # (the title names the first row's framework: a column where another's differs)
        out.append(_table(
            ["precision", *(["framework"] if fw else []), "samples/s", *(["speedup vs fp32"] if speedups else []),
             *(["vs fp32 eager"] if eager else []), *(["compile"] if compiled else []),
             *(["vs tf32"] if tf32 else []), *(["energy J/sample", "mean power W"] if energy else []),
             "step p50 ms",
             "step p90 ms", "first step ms", "data load ms/batch", "TFLOP/s", "MFU", "skipped steps"],
            [[e(display_name(r)), *([e(framework_of(r))] if fw else []), _num(r.get("samples_per_s"), ",.0f"),
              *([_speedup(r)] if speedups else []),
              *([_ratio(r.get("speedup_vs_fp32_eager"))] if eager else []), *([e(compile_note(r) or "–")] if compiled else []),
              *([_ratio(r.get("speedup_vs_tf32"))] if tf32 else []),
              *([e(measured_energy_text(r)), _num(r.get("mean_power_w"), ",.0f")] if energy else []),
              _num(r.get("step_ms_p50"), ",.2f"), _num(r.get("step_ms_p90"), ",.2f"), _num(r.get("first_step_ms"), ",.1f"),
              _num(r.get("data_ms_per_batch"), ",.2f"), _num(r.get("achieved_tflops"), ",.3f"), _num(r.get("mfu"), ".1%"),
              _num(r.get("skipped_steps"), ",")]
             for r in ok]))
        low = next((r["mfu_note"] for r in ok if r.get("mfu_note")), None)
        if low:  # (the MFU column's dashes, said)
            out.append(f'<p class="sub">MFU: {e(low)}.</p>')
        if energy:
            out.append(_img(charts.bars([display_name(r) for r in ok if r.get("joules_per_sample") is not None],
                                        [float(r["joules_per_sample"]) for r in ok if r.get("joules_per_sample") is not None],
                                        "joules per sample (NVML, timed steps)", "Energy per sample per precision",
                                        fmt=sig), "energy chart"))
        if any(r.get("peak_allocated_bytes") is not None for r in ok):
            out.append("<h3>Memory</h3>")
            out.append(_img(charts.memory_chart(ok, "Where the memory goes (bars) and the measured peak (mark)"),
                            "memory chart"))
            cpu = all(str(r.get("device", "")).startswith("cpu") for r in ok)
            bases = {memory_basis(r) for r in ok}
            if "exact" in bases:
                out.append('<p class="sub">CPU: the peak is the growth of the process\'s resident memory (RSS), '
                           "approximate (the allocator reuses freed memory); the split into weights, grads, optimizer "
                           "state and activations is exact, and \u201cvs fp32\u201d compares its totals.</p>")
            if "rss" in bases:
                out.append('<p class="sub">RSS growth: this framework gives no tensor-level counts on a CPU, so the '
                           "compared memory is the growth of the process's resident memory, approximate (the same "
                           "model has read +36% and +202% vs fp32 in two runs). A saving is shown only when it clears "
                           "the range of the cells' readings (--repeats 3); weights and optimizer state are exact "
                           "(the model's variables).</p>")
            # (a CPU cell's "reserved" is its RSS growth again: a column of the same figures said nothing)
            reserved = any(r.get("peak_reserved_bytes") != r.get("peak_allocated_bytes") for r in ok)
            savings = has_savings(ok)
            # (a GPU's compared memory is its allocator's peak: "11.0 GiB (peak)" beside "peak allocated 11.0 GiB" was
            # one figure twice; "vs fp32" then follows the peak it compares)
            same = bases == {"peak"}
            out.append(_table(
                ["precision", *([] if same else ["compared memory"]), *(["vs fp32"] if savings and not same else []),
                 "peak RSS growth" if cpu else "peak allocated", *(["vs fp32"] if savings and same else []),
                 *(["peak reserved"] if reserved else []), "weights", "grads", "optimizer + masters", "activations",
                 "model file fp32 / 16-bit"],
                [[e(display_name(r)), *([] if same else [e(memory_text(r))]),
                  *([_saving(r.get("memory_saving_vs_fp32"), r)] if savings and not same else []),
                  fmt_bytes(r.get("peak_allocated_bytes")),
                  *([_saving(r.get("memory_saving_vs_fp32"), r)] if savings and same else []),
                  *([fmt_bytes(r.get("peak_reserved_bytes"))] if reserved else []),
                  fmt_bytes(r.get("weights_bytes")), fmt_bytes(r.get("grads_bytes")),
                  fmt_bytes(r.get("optimizer_bytes")), fmt_bytes(r.get("activation_bytes")),
                  f"{fmt_bytes(r.get('model_bytes_fp32'))} / {fmt_bytes(r.get('model_bytes_half'))}"] for r in ok]))
        mb = [r for r in ok if r.get("max_batch")]
        if mb:
            out.append("<h3>Largest batch that fits</h3>")
            out.append(_img(charts.bars([display_name(r) for r in mb], [float(r["max_batch"]) for r in mb],
                                        "largest batch (samples)", "Largest batch per precision"), "max batch chart"))
            ratios = any(r.get("max_batch_ratio_vs_fp32") is not None for r in mb)
            out.append(_table(["precision", "max batch", *(["vs fp32"] if ratios else []), "samples/s at max batch"],
                              [[e(display_name(r)), ("≥ " if r.get("max_batch_limit_hit") else "") + _num(r["max_batch"], ","),
                                *([_batch_ratio(r)] if ratios else []),
                                _num(r.get("max_batch_samples_per_s"), ",.0f")]
                               for r in mb]))
        conv = [r for r in ok if r.get("converge")]
        if conv:
            out.append("<h3>Convergence</h3>")
            out.append(_img(charts.loss_curves(conv, "Training loss, mean over seeds with min–max band"), "loss curves"))
            out.append(_img(charts.scale_chart(conv, "Loss scale of the fp16 modes (first seed)"), "loss scale chart"))
            rows_c = []
            for r in conv:
                final, metric, verdict, *rest = convergence.cells(r, conv)
                rows_c.append([e(display_name(r)), e(final), e(metric),
                               f'<span class="{VERDICT_CLASS[converge_tone(verdict)]}">{e(verdict)}</span>',
                               *(e(c) for c in rest)])
            out.append(_table([e(h) for h in convergence.headers(conv)], rows_c))
        inf = [r for r in ok if r.get("inference")]
        if inf:
            out.append("<h3>Inference latency</h3>")
            sizes = sorted({s for r in inf for s in r["inference"]}, key=int)
            hdr = ["precision"] + [f"batch {e(s)}: p50 / p90 / p99 ms" for s in sizes]
            out.append(_table(hdr, [[e(display_name(r))] + [
                " / ".join(_num(r["inference"].get(s, {}).get(k), ",.2f") for k in ("p50_ms", "p90_ms", "p99_ms"))
                for s in sizes] for r in inf]))
    for diag in diagnoses or []:
        out.append(f"<h3>Diagnostics: {e(diag['precision'])} <span class='sub'>({e(diag.get('created_at', ''))})</span></h3>")
        sev = {"error": "bad", "warning": "", "info": "dim"}
        out.append(_table(["severity", "finding", "fix"],
                          [[f'<span class="{sev.get(f["severity"], "")}">{e(f["severity"])}</span>',
                            e(f["title"]) + (f'<br><span class="dim">{e(f["detail"])}</span>' if f.get("detail") else ""),
                            e(f.get("fix"))] for f in diag.get("findings", [])], left=3))
    warned = [r for r in ok if r.get("warnings")]
    if warned:
        out.append("<h3>Warnings</h3>")
        out.append(_table(["precision", "warning"], [[e(display_name(r)), e(w)] for r in warned for w in r["warnings"]],
                          left=2))
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        out.append("<h3>Cells that did not run to the end</h3>")
        out.append(_table(["precision", "status", "reason"],
                          [[e(display_name(r)), f'<span class="bad">{e(r["status"])}</span>', e(r.get("reason"))]
                           for r in failed], left=3))
    return "\n".join(out)


def render_html(rows: list[dict[str, Any]], run: dict[str, Any] | None = None,
                all_rows: list[dict[str, Any]] | None = None, diagnoses: list[dict[str, Any]] | None = None,
                predictions: list[dict[str, Any]] | None = None) -> str:
    """The report of ``rows`` (derived keys present). ``all_rows`` (every device) adds the cross-GPU section;
    ``diagnoses`` (from ``ampbench diagnose``) add a section to their workload (latest per precision);
    ``predictions`` (from ``ampbench predict``) a section of their own, beside any measurement of the same cell."""
    groups = workload_groups(rows)
    advices = [advise(g) for g in groups]
    run = run or {}
    title = "ampbench report" + (f" — {run.get('label')}" if run.get("label") else "")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<div class="sub">run {e(run.get("run_id", "?"))} · {e(run.get("created_at", ""))} · '
        f'{e(run.get("device_name") or (rows[0].get("device_name") if rows else ""))} · ampbench {e(ampbench.__version__)}</div>',
    ]
    if not rows:
        parts.append(f"<p>{e(run.get('label') or 'No results in this run.')}</p>")
    else:
        parts.append("<h2>Recommendations</h2>")
        names = group_labels(groups)  # (bert tiny and bert small: two rows, named apart)
        parts.append(_table(["workload", "use", "evidence"],
                            [[f'<a href="#w{i}">{e(names[i])}</a>', f'<span class="nb">{e(a.recommended or "–")}</span>',
                              e(a.reason) + f' <span class="dim">({e(a.label)})</span>'] for i, a in enumerate(advices)],
                            left=3))
    # (one machine, one set of versions: its environment once, not the same eight lines under every workload)
    envs = [_env_of(g) for g in groups]
    shared = len(set(envs)) == 1 and len(groups) > 1
    if shared:
        parts += ["<h2>Environment</h2>", envs[0]]
    for i, (g, a) in enumerate(zip(groups, advices)):
        latest: dict[str, dict[str, Any]] = {}
        for d in diagnoses or []:
            if d.get("target") == g[0]["workload"] and d.get("device_name") == g[0].get("device_name"):
                latest[d["precision"]] = d
        parts.append(_workload_section(g, a, f"w{i}", list(latest.values()), env="" if shared else envs[i]))
    cost = accumulation_cost(rows)
    if cost:  # (run --grad-accum 1,N: the accumulated step beside the plain one, measured in one run)
        parts.append('<h2 id="accumulation">Gradient accumulation</h2>')
        parts.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in cost) + "</ul>")
    if all_rows and len({r.get("device_name") for r in all_rows if r.get("status") == "ok"}) > 1:
        parts.append('<h2 id="compare">Across GPUs</h2>')
        parts.append(compare_html(all_rows))
    predicted = predictions_table(predictions or [], all_rows or rows)
    if predicted:
        parts.append('<h2 id="predicted">Predicted on GPUs <span class="sub">(ampbench predict: a traced step priced on '
                     "each GPU's measured kernel table where one exists, else its datasheet; no GPU ran these)</span></h2>")
        parts.append(_table(PREDICTED_HEADERS, [[e(c) for c in predicted_cells(p)] for p in predicted], left=4))
    if (run or {}).get("predictions_note"):  # (predictions of workloads this run did not measure: where they are)
        parts.append(f'<p class="dim">{e(run["predictions_note"])}</p>')  # type: ignore[index]
    which = compared_cells(latest_predictions(predictions or []))
    if which:
        parts.append('<h2 id="which-gpu">Which GPU <span class="sub">(ampbench predict --gpu a,b,c: the same cell priced '
                     "on each GPU; no GPU ran these)</span></h2>")
        picks = list(gpu_advice(latest_predictions(predictions or []), shown=None))  # (every GPU named)
        if picks:
            parts.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in picks) + "</ul>")
        for title, gpus, group in which:
            parts.append(f"<h3>{e(title)}</h3>")
            modes = list(group)
            for head, figure in WHICH_GPU_FIGURES:  # (a table per figure, a GPU a row: the whole catalogue fits the page)
                cells = [[_figure_cell(figure, group[m].get(g), fp32_unfit(group, g)) for m in modes] for g in gpus]
                if not any(c not in ("", "–") for row in cells for c in row):
                    continue  # (no GPU priced: no cost table)
                parts.append(f'<div class="sub">{e(head)}</div>')
                parts.append(_table(["GPU", *[_nobreak(m) for m in modes]],
                                    [[_nobreak(g), *row] for g, row in zip(gpus, cells)]))
                if figure == "speed" and any(fp32_unfit(group, g) for g in gpus):
                    parts.append(f'<p class="dim">{e(unfit_note(accumulation_splits(group, gpus)))}</p>')
            parts.append(_img(charts.gpu_chart(gpus, chart_data(group), f"{title}: predicted samples/s per GPU"),
                              f"{title}: predicted samples/s per precision and GPU"))
    since = run.get("since")
    if since is not None:  # (the last run on this device that timed these cells: what changed since)
        parts.append(_since_html(since))
    parts.append('<p class="dim">Every figure is from the device named in its section; CPU and GPU results are '
                 "different facts. Generated by ampbench; this page makes no network requests.</p></body></html>")
    return "\n".join(parts)


def _since_html(diff: Any) -> str:
    """The section "Since run X": which runs, what differs, a table per setting (as ``compare --runs``), the count."""
    out = [f'<h2 id="since">Since run {e(diff.before.run_id)} <span class="sub">(the last run on this device that '
           "timed these cells: ampbench compare --runs)</span></h2>",
           "<ul>" + "".join(f"<li>{e(line)}</li>" for line in header_lines(diff)) + "</ul>"]
    for setting, changes in diff.settings():
        out.append(f"<h3>{e(setting.workload)} ({e(setting.preset)}), {e(setting.describe())}</h3>")
        cells = []
        for c in changes:
            line = cell_line(c)
            tone = {"good": "ok", "bad": "bad"}.get(verdict_tone(line["verdict"]), "")
            verdict = f'<span class="{tone}">{e(line["verdict"])}</span>'
            cells.append([e(line[k]) if k != "verdict" else verdict for k, _ in DIFF_TABLE])
        out.append(_table([head for _, head in DIFF_TABLE], cells))
    out.append(f"<p>{e(summary_line(diff))}</p>")
    return "\n".join(out)


WHICH_GPU_FIGURES = (("samples/s (x that GPU's fp32) ±error", "speed"), ("peak memory / max batch", "memory"),
                     ("energy per sample, mJ", "energy"), ("USD per million samples (--prices)", "usd"))


def _figure_cell(figure: str, r: dict[str, Any] | None, unfit: bool = False) -> str:
    """A GPU's cell of one figure in the "Which GPU" tables (HTML): its value; a mode it cannot run, its status;
    ``unfit``: that GPU's fp32 does not fit the batch (its "x fp32" marked)."""
    if r is None:
        return ""
    if r.get("status") != "ok":
        return e(r.get("status")) if figure == "speed" or (figure == "memory" and r.get("status") == "oom") else ""
    if figure == "speed":
        band = r.get("predicted_error_pct")
        return (f"{r['predicted_samples_per_s']:,.0f}{ratio_text(r, unfit)}"
                + (f' <span class="dim">±{band}%</span>' if band is not None else ""))
    if figure == "memory":
        return e(predicted_memory_text(r))
    if figure == "energy":
        return e(energy_text(r)) if r.get("predicted_joules_per_sample") is not None else "–"
    return e(usd_text(r)) if r.get("predicted_usd_per_million_samples") is not None else "–"


def _nobreak(name: str) -> str:
    """A name that must not wrap mid-token ("a100-/80gb"): its hyphens non-breaking."""
    return f'<span class="nb">{e(name)}</span>'


PREDICTED_HEADERS = ["workload", "GPU", "setting", "precision", "predicted samples/s ± (references)",
                     "measured samples/s (error)", "vs fp32 predicted / measured", "predicted peak / max batch",
                     "bound"]


def predicted_cells(p: dict[str, Any]) -> list[str]:
    """One predictions-table line as text (HTML and Markdown): a figure with its error or its measured twin in one
    cell, so the table fits a page."""
    def num(v: Any, spec: str) -> str:
        return "–" if not isinstance(v, (int, float)) else format(v, spec)
    measured = num(p["measured_samples_per_s"], ",.0f")
    if isinstance(p.get("error"), (int, float)):
        measured += f" ({p['error']:+.0%})"
    if p["measured_device"]:
        measured += f" on {p['measured_device']}"
    band = "" if p.get("predicted_error_pct") is None else f" ±{p['predicted_error_pct']}%"
    # (not ok: its status, and why where the memory column does not say it -- an oom's peak and largest batch are there)
    predicted = (num(p["predicted_samples_per_s"], ",.0f") + band if p["status"] == "ok" else str(p["status"])
                 + ("" if p["status"] == "oom" or not p["reason"] else f": {p['reason']}")
                 + (f"; {p['accumulated']}" if p.get("accumulated") else ""))  # (how an oom batch trains, its speed)
    return [f"{p['workload']} ({p['preset']})" if p["preset"] else str(p["workload"]), str(p["gpu"]), str(p["setting"]),
            str(p["precision"]), predicted, measured,
            f"{num(p['predicted_speedup_vs_fp32'], '.2f')} / {num(p['measured_speedup_vs_fp32'], '.2f')}",
            predicted_memory_text(p), str(p["predicted_bound"] or "–")]


def compare_html(rows: list[dict[str, Any]], reference: str | None = None) -> str:
    out = []
    for t in compare_table(rows, reference=reference):
        out.append(f"<h3>{e(t.title)}: throughput relative to {e(t.reference)}</h3>")
        body = []
        for gpu in t.devices:
            cells = []
            for p in t.precisions:
                c = t.cells.get((gpu, p))
                cells.append("–" if c is None else f"{c.relative:.2f}x <span class='dim'>({c.samples_per_s:,.0f}/s)</span>")
            body.append([e(gpu)] + cells)
        out.append(_table(["device"] + [e(p) for p in t.precisions], body))
    return "\n".join(out)

