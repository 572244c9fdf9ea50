"""Output at any width: tables stack to fit 80 columns with no number cut, progress lines keep their ETA, and
one-line messages stay one line (COLUMNS unset, 80, or 200)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from ampbench.report.console import results_tables
from ampbench.report.run_text import progress_line
from ampbench.store import Store, derive
from tests.conftest import cli


def _render(tables: list, width: int) -> str:
    con = Console(width=width, file=io.StringIO(), color_system=None)
    for t in tables:
        con.print(t)
    return con.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_results_tables_fit_the_width_without_cutting_a_number(report_store: Store, width: int) -> None:
    rows = derive(report_store.rows(report_store.runs()[0].run_id))
    text = _render(results_tables(rows, width), width)
    assert max(len(line) for line in text.splitlines()) <= width and _whole_tables(text.splitlines(), width)
    assert "…" not in text and "..." not in text
    for r in rows:  # every figure whole, as its own cell prints it
        if r.get("samples_per_s"):
            assert f"{r['samples_per_s']:,.0f}" in text
        if r.get("step_ms_p50"):
            assert f"{r['step_ms_p50']:,.2f}" in text
    for head in ("samples/s", "speedup", "step p50 ms", "skipped"):  # headers wrap at spaces, never cut
        assert all(word in text for word in head.split())
    tables = results_tables(rows, width)
    assert len(tables) == 2 if width == 200 else len(tables) > 2  # (two workloads: a table each, stacked if too wide)


def test_a_pytorch_table_has_no_framework_column(report_store: Store) -> None:
    """"torch" on every row of every PyTorch table took a column of an 80-wide terminal (and of every Markdown and
    HTML table); a table with a Keras row keeps it (test_rss_labels). A Markdown converge column is there only where
    a row was checked."""
    from ampbench.report.html import render_html
    from ampbench.report.markdown import render_markdown

    rows = derive(report_store.rows(report_store.runs()[0].run_id))
    text = _render(results_tables(rows, 80), 80)
    assert "framework" not in text and "torch" not in text and "samples/s" in text
    md, html = render_markdown(rows), render_html(rows)
    assert "| framework |" not in md and "| torch |" not in md and "| samples/s |" in md
    assert ">framework</th>" not in html and ">samples/s</th>" in html
    assert "| converge |" in md and any(r.get("converge_verdict") for r in rows)
    unchecked = [{**r, "converge_verdict": None} for r in rows]
    assert "converge" not in render_markdown(unchecked).split("| precision |", 1)[1].split("\n", 1)[0]
    assert "skipped" in text  # (amp-fp16 skipped a step: the column stays)
    calm = [{**r, "skipped_steps": 0} for r in rows]  # (none skipped: a column of zeros was a table of its own)
    text = _render(results_tables(calm, 80), 80)
    assert "skipped" not in text.replace("no step skipped", "") and "no step skipped" in text


def test_ampbench_results_at_80_columns(report_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("results", "--db", str(report_store.path), "--run", report_store.runs()[0].run_id)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "2,900" in out and "1,000" in out and not re.search(r"\d…|\d\.\.\.", out)


@pytest.mark.parametrize("budget", [30, 46, 80, 200])
def test_a_progress_line_keeps_its_step_count_and_eta(budget: int) -> None:
    inside = "convergence seed 2/3: step 140/200, ~12 s left"
    line = progress_line("user:/home/someone/projects/models/very_long_model_file.py:build (small) amp-bf16 b64",
                         inside, budget)
    assert len(line) <= budget
    assert line.endswith("~12 s left") and ("step 140/200" in line or budget < len("step 140/200, ~12 s left") + 2)
    assert progress_line("tabular-mlp (tiny) fp32", "warm-up: step 1/2", 200) == \
        "running tabular-mlp (tiny) fp32: warm-up: step 1/2"


@pytest.mark.parametrize("columns", [None, "80", "200"])
def test_one_line_messages_stay_one_line_at_any_width(columns: str | None, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    code, out, err = cli("run", "--workloads", "tabular-mlp,no-such-workload-with-a-long-name", "--preset", "tiny",
                         "--precisions", "fp32", "--db", str(tmp_path / "r.db"))
    assert code == 2 and err.count("\n") == 1 and len(err) > 100, err


def _whole_tables(lines: list[str], width: int) -> bool:
    """Every table line within ``width`` and ending on the table's right border (rich crops a too-wide table's
    lines to the width: a cropped line ends mid-column)."""
    table = [line.rstrip() for line in lines if line[:1] in "┏┃┡│└"]
    return bool(table) and all(len(line) <= width and line[-1] in "┓┃┩│┘" for line in table)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_stacked_tables_never_exceed_the_width_when_headers_must_wrap(width: int) -> None:
    """Columns whose headers are wider than their numbers ("peak memory" over "69.0 MiB"): rich's own collapse took
    the key column below its minimum, then widened it back past the terminal (a table 83 wide at 80, cut)."""
    from ampbench.report.console import Col, stack_tables

    modes = ["fp32", "tf32", "amp-fp16", "master-bf16"]
    cols = [Col("ms/step", ["2.74"] * 4), Col("samples/s", ["23,351"] * 4), Col("x fp32", ["1.00"] * 4),
            Col("x tf32", ["0.44"] * 4), Col("peak memory", ["69.0 MiB"] * 4), Col("max batch", ["189,508"] * 4),
            Col("MFU", ["3%"] * 4), Col("bound", ["compute"] * 4), Col("activations", ["22.2 MiB"] * 4)]
    text = _render(stack_tables("t", Col("mode", modes, justify="left"), cols, width), width)
    assert _whole_tables(text.splitlines(), width)
    for cell in ("master-bf16", "23,351", "69.0 MiB", "189,508", "compute", "22.2 MiB"):
        assert cell in text
    for word in ("peak", "memory", "samples/s", "activations"):
        assert word in text


def test_a_narrow_tables_title_is_one_line_at_the_terminals_width_not_the_tables() -> None:
    """rich wraps a table's title to the table's width: predict's three-column energy table at 100 columns put its
    title on three lines ("user:m.py:frozen (small), batch / 64: energy per sample, mJ, / predicted per GPU")."""
    from ampbench.report.console import Col, stack_tables

    title = "user:m.py:frozen (small), batch 64: energy per sample, mJ, predicted per GPU"
    tables = stack_tables(title, Col("mode", ["fp32", "amp-bf16"], justify="left"),
                          [Col("l4", ["0.611", "0.868"]), Col("h100-sxm", ["1.69", "2.34"])], 100)
    lines = _render(tables, 100).splitlines()
    assert lines[0].rstrip() == title and lines[1].startswith("┏") and len(lines[1]) < 40
    narrow = _render(tables, 40).splitlines()  # (narrower than the title: it wraps at the terminal, at spaces)
    head = narrow[:next(i for i, x in enumerate(narrow) if x.startswith("┏"))]
    assert len(head) == 2 and " ".join(x.strip() for x in head) == title and max(map(len, narrow)) <= 40


def test_ampbench_predict_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("predict", "--gpu", "a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny", "--db",
                         str(tmp_path / "r.db"))
    assert code == 0, err
    assert _whole_tables([line for line in out.splitlines() if line[:1] in "┏┃┡│└"], 80)  # (messages: one line)
    assert "master-bf16" in out and "samples/s" in out


def test_every_part_of_a_stacked_table_repeats_the_columns_that_tell_its_rows_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --batch-size 8,16 the continuation tables of run and results carry precision and batch (not precision
    alone: "fp32, fp32, master-bf16, master-bf16"); the advice is one line for the workload, not one per batch. At
    60 columns: at 80 whether the table stacks at all depends on its measured figures ("1.00x (moved 14%)" or "1.00x":
    one table when they are short)."""
    monkeypatch.setenv("COLUMNS", "60")
    db = tmp_path / "r.db"
    code, out, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,master-bf16",
                         "--batch-size", "8,16", "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report",
                         "--db", str(db))
    assert code == 0, err
    code, listed, err = cli("results", "--db", str(db))
    assert code == 0, err
    for text in (out, listed):
        heads = [line for line in text.splitlines() if line.startswith("┃") and "precision" in line]
        assert len(heads) >= 2 and all("batch" in h for h in heads), heads  # (each part: precision and batch)
    advice = [line for line in out.splitlines() if re.match(r"tabular-mlp \(tiny\)( at batch [\d, ]+)?: ", line)]
    assert len(advice) == 1, advice
    # (the same pick at both batches says them once; picks that differ -- a noisy baseline on a shared machine --
    # are said per batch, still on the workload's one line)
    assert "at batch 8, 16: " in advice[0] or ("batch 8: " in advice[0] and "batch 16: " in advice[0]), advice


def test_compare_at_80_columns_never_wraps_a_precision_name_nor_cuts_a_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db = tmp_path / "r.db"
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--steps", "2", "--warmup", "1",
                       "--no-isolate", "--no-report", "--db", str(db))
    assert code == 0, err
    # the same cells from a second machine (compare sets a setting beside itself only on two devices)
    code, exported, err = cli("export", "--db", str(db), "--out", "-")
    assert code == 0, err
    other = json.loads(exported)
    for item in (*other["runs"], *other["rows"]):
        item["run_id"] += "-other"
        item["device_name"] = "Another CPU"
    (tmp_path / "other.json").write_text(json.dumps(other))
    code, _, err = cli("import", str(tmp_path / "other.json"), "--db", str(db))
    assert code == 0, err
    code, out, err = cli("compare", "--db", str(db))
    assert code == 0, err
    from ampbench.store.derive import merge_repeats

    rows = merge_repeats(Store(db).rows())  # (as compare reads them: repeats and the closing baseline merged)
    assert _whole_tables([line for line in out.splitlines() if line[:1] in "┏┃┡│└"], 80)
    for r in rows:
        assert r["precision"] in out and f"({r['samples_per_s']:,.0f}/s)" in out, r["precision"]
    assert "…" not in out


@pytest.mark.parametrize("width", ["80", "100"])
def test_list_gpus_cuts_no_number_nor_header(monkeypatch: pytest.MonkeyPatch, width: str) -> None:
    from ampbench.measure.gpus import predictable

    monkeypatch.setenv("COLUMNS", width)
    code, out, err = cli("list", "gpus")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= int(width) and "…" not in out
    for g in predictable():  # every figure whole (the "3,..." and "49...")
        assert g.key in out and f"{g.bandwidth_gbs:,.0f}" in out and f"{g.tflops['fp32']:g}" in out
    for head in ("TDP", "NVLink", "GB/s", "memory"):
        assert head in out


def test_a_converge_only_table_and_its_cell_lines_say_what_was_measured() -> None:
    """--measure converge alone: the table had five columns of "-" (speed, step time, memory) and each finished
    cell's line ended in two spaces; the table keeps the columns with a figure, each cell's line says its final training loss
    (and the held-out split's metric) -- the verdict needs fp32's cell -- and a largest batch where one was searched."""
    from ampbench.cli.render import cell_line, ok_detail
    from tests.report.test_advisor import _row

    unspeeded = {"samples_per_s": None, "peak_allocated_bytes": None, "step_ms_p50": None, "measures": ["converge"]}
    rows = derive([_row("fp32", None, verdict_losses=[1.0, 1.01], **unspeeded),
                   _row("amp-bf16", None, verdict_losses=[1.0, 1.0], **unspeeded)])
    text = _render(results_tables(rows, 80), 80)
    heads = text.split("┡")[0]
    assert "converge" in heads and "baseline" in text and "parity" in text
    for head in ("samples/s", "speedup", "p50", "memory", "fp32"):  # (no curves stored: no time to fp32's loss)
        assert head not in heads, head
    assert "-" not in text.split("┡")[1].replace("amp-bf16", "")
    cell = {"samples_per_s": None, "final_loss": 1.8789, "metric_name": "accuracy", "metric": 0.421875,
            "converge": {"steps": 30}, "max_batch": 3072, "max_batch_limit_hit": False}
    assert ok_detail(cell) == "after 30 steps: train loss 1.879, test accuracy 42.19%, max batch 3,072"
    lm = {"final_loss": 3.816, "metric_name": "perplexity", "metric": 26.9, "converge": {"steps": 30}}
    assert ok_detail(lm) == "after 30 steps: train loss 3.816, test perplexity 26.9"
    assert ok_detail({"samples_per_s": 6037.2}) == "6,037 samples/s"
    assert cell_line("ok", "ok", "w (tiny) fp32", "") == "  [green]ok         [/] w (tiny) fp32"


@pytest.mark.parametrize("width", [30, 40, 80, 200])
def test_a_title_wraps_between_its_parts(width: int) -> None:
    """At 80 columns "mnist-cnn (small), batch 64 on AMD EPYC  run 20261128-152755-238adc  no step skipped" put "no
    step" at the end of one line and "skipped" on the next: it wraps between its parts (two spaces apart), each whole
    where it fits, its markup kept."""
    from rich.table import Table

    from ampbench.report.titled import titled

    parts = ["mnist-cnn (small), batch 64 on AMD EPYC", "run 20261128-152755-238adc", "no step skipped"]
    title = f"{parts[0]}  [dim]{parts[1]}[/]  [dim]{parts[2]}[/]"
    table = Table("precision")
    table.add_row("fp32")
    con = Console(width=width, file=io.StringIO(), color_system="standard", force_terminal=True)
    con.print(titled(title, table))
    plain = re.sub(r"\x1b\[[0-9;]*m", "", con.file.getvalue())  # type: ignore[attr-defined]
    head = plain.split("┏")[0].splitlines()
    assert all(len(line) <= width for line in head)
    if width >= len("  ".join(parts)):
        assert head == ["  ".join(parts)]
    else:
        for part in parts:
            if len(part) <= width:
                assert any(line.strip() == part or f"  {part}" in line or line.startswith(f"{part}  ")
                           for line in head), (part, head)
    assert "\x1b[2;3mrun 20261128" in con.file.getvalue()  # (the dim parts stay dim)


def test_a_paragraph_of_a_note_goes_below_the_table_and_a_short_one_stays_beside_its_row() -> None:
    """A note column that got a stacked table of its own was a column of empty rows beside a wrapped paragraph (bert
    tiny's fp8 row: 14 lines tall at 200 columns); such notes are lines below the table, led by their row."""
    def row(precision: str, sps: float | None, **kw: object) -> dict:
        return {"run_id": "r", "workload": "bert", "preset": "tiny", "batch_size": 4, "device_name": "CPU",
                "device": "cpu", "precision": precision, "status": "ok", "samples_per_s": sps, "step_ms_p50": 2.0,
                "measures": ["throughput"], **kw}

    long = "no Linear layer was converted to fp8 (" + "layer too small to gain, " * 8 + "): every GEMM ran in bf16"
    rows = derive([row("fp32", 100.0), row("amp-bf16", 90.0), row("fp8-tensorwise", 80.0, warnings=[long])])
    for width in (80, 200):
        text = _render(results_tables(rows, width), width)
        assert "│ note" not in text and "note (fp8-tensorwise): no Linear layer" in text, text
        assert text.count("amp-bf16") == 1  # (no second, note-only table of every row)
    short = derive([row("fp32", 100.0), row("amp-fp16", None, status="oom", reason="out of memory at batch 4")])
    text = _render(results_tables(short, 120), 120)
    assert "note" in text and "out of memory at batch 4 │" in text  # (a column beside its row)
