"""The lines ``predict`` prints beside its tables: why a GPU cannot run a mode (a comparison's cell says only
"unsupported"), and what an fp8 row converted (none: it is amp-bf16's step)."""

from __future__ import annotations

import pytest

from ampbench.measure.gpus import lookup
from ampbench.predict.rows import Machine, Question, predict_target
from ampbench.report.predictions import fp8_lines, unsupported_lines
from ampbench.workloads import create_workload
from ampbench.workloads.factory import build_meta


def test_an_fp8_row_says_what_it_converted_and_a_gpu_that_cannot_run_it_says_why() -> None:
    rows = []
    for gpu in ("h100-sxm", "a100-80gb", "a100-40gb"):
        rows += predict_target("tabular-mlp", lambda: build_meta(lambda: create_workload("tabular-mlp", "tiny")),
                               Question(("amp-bf16", "fp8-rowwise"), 16), Machine(lookup(gpu)))
    h100 = {r["precision"]: r for r in rows if r["gpu"] == "h100-sxm"}
    assert h100["fp8-rowwise"]["fp8_layers"].startswith("0/3 converted; skipped:")
    assert h100["fp8-rowwise"]["predicted_ops"] == h100["amp-bf16"]["predicted_ops"]  # (nothing converted)
    assert any(n.startswith("fp8: no layer converted") for n in h100["fp8-rowwise"]["notes"])
    (line,) = fp8_lines(rows)
    assert line.startswith("tabular-mlp (tiny, batch 16) fp8-rowwise: 0/3 converted") and "amp-bf16's step" in line
    (why,) = unsupported_lines(rows)
    assert why.startswith("fp8-rowwise unsupported on a100-80gb, a100-40gb: fp8 Tensor Cores need compute capability")


def test_gpus_refused_by_one_rule_are_one_line_grouped_by_their_own_part() -> None:
    """--gpu all printed a line per compute capability for amp-bf16 ("...; the GPU is 6.1", "...; the GPU is 7.0"):
    one line per rule now, its GPUs grouped by what each is."""
    rule = "bf16 needs compute capability >= 8.0 (Ampere or newer)"
    rows = [{"precision": "amp-bf16", "status": "unsupported", "gpu": g, "reason": f"{rule}; the GPU is {cc}"}
            for g, cc in (("m4000", "5.2"), ("p4", "6.1"), ("gtx-1080-ti", "6.1"), ("t4", "7.5"))]
    assert unsupported_lines(rows) == [f"amp-bf16 unsupported on 4 GPUs: {rule} -- 5.2: m4000; 6.1: p4, gtx-1080-ti; "
                                       "7.5: t4"]
    assert unsupported_lines(rows[1:3]) == [f"amp-bf16 unsupported on p4, gtx-1080-ti: {rule}; the GPU is 6.1"]


def test_an_fp8_row_slower_than_bf16_says_why() -> None:
    from ampbench.predict.config import PredictConfig

    config = PredictConfig.from_strings(gpu="h100-sxm", workloads="tabular-mlp", preset="tiny",
                                        precisions="amp-bf16,fp8-rowwise", fp8_filter="dims")
    rows = config.predict()
    (line,) = fp8_lines(rows)
    fp8, bf16 = (next(r for r in rows if r["precision"] == p) for p in ("fp8-rowwise", "amp-bf16"))
    assert fp8["fp8_layers"].startswith("1/3 converted") and fp8["predicted_step_ms"] > bf16["predicted_step_ms"]
    assert f"slower than amp-bf16 (h100-sxm {bf16['predicted_step_ms'] / fp8['predicted_step_ms']:.2f}x" in line
    assert "scaling and casts cost more" in line
    # an accumulated fp8 step is its own line, compared with amp-bf16's accumulated step, not the plain one
    fast_plain = {**bf16, "predicted_step_ms": fp8["predicted_step_ms"] * 10}  # (would say nothing if compared)
    rows4 = [fast_plain, {**fp8, "grad_accum": 4}, {**bf16, "grad_accum": 4}]
    (line4,) = fp8_lines(rows4)
    assert line4.startswith("tabular-mlp (tiny, batch 16 x 4 micro-batches a step) fp8-rowwise: 1/3 converted")
    assert "slower than amp-bf16" in line4


def test_every_stored_prediction_is_reachable_beside_runs_of_other_workloads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A prediction of a workload the store's runs did not measure: the run's report says where it is, and
    report --predictions / results --predictions show it (they showed nothing)."""
    import json

    from tests.conftest import cli

    db = str(tmp_path / "r.db")
    code, _, err = cli("predict", "--gpu", "h100-sxm", "--workloads", "mnist-cnn", "--preset", "tiny", "--precisions",
                       "fp32", "--db", db)
    assert code == 0, err
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "2",
                       "--warmup", "1", "--db", db, "--no-isolate")
    assert code == 0, err
    code, md, err = cli("report", "--db", db, "--format", "md", "--out", "-")
    assert code == 0 and "1 other workload(s) have stored predictions (mnist-cnn)" in md
    assert "ampbench report --predictions" in md
    code, md, err = cli("report", "--db", db, "--format", "md", "--out", "-", "--predictions")
    assert code == 0 and "mnist-cnn" in md and "every prediction stored" in md
    code, out, err = cli("results", "--db", db, "--predictions", "--format", "json")
    assert code == 0 and [p["workload"] for p in json.loads(out)] == ["mnist-cnn"]
    code, out, err = cli("results", "--db", db, "--predictions", "--workloads", "bert")
    assert code == 2 and "no predictions of bert" in err
    code, out, err = cli("report", "--db", db, "--predictions", "--latest")
    assert code == 2 and "not both" in err


def test_the_reports_predicted_memory_cells_are_the_predicted_peak_and_max_batch() -> None:
    """The HTML/Markdown predictions table and the "Which GPU" memory cells read a prediction's peak and largest
    batch (they read a run row's measured memory -- absent from a prediction -- and showed "-" on every row)."""
    from ampbench.report.html import _figure_cell, predicted_cells
    from ampbench.report.predictions import table

    stored = {"workload": "hf:bert", "preset": "small", "batch_size": 32, "precision": "fp32", "gpu": "h100-sxm",
              "status": "ok", "predicted_samples_per_s": 469.0, "predicted_peak_bytes": 4_111_467_596,
              "predicted_max_batch": 887, "predicted_bound": "compute", "predicted_error_pct": 20,
              "created_at": "2026-11-28T00:00:00Z"}
    (line,) = table([stored], [])
    expect = f"{4_111_467_596 / 2**30:.1f} GiB / 887"  # (oracle: the bytes in GiB by hand)
    assert expect == "3.8 GiB / 887"
    assert predicted_cells(line)[7] == expect
    assert _figure_cell("memory", stored) == expect


def test_a_prediction_that_does_not_fit_keeps_its_line_with_its_status() -> None:
    """fp32 ResNet-50 at batch 256 on an 8 GB card is oom: the predictions table left the line out, so the report
    said nothing of it. It keeps its line -- its status where samples/s would be, the peak and the largest batch that
    fits in the memory cell -- and a mode the GPU cannot run says why."""
    from rich.console import Console

    from ampbench.report.console import predicted_table
    from ampbench.report.html import predicted_cells
    from ampbench.report.predictions import table

    base = {"workload": "resnet50", "preset": "paper", "batch_size": 256, "gpu": "m4000",
            "created_at": "2026-11-28T00:00:00Z"}
    oom = {**base, "precision": "fp32", "status": "oom", "predicted_peak_bytes": 20.9 * 2**30, "predicted_max_batch": 80,
           "reason": "predicted peak 20.9 GiB exceeds the 6.8 GiB the allocator can fill on m4000"}
    refused = {**base, "precision": "amp-bf16", "status": "unsupported",
               "reason": "bf16 needs compute capability >= 8.0 (Ampere or newer); the GPU is 5.2"}
    lines = table([oom, refused], [])
    assert [(x["precision"], x["status"]) for x in lines] == [("fp32", "oom"), ("amp-bf16", "unsupported")]
    cells = predicted_cells(lines[0])
    assert cells[4] == "oom" and cells[7] == "20.9 GiB / 80" and cells[8] == "–"
    assert predicted_cells(lines[1])[4] == f"unsupported: {refused['reason']}"
    console = Console(record=True, width=200)
    for part in predicted_table(lines, 200):
        console.print(part)
    text = console.export_text()
    assert "oom" in text and "unsupported" in text
    # an oom whose accumulated step was priced says how it trains that batch, and how fast
    priced = {**oom, "predicted_accumulated_micro_batches": 4, "predicted_accumulated_batch": 64,
              "predicted_accumulated_samples_per_s": 117.3, "predicted_accumulated_step_ms": 2182.4}
    assert predicted_cells(table([priced], [])[0])[4] == "oom; 4 x 64 accumulated: 117/s"
    both = {**priced, "predicted_checkpointed": {"blocks": {"peak_bytes": 9e9, "step_ms": 2910.6, "samples_per_s": 88.0},
                                                 "selective": {"peak_bytes": 19e9}}}
    assert predicted_cells(table([both], [])[0])[4] == "oom; 4 x 64 accumulated: 117/s; checkpointed (blocks): 88/s"


def test_stored_predictions_at_80_columns_cut_no_header_nor_figure() -> None:
    """`results --predictions` at 80 columns was one eight-column table: "workloa / d", "predicte / d/s", four lines
    a row. A table per workload and setting (its title), GPU and mode leading each row, stacked to the width."""
    from rich.console import Console

    from ampbench.report.console import predicted_table
    from ampbench.report.predictions import table

    rows = [{"workload": "user:/home/someone/models/m.py:frozen", "preset": "small", "batch_size": 64, "gpu": g,
             "created_at": "2026-11-28T00:00:00Z", "precision": p, "status": "ok", "predicted_samples_per_s": sps,
             "predicted_error_pct": 28} for g in ("l4", "h100-sxm") for p, sps in (("fp32", 117885.0), ("amp-bf16", 82988.0))]
    console = Console(record=True, width=80)
    for part in predicted_table(table(rows, []), 80):
        console.print(part)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for head in ("GPU", "mode", "predicted/s"):
        assert f" {head} " in text, head
    assert "117,885" in text and "82,988" in text and "…" not in text
    assert text.count("┏") == 1 and "user:/home/someone/models/m.py:frozen (small), batch 64, eager: predicted" in \
        " ".join(text.split())
    assert "measured/s" not in text  # (nothing measured: no column of "-")


def test_error_band_lines_name_each_reference_once() -> None:
    """Rows of several op mixes and kinds of math printed one near-copy line of the whole basis per distinct band
    (seven on the GPU suite): each reference is one line now, a figure that varies a range, and the modes it applies
    to where it is not all of them."""
    from ampbench.report.console import error_band_lines

    def row(precision: str, kernels: int, amp: bool) -> dict:
        basis = [f"kernels of this op mix on Hopper (h100-sxm, h200, fitted on): {kernels}%",
                 "fp32 training steps on Hopper: median 7%, worst 14%"]
        if precision != "fp32":
            basis.append("published AMP/TF32 results: median 5%, worst 20%")
        basis.append(f"published {'AMP' if amp else 'FP32/TF32'} steps on Hopper (x): median {10 if amp else 12}%, "
                     f"worst {33 if amp else 25}%")
        return {"precision": precision, "predicted_error_basis": "; ".join(basis)}

    rows = [row("fp32", 20, False), row("tf32", 23, False), row("amp-bf16", 24, True), row("fp32", 21, False)]
    lines = error_band_lines(rows)
    assert lines[0].startswith("± error: the typical |error| of predictions like these")
    assert lines[1:] == [
        "  kernels of this op mix on Hopper (h100-sxm, h200, fitted on): 20-24% (by op mix)",
        "  fp32 training steps on Hopper: median 7%, worst 14%",
        "  published FP32/TF32 steps on Hopper (x): median 12%, worst 25% \\[fp32, tf32]",
        "  published AMP/TF32 results: median 5%, worst 20% \\[tf32, amp-bf16]",
        "  published AMP steps on Hopper (x): median 10%, worst 33% \\[amp-bf16]"]
    one = error_band_lines(rows[:1])
    assert one == [f"± error: the typical |error| of predictions like these ({rows[0]['predicted_error_basis']})"]


def test_a_band_part_with_a_semicolon_in_its_parentheses_is_one_line() -> None:
    """The launch-bound band "(the host sets them; a faster host runs them faster)" was printed as two half lines."""
    from ampbench.report.console import error_band_lines, top_level_parts

    launch = "launch-bound steps measured on h200 (the host sets them; a faster host runs them faster): median 23%, worst 55%"
    assert top_level_parts(f"a: 1%; {launch}; b (c; d); e") == ["a: 1%", launch, "b (c; d)", "e"]
    rows = [{"precision": "tf32", "predicted_error_basis": "fp32 steps: median 7%"},
            {"precision": "amp-bf16", "predicted_error_basis": f"fp32 steps: median 7%; {launch}"}]
    assert f"  {launch} \\[amp-bf16]" in error_band_lines(rows)


def test_an_mfu_over_100_percent_says_why_and_is_winograds() -> None:
    """mnist-cnn's paper CNN (3x3 convolutions of 420 and 1,000 channels) in fp32 on an A100 is predicted at an MFU
    over 100% of the datasheet's 19.5 TFLOP/s; without Winograd (its efficiency near zero) it is under 100%: the line
    that says why names the reason that is true. A row under 100% gets no line."""
    import dataclasses

    from ampbench.cells import DataOptions
    from ampbench.measure.gpus import lookup
    from ampbench.predict import kernels
    from ampbench.predict.config import PredictConfig
    from ampbench.predict.cost import price
    from ampbench.predict.trace import trace_step
    from ampbench.report.console import mfu_over_peak_lines
    from ampbench.workloads import build_target
    from ampbench.workloads.factory import build_meta

    rows = PredictConfig.from_strings(gpu="a100-80gb", workloads="mnist-cnn", preset="paper",
                                      precisions="fp32,amp-bf16").predict()
    fp32, bf16 = rows
    assert fp32["predicted_mfu"] == pytest.approx(fp32["flops_per_step"] / (fp32["predicted_step_ms"] / 1e3) / 19.5e12)
    assert fp32["predicted_mfu"] > 1 > bf16["predicted_mfu"]
    (line,) = mfu_over_peak_lines(rows)
    assert line.startswith(f"MFU over 100% (mnist-cnn fp32 {fp32['predicted_mfu']:.0%}): ") and "Winograd" in line
    assert mfu_over_peak_lines([bf16]) == []
    wl = build_meta(lambda: build_target("mnist-cnn", None, "paper", DataOptions(), 0, preset_given=False))
    trace = trace_step(wl, "fp32", fp32["batch_size"], channels_last=False)
    no_winograd = dataclasses.replace(kernels.calibration(), winograd_efficiency=1e-6)
    cost = price(trace, lookup("a100-80gb"), tf32=False, kernels=None, cal=no_winograd)
    assert cost.flops / cost.step_s / 19.5e12 < 1


def test_an_accumulated_prediction_pairs_with_the_accumulated_measurement_only() -> None:
    """``predict --grad-accum 4`` and ``run --grad-accum 4`` name one cell (CellId's grad_accum): the prediction of the
    step of 4 micro-batches pairs with that measured row, never with the plain step at the same batch."""
    from ampbench.report.predictions import measured_for

    pred = {"gpu": "h200", "workload": "bert", "preset": "paper", "precision": "amp-bf16", "batch_size": 32,
            "grad_accum": 4, "status": "ok"}
    measured = {"workload": "bert", "preset": "paper", "precision": "amp-bf16", "batch_size": 32, "status": "ok",
                "device": "cuda", "device_name": "NVIDIA H200", "samples_per_s": 1000.0}
    plain = {**measured, "grad_accum": None}
    accumulated = {**measured, "grad_accum": 4, "samples_per_s": 900.0}
    assert measured_for(pred, [plain]) is None
    assert measured_for(pred, [plain, accumulated]) is accumulated
    assert measured_for({**pred, "grad_accum": None}, [plain, accumulated]) is plain
