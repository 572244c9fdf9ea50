"""Memory that is RSS growth (a Keras cell on a CPU) says so in every output, and a saving is claimed only when it
clears the noise of the readings; exact figures stay labelled exact."""

from __future__ import annotations

import csv
import io

from ampbench.report.console import results_tables
from ampbench.report.html import render_html
from ampbench.report.markdown import render_markdown
from ampbench.store import DERIVED_KEYS, ROW_KEYS, derive
from ampbench.store.exchange import to_csv

MIB = 2**20


def _row(precision: str, rss: int, key: str = "", repeat_of: str | None = None, repeat: int = 0,
         **kw: object) -> dict[str, object]:
    r = {k: None for k in ROW_KEYS if k not in DERIVED_KEYS}
    r.update(run_id="r", cell_key=key or f"k-{precision}", workload="user:m.py:build", preset="tiny", precision=precision,
             batch_size=32, device="cpu", device_name="AMD EPYC", status="ok", samples_per_s=100.0, step_ms_p50=10.0,
             measures=["throughput", "memory"], framework="keras", keras_backend="tensorflow", keras_version="3.15.1",
             backend_version="2.21.0", memory_source="cpu rss growth", cpu_rss_peak_bytes=rss, peak_allocated_bytes=rss,
             weights_bytes=4000, optimizer_bytes=8000, repeat=repeat, repeat_of=repeat_of,
             env={"device": "cpu", "framework": "keras", "keras_version": "3.15.1", "keras_backend": "tensorflow",
                  "backend_version": "2.21.0", "ampbench": "0.1.0", "python": "3.11.7"})
    r.update(kw)
    return r


def _reps(precision: str, readings: list[int]) -> list[dict[str, object]]:
    key = f"k-{precision}"
    return [_row(precision, v, key if i == 0 else f"{key}-{i}", None if i == 0 else key, i)
            for i, v in enumerate(readings)]


def test_one_rss_reading_claims_no_saving_and_says_why() -> None:
    rows = derive([_row("fp32", 273 * MIB), _row("amp-fp16", 63 * MIB)])  # "77% less" was printed for this
    fp16 = next(r for r in rows if r["precision"] == "amp-fp16")
    assert fp16["memory_basis"] == "rss" and fp16["memory_saving_vs_fp32"] is None
    assert "one RSS reading per cell" in fp16["memory_saving_vs_fp32_note"]


def test_repeated_readings_give_a_saving_only_beyond_their_spread() -> None:
    clear = derive(_reps("fp32", [270 * MIB, 276 * MIB, 273 * MIB]) + _reps("amp-fp16", [120 * MIB, 126 * MIB, 124 * MIB]))
    fp16 = next(r for r in clear if r["precision"] == "amp-fp16")
    assert fp16["cpu_rss_peak_bytes_repeats"] == [120 * MIB, 126 * MIB, 124 * MIB]
    # median over median, computed by hand: 1 - 124 / 273
    assert fp16["memory_saving_vs_fp32"] == 1 - 124 / 273 and fp16["memory_saving_vs_fp32_note"] is None
    noisy = derive(_reps("fp32", [150 * MIB, 270 * MIB, 200 * MIB]) + _reps("amp-fp16", [120 * MIB, 220 * MIB, 180 * MIB]))
    fp16 = next(r for r in noisy if r["precision"] == "amp-fp16")
    assert fp16["memory_saving_vs_fp32"] is None and "within the readings' noise" in fp16["memory_saving_vs_fp32_note"]


def test_every_output_labels_rss_figures() -> None:
    from rich.console import Console

    rows = derive([_row("fp32", 273 * MIB), _row("amp-fp16", 63 * MIB)])
    con = Console(width=200, file=io.StringIO(), color_system=None)
    for t in results_tables(rows, 200):
        con.print(t)
    text = con.file.getvalue()  # type: ignore[attr-defined]
    assert "memory (rss)" in text and "noise unknown" in text and "77%" not in text
    # a Keras table names its framework: once, in its title, where every row is one framework's (a column of
    # "keras/tensorflow" on every row was a column that said one thing)
    assert "(tiny, keras/tensorflow)" in text and "framework" not in text and text.count("keras/tensorflow") == 1
    md = render_markdown(rows)
    assert "memory (RSS growth, approximate)" in md and "exact split" not in md and "– (noise unknown)" in md
    html = render_html(rows)
    assert "273.0 MiB (rss)" in html and "one RSS reading per cell" in html and "vs fp32 (split)" not in html
    assert "tensorflow 2.21.0" in html and "None / " not in html  # the backend and its version, not torch's
    table = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert {r["memory_basis"] for r in table} == {"rss"} and table[1]["memory_saving_vs_fp32"] == ""


def test_exact_and_rss_side_by_side_label_each_figure() -> None:
    torch_rows = [_row(p, 10 * MIB, key=f"t-{p}", framework=None, keras_backend=None, memory_source="exact split",
                       weights_bytes=100, grads_bytes=100, optimizer_bytes=200, activation_bytes=600) for p in ("fp32",)]
    rows = derive(torch_rows + [_row("fp32", 273 * MIB)])
    from ampbench.report.console import memory_head, memory_text

    assert memory_head(rows) == ("memory", True)
    assert {memory_text(r) for r in rows} == {"1,000 B (exact)", "273.0 MiB (rss)"}


def test_the_html_memory_table_has_a_reserved_column_only_where_it_differs() -> None:
    """On a CPU "peak reserved" repeated the RSS growth figure by figure; a GPU's reserved (the caching allocator's)
    differs from its allocated peak and keeps its column."""
    from ampbench.report.html import render_html

    cpu = derive([_row("fp32", 273 * MIB), _row("amp-fp16", 63 * MIB)])
    cpu = [{**r, "peak_reserved_bytes": r.get("peak_allocated_bytes")} for r in cpu]
    html = render_html(cpu)
    assert "peak RSS growth" in html and "peak reserved" not in html
    gpu = [{**r, "device": "cuda:0", "memory_source": "torch.cuda peak allocated",
            "peak_reserved_bytes": (r.get("peak_allocated_bytes") or 0) + 64 * MIB} for r in cpu]
    assert "peak reserved" in render_html(derive(gpu))


def test_every_nested_value_of_a_csv_row_is_json() -> None:
    """phases_s and warnings (not in CSV_NESTED) were written as Python's repr -- {'process_start': 0.0057} --
    which no CSV consumer reads back; every dict or list is JSON."""
    import json

    rows = derive([_row("fp32", 273 * MIB, phases_s={"build": 1.5, "timed_steps": 3.25},
                        warnings=["throughput at the max batch 1,776 not measured"])])
    (line,) = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert json.loads(line["phases_s"]) == {"build": 1.5, "timed_steps": 3.25}
    assert json.loads(line["warnings"]) == ["throughput at the max batch 1,776 not measured"]
    assert json.loads(line["env"])["keras_backend"] == "tensorflow" and line["samples_per_s"] == "100.0"


def test_a_note_every_noted_row_shares_is_said_once_below_the_table() -> None:
    """Keras's "one RSS reading per cell" note filled a wrapped note column on every row but fp32: one line below the
    table names the rows; notes that differ keep their column."""
    from rich.console import Console

    rows = derive([_row(p, v) for p, v in (("fp32", 273 * MIB), ("amp-fp16", 63 * MIB), ("amp-bf16", 70 * MIB))])
    con = Console(width=80, file=io.StringIO(), color_system=None)
    for t in results_tables(rows, 80):
        con.print(t)
    text = con.file.getvalue()  # type: ignore[attr-defined]
    flat = " ".join(text.split())
    assert flat.count("one RSS reading per cell") == 1 and "note (amp-fp16, amp-bf16): one RSS reading" in flat
    assert "┃ note" not in text
    apart = [{**r, "warnings": ["a warning of its own"]} if r["precision"] == "amp-bf16" else r for r in rows]
    con = Console(width=200, file=io.StringIO(), color_system=None)
    for t in results_tables(apart, 200):
        con.print(t)
    assert "┃ note" in con.file.getvalue()  # type: ignore[attr-defined]


def _text(rows: list[dict[str, object]], width: int = 200) -> str:
    from rich.console import Console

    con = Console(width=width, file=io.StringIO(), color_system=None)
    for t in results_tables(rows, width):
        con.print(t)
    return con.file.getvalue()  # type: ignore[attr-defined]


def test_a_note_part_several_rows_share_is_said_once_and_each_row_keeps_its_own() -> None:
    """"one RSS reading per cell: ..." followed the output-layer warning under every half mode: four copies, each its
    own line below the table. The shared part is one line naming its rows; a row's own part stays its own."""
    own = "the output layer 'dense_2' computes in float16"
    rows = derive([_row("fp32", 273 * MIB), _row("amp-fp16", 63 * MIB, warnings=[own]),
                   _row("amp-bf16", 70 * MIB), _row("pure-bf16", 60 * MIB)])
    text = _text(rows)
    shared = next(r for r in rows if r["precision"] == "amp-bf16")["memory_saving_vs_fp32_note"]
    assert shared and text.count(shared) == 1, text
    assert f"note (amp-fp16, amp-bf16, pure-bf16): {shared}" in text
    assert text.count(own) == 1 and own + ";" not in text  # (the row's own note, without the shared part)


def test_a_table_of_two_frameworks_keeps_its_framework_column() -> None:
    torch_row = _row("fp32", 10 * MIB, key="t-fp32", framework=None, keras_backend=None, keras_version=None)
    text = _text(derive([torch_row, _row("amp-bf16", 20 * MIB)]))
    assert "framework" in text and "keras/tensorflow" in text and "(tiny)" in text
