from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.errors import AmpbenchError
from ampbench.store import DERIVED_KEYS, ROW_KEYS, SCHEMA_VERSION, Store, derive, export_data, import_file, to_csv, write_json
from ampbench.store.derive import converge_verdict, merge_repeats, no_learning
from ampbench.store.exchange import Imported
from tests.conftest import cli


def _row(run_id: str, precision: str, sps: float | None, peak: int | None = 1000, status: str = "ok",
         **kw: object) -> dict[str, object]:
    row = {k: None for k in ROW_KEYS if k not in DERIVED_KEYS}
    row.update(run_id=run_id, cell_key=f"{precision}-{kw.get('workload', 'w')}", workload="w", preset="tiny",
               precision=precision, batch_size=8, device_name="dev", status=status, reason="",
               samples_per_s=sps, peak_allocated_bytes=peak, created_at="2026-01-01T00:00:00+00:00")
    row.update(kw)
    return row


def _store(tmp_path: Path) -> tuple[Store, str]:
    s = Store(tmp_path / "r.db")
    info = s.create_run({"identity": {"x": 1}}, device="cpu", device_name="dev", hostname="h")
    return s, info.run_id


def test_schema_versioned_and_wal(tmp_path: Path) -> None:
    s, _ = _store(tmp_path)
    assert s.schema_version == SCHEMA_VERSION
    mode = sqlite3.connect(tmp_path / "r.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_newer_schema_refused(tmp_path: Path) -> None:
    _store(tmp_path)[0].close()
    c = sqlite3.connect(tmp_path / "r.db")
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.close()
    with pytest.raises(AmpbenchError, match="newer than this ampbench"):
        Store(tmp_path / "r.db")


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(AmpbenchError, match="not a usable ampbench results store"):
        Store(bad)


def test_add_commits_at_once_and_ignores_duplicates(tmp_path: Path) -> None:
    s, run = _store(tmp_path)
    assert s.add(_row(run, "fp32", 100.0))
    assert not s.add(_row(run, "fp32", 999.0))  # same cell key: kept as first written
    other = Store(tmp_path / "r.db")  # another connection sees it without any close/flush
    assert [r["samples_per_s"] for r in other.rows(run)] == [100.0]


def test_two_processes_write_at_once(tmp_path: Path) -> None:
    s, run = _store(tmp_path)
    code = (
        "import sys; from ampbench.store import Store\n"
        "s = Store(sys.argv[1])\n"
        "for i in range(40):\n"
        "    s.add({'run_id': sys.argv[2], 'cell_key': sys.argv[3] + str(i), 'workload': 'w', 'precision': 'fp32',"
        " 'status': 'ok'})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "r.db"), run, tag]) for tag in "ab"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(s.rows(run)) == 80


def test_derive_ratios_vs_fp32() -> None:
    rows = [_row("r", "fp32", 100.0, 1000, max_batch=590), _row("r", "amp-fp16", 250.0, 400, max_batch=1000),
            _row("r", "pure-fp16", None, None, status="oom")]
    d = {r["precision"]: r for r in derive(rows)}
    assert d["fp32"]["speedup_vs_fp32"] == 1.0
    assert d["amp-fp16"]["speedup_vs_fp32"] == pytest.approx(2.5)
    assert d["amp-fp16"]["memory_saving_vs_fp32"] == pytest.approx(0.6)
    assert d["amp-fp16"]["max_batch_ratio_vs_fp32"] == pytest.approx(1000 / 590)
    assert d["pure-fp16"]["speedup_vs_fp32"] is None


def test_derive_without_ok_fp32_gives_no_ratios() -> None:
    rows = [_row("r", "fp32", None, status="error"), _row("r", "amp-bf16", 200.0)]
    assert derive(rows)[1]["speedup_vs_fp32"] is None


def test_derive_mfu_vs_measured_uses_hw_probe() -> None:
    rows = [_row("r", "amp-bf16", 1.0, achieved_tflops=50.0, math_mode="bf16")]
    hw = [{"device_name": "dev", "gemm": [{"math_mode": "bf16", "tflops": 80.0}, {"math_mode": "bf16", "tflops": 100.0},
                                          {"math_mode": "fp32", "tflops": 1000.0}]}]
    assert derive(rows, hw)[0]["mfu_vs_measured"] == pytest.approx(0.5)
    assert derive(rows, [])[0]["mfu_vs_measured"] is None


def test_an_mfu_against_a_peak_the_device_outran_is_not_shown() -> None:
    """This VM's bf16 GEMM ran 1.47x the peak at its nominal clock: every peak of it is a lower bound, and a cell's
    MFU against them overstated by as much (fp32 read 41%): null with the reason, the stored figure kept."""
    rows = [_row("r", "fp32", 1.0, achieved_tflops=0.135, peak_tflops=0.332, mfu=0.407, math_mode="fp32")]
    probe = {"device_name": "dev", "gemm": [{"math_mode": "fp32", "tflops": 0.221, "peak_tflops": 0.332},
                                            {"math_mode": "bf16", "tflops": 0.976, "peak_tflops": 0.664}]}
    d = derive(rows, [probe])[0]
    assert d["mfu"] is None and d["mfu_note"] == ("ampbench hw measured a bf16 GEMM at 1.47x this device's peak: its "
                                                  "peaks are lower bounds here, so no MFU against them is shown")
    assert rows[0]["mfu"] == 0.407  # (the row as stored)
    from ampbench.report.html import render_html

    assert "MFU: ampbench hw measured a bf16 GEMM at 1.47x this device&#x27;s peak" in render_html(derive(rows, [probe]))
    within = {**probe, "gemm": [{**g, "tflops": 0.5 * g["peak_tflops"]} for g in probe["gemm"]]}
    for hw in ([within], [{**probe, "device_name": "other"}], []):
        d = derive(rows, hw)[0]
        assert d["mfu"] == 0.407 and d["mfu_note"] is None


def _conv(finals: list[float], diverged: bool = False) -> dict[str, object]:
    return {"final_losses": finals, "diverged": [diverged] * len(finals)}


def test_converge_verdict() -> None:
    base = {"precision": "fp32", "converge": _conv([1.00, 1.02, 0.98])}  # std 0.02 -> tol 0.06
    assert converge_verdict({"precision": "amp-bf16", "converge": _conv([1.05, 1.04, 1.06])}, base)[0] == "parity"
    verdict, tol = converge_verdict({"precision": "amp-fp16", "converge": _conv([1.2, 1.2, 1.2])}, base)
    assert (verdict, tol) == ("worse", pytest.approx(0.06))
    assert converge_verdict({"precision": "pure-fp16", "converge": _conv([1.0], diverged=True)}, base)[0] == "diverged"
    assert converge_verdict({"precision": "amp-fp16", "converge": _conv([1.0])}, None)[0] == "no-baseline"
    assert converge_verdict(base, base)[0] == "baseline"
    # one seed: the relative floor (2%) is the tolerance
    assert converge_verdict({"precision": "x", "converge": _conv([1.019])}, {"converge": _conv([1.0])})[0] == "parity"
    assert converge_verdict({"precision": "x", "converge": _conv([1.03])}, {"converge": _conv([1.0])})[0] == "worse"


def _curves(curves: list[list[float]]) -> dict[str, object]:
    """A convergence record with loss curves, final losses the mean of each curve's last tenth (as measured)."""
    finals = [sum(c[-max(1, len(c) // 10):]) / max(1, len(c) // 10) for c in curves]
    return {"steps": len(curves[0]), "curve_steps": list(range(1, len(curves[0]) + 1)), "losses": curves,
            "final_losses": finals, "diverged": [False] * len(curves)}


def test_a_convergence_run_in_which_fp32_did_not_learn_is_inconclusive() -> None:
    """fp32's loss 10.84 -> 10.84 over 30 steps (hf:gpt2 at AdamW 1e-4): a mode that learned nothing at all would be
    "parity"; every row is inconclusive instead, with no time to fp32's loss. Where fp32 learned (10.8 -> 2.0) the
    verdicts are what they were; rows without curves (older stores) too."""
    flat = [10.84 + 0.01 * ((i * 7) % 3 - 1) for i in range(30)]
    fp32 = {"precision": "fp32", "status": "ok", "converge": _curves([flat, flat[::-1]])}
    amp = {"precision": "amp-bf16", "status": "ok", "converge": _curves([flat, flat])}
    assert converge_verdict(amp, fp32)[0] == "inconclusive" and converge_verdict(fp32, fp32)[0] == "inconclusive"
    why = no_learning(fp32)
    # oracle by hand: the first loss and the final (last 3) of the flat curves (10.83, 10.84), tolerance 2% of it
    assert why is not None and "10.84 → 10.84" in why and "in 30 steps" in why and "(0.217)" in why, why
    learning = [10.8 - 8.8 * min(1.0, i / 15) for i in range(30)]  # 10.8 -> 2.0 by step 16
    fp32_learns = {"precision": "fp32", "status": "ok", "converge": _curves([learning, learning])}
    assert no_learning(fp32_learns) is None
    assert converge_verdict({"precision": "amp-bf16", "converge": _curves([learning, learning])}, fp32_learns)[0] \
        == "parity"
    assert converge_verdict(amp, fp32_learns)[0] == "worse"  # (the mode that never learned: caught now)
    # just below and just above the line: a fall within the tolerance is not learning
    tol = 0.02 * 2.0
    edge = [2.0 + 0.99 * tol] + [2.0] * 29
    assert no_learning({"converge": _curves([edge])}) is not None
    edge = [2.0 + 1.01 * tol] + [2.0] * 29
    assert no_learning({"converge": _curves([edge])}) is None
    fast = [2.3, 1.5, 0.8, 0.3] + [0.1] * 196  # (a loss that falls in 4 of 200 steps and stays: it learned)
    assert no_learning({"converge": _curves([fast, [x + 0.2 for x in fast]])}) is None
    assert no_learning({"converge": _conv([1.0, 1.02])}) is None  # (no curves: judged as before)
    rows = derive([fp32 | {"run_id": "r", "workload": "w", "samples_per_s": 10.0, "step_ms_mean": 100.0},
                   amp | {"run_id": "r", "workload": "w", "samples_per_s": 12.0, "step_ms_mean": 80.0}])
    assert [r["converge_verdict"] for r in rows] == ["inconclusive", "inconclusive"]
    assert all(r["fp32_loss_target"] is None and r["steps_to_fp32_loss"] is None for r in rows)


def test_export_import_roundtrip_between_stores(tmp_path: Path) -> None:
    a, run = _store(tmp_path)
    a.add(_row(run, "fp32", 100.0))
    a.add(_row(run, "amp-bf16", float("nan"), status="diverged", reason="loss nan"))
    a.add_hw({"device_name": "dev", "gemm": []})
    write_json(export_data(a), tmp_path / "x.json")
    data = json.loads((tmp_path / "x.json").read_text())  # strict JSON: NaN written as null
    assert data["rows"][1]["samples_per_s"] is None and data["rows"][0]["speedup_vs_fp32"] == 1.0
    b = Store(tmp_path / "other.db")
    assert import_file(b, tmp_path / "x.json") == Imported(1, 2, 0)
    assert import_file(b, tmp_path / "x.json") == Imported(0, 0, 0)  # idempotent
    assert [r["precision"] for r in b.rows(run)] == ["fp32", "amp-bf16"]
    assert "speedup_vs_fp32" not in b.rows(run)[0]  # derived keys are not stored
    assert len(b.hw("dev")) == 1


def test_a_probe_without_its_time_is_imported_once_whenever_imported(tmp_path: Path, monkeypatch) -> None:
    """The probe's time is stamped into it when stored: an export imported again a second later adds nothing (the
    round trip above failed once in CI when its two imports straddled a second)."""
    from ampbench.store import sqlite

    a, _ = _store(tmp_path)
    a.add_hw({"device_name": "dev", "gemm": []})
    write_json(export_data(a), tmp_path / "x.json")
    b = Store(tmp_path / "other.db")
    import_file(b, tmp_path / "x.json")
    monkeypatch.setattr(sqlite, "utcnow", lambda: "2099-01-01T00:00:00+00:00")  # (a later second)
    import_file(b, tmp_path / "x.json")
    (probe,) = b.hw("dev")
    assert probe["created_at"] == a.hw("dev")[0]["created_at"] != "2099-01-01T00:00:00+00:00"


def test_a_kernel_table_moves_with_export_and_import_once(tmp_path: Path) -> None:
    """``hw --calibrate`` on the GPU machine, ``predict`` on a laptop: the table travels in the export (it did not:
    runs, rows and probes only) and is added once; oracle: the stored table read back from the other store."""
    import torch

    from ampbench.measure import calibrate as cal

    a, run = _store(tmp_path)
    a.add(_row(run, "fp32", 100.0))
    table = cal.sweep(torch.device("cpu"), cases=cal.cases(cal.CPU_SIZES, ["fp32"])[:3], min_s=0.0)
    a.add_calibration(table)
    write_json(export_data(a), tmp_path / "x.json")
    b = Store(tmp_path / "other.db")
    assert import_file(b, tmp_path / "x.json") == Imported(1, 1, 0, 1)
    assert import_file(b, tmp_path / "x.json") == Imported(0, 0, 0, 0)  # (the same device and time: not again)
    (back,) = b.calibrations(table["device_name"])
    assert back["kernels"] == json.loads(json.dumps(table["kernels"])) and back["created_at"] == table["created_at"]
    # a GPU's table (the shipped H200 sweep: kernels, workspaces, power per kind) arrives whole: predict reads it as is
    import ampbench.predict as predict_pkg

    h200 = cal.from_csv((Path(predict_pkg.__file__).parent / "calibration" / "h200.csv").read_text())
    a.add_calibration(h200)
    write_json(export_data(a), tmp_path / "x.json")
    assert import_file(b, tmp_path / "x.json") == Imported(0, 0, 0, 1)
    assert b.calibrations("NVIDIA H200") == [h200]
    assert export_data(a, kernel_tables=False)["calibrations"] == []  # (run --json: the run's own results)
    data = json.loads((tmp_path / "x.json").read_text())
    data["calibrations"][0]["kernels"] = "many"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    c = Store(tmp_path / "third.db")
    with pytest.raises(AmpbenchError, match="kernel table 0 needs a device_name and created_at .* nothing was imported"):
        import_file(c, tmp_path / "bad.json")
    assert c.runs() == [] and c.calibrations() == []


def test_predictions_move_with_export_and_import_once(tmp_path: Path) -> None:
    """A store holding only `ampbench predict`'s rows exported "0 runs, 0 rows": its predictions travel with an
    export of every run (not with --run, nor run --json: a run's own results) and are added once. Oracle: the rows
    read back from the other store."""
    a, run = _store(tmp_path)
    a.add(_row(run, "fp32", 100.0))
    predicted = [{"workload": "mnist-cnn", "precision": p, "gpu": "h100-sxm", "batch_size": 16, "status": "ok",
                  "predicted_step_ms": ms, "predicted_mfu": float("nan")} for p, ms in (("fp32", 1.5), ("amp-bf16", 0.9))]
    a.add_predictions(predicted)
    data = export_data(a)
    assert [p["precision"] for p in data["predictions"]] == ["fp32", "amp-bf16"]
    assert data["predictions"][0]["predicted_mfu"] is None  # (strict JSON: NaN as null)
    assert export_data(a, [run])["predictions"] == [] and export_data(a, kernel_tables=False)["predictions"] == []
    write_json(data, tmp_path / "x.json")
    b = Store(tmp_path / "other.db")
    assert import_file(b, tmp_path / "x.json") == Imported(1, 1, 0, 0, 2)
    assert import_file(b, tmp_path / "x.json") == Imported(0, 0, 0, 0, 0)  # (the same rows: not again)
    back = b.predictions()
    assert [(p["precision"], p["predicted_step_ms"], p["created_at"]) for p in back] == [
        (p["precision"], p["predicted_step_ms"], p["created_at"]) for p in a.predictions()]
    doc = json.loads((tmp_path / "x.json").read_text())
    doc["predictions"][1] = {"workload": "mnist-cnn", "precision": "amp-bf16"}
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    c = Store(tmp_path / "third.db")
    with pytest.raises(AmpbenchError, match="prediction 1 needs a workload, precision and gpu .* nothing was imported"):
        import_file(c, tmp_path / "bad.json")
    assert c.runs() == [] and c.predictions() == []


@pytest.mark.parametrize("content, msg", [("{", "is not JSON"), ('{"format": "other"}', "not an ampbench export"),
                                          ('{"format": "ampbench-results", "version": 99}', "format version 99")])
def test_import_rejects_bad_files(tmp_path: Path, content: str, msg: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(AmpbenchError, match=msg):
        import_file(Store(tmp_path / "r.db"), f)


def test_ampbench_import_checks_every_file_before_it_opens_the_store(tmp_path: Path) -> None:
    """A bad file made an empty store where --db named none, and the good file before a bad one was imported before
    the command failed: every file is read and checked first, nothing is created or written unless all are good."""
    from tests.conftest import cli

    a, run = _store(tmp_path)
    a.add(_row(run, "fp32", 10.0))
    write_json(export_data(a), tmp_path / "good.json")
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    db = tmp_path / "new.db"
    code, _, err = cli("import", str(tmp_path / "good.json"), str(tmp_path / "bad.json"), "--db", str(db))
    assert code == 2 and "bad.json is not an ampbench export" in err and not db.exists()
    code, out, err = cli("import", str(tmp_path / "good.json"), "--db", str(db))
    assert code == 0 and "1 new run, 1 new row" in out and len(Store(db).rows()) == 1


def test_csv_has_every_key(tmp_path: Path) -> None:
    text = to_csv(derive([_row("r", "fp32", 10.0, env={"a": 1})]))
    header, line = text.splitlines()[:2]
    assert header.split(",") == list(ROW_KEYS)
    assert '""a"": 1' in line


def test_run_lookup_by_prefix_and_unknown(tmp_path: Path) -> None:
    s, run = _store(tmp_path)
    assert s.run(run[:10]).run_id == run
    with pytest.raises(AmpbenchError, match="no run 'nope'"):
        s.run("nope")


def _repeats(precision: str, speeds: list[float | None], noise: float = 0.01) -> list[dict[str, object]]:
    """Stored rows of one cell measured len(speeds) times (None: that repeat failed)."""
    first = f"{precision}-w"
    return [_row("r", precision, sps, status="ok" if sps else "error", repeat=i, step_ms_p50=1000.0 / sps if sps else None,
                 samples_per_s_noise=noise, cell_key=first if i == 0 else f"{first}-{i}",
                 repeat_of=None if i == 0 else first) for i, sps in enumerate(speeds)]


def test_repeats_merge_into_one_row_with_the_median_repeats_timing() -> None:
    rows = merge_repeats(_repeats("fp32", [100.0, 90.0, 120.0]) + _repeats("amp-bf16", [150.0, None, 130.0]))
    assert len(rows) == 2
    fp32, amp = rows
    assert fp32["samples_per_s"] == 100.0 and fp32["step_ms_p50"] == 10.0 and fp32["cell_key"] == "fp32-w"
    assert fp32["samples_per_s_repeats"] == [100.0, 90.0, 120.0]
    assert amp["samples_per_s"] == 130.0 and amp["samples_per_s_repeats"] == [150.0, None, 130.0]  # lower median of 2
    assert merge_repeats(rows) == rows  # merged (e.g. imported) rows stay as they are


def test_derive_speedup_range_pairs_repeats_and_noise_adds_in_quadrature() -> None:
    d = {r["precision"]: r for r in derive(_repeats("fp32", [100.0, 90.0, 120.0], 0.03)
                                           + _repeats("amp-bf16", [150.0, None, 130.0], 0.04))}
    assert d["amp-bf16"]["speedup_vs_fp32"] == pytest.approx(1.3)
    assert d["amp-bf16"]["speedup_vs_fp32_range"] == pytest.approx([130 / 120, 1.5])  # repeat 1 failed: 2 pairs
    assert d["amp-bf16"]["speedup_vs_fp32_noise"] == pytest.approx(0.05)
    assert d["fp32"]["speedup_vs_fp32_range"] is None and d["fp32"]["speedup_vs_fp32_noise"] is None
    single = {r["precision"]: r for r in derive(_repeats("fp32", [100.0]) + _repeats("amp-bf16", [110.0]))}
    assert single["amp-bf16"]["speedup_vs_fp32_range"] is None  # one repeat: no range


def test_a_repeat_without_its_first_row_is_kept() -> None:
    orphan = _repeats("fp32", [100.0, 90.0])[1]
    assert merge_repeats([orphan]) == [orphan]


def test_repeats_survive_export_and_import(tmp_path: Path) -> None:
    s, run_id = _store(tmp_path)
    for r in _repeats("fp32", [100.0, 90.0, 120.0]) + _repeats("amp-bf16", [150.0, 140.0, 130.0]):
        s.add({**r, "run_id": run_id})
    out = tmp_path / "e.json"
    write_json(export_data(s), out)
    exported = json.loads(out.read_text())["rows"]
    assert len(exported) == 2
    other = Store(tmp_path / "other.db")
    assert import_file(other, out) == Imported(1, 2, 0)
    again = {r["precision"]: r for r in derive(other.rows())}
    assert again["amp-bf16"]["speedup_vs_fp32_range"] == pytest.approx([130 / 120, 140 / 90])
    assert again["fp32"]["samples_per_s_repeats"] == [100.0, 90.0, 120.0]


def test_cpu_memory_saving_compares_the_exact_split_not_the_rss_peak() -> None:
    split = dict(weights_bytes=100, grads_bytes=100, optimizer_bytes=200)
    rows = [_row("r", "fp32", 10.0, peak=5000, device="cpu", activation_bytes=600, **split),
            _row("r", "amp-bf16", 10.0, peak=10, device="cpu", activation_bytes=300, **split)]
    d = {r["precision"]: r for r in derive(rows)}
    assert d["amp-bf16"]["memory_saving_vs_fp32"] == pytest.approx(0.3)  # 700 vs 1000 bytes, whatever RSS said
    gpu = [dict(r, device="cuda:0") for r in rows]
    assert derive(gpu)[1]["memory_saving_vs_fp32"] == pytest.approx(1 - 10 / 5000)


def test_closing_baseline_becomes_drift_and_widens_every_speedups_noise() -> None:
    fp32 = _repeats("fp32", [100.0, 60.0], 0.03)  # fp32 measured again after the other modes: 40% slower
    fp32[1]["closing_baseline"] = True
    rows = derive(fp32 + _repeats("amp-bf16", [150.0], 0.04))
    assert len(rows) == 2
    base, amp = rows
    assert base["baseline_drift"] == pytest.approx(0.4) and base["samples_per_s"] == 100.0
    assert base["samples_per_s_repeats"] is None  # not a repeat: the estimate stays the first measurement
    assert amp["speedup_vs_fp32"] == pytest.approx(1.5) and amp["speedup_vs_fp32_range"] is None
    assert amp["speedup_vs_fp32_noise"] == pytest.approx((0.03**2 + 0.04**2 + 0.4**2) ** 0.5)
    assert merge_repeats(rows) == rows


def _export_with(tmp_path: Path, **bad: object) -> Path:
    a, run = _store(tmp_path)
    a.add(_row(run, "fp32", 100.0, measures=["throughput"]))
    a.add(_row(run, "amp-bf16", 120.0, measures=["throughput"]))
    data = export_data(a)
    data["rows"][1].update(bad)
    f = tmp_path / "x.json"
    f.write_text(json.dumps(data))  # (json's default writes NaN/Infinity, as a hand-made file may)
    return f


@pytest.mark.parametrize("bad, msg", [
    ({"samples_per_s": "fast"}, "row 1 w/amp-bf16: samples_per_s must be a number, got 'fast'"),
    ({"precision": "fp17"}, "precision 'fp17' is not a mode name"),
    ({"status": "great"}, "status 'great' is not one of ok, oom"),
    ({"batch_size": 8.5}, "batch_size must be an integer"),
    ({"env": [1, 2]}, "env must be an object"),
    ({"measures": "throughput"}, "measures must be a list of names"),
    ({"run_id": ""}, "run_id must be a non-empty string"),
    ({"samples_per_s": -5}, "samples_per_s must be >= 0, got -5"),
    ({"peak_allocated_bytes": -1}, "peak_allocated_bytes must be >= 0, got -1"),
    ({"step_ms_p50": float("inf")}, "step_ms_p50 must be a finite number, got inf"),
    ({"batch_size": 0}, "batch_size must be > 0, got 0"),
    ({"samples_per_s_repeats": [100.0, -3.0]}, "samples_per_s_repeats must be >= 0, got -3.0"),
    ({"mfu": float("nan")}, "mfu must be a finite number, got nan"),
])
def test_import_refuses_a_badly_typed_row_and_writes_nothing(tmp_path: Path, bad: dict[str, object], msg: str) -> None:
    f = _export_with(tmp_path, **bad)
    b = Store(tmp_path / "other.db")
    with pytest.raises(AmpbenchError, match=re.escape(msg)):
        import_file(b, f)
    assert b.runs() == [] and b.rows() == []  # nothing written, not even the run


def test_readers_skip_a_malformed_stored_row_instead_of_crashing(tmp_path: Path) -> None:
    """Rows stored before imports were validated: results, report and compare still work."""
    s, run = _store(tmp_path)
    s.add(_row(run, "fp32", 100.0, device="cpu"))
    s.add(_row(run, "amp-bf16", "fast", device="cpu"))  # type: ignore[arg-type]  (what an old import let in)
    reader = Store(tmp_path / "r.db")
    assert [r["precision"] for r in reader.rows()] == ["fp32"] and reader.skipped_rows == 1
    db = str(tmp_path / "r.db")
    for args in (["results"], ["report", "--format", "md", "--out", "-"], ["compare"]):  # (in this process: a crash
        code, _, err = cli(*args, "--db", db)  # raises here)
        assert code == 0 and "Traceback" not in err, (args, err)
    assert "1 stored row with malformed values skipped" in cli("results", "--db", db)[2]


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    f = tmp_path / "app.db"
    c = sqlite3.connect(f)
    c.execute("CREATE TABLE users (name TEXT)")
    c.execute("INSERT INTO users VALUES ('ada')")
    c.commit()
    c.close()
    before = f.read_bytes()
    with pytest.raises(AmpbenchError, match=r"app.db is an SQLite database of something else \(tables: users\)"):
        Store(f)
    assert f.read_bytes() == before  # no tables added, not even the journal mode changed
    assert not (tmp_path / "app.db-wal").exists()


def _damaged(tmp_path: Path) -> Path:
    """A store whose header is valid and whose 6th page is damaged (what a disk error or a torn copy leaves)."""
    s, run = _store(tmp_path)
    for i in range(300):
        s.add(_row(run, "fp32", 100.0 + i, cell_key=f"k{i}", reason="x" * 200))
    s.close()
    db = tmp_path / "r.db"
    with open(db, "r+b") as f:
        f.seek(4096 * 5)
        f.write(b"\x07" * 16)
    return db


@pytest.mark.parametrize("args", [["results"], ["report", "--format", "md", "--out", "-"], ["compare"],
                                  ["export", "--out", "OUT"], ["import", "FILE"],
                                  ["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32",
                                   "--steps", "1", "--warmup", "1", "--no-isolate", "--no-report"]])
def test_a_damaged_store_is_refused_in_one_line_and_left_untouched(tmp_path: Path, args: list[str]) -> None:
    from tests.conftest import cli

    db = _damaged(tmp_path)
    export = tmp_path / "x.json"
    write_json({"format": "ampbench-results", "version": 1, "runs": [], "rows": [], "hw": []}, export)
    before = db.read_bytes()
    args = [str(tmp_path / "out.json") if a == "OUT" else str(export) if a == "FILE" else a for a in args]
    code, out, err = cli(*args, "--db", str(db))
    assert code == 2 and err.count("\n") == 1 and "is damaged (SQLite's integrity check" in err, err
    assert "Traceback" not in err and db.read_bytes() == before  # not a byte written into it
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("args", [["results"], ["report", "--out", "-"], ["compare"], ["export", "--out", "OUT"]])
def test_commands_that_only_read_never_create_a_store(tmp_path: Path, args: list[str]) -> None:
    from tests.conftest import cli

    missing = tmp_path / "missing.db"
    code, _, err = cli(*[str(tmp_path / "o.json") if a == "OUT" else a for a in args], "--db", str(missing))
    assert code == 2 and "no results store there" in err and err.count("\n") == 1
    assert not missing.exists() and not list(tmp_path.iterdir())


def test_signed_and_diverged_values_still_import(tmp_path: Path) -> None:
    """What can be negative or non-finite is: a user's loss, a metric, a mode using more memory than fp32."""
    f = _export_with(tmp_path, final_loss=-0.5, metric=-1.0, memory_saving_vs_fp32=-0.06)
    assert import_file(Store(tmp_path / "b.db"), f).rows == 2
    nan = _export_with(tmp_path / "n", final_loss=float("nan")) if (tmp_path / "n").mkdir() is None else None
    assert nan is not None and import_file(Store(tmp_path / "c.db"), nan).rows == 2


def test_reimporting_changed_rows_says_they_differ_and_keeps_the_stored_ones(tmp_path: Path) -> None:
    from tests.conftest import cli

    f = _export_with(tmp_path)
    db = tmp_path / "b.db"
    assert cli("import", str(f), "--db", str(db))[0] == 0
    data = json.loads(f.read_text())
    data["rows"][0]["samples_per_s"] = 150.0  # someone's copy of the file, edited
    f.write_text(json.dumps(data))
    code, out, _ = cli("import", str(f), "--db", str(db))
    assert code == 0 and "0 new rows; 1 stored row differs from the file's and was kept as stored" in " ".join(out.split())
    assert {r["precision"]: r["samples_per_s"] for r in Store(db).rows()}["fp32"] == 100.0
    assert cli("import", str(f), "--db", str(db))[0] == 0
    _, again, _ = cli("import", str(tmp_path / "x.json"), "--db", str(db))
    assert "differ" in again  # (still the edited file: still said)


def test_export_to_dash_prints_the_json_and_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``export --out -`` wrote a file named "-" into the working directory (one was committed); as report's, it
    prints: what it prints is the export, and imports."""
    from tests.conftest import cli

    a, run = _store(tmp_path)
    a.add(_row(run, "fp32", 100.0, measures=["throughput"]))
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("export", "--out", "-", "--db", str(a.path))
    assert code == 0 and not (tmp_path / "-").exists(), err
    assert json.loads(out) == export_data(a)
    (tmp_path / "x.json").write_text(out)
    assert import_file(Store(tmp_path / "b.db"), tmp_path / "x.json").rows == 1
