"""The lent H200's real-scale rows in every report: the AMP gain over TF32 beside the one over fp32, joules per
sample (measured, with the prediction at TDP where one is stored), the half-type and energy advice -- in the
console (80 columns, no number cut), the Markdown and the HTML."""

from __future__ import annotations

import json
from pathlib import Path

from ampbench.report.console import advice_lines, results_tables
from ampbench.report.html import render_html
from ampbench.report.markdown import render_markdown
from ampbench.report.numbers import sig
from ampbench.store import derive

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "truth" / "runs.json"


def _rows() -> list[dict]:
    data = json.loads(RUNS.read_text())
    return derive(data["rows"])


def test_the_console_shows_the_gain_over_tf32_and_the_energy_whole_at_80_columns() -> None:
    from rich.console import Console

    rows = [r for r in _rows() if r["workload"] == "gpt2"]
    console = Console(width=80, record=True)
    for t in results_tables(rows, 80):
        console.print(t)
    text = console.export_text()
    amp = next(r for r in rows if r["precision"] == "amp-bf16")
    assert "vs tf32" in text and f"{amp['speedup_vs_tf32']:.2f}x" in text
    assert "J/sample" in text and sig(amp["joules_per_sample"]) in text
    lines = list(advice_lines(rows))
    assert any("half type: bf16" in line for line in lines) and any("most energy-efficient" in line for line in lines)


def test_energy_keeps_three_significant_digits() -> None:
    """1.0003 J a sample was "1" beside 0.337 (:.3g drops trailing zeros)."""
    from ampbench.report.console import measured_energy_text

    assert measured_energy_text({"joules_per_sample": 1.0003, "predicted_joules_per_sample": 0.38}) == "1.00 (pred 0.380)"
    assert measured_energy_text({"joules_per_sample": 0.12}) == "0.120" and measured_energy_text({}) == "-"


def test_markdown_and_html_carry_the_same_columns_and_advice() -> None:
    rows = _rows()
    md = render_markdown(rows, {"run_id": "r"})
    assert "| vs tf32 |" in md and "| energy J/sample |" in md and "**half type**:" in md
    assert "**most energy-efficient**:" in md
    html = render_html(rows, {"run_id": "r"})
    assert "energy J/sample" in html and "mean power W" in html and "energy chart" in html
    assert "<b>Half type</b>" in html and "<b>Most energy-efficient</b>" in html


def test_the_speedup_over_tf32_is_the_two_rows_ratio() -> None:
    """Oracle: samples/s of the two rows."""
    rows = _rows()
    for r in rows:
        if r["precision"] in ("amp-fp16", "amp-bf16", "master-bf16") and r["status"] == "ok":
            tf32 = next(t for t in rows if t["workload"] == r["workload"] and t["precision"] == "tf32")
            assert abs(r["speedup_vs_tf32"] - r["samples_per_s"] / tf32["samples_per_s"]) < 1e-12
        if r["precision"] in ("fp32", "tf32"):
            assert r["speedup_vs_tf32"] is None


def test_an_execution_every_row_shares_is_in_the_title_and_a_diverged_row_unsays_no_step_skipped() -> None:
    """ResNet-50 on the H200, every cell channels_last: "channels_last" on every row and a "vs fp32 eager" column of
    "-" (no eager fp32 ran) took two columns of an 80-wide terminal; "no step skipped" headed a table whose amp-fp16
    diverged after skipping 53."""
    from rich.console import Console

    rows = [r for r in _rows() if r["workload"] == "resnet50"]
    console = Console(width=80, record=True)
    for t in results_tables(rows, 80):
        console.print(t)
    text = console.export_text()
    assert "on NVIDIA H200 · channels_last" in text and "execution" not in text and "eager" not in text, text
    assert "diverged" in text and "no step skipped" not in text
    assert text.count("channels_last") == 1


def test_the_markdown_says_a_shared_execution_in_its_heading_and_the_mode_once() -> None:
    rows = [r for r in _rows() if r["workload"] == "resnet50"]
    md = render_markdown(rows, {"run_id": "r"})
    assert "on NVIDIA H200 · channels_last" in md and "| execution |" not in md and "eager" not in md, md
    assert md.count("channels_last") == 2  # (the heading, and the advice's "(at channels_last)")
    assert "**use amp-bf16** (speed only, convergence not checked): (at channels_last) " in md
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert not any(" - |" in line for line in table), table  # ("–" throughout, as the page's other cells)
    html = render_html(rows, {"run_id": "r"})
    assert "vs fp32 eager" not in html and "<th>compile</th>" not in html and '<th class="">compile</th>' not in html


def test_the_energy_chart_labels_keep_three_significant_digits(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The page's energy chart labelled 1.0003 J "1" beside 0.337 ("{:.3g}")."""
    from ampbench.report import charts

    texts: list[str] = []
    real = charts._to_uri

    def capture(fig):  # type: ignore[no-untyped-def]
        texts.extend(t.get_text().strip() for t in fig.axes[0].texts)
        return real(fig)

    monkeypatch.setattr(charts, "_to_uri", capture)
    rows = [r for r in _rows() if r["workload"] == "bert"]
    render_html(rows, {"run_id": "r"})
    joules = [r["joules_per_sample"] for r in rows if r["status"] == "ok" and r.get("joules_per_sample")]
    assert joules and all(sig(j) in texts for j in joules), texts
    assert sig(1.0003) == "1.00"  # (what the chart's "{:.3g}" wrote as "1")


def test_a_gpus_memory_table_says_its_peak_once() -> None:
    """On a GPU the compared memory is the allocator's peak: "11.0 GiB (peak)" stood beside "peak allocated 11.0 GiB"."""
    import re

    html = render_html([r for r in _rows() if r["workload"] == "bert"], {"run_id": "r"})
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", html[html.index("<h3>Memory</h3>"):])
    assert "compared memory" not in heads[:12] and heads[1:3] == ["peak allocated", "vs fp32"], heads[:12]
    assert "(peak)" not in html[html.index("<h3>Memory</h3>"):html.index("<h3>Memory</h3>") + 20000]
