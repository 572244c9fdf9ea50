"""``ampbench predict --gpu a,b,c`` / ``all``: one trace priced on every GPU, the GPUs side by side, energy at TDP and
the cost per million samples (each recomputed here from the catalogue and the prices), the advisor's picks, the
GPUs without Tensor Cores predicted as they run, and ``--prices`` refused in one line when wrong."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ampbench.errors import AmpbenchError
from ampbench.measure.gpus import lookup, predictable
from ampbench.predict.config import PredictConfig, load_prices
from ampbench.report.console import fmt_bytes
from ampbench.report.gpu_comparison import advice, comparison_tables, mark_ranks
from ampbench.report.numbers import bytes_unit, sig
from ampbench.report.predictions import no_speedup_lines
from ampbench.store import Store
from tests.conftest import cli

GPUS = ("t4", "a100-80gb", "gtx-1080-ti", "rtx-2080-ti")


@pytest.fixture(scope="module")
def rows() -> list[dict]:  # (a batch whose step the GPU sets, not the host: GPUs differ there)
    config = PredictConfig.from_strings(gpu=",".join(GPUS), workloads="tabular-mlp", preset="small", batch_size="65536",
                                        precisions="fp32,amp-fp16,amp-bf16,master-fp16")
    return config.predict()


def test_each_gpu_gets_every_precision_priced_from_one_trace(rows: list[dict]) -> None:
    assert [r["gpu"] for r in rows] == [g for g in GPUS for _ in range(4)]  # (in the order given)
    for precision in ("fp32", "amp-fp16", "master-fp16"):
        same = [r for r in rows if r["precision"] == precision]
        assert all(r["status"] == "ok" for r in same)
        assert len({r["flops_per_step"] for r in same}) == 1 and len({r["predicted_peak_bytes"] for r in same}) == 1
    bf16 = {r["gpu"]: r["status"] for r in rows if r["precision"] == "amp-bf16"}
    assert bf16 == {"t4": "unsupported", "a100-80gb": "ok", "gtx-1080-ti": "unsupported", "rtx-2080-ti": "unsupported"}


def test_energy_per_sample_is_the_tdp_over_the_predicted_rate(rows: list[dict]) -> None:
    for r in rows:
        tdp = lookup(r["gpu"]).tdp_w
        assert r["gpu_tdp_w"] == tdp
        if r["status"] == "ok":
            assert r["predicted_joules_per_sample"] == pytest.approx(tdp * r["predicted_step_ms"] / 1e3 / r["batch_size"])
        else:
            assert "predicted_joules_per_sample" not in r


def test_without_tensor_cores_half_precision_buys_memory_not_speed(rows: list[dict]) -> None:
    """GTX 1080 Ti (compute capability 6.1): fp16 GEMMs in fp32 math on fp16 storage. Its AMP speedup stays near 1
    (only memory-bound kernels gain) and below the RTX 2080 Ti's (Tensor Cores); the memory saving is the same."""
    by = {(r["gpu"], r["precision"]): r for r in rows}
    pascal, turing = by["gtx-1080-ti", "amp-fp16"], by["rtx-2080-ti", "amp-fp16"]
    assert pascal["predicted_math_mode"] == "fp16" and pascal["predicted_speedup_vs_fp32"] < 1.15
    assert turing["predicted_speedup_vs_fp32"] > pascal["predicted_speedup_vs_fp32"] + 0.1
    assert pascal["predicted_peak_bytes"] == turing["predicted_peak_bytes"] < by["gtx-1080-ti", "fp32"]["predicted_peak_bytes"]
    # MFU against the fp32 peak: what PyTorch's fp16 GEMMs can reach there
    assert pascal["predicted_mfu"] == pytest.approx(
        pascal["flops_per_step"] / (pascal["predicted_step_ms"] / 1e3) / (lookup("gtx-1080-ti").tflops["fp32"] * 1e12))
    lines = [line for line in no_speedup_lines(rows) if "gtx-1080-ti" in line]
    assert len(lines) == 1 and "amp-fp16, master-fp16 buy memory, not speed" in lines[0]
    assert "no Tensor Cores (compute capability 6.1)" in lines[0] and "peak memory fp32" in lines[0]
    assert not any("buy memory" in line for line in no_speedup_lines(rows) if "rtx-2080-ti" in line)


def _modes_of(line: str, cell: str) -> list[str]:
    """The modes an advice line speaks of ("<cell> fp32, tf32: ..." or "<cell> every mode (fp32, ...): ...")."""
    head = line.split(": ", 1)[0].removeprefix(cell + " ")
    return head.removeprefix("every mode (").removesuffix(")").split(", ")


def test_the_advisor_names_the_fastest_and_the_most_frugal_gpu(rows: list[dict]) -> None:
    cell = "tabular-mlp (small, batch 65536)"
    said = {mode: line for line in advice(rows) for mode in _modes_of(line, cell)}
    for precision in ("fp32", "amp-fp16", "master-fp16"):
        ok = [r for r in rows if r["precision"] == precision]
        fastest = max(ok, key=lambda r: r["predicted_samples_per_s"])["gpu"]
        frugal = min(ok, key=lambda r: r["predicted_joules_per_sample"])["gpu"]
        line = said[precision]
        assert f"fastest {fastest}" in line and f"most energy-efficient {frugal}" in line
        assert "cheapest" not in line  # (no prices)
    assert "amp-bf16" not in said  # (one GPU runs it: nothing to compare)


def test_modes_with_the_same_picks_share_a_line_their_figures_a_range() -> None:
    """A launch-bound model on an L4 and an H100: eight lines said "fastest: none beyond the error band; most
    energy-efficient l4", mode after mode. Modes whose picks name the same GPUs (and the same power basis) share one
    line, the figures as the range of theirs; a mode that picks otherwise keeps its own."""
    def cell(gpu: str, mode: str, rate: float, joules: float) -> dict:
        return _cell(gpu, rate, 25, precision=mode, predicted_joules_per_sample=joules, predicted_energy_basis="TDP")

    rows = [cell("l4", "fp32", 117_885.0, 0.611e-3), cell("h100-sxm", "fp32", 117_756.0, 1.69e-3),
            cell("l4", "amp-bf16", 82_988.0, 0.868e-3), cell("h100-sxm", "amp-bf16", 82_923.0, 2.34e-3)]
    (line,) = advice(rows)
    assert line == ("w (tiny, batch 8) fp32, amp-bf16: fastest: none beyond the error band (the best 82,988-117,885 "
                    "samples/s); most energy-efficient l4 (0.611-0.868 mJ/sample at TDP)"), line
    rows.append(cell("l4", "amp-fp16", 58_603.0, 1.23e-3))
    rows.append(cell("h100-sxm", "amp-fp16", 58_571.0, 3.35e-3))
    (line,) = advice(rows)
    assert line.startswith("w (tiny, batch 8) every mode (fp32, amp-bf16, amp-fp16): ") and "0.611-1.23 mJ" in line
    rows.append(cell("h100-sxm", "pure-bf16", 300_000.0, 0.2e-3))  # (the H100 leads here: a line of its own)
    rows.append(cell("l4", "pure-bf16", 100_000.0, 0.9e-3))
    lines = list(advice(rows))
    assert len(lines) == 2 and lines[1] == ("w (tiny, batch 8) pure-bf16: fastest h100-sxm (300,000 samples/s); "
                                            "most energy-efficient h100-sxm (0.200 mJ/sample at TDP)"), lines
    assert lines[0].startswith("w (tiny, batch 8) fp32, amp-bf16, amp-fp16: ")


def _cell(gpu: str, rate: float, band: int = 10, **more: object) -> dict:
    return {"workload": "w", "preset": "tiny", "batch_size": 8, "precision": "fp32", "status": "ok", "gpu": gpu,
            "predicted_error_pct": band, "predicted_joules_per_sample": 1.0, "predicted_samples_per_s": rate, **more}


def test_a_tie_is_two_overlapping_bands_nothing_wider_and_the_nearest_is_named_first() -> None:
    rows = [_cell("a", 100.0), _cell("c", 50.0), _cell("b", 95.0)]
    (line,) = advice(rows)
    assert "fastest a (100 samples/s), tied within the error band with b;" in line
    rows[1]["predicted_samples_per_s"] = 99.0
    (line,) = advice(rows)
    assert "fastest: none beyond the error band" in line
    # the issue's case: b200 10,276/s and h100-pcie 5,203/s at +-25%: 7,707 (b200's low end) > 6,504 (h100-pcie's high)
    rows = [_cell("b200", 10_276.0, 25), _cell("h100-pcie", 5_203.0, 25), _cell("h100-sxm", 7_000.0, 25),
            _cell("h200", 8_918.0, 25), _cell("a40", 4_800.0, 25)]
    (line,) = advice(rows)
    assert "fastest b200 (10,276 samples/s), tied within the error band with h200, h100-sxm;" in line
    assert "h100-pcie" not in line.split(";")[0] and "a40" not in line.split(";")[0]
    mark_ranks(rows)
    assert {r["gpu"]: (r["predicted_speed_rank"], r["predicted_tied_with_fastest"]) for r in rows} == {
        "b200": (1, True), "h200": (2, True), "h100-sxm": (3, True), "h100-pcie": (4, False), "a40": (5, False)}


def test_an_exact_tie_names_no_winner_and_says_why_when_launch_bound() -> None:
    launch = {"predicted_bound": "launch"}
    rows = [_cell(g, 31_828.1, 25, **launch) for g in ("b200", "h100-sxm", "a100-80gb", "l4", "t4")]
    rows.append(_cell("k80", 9_000.0, 25, **launch))
    (line,) = advice(rows)
    fastest = line.split(": ", 1)[1].split(";")[0]
    assert fastest.startswith("fastest: 5 GPUs alike (b200, h100-sxm, a100-80gb and 2 more) (31,828 samples/s)")
    assert "launch-bound" in fastest and "the GPU does not set the pace" in fastest
    (full,) = advice(rows, shown=None)
    assert "(b200, h100-sxm, a100-80gb, l4, t4)" in full
    rows.pop()  # every GPU alike: the same finding, the same why
    (line,) = advice(rows)
    assert "fastest: none beyond the error band" in line and "launch-bound" in line
    mark_ranks(rows)
    assert {r["predicted_speed_rank"] for r in rows} == {1}


def test_prices_give_the_cost_per_million_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.csv"
    prices.write_text("gpu,usd_per_hour\nt4,0.35\nA100-80GB,1.89\nh100-sxm,4.0\n")  # (a GPU not predicted: ignored)
    db = tmp_path / "r.db"
    out = tmp_path / "p.json"
    monkeypatch.setenv("COLUMNS", "80")
    code, text, err = cli("predict", "--gpu", "t4,a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny",
                          "--precisions", "fp32,amp-bf16", "--prices", str(prices), "--db", str(db), "--json", str(out))
    assert code == 0, err
    rows = json.loads(out.read_text())
    for r in rows:
        price = {"t4": 0.35, "a100-80gb": 1.89}[r["gpu"]]
        assert r["usd_per_hour"] == price
        if r["status"] == "ok":
            assert r["predicted_usd_per_million_samples"] == pytest.approx(price / 3600 / r["predicted_samples_per_s"] * 1e6)
    flat = " ".join(text.split())
    assert "USD per million samples" in flat and "cheapest per sample" in flat and "a100-80gb" in flat
    assert max(len(line) for line in text.splitlines() if "│" in line) <= 80  # (tables stacked to fit; text soft-wraps)
    assert len(Store(db).predictions()) == len(rows) == 4


def test_one_priced_gpu_shows_its_cost_and_energy_and_a_comparison_prices_only_the_priced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"h100-sxm": 2.5}')
    monkeypatch.setenv("COLUMNS", "120")
    code, text, err = cli("predict", "--gpu", "h100-sxm", "--workloads", "tabular-mlp", "--preset", "tiny",
                          "--precisions", "fp32", "--prices", str(prices), "--db", str(tmp_path / "r.db"), "--json",
                          str(tmp_path / "p.json"))
    assert code == 0, err
    (row,) = json.loads((tmp_path / "p.json").read_text())
    line = next(x for x in text.splitlines() if x.startswith("│ fp32"))
    assert sig(row["predicted_usd_per_million_samples"]) in line and sig(row["predicted_joules_per_sample"] * 1e3) in line
    code, text, err = cli("predict", "--gpu", "h100-sxm,t4,l4", "--workloads", "tabular-mlp", "--preset", "tiny",
                          "--precisions", "fp32", "--prices", str(prices), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if "USD" in x)
    cost = "\n".join(lines[start:next(i for i in range(start, len(lines)) if lines[i].startswith("└")) + 1])
    assert "h100-sxm" in cost and "t4" not in cost and "l4" not in cost  # (unpriced GPUs: no cost column)


def test_a_column_of_sizes_is_written_in_one_unit() -> None:
    assert bytes_unit([1_002.2 * 2**20, 1.0 * 2**30, None]) == "GiB"
    assert fmt_bytes(1_002.2 * 2**20, "GiB") == "1.0 GiB" and fmt_bytes(512, "KiB") == "0.5 KiB"
    rows = [{"workload": "w", "preset": "tiny", "batch_size": 8, "precision": p, "status": "ok", "gpu": "a",
             "predicted_samples_per_s": 1.0, "predicted_peak_bytes": b, "predicted_max_batch": 9}
            for p, b in (("fp32", 1.1 * 2**30), ("amp-bf16", 1_002.2 * 2**20))]
    console = Console(width=200, record=True, file=io.StringIO())
    for part in comparison_tables(rows + [{**r, "gpu": "b"} for r in rows], 200):
        console.print(part)
    text = console.export_text()
    assert "MiB" not in text and "1.0 GiB / 9" in text


@pytest.mark.parametrize("content, said", [
    ('{"a200": 1.0}', "'a200' is not a known GPU"), ('{"t4": -1}', "t4's price must be a number of USD per hour > 0"),
    ('{"t4": "cheap"}', "must be a number"), ("t4;0.35\n", "expected JSON"), ("[]", "expected JSON")])
def test_bad_prices_are_one_line(tmp_path: Path, content: str, said: str) -> None:
    f = tmp_path / "p.json"
    f.write_text(content)
    with pytest.raises(AmpbenchError, match=said):
        load_prices(f, (lookup("t4"),))
    code, _, err = cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--prices", str(f),
                       "--db", str(tmp_path / "r.db"))
    assert code == 2 and said.split("'")[0] in err and len(err.strip().splitlines()) == 1


def test_all_predicts_every_gpu_of_the_catalogue(tmp_path: Path) -> None:
    config = PredictConfig.from_strings(gpu="all", workloads="tabular-mlp", preset="tiny", precisions="fp32")
    assert config.gpus == predictable() and len(config.gpus) >= 35
    rows = config.predict()
    assert [r["gpu"] for r in rows] == [g.key for g in predictable()] and all(r["status"] == "ok" for r in rows)
    console = Console(width=80, record=True, file=io.StringIO())
    for part in comparison_tables(rows, 80):
        console.print(part)
    text = console.export_text()
    assert all(g.key in text for g in predictable()) and max(len(line) for line in text.splitlines()) <= 80


def test_all_gpus_of_a_warning_users_model_warn_once_and_say_each_finding_once(
        tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    model = tmp_path / "cnn.py"
    model.write_text("import warnings\nfrom torch import nn\n\n\ndef build():\n"
                     "    warnings.warn('my model warns')\n"
                     "    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), "
                     "nn.Flatten(), nn.Linear(8, 10))\n")
    code, out, err = cli("predict", "--gpu", "all", "--model", f"{model}:build", "--input-shape", "3,16,16",
                         "--num-classes", "10", "--precisions", "fp32,amp-fp16", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert sum("my model warns" in str(w.message) for w in recwarn) == 1  # (it printed once per GPU and build: 84
    # times)
    lines = [line for line in out.splitlines() if "no speedup predicted" in line or "buy memory" in line]
    assert 1 <= len(lines) <= 8  # (one per finding, the GPUs named in it: not one per GPU)
    flat = " ".join(out.split())
    assert flat.count("ampbench run of these") == 1 and f"({len(predictable())} GPUs;" in flat


def test_the_reports_show_which_gpu(tmp_path: Path) -> None:
    """The stored predictions of one cell on several GPUs: a "Which GPU" section, GPUs as columns (HTML with a chart,
    Markdown with a table); one GPU alone has none."""
    from ampbench.report import build_report

    db = tmp_path / "r.db"
    code, _, err = cli("predict", "--gpu", "t4,l4", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions",
                       "fp32,amp-fp16", "--db", str(db))
    assert code == 0, err
    html = build_report(Store(db), fmt="html")[1]
    md = build_report(Store(db), fmt="md")[1]
    assert 'id="which-gpu"' in html and html.count('<img class="chart"') >= 1
    section = md.split("### Which GPU", 1)[1]
    assert "| mode | t4 | l4 |" in section and "| amp-fp16 |" in section
    one = tmp_path / "one.db"
    assert cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny", "--db", str(one))[0] == 0
    assert "Which GPU" not in build_report(Store(one), fmt="md")[1]


def test_csv_puts_the_gpus_side_by_side(tmp_path: Path) -> None:
    import csv

    out, js = tmp_path / "p.csv", tmp_path / "p.json"
    code, _, err = cli("predict", "--gpu", "t4,a100-80gb", "--workloads", "tabular-mlp", "--preset", "tiny",
                       "--precisions", "fp32,amp-bf16", "--csv", str(out), "--json", str(js), "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    table = list(csv.DictReader(out.read_text().splitlines()))
    rows = {(r["gpu"], r["precision"]): r for r in json.loads(js.read_text())}
    assert [line["mode"] for line in table] == ["fp32", "amp-bf16"]
    for line in table:
        for gpu in ("t4", "a100-80gb"):
            r = rows[gpu, line["mode"]]
            assert line[f"{gpu} status"] == r["status"]
            if r["status"] == "ok":
                assert float(line[f"{gpu} samples_per_s"]) == pytest.approx(r["predicted_samples_per_s"])
                assert float(line[f"{gpu} joules_per_sample"]) == pytest.approx(r["predicted_joules_per_sample"])
            else:
                assert line[f"{gpu} samples_per_s"] == ""


def test_the_energy_pick_says_the_power_its_figure_was_priced_at_and_which_gpus_were_priced_otherwise() -> None:
    """A measured kernel table's power beside a rated TDP (an upper bound): the line says which is which (it said
    "at TDP or at measured power" of every figure)."""
    measured = "measured power: NVIDIA H200's measured kernels"
    rows = [_cell("h200", 100.0, predicted_joules_per_sample=0.1, predicted_energy_basis=measured),
            _cell("a100", 60.0, predicted_joules_per_sample=0.3, predicted_energy_basis="TDP"),
            _cell("v100", 30.0, predicted_joules_per_sample=0.6, predicted_energy_basis="TDP")]
    (line,) = advice(rows)
    assert "most energy-efficient h200 (100 mJ/sample at measured power; a100, v100 at TDP)" in line, line
    for r in rows:
        r["predicted_energy_basis"] = "TDP"
    (line,) = advice(rows)
    assert "most energy-efficient h200 (100 mJ/sample at TDP)" in line, line
    # --gpu all: the GPUs priced otherwise named as the ties are, three and "N more" (the console; all in the HTML)
    many = [_cell("h200", 100.0, predicted_joules_per_sample=0.1, predicted_energy_basis=measured),
            *(_cell(f"g{i}", 60.0, predicted_joules_per_sample=0.3 + i, predicted_energy_basis="TDP") for i in range(6))]
    (line,) = advice(many)
    assert "(100 mJ/sample at measured power; g0, g1, g2 and 3 more at TDP)" in line, line
    (full,) = advice(many, shown=None)
    assert "g0, g1, g2, g3, g4, g5 at TDP" in full


def test_an_x_fp32_over_an_fp32_that_does_not_fit_is_marked_in_every_report() -> None:
    """ResNet-50 at batch 256 on a T4: its fp32 step needs more than the T4's 16 GB, so amp-fp16's "x fp32" there is
    over the step fp32 trains that batch by (2 micro-batches of 128, accumulated) -- marked, with the line that says
    so, in the console, Markdown and HTML; the A100's, whose fp32 fits, is not."""
    from ampbench.report.gpu_comparison import UNFIT_NOTE, markdown
    from ampbench.report.html import render_html

    rows = PredictConfig.from_strings(gpu="t4,a100-40gb", workloads="resnet50", precisions="fp32,amp-fp16").predict()
    by = {(r["gpu"], r["precision"]): r for r in rows}
    t4 = lookup("t4")
    assert by["t4", "fp32"]["predicted_peak_bytes"] > t4.memory_gib * 2**30  # (an oracle on the oom: the datasheet)
    assert by["t4", "fp32"]["status"] == "oom" and by["a100-40gb", "fp32"]["status"] == "ok"
    x_t4, x_a100 = by["t4", "amp-fp16"]["predicted_speedup_vs_fp32"], by["a100-40gb", "amp-fp16"]["predicted_speedup_vs_fp32"]
    fp32 = by["t4", "fp32"]  # (the oracle: x fp32 over the accumulated step that row priced)
    assert x_t4 == pytest.approx(fp32["predicted_accumulated_step_ms"] / by["t4", "amp-fp16"]["predicted_step_ms"])
    console = Console(width=120, record=True)
    for t in comparison_tables(rows, 120):
        console.print(t)
    text = console.export_text()
    assert f"({x_t4:.2f}x*)" in text and f"({x_a100:.2f}x)" in text and " ".join(text.split()).count(UNFIT_NOTE) == 1
    md = "\n".join(markdown(rows, str))
    assert f"({x_t4:.2f}x*)" in md and f"({x_a100:.2f}x)" in md and UNFIT_NOTE in md
    html = render_html([], {"run_id": "r"}, predictions=rows)
    assert f"({x_t4:.2f}x*)" in html and f"({x_a100:.2f}x)" in html and "fp32 does not fit this batch" in html
    # and how the T4's fp32 trains batch 256 all the same: equal micro-batches within its predicted largest batch
    largest = fp32["predicted_max_batch"]
    n = next(n for n in range(1, 257) if 256 % n == 0 and 256 // n <= largest)
    assert fp32["predicted_accumulated_micro_batches"] == n  # (the held gradients need no finer split here)
    split = ("x fp32 is over fp32 training that batch a step by gradient accumulation (ampbench train --batch-size M "
             f"--grad-accum N): t4 {n} x {256 // n} ({fp32['predicted_accumulated_step_ms']:,.1f} ms a step")
    assert largest < 256 and split in " ".join(text.split()) and split in md and split in html
    assert "cannot run" not in " ".join(text.split())
    alone = PredictConfig.from_strings(gpu="a100-40gb,h100-sxm", workloads="resnet50", precisions="fp32,amp-fp16")
    plain = "\n".join(markdown(alone.predict(), str))
    assert "x*)" not in plain and UNFIT_NOTE not in plain  # (every fp32 fits: no mark, no line)


def test_the_unfit_note_says_what_each_marked_x_fp32_is_over() -> None:
    """An fp32 that does not fit: "x fp32" over its priced accumulated step; rows stored before accumulated steps were
    priced name the split alone (x fp32 then over the step that cannot run); a GPU where no micro-batch fits says so
    as "elsewhere" beside priced ones."""
    from ampbench.report.gpu_comparison import UNFIT_NOTE, accumulation_splits, unfit_note

    def fp32(**keys):
        return {"precision": "fp32", "status": "oom", "batch_size": 256, "predicted_max_batch": 169, **keys}

    priced = fp32(predicted_accumulated_micro_batches=2, predicted_accumulated_batch=128,
                  predicted_accumulated_step_ms=2181.7, predicted_accumulated_samples_per_s=117.3)
    none = fp32(predicted_accumulated_micro_batches=0, predicted_accumulated_batch=0)  # (priced: nothing fits)
    group = {"fp32": {"t4": priced, "k80": none, "old": fp32()}, "amp-fp16": {}}
    splits = accumulation_splits(group, ["t4", "k80", "old"])
    assert splits == (["t4 2 x 128 (2,181.7 ms a step, 117 samples/s)"], ["old 2 x 128"], ["k80"])
    note = unfit_note(splits)
    assert note.startswith(f"{UNFIT_NOTE}: x fp32 is over fp32 training that batch a step by gradient accumulation")
    assert "; elsewhere x fp32 is the ratio of step times all the same, at a batch fp32 cannot run" in note
    assert note.endswith("M within its largest batch): old 2 x 128")
    only = unfit_note(accumulation_splits(group, ["t4"]))
    assert "cannot run" not in only and only.endswith("t4 2 x 128 (2,181.7 ms a step, 117 samples/s)")
    assert unfit_note(accumulation_splits(group, ["k80"])) == (f"{UNFIT_NOTE}: x fp32 is the ratio of step times all "
                                                               "the same, at a batch fp32 cannot run")


def test_the_fabric_line_names_the_modes_behind_each_figure() -> None:
    """A many-GPU prediction's line: one figure where every row's is the same; where they differ, each figure after
    the modes it is theirs (an execution said where the GPU's rows are of several), and how often an accumulating
    step reduces."""
    from ampbench.report.gpu_comparison import ddp_lines

    def row(precision: str, allreduce: float, exposed: float, reductions: int = 1, **extra) -> dict:
        return {"gpu": "h100-sxm", "status": "ok", "strategy": "ddp", "world_size": 8, "gpus_per_node": 8, "nodes": 1,
                "interconnect": "nvlink", "predicted_bus_gbs": 360.0, "precision": precision,
                "predicted_allreduce_ms": allreduce, "predicted_comm_ms": exposed, "predicted_reductions": reductions,
                "predicted_scaling_efficiency": 0.9, **extra}

    (same,) = ddp_lines([row("fp32", 3.39, 0.15), row("amp-bf16", 3.39, 0.15)])
    assert "the gradients' all-reduce: 3.39 ms a step, 0.15 ms of it past the backward; scaling" in same
    (acc,) = ddp_lines([row("fp32", 3.39, 0.15, grad_accum=4), row("amp-bf16", 3.39, 0.15, grad_accum=4),
                        row("master-bf16", 7.06, 0.44, 4, grad_accum=4)])
    assert ("the gradients' all-reduce (once, in the last of 4 micro-batches' backward; master-bf16 in each "
            "micro-batch's): fp32, amp-bf16 3.39 ms a step, 0.15 ms of it past the backward; master-bf16 7.06 ms a "
            "step, 0.44 ms of it past the backward;") in acc
    (ex,) = ddp_lines([row("amp-bf16", 3.39, 0.15), row("amp-bf16", 3.39, 0.05, checkpointing="selective")])
    assert ("amp-bf16 3.39 ms a step, 0.15 ms of it past the backward; amp-bf16 · selective-checkpointing 3.39 ms a "
            "step, 0.05 ms") in ex
    assert "efficiency (one GPU's step / this step) amp-bf16 0.90, amp-bf16 · selective-checkpointing 0.90" in ex
