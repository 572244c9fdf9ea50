"""Output at any width: tables stack to fit 80 columns with no number cut, progress lines keep their ETA, and
one-line messages stay one line (COLUMNS unset, 80, or 200)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from ampbench.cli.render import progress_line
from ampbench.report.console import results_tables
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
    assert max(len(line) for line in text.splitlines()) <= width
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
