"""The report: HTML rendered in a real headless browser, Markdown, cross-GPU tables, escaping."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from unittest import mock

import pytest

from ampbench.report import build_report, write_report
from ampbench.report.compare import compare_table
from ampbench.store import Store, derive
from tests.conftest import in_process

from .chromium import Chromium, find_chromium
from .conftest import EVIL, _row

CHROMIUM = find_chromium()


def test_html_is_self_contained_and_escapes_user_strings(report_store: Store) -> None:
    _, page = build_report(report_store, report_store.latest_run_id)  # type: ignore[attr-defined]
    assert "<script" not in page.lower().replace("&lt;script", "")  # no script element at all
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "nightly &lt;b&gt;" in page
    for bad in ("http://", "https://", "src=\"//", "@import", "url("):
        assert bad not in page.replace('xmlns="http://www.w3.org/2000/svg"', ""), bad
    assert 'http-equiv="Content-Security-Policy"' in page
    # content: advice, charts, tables, failures, inference, cross-GPU
    assert "Use amp-fp16" in page and "2.90x faster than fp32, 45% less memory, batch 590 → 1,120" in page
    assert page.count('<img class="chart"') >= 5  # throughput, memory, max batch, loss curves, loss scale
    for text in ("Inference latency", "Largest batch that fits", "Convergence", "Cells that did not run to the end",
                 "diverged", "unsupported", "Across GPUs", "Tesla V100-SXM2-16GB", "compute capability", "8.0"):
        assert text in page, text


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install chromium; .ci/run does it)")
def test_report_in_headless_chromium(report_store: Store, tmp_path: Path) -> None:
    path = write_report(report_store, tmp_path / "report.html", report_store.latest_run_id)  # type: ignore[attr-defined]
    with Chromium(CHROMIUM) as browser:  # type: ignore[arg-type]
        page = browser.load(path, {
            "images": "Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length",
            "tables": "document.querySelectorAll('table').length",
            "title": "document.title",
            "h2": "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)",
            "scripts": "document.scripts.length",
            "width": "document.documentElement.scrollWidth",
        })
    (tmp_path / "report.png").write_bytes(page.screenshot)
    assert page.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(page.screenshot) > 20_000
    left = [u for u in page.requests if not (u.startswith("data:") or u == path.resolve().as_uri())]
    assert left == [], f"requests leaving the page: {left}"
    errors = [m for m in page.console if m[0] in ("error", "warning", "assert")]
    assert errors == [], errors
    v = page.values
    assert v["images"] >= 6 and v["tables"] >= 8 and v["scripts"] == 0
    assert v["title"] == "ampbench report — nightly <b>"
    assert f"{EVIL} (small, batch 64) · torch" in v["h2"]  # shown as text, not run (and the framework named)
    assert v["width"] <= 1280  # no horizontal scrolling on a laptop-sized window


def test_markdown_summary(report_store: Store) -> None:
    _, md = build_report(report_store, report_store.latest_run_id, "md")  # type: ignore[attr-defined]
    assert "### resnext (small, batch 64) on NVIDIA A100-SXM4-80GB" in md
    assert "**use amp-fp16** (converges like fp32)" in md
    assert "| amp-fp16 | ok | 2,900 | 2.90x |" in md
    assert "&lt;script&gt;" in md and "<script>" not in md
    assert "diverged: training loss is nan" in md


def test_markdown_memory_columns_compare_the_same_measure_on_cpu(tmp_path: Path) -> None:
    """On CPU the compared memory is the exact split; a mode with a higher RSS peak but a smaller split shows
    both, each in its own labelled column, never "less" next to a bigger peak of another measure."""
    from ampbench.report.markdown import render_markdown
    from ampbench.store import derive

    from .conftest import _row

    split = dict(weights_bytes=1000, grads_bytes=1000, optimizer_bytes=2000)
    rows = [_row("r", "w", "fp32", 100.0, device="cpu", device_name="CPU", cpu_rss_peak_bytes=3 * 2**20,
                 peak_allocated_bytes=3 * 2**20, activation_bytes=4000, **split),
            _row("r", "w", "amp-bf16", 100.0, device="cpu", device_name="CPU", cpu_rss_peak_bytes=4 * 2**20,
                 peak_allocated_bytes=4 * 2**20, activation_bytes=2000, **split)]
    md = render_markdown(derive(rows))
    assert "| memory (exact split) | memory vs fp32 | CPU RSS peak (approximate) |" in md
    assert "| 5.9 KiB | 25% less | 4.0 MiB |" in md  # (4000 + 2000) / (4000 + 4000) = 75%; the RSS peak apart
    gpu = render_markdown(derive([_row("r", "w", "fp32", 100.0, peak_allocated_bytes=2**30),
                                  _row("r", "w", "amp-bf16", 100.0, peak_allocated_bytes=2**29)]))
    assert "| peak allocated | memory vs fp32 |\n" in gpu and "| 512.0 MiB | 50% less |" in gpu


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_every_markdown_row_has_its_headers_cells(compiled: bool, device: str) -> None:
    """Each table row holds as many cells as its header, whichever optional columns the rows bring: one-process and
    DDP rows at one execution carried an execution cell ("eager") that their header, with only a strategy column,
    lacked, so every figure sat under the wrong heading."""
    from ampbench.report.markdown import render_markdown

    cpu = dict(device=device, device_name="CPU" if device == "cpu" else "GPU", cpu_rss_peak_bytes=2**20,
               weights_bytes=10, grads_bytes=10, optimizer_bytes=20, activation_bytes=40) if device == "cpu" else {}
    rows = [_row("r", "w", p, sps, strategy=strategy, world_size=2 if strategy else None, cell_key=f"{p}-{strategy}-{c}",
                 compile=c, **cpu)
            for p, sps in (("fp32", 100.0), ("amp-bf16", 150.0)) for strategy in (None, "ddp")
            for c in (("off", "on") if compiled else ("off",))]
    tables = [line for line in render_markdown(derive(rows)).splitlines() if line.startswith("| ")]
    heads = [i for i, line in enumerate(tables) if line.startswith("| precision |")]
    assert heads
    for i in heads:
        width = tables[i].count(" |")
        body = [line for line in tables[i + 1:] if not line.startswith("| precision |")][:len(rows) + 1]
        assert body and all(line.count(" |") == width for line in body), (tables[i], body)
    one = [line for line in tables if line.startswith("| amp-bf16 | ddp x2 |")]
    assert compiled or (one and one[0].startswith("| amp-bf16 | ddp x2 | ok | 150 | 1.50x |")), tables


def test_the_convergence_table_says_the_training_loss_and_the_held_out_metric_in_html_and_markdown() -> None:
    """The Markdown summary had the verdicts alone (the HTML page the losses); both said "final loss" beside a bare
    metric -- a perplexity read as that loss's exponential. Oracle: the seeds' figures, averaged here."""
    from ampbench.report.html import render_html
    from ampbench.report.markdown import render_markdown

    from .conftest import _converge

    conv = {"fp32": _converge(1.0), "amp-bf16": _converge(1.02)}
    rows = derive([_row("r", "w", p, 100.0, converge=c, metric_name="accuracy", final_loss=sum(c["final_losses"]) / 3,
                        metric=sum(c["metrics"]) / 3) for p, c in conv.items()])
    md = render_markdown(rows)
    page = render_html(rows)
    for p, c in conv.items():
        finals = c["final_losses"]
        mean, half = sum(finals) / 3, (max(finals) - min(finals)) / 2
        accuracy = sum(c["metrics"]) / 3 * 100
        assert f"| {p} | {mean:.4f} ± {half:.4f} | {accuracy:.2f}% |" in md, md
        assert f"<td class=\"\">{mean:.4f} ± {half:.4f}</td><td class=\"\">{accuracy:.2f}%</td>" in page
    assert "Convergence (w):" in md
    for text in ("final train loss (last 10% of steps; mean ± half range over seeds)", "test accuracy"):
        assert text in md and text in page, text


def test_csv_report(report_store: Store) -> None:
    _, text = build_report(report_store, None, "csv")
    assert text.splitlines()[0].startswith("run_id,cell_key,workload")


def test_compare_normalises_to_the_slowest_device(report_store: Store) -> None:
    (t,) = compare_table(report_store.rows(), workloads=["resnext"])
    assert t.reference == "Tesla V100-SXM2-16GB" and t.devices[0] == t.reference
    assert t.precisions == ["fp32", "amp-fp16"]
    assert t.cells[("NVIDIA A100-SXM4-80GB", "fp32")].relative == pytest.approx(2.5)
    assert t.cells[("NVIDIA A100-SXM4-80GB", "amp-fp16")].relative == pytest.approx(2900 / 1100)
    (t,) = compare_table(report_store.rows(), reference="NVIDIA A100-SXM4-80GB", workloads=["resnext"])
    assert t.cells[("Tesla V100-SXM2-16GB", "fp32")].relative == pytest.approx(0.4)


def test_compare_sets_a_figure_only_beside_the_same_cell(tmp_path: Path) -> None:
    """An fsdp x2 cell, a compiled cell and another batch size of the same workload and precision are other tables,
    never in the place of the one-process eager cell (seen: a device's fp32 shown as its fsdp x2 cell's 1,462
    samples/s while its one-process cell measured 67). Each table says which execution its figures are."""
    a, b = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
    rows = [_row("r1", "bert", "fp32", 67.0, device_name=a, created_at="2026-11-21T00:00:01+00:00"),
            _row("r1", "bert", "fp32", 1462.0, device_name=a, strategy="fsdp", world_size=2,
                 created_at="2026-11-21T00:00:02+00:00"),
            _row("r1", "bert", "fp32", 90.0, device_name=a, compile="on", created_at="2026-11-21T00:00:03+00:00"),
            _row("r1", "bert", "fp32", 150.0, device_name=a, batch_size=128, created_at="2026-11-21T00:00:04+00:00"),
            _row("r2", "bert", "fp32", 134.0, device_name=b),
            _row("r2", "bert", "fp32", 2900.0, device_name=b, strategy="fsdp", world_size=2)]
    tables = {t.setting.describe(): t for t in compare_table(rows)}
    assert sorted(tables) == ["batch 128, eager", "batch 64, compile", "batch 64, eager", "batch 64, eager, fsdp x2"]
    eager = tables["batch 64, eager"]
    assert eager.cells[(a, "fp32")].samples_per_s == 67.0 and eager.cells[(b, "fp32")].relative == pytest.approx(2.0)
    fsdp = tables["batch 64, eager, fsdp x2"]
    assert fsdp.cells[(a, "fp32")].samples_per_s == 1462.0 and fsdp.title == "bert (small), batch 64, eager, fsdp x2"
    assert list(tables["batch 64, compile"].devices) == [a]
    # the derived ratios and the advisor group by the same identity: fsdp fp32 is its own baseline
    derived = {(r["samples_per_s"]): r for r in derive(rows)}
    assert derived[1462.0]["speedup_vs_fp32"] == 1.0 and derived[90.0]["speedup_vs_fp32_eager"] == pytest.approx(90 / 67)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process (nothing here needs a process of its own: ~2 s of imports each), 200 wide."""
    with mock.patch.dict(os.environ, COLUMNS="200"):  # (the console reads it when it prints)
        return in_process(*args)


def test_report_and_compare_commands(report_store: Store, tmp_path: Path) -> None:
    db = str(report_store.path)
    r = _cli("report", "--db", db, "--run", report_store.latest_run_id, "--out", str(tmp_path / "r.md"),  # type: ignore[attr-defined]
             "--format", "md")
    assert r.returncode == 0 and (tmp_path / "r.md").read_text().startswith("## ampbench results")
    for name, starts in (("plain.md", "## ampbench results"), ("plain.csv", "run_id,"), ("plain.html", "<!DOCTYPE")):
        r = _cli("report", "--db", db, "--out", str(tmp_path / name))  # (no --format: the extension's)
        assert r.returncode == 0 and (tmp_path / name).read_text().startswith(starts), (name, r.stderr)
    r = _cli("report", "--db", db)
    assert r.returncode == 0 and "reports/" in r.stdout
    c = _cli("compare", "--db", db, "--workloads", "resnext", "--precision", "O1")
    assert c.returncode == 0, c.stderr
    flat = " ".join(c.stdout.split())
    assert "relative to Tesla V100-SXM2-16GB" in flat and "2.64x" in flat and "fp32" not in flat
    every = _cli("compare", "--db", db).stdout  # (a workload measured on the A100 alone: said once, no table of 1.00x)
    flat = " ".join(every.split())
    assert flat.count("1 of the 2 settings was measured on one device only") == 1, every
    (alone,) = [line.strip() for line in every.splitlines() if line.strip().endswith("eager") and " only: " in line]
    assert alone.startswith("NVIDIA A100-SXM4-80GB only: ") and every.count("relative to") == 1, every
    bad = _cli("report", "--db", db, "--format", "pdf")
    assert bad.returncode == 2 and "--format 'pdf': choose one of html, md, csv" in bad.stderr
    bad = _cli("compare", "--db", db, "--reference", "TPU")
    assert bad.returncode == 2 and "--reference 'TPU'" in bad.stderr


def test_compare_without_a_shared_setting_says_so_and_prints_no_table() -> None:
    """Two devices that share no setting: the command said "only one device has results" under tables of "1.00x";
    it says no setting was measured on both and lists each device's settings (three, then a count)."""
    from ampbench.cli.compare import alone_text

    rows = [_row("r1", w, "fp32", 100.0, device_name="NVIDIA H200") for w in ("a", "b", "c", "d", "e")]
    rows.append(_row("r2", "mnist", "fp32", 50.0, device_name="AMD EPYC"))
    tables = compare_table(rows)
    assert all(len(t.devices) == 1 for t in tables)
    text = alone_text(tables, [])
    assert text.startswith("[dim]no setting was measured on both devices here: ampbench results shows")
    assert "NVIDIA H200 only: a (small), batch 64, eager; b (small), batch 64, eager; c (small), batch 64, eager and " \
           "2 more" in text and "AMD EPYC only: mnist (small), batch 64, eager" in text
    one = alone_text([t for t in tables if t.devices == ["NVIDIA H200"]], [])
    assert one.startswith("[dim]only one device has results here:")
    three = compare_table([*rows, _row("r3", "vit", "fp32", 70.0, device_name="NVIDIA H100")])
    assert alone_text(three, []).startswith("[dim]no setting was measured on two of the 3 devices here:")


def test_run_writes_the_report(tmp_path: Path) -> None:
    planted = Path(__file__).parents[1] / "bench" / "planted.py"
    r = _cli("run", "--model", f"{planted}:ok", "--input-shape", "3,4,4", "--num-classes", "5", "--preset", "tiny",
             "--precisions", "fp32,amp-bf16", "--steps", "3", "--warmup", "1", "--db", str(tmp_path / "r.db"),
             "--no-isolate", "--json", str(tmp_path / "o.json"))
    assert r.returncode == 0, r.stderr
    run_id = json.loads((tmp_path / "o.json").read_text())["runs"][0]["run_id"]
    report = tmp_path / "reports" / f"{run_id}.html"
    assert report.exists() and f"report: {report}" in r.stdout.replace("\n", "")
    assert "user:" in r.stdout and ("use" in r.stdout or "fp32" in r.stdout)


def test_throughput_chart_draws_the_repeat_range() -> None:
    import base64

    from ampbench.report.charts import throughput_chart

    rows = [{"precision": "fp32", "status": "ok", "samples_per_s": 100.0, "speedup_vs_fp32": 1.0},
            {"precision": "amp-bf16", "status": "ok", "samples_per_s": 150.0, "speedup_vs_fp32": 1.5}]
    plain = base64.b64decode(throughput_chart(rows, "t").split(",", 1)[1]).decode()
    for r, reps in zip(rows, ([90.0, 100.0, 120.0], [150.0, 140.0, 155.0])):
        r["samples_per_s_repeats"] = reps
    ranged = base64.b64decode(throughput_chart(rows, "t").split(",", 1)[1]).decode()
    assert ranged.count("<g id=\"LineCollection") == 1 and plain.count("<g id=\"LineCollection") == 0


def test_an_environment_every_workload_shares_is_shown_once() -> None:
    """The CPU main job's page repeated the same environment table (device, half-precision hardware, peaks, threads,
    versions, host) under each of its four workloads: once, under its own heading, where they share it; per workload
    where they differ."""
    from ampbench.report.html import render_html
    from tests.report.conftest import _row

    rows = derive([_row("r", w, p, s) for w in ("a", "b") for p, s in (("fp32", 100.0), ("amp-bf16", 200.0))])
    html = render_html(rows)
    assert html.count('<table class="env">') == 1 and "<h2>Environment</h2>" in html
    assert html.index("<h2>Environment</h2>") < html.index('id="w0"')
    apart = derive([*rows[:2], *[{**r, "env": {**r["env"], "hostname": "other-box"}} for r in rows[2:]]])
    html = render_html(apart)
    assert html.count('<table class="env">') == 2 and "<h2>Environment</h2>" not in html
    one = render_html(derive(rows[:2]))
    assert one.count('<table class="env">') == 1 and "<h2>Environment</h2>" not in one
