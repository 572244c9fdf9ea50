"""A Markdown summary (for issues and pull requests): recommendation and one table per workload."""

from __future__ import annotations

from typing import Any

from ampbench.execution.axes import Execution, display_name, strategy_label
from ampbench.report import convergence
from ampbench.report.accumulation import accumulated_text, accumulation_cost
from ampbench.report.advisor import advise, workload_groups
from ampbench.report.console import (
    compile_note,
    eager_speedup_text,
    fmt_bytes,
    has_eager_speedups,
    has_savings,
    has_speedups,
    measured_energy_text,
    memory_text,
    saving_note,
    speedup_text,
    times_text,
)
from ampbench.report.gpu_comparison import markdown as gpu_markdown
from ampbench.report.numbers import SHOWN
from ampbench.report.predictions import latest
from ampbench.report.predictions import table as predictions_table
from ampbench.report.run_diff import markdown as diff_markdown
from ampbench.store.derive import memory_basis
from ampbench.store.row_keys import framework_of, names_frameworks
from ampbench.store.time_to_loss import text as time_to_loss_text


def md_escape(value: Any) -> str:
    """Text safe inside a Markdown table cell: no pipes, no HTML, no line breaks."""
    text = "" if value is None else str(value)
    for a, b in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("\n", " "), ("`", "\\`")):
        text = text.replace(a, b)
    return text


def _dash(text: str) -> str:
    """The console's "-" for no figure as the page's "–" (a table mixed both)."""
    return "–" if text == "-" else text


def _f(v: Any, spec: str) -> str:
    return "–" if not isinstance(v, (int, float)) else format(v, spec)


def render_markdown(rows: list[dict[str, Any]], run: dict[str, Any] | None = None,
                    predictions: list[dict[str, Any]] | None = None) -> str:
    run = run or {}
    lines = [f"## ampbench results — run {md_escape(run.get('run_id', '?'))}", ""]
    if not rows and run.get("label"):
        lines += [f"_{md_escape(run['label'])}_", ""]

    for group in workload_groups(rows):
        first = group[0]
        wl, preset, bs, dev = first["workload"], first.get("preset"), first.get("batch_size"), first.get("device_name")
        a = advise(group)
        executions = {Execution.of(r).label for r in group}
        # (one execution every row shares, not eager: said in the heading, not a column of copies)
        one_ex = next(iter(executions)) if len(executions) == 1 and not Execution.of(first).is_default else None
        on = f" · {md_escape(one_ex)}" if one_ex else ""
        lines.append(f"### {md_escape(wl)} ({md_escape(preset)}, batch {bs}{md_escape(accumulated_text(first))}) on "
                     f"{md_escape(dev)}{on}")
        lines.append("")
        use = f"**use {md_escape(a.recommended)}**" if a.recommended else "**no recommendation**"
        lines.append(f"{use} ({md_escape(a.label)}): {md_escape(a.reason)}")
        lines.append("")
        if a.combination is not None:
            lines.append(f"**fastest combination: {md_escape(a.combination)}**: {md_escape(a.combination_evidence)}")
            lines.append("")
        if a.least_memory is not None:
            lines.append(f"**least memory**:{md_escape(a.least_memory.removeprefix('least memory:'))}")
            lines.append("")
        if a.distributed is not None:
            lines.append(f"**distributed**: {md_escape(a.distributed)}")
        if a.optimizer_states is not None:
            lines.append(f"**{md_escape(a.optimizer_states.split(':', 1)[0])}**:{md_escape(a.optimizer_states.split(':', 1)[1])}")
            lines.append("")
        for said in (a.half_type, a.energy, a.data):
            if said is not None:
                head, _, rest = said.partition(":")
                lines += [f"**{md_escape(head)}**:{md_escape(rest)}", ""]
        axes = len({Execution.of(r) for r in group}) > 1 or not all(Execution.of(r).is_default for r in group)
        # "memory vs fp32" compares the column next to it: the allocator's peak on a GPU, the exact split
        # (weights + grads + optimizer state + activations) on a CPU, whose RSS peak gets its own column; cells
        # with only RSS growth (Keras on a CPU) say so in the header, or per figure when the table mixes them
        cpu = all(str(r.get("device") or "").startswith("cpu") for r in group)
        bases = {memory_basis(r) for r in group}
        compared = {"exact": "memory (exact split)", "rss": "memory (RSS growth, approximate)",
                    "peak": "peak allocated"}[next(iter(bases))] if len(bases) == 1 else "memory"
        rss = " CPU RSS peak (approximate) |" if cpu else ""
        ex_col = axes and not one_ex
        ex_head, ex_rule = (" execution |", " --- |") if ex_col else ("", "")
        dist = any(r.get("strategy") for r in group)
        if dist:
            ex_head, ex_rule = ex_head + " strategy |", ex_rule + " --- |"
        eager = axes and has_eager_speedups(group)
        eager_head, eager_rule = (" vs fp32 eager |", " ---: |") if eager else ("", "")
        tf32 = any(r.get("speedup_vs_tf32") is not None for r in group)
        energy = any(r.get("joules_per_sample") is not None for r in group)
        eager_head += (" vs tf32 |" if tf32 else "") + (" energy J/sample |" if energy else "")
        eager_rule += (" ---: |" if tf32 else "") + (" ---: |" if energy else "")
        # (a framework column only where a row is not PyTorch's, a converge column only where a row was checked:
        # columns that say the same on every row say nothing)
        fw_head, fw_rule = (" framework |", " --- |") if names_frameworks(group) else ("", "")
        converged = any(r.get("converge_verdict") for r in group)
        to_loss = any(r.get("fp32_loss_target") is not None for r in group)
        # (ratio columns only where a row has a ratio: a run without fp32 had two columns of "–")
        speedups, savings = has_speedups(group), has_savings(group)
        sp_head, sp_rule = (" speedup vs fp32 |", " ---: |") if speedups else ("", "")
        sv_head, sv_rule = (" memory vs fp32 |", " ---: |") if savings else ("", "")
        lines.append(f"| precision |{fw_head}{ex_head} status | samples/s |{sp_head}{eager_head} step p50 ms | "
                     f"{compared} |{sv_head}{rss}" + (" converge |" if converged else "")
                     + (" to fp32 loss |" if to_loss else ""))
        lines.append(f"| --- |{fw_rule}{ex_rule} --- | ---: |{sp_rule}{eager_rule} ---: | ---: |{sv_rule}"
                     + (" ---: |" if cpu else "") + (" --- |" if converged else "") + (" ---: |" if to_loss else ""))
        for r in group:
            saving = r.get("memory_saving_vs_fp32")
            mem = (f"– ({saving_note(r)})" if saving_note(r) else "–" if not isinstance(saving, (int, float))
                   else "same" if abs(saving) < SHOWN else f"{saving:.0%} less" if saving > 0 else f"{-saving:.0%} more")
            speedup = speedup_text(r)[0] if r.get("speedup_vs_fp32") is not None else "–"
            status = md_escape(r.get("status"))
            if r.get("status") != "ok":
                status += f": {md_escape(r.get('reason'))}"
            elif compile_note(r) or r.get("warnings"):
                status += f" ({md_escape('; '.join(n for n in (compile_note(r), *(r.get('warnings') or [])) if n))})"
            # (ex_col, not ex_head: a strategy column alone made every row carry an execution cell its header lacked)
            ex_cell = f" {md_escape(Execution.of(r).label)} |" if ex_col else ""
            if r.get("strategy"):
                ex_cell += f" {md_escape(strategy_label(r))} |"
            elif dist:
                ex_cell += " 1 process |"
            eager_cell = f" {_dash(eager_speedup_text(r))} |" if eager else ""
            if tf32:
                eager_cell += f" {_dash(times_text(r.get('speedup_vs_tf32')))} |"
            if energy:
                eager_cell += f" {_dash(md_escape(measured_energy_text(r)))} |"
            rss_cell = f" {_dash(fmt_bytes(r.get('cpu_rss_peak_bytes')))} |" if cpu else ""
            state = f" · {r['optimizer_state']} optimizer states" if r.get("optimizer_state") else ""
            fw_cell = f" {framework_of(r)} |" if fw_head else ""
            lines.append(f"| {md_escape(r['precision'] + state)} |{fw_cell}{ex_cell} {status} | "
                         f"{_f(r.get('samples_per_s'), ',.0f')} |"
                         + (f" {speedup} |" if speedups else "") + f"{eager_cell} "
                         f"{_f(r.get('step_ms_p50'), ',.2f')} | {_dash(memory_text(r, len(bases) > 1))} |"
                         + (f" {mem} |" if savings else "") + f"{rss_cell}"
                         + (f" {md_escape(r.get('converge_verdict') or '–')} |" if converged else "")
                         + (f" {_dash(time_to_loss_text(r))} |" if to_loss else ""))
        lines.append("")
        conv = [r for r in group if r.get("status") == "ok" and r.get("converge")]
        if conv:  # (the final losses and the metric: the HTML page had them, the summary only the verdicts)
            heads = convergence.headers(conv)
            lines += [f"Convergence ({md_escape(wl)}):", "", "| " + " | ".join(md_escape(h) for h in heads) + " |",
                      "| --- |" + " ---: |" * 2 + " --- |" + " ---: |" * (len(heads) - 4)]
            lines += ["| " + " | ".join(md_escape(c) for c in (display_name(r), *convergence.cells(r, conv))) + " |"
                      for r in conv]
            lines.append("")
    cost = accumulation_cost(rows)
    if cost:  # (run --grad-accum 1,N: the accumulated step beside the plain one, measured in one run)
        lines += ["### Gradient accumulation", "", *(f"- {md_escape(line)}" for line in cost), ""]
    predicted = predictions_table(predictions or [], rows)
    if predicted:
        from ampbench.report.html import PREDICTED_HEADERS, predicted_cells  # lazy: matplotlib

        lines += ["### Predicted on GPUs (ampbench predict: a traced step priced on each GPU's measured kernel table "
                  "where one exists, else its datasheet; no GPU ran these)", "", "| " + " | ".join(PREDICTED_HEADERS) + " |",
                  "|" + " --- |" * 4 + " ---: |" * (len(PREDICTED_HEADERS) - 5) + " --- |"]
        lines += ["| " + " | ".join(md_escape(c) for c in predicted_cells(p)) + " |" for p in predicted]
        lines.append("")
    if run.get("predictions_note"):  # (predictions of workloads this run did not measure: where they are)
        lines += [f"_{md_escape(run['predictions_note'])}_", ""]
    which = gpu_markdown(latest(predictions or []), md_escape)
    if which:
        lines += ["### Which GPU (ampbench predict --gpu a,b,c: the same cell priced on each GPU)", *which, ""]
    since = run.get("since")
    if since is not None:  # (the last run on this device that timed these cells: what changed since)
        lines += [f"### Since run {md_escape(since.before.run_id)}", "", diff_markdown(since, heading="####"), ""]
    lines.append("_Measured by ampbench; every figure is from the device named in its heading (predictions: the GPU "
                 "named in their row)._")
    return "\n".join(lines) + "\n"
