"""``ampbench predict``: every registered workload and a --model file on every GPU name; rows, store, report,
refusals and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ampbench.measure.gpus import predictable
from ampbench.precision import list_precisions
from ampbench.predict.rows import Machine, Question, predict_target, refusal
from ampbench.store import Store
from tests.conftest import cli

FIXTURES = Path(__file__).resolve().parents[1] / "doc_fixtures"
MODES = [p for p in list_precisions() if not p.startswith("fp8")]
ROW_KEYS = {"gpu", "precision", "batch_size", "predicted_step_ms", "predicted_samples_per_s", "predicted_speedup_vs_fp32",
            "predicted_speedup_vs_tf32", "predicted_peak_bytes", "predicted_weights_bytes", "predicted_grads_bytes",
            "predicted_optimizer_bytes", "predicted_activation_bytes", "predicted_max_batch", "predicted_mfu",
            "predicted_time_split", "predicted_op_split", "predicted_bound", "device", "source"}


def _check_rows(rows: list[dict], gpu) -> None:
    by = {r["precision"]: r for r in rows}
    assert set(by) == set(MODES)
    for name, r in by.items():
        if r["status"] != "ok":
            assert r["status"] == "unsupported" and r["reason"] == refusal(gpu, name)
            continue
        assert set(r) >= ROW_KEYS and r["device"] == f"predicted: {gpu.key}" and r["source"] == "predicted"
        assert r["predicted_samples_per_s"] == pytest.approx(r["batch_size"] * 1e3 / r["predicted_step_ms"])
        assert r["predicted_peak_bytes"] > r["predicted_weights_bytes"] > 0
        split = ("weights", "grads", "optimizer", "activation", "temporary", "workspace")  # (the peak: its split's sum)
        assert r["predicted_peak_bytes"] == sum(r[f"predicted_{k}_bytes"] for k in split)
        assert r["predicted_peak_bytes"] <= r["predicted_usable_bytes"] and r["predicted_context_bytes"] > 0
        assert 0 < r["predicted_error_pct"] < 100 and r["predicted_error_basis"] and r["trace_s"] > 0
        for base in ("fp32", "tf32"):  # (a speedup is the baseline's step over this one's)
            if by[base]["status"] == "ok":
                want = by[base]["predicted_step_ms"] / r["predicted_step_ms"]
                assert r[f"predicted_speedup_vs_{base}"] == pytest.approx(want)
        assert sum(r["predicted_op_split"].values()) == pytest.approx(1.0)
        assert sum(r["predicted_time_split"].values()) == pytest.approx(1.0)
        assert 0 < r["predicted_mfu"] < 1 and r["predicted_max_batch"] is not None
    assert by["fp32"]["predicted_speedup_vs_fp32"] == pytest.approx(1.0)
    assert (by["amp-bf16"]["status"] == "ok") == (gpu.capability >= (8, 0))


@pytest.mark.parametrize("workload", ["mnist-cnn", "conv-dummy", "resnext", "unet", "bert", "lstm-lm", "tabular-mlp"])
def test_every_registered_workload_on_every_gpu(workload: str) -> None:
    from ampbench.workloads import build_target
    from ampbench.workloads.data_options import DataOptions
    from ampbench.workloads.registry import list_workloads

    assert workload in list_workloads()
    traced: dict = {}

    def build():
        return build_target(workload, None, "tiny", DataOptions(), 0)

    for gpu in predictable():  # (traces are per precision; pricing per GPU is arithmetic: one trace set, thirteen GPUs)
        rows = predict_target(workload, build, Question(tuple(MODES)), Machine(gpu), traces=traced)
        _check_rows(rows, gpu)


def test_predict_a_model_file_from_the_cli_stores_rows_and_reports_them(tmp_path: Path) -> None:
    db, out = tmp_path / "r.db", tmp_path / "p.json"
    code, stdout, err = cli("predict", "--gpu", "A100-80GB", "--model", f"{FIXTURES}/my_net.py:build",
                            "--input-shape", "3,32,32", "--num-classes", "10", "--batch-size", "32,64", "--precisions",
                            "fp32,tf32,amp-bf16,fp8-tensorwise", "--db", str(db), "--json", str(out))
    assert code == 0, err
    rows = json.loads(out.read_text())
    assert [(r["batch_size"], r["precision"]) for r in rows] == [(b, p) for b in (32, 64) for p in (
        "fp32", "tf32", "amp-bf16", "fp8-tensorwise")]
    assert rows[3]["status"] == "unsupported" and "compute capability >= 8.9" in rows[3]["reason"]
    assert all(math.isfinite(r["predicted_step_ms"]) for r in rows if r["status"] == "ok")
    assert "(no GPU ran it)" in stdout and "fp8-tensorwise: fp8 Tensor Cores need" in " ".join(stdout.split())
    stored = Store(db).predictions()
    assert len(stored) == 8 and {r["gpu"] for r in stored} == {"a100-80gb"}


def test_a_report_shows_predictions_beside_the_measurement_of_the_same_cell(tmp_path: Path) -> None:
    """A GPU row imported from another machine and a prediction of the same cell: the report and compare show both,
    with the prediction's error; the advisor's "why no speedup" quotes the predicted breakdown."""
    from ampbench.report import build_report
    from ampbench.report.predictions import attach, table

    measured = [{"workload": "bert", "precision": p, "batch_size": 8, "status": "ok", "device": "cuda:0",
                 "device_name": "NVIDIA A100-SXM4-80GB", "samples_per_s": s, "speedup_vs_fp32": s / 1000}
                for p, s in (("fp32", 1000.0), ("amp-bf16", 1040.0))]
    predicted = [{"workload": "bert", "precision": "amp-bf16", "batch_size": 8, "gpu": "a100-80gb", "status": "ok",
                  "predicted_samples_per_s": 1300.0, "predicted_bound": "launch",
                  "predicted_time_split": {"compute": 0.1, "memory": 0.1, "launch": 0.8}},
                 {"workload": "bert", "precision": "fp32", "batch_size": 8, "gpu": "a100-80gb", "status": "ok",
                  "predicted_samples_per_s": 1250.0, "predicted_bound": "launch",
                  "predicted_time_split": {"compute": 0.1, "memory": 0.1, "launch": 0.8}}]
    lines = {p["precision"]: p for p in table(predicted, measured)}
    assert lines["amp-bf16"]["measured_samples_per_s"] == 1040.0
    assert lines["amp-bf16"]["error"] == pytest.approx(1300 / 1040 - 1)
    assert table(predicted, [{**measured[1], "device_name": "NVIDIA H100 80GB HBM3"}])[0]["measured_samples_per_s"] is None
    for other_cell in ({"preset": "paper"}, {"compile": "on"}, {"memory_format": "channels_last"}, {"cuda_graphs": "on"},
                       {"strategy": "ddp", "world_size": 2}, {"batch_size": 16}):  # (the same cell or no match)
        assert table(predicted, [{**measured[1], **other_cell}])[0]["measured_samples_per_s"] is None, other_cell
    compiled = [{**p, "compile": "on", "cuda_graphs": "on"} for p in predicted]  # (predict --compile on --cuda-graphs on)
    assert table(compiled, [{**measured[1], "compile": "on", "cuda_graphs": "on"}])[0]["measured_samples_per_s"] == 1040.0
    assert table(compiled, [measured[1]])[0]["measured_samples_per_s"] is None
    fp32 = attach(measured, predicted)[0]
    assert fp32["predicted_why"].startswith("launch-bound (80% of the predicted step")
    from ampbench.report.advisor import _why_nothing_helps

    assert "predicted for fp32: launch-bound" in _why_nothing_helps(fp32, [])
    db = tmp_path / "r.db"
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "2",
                       "--warmup", "1", "--no-isolate", "--no-report", "--db", str(db))
    assert code == 0, err
    code, _, err = cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions",
                       "fp32,amp-fp16", "--db", str(db))
    assert code == 0, err
    for fmt in ("html", "md"):
        text = build_report(Store(db), fmt=fmt)[1]
        assert "Predicted on GPUs" in text and "t4" in text


@pytest.mark.parametrize("args, said", [
    (["--gpu", "zz9000"], "--gpu 'zz9000' is not known; use one of: m4000, p4, quadro-p4000"),
    (["--gpu", "a200"], "did you mean h200 or b200?"),
    (["--gpu", "t4,a200"], "--gpu 'a200' is not known"), (["--gpu", "a10g"], "--gpu 'a10g' has no published SM count"),
    (["--gpu", " , "], "names no GPU"),
    ([], "give --gpu NAME[,NAME...] (or all) or --gpu-spec FILE.json"),
    (["--gpu", "t4", "--workloads", "mnist"], "unknown workload 'mnist'"),
    (["--gpu", "t4", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),  # (run's parser: the same words)
    (["--gpu", "t4", "--batch-size", "8,x"], "--batch-size '8,x': expected integers, e.g. 64 or 64,128"),
    (["--gpu", "t4", "--precisions", "fp64"], "fp64"),
    (["--gpu", "t4", "--workloads", "bert", "--model", "x.py:f"], "give --workloads or --model, not both"),
    (["--gpu", "t4", "--host-us", "12"], "--host-us '12': expected F,B[,P[,D]] microseconds > 0"),
    (["--gpu", "t4", "--host-us", "12,-1"], "--host-us '12,-1': expected F,B[,P[,D]]"),
    (["--gpu", "t4", "--host-us", "a,b"], "ampbench hw --device cuda measures them"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], said: str, tmp_path: Path) -> None:
    code, _, err = cli("predict", *args, "--db", str(tmp_path / "r.db"))
    assert code == 2 and said in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists()  # (refused before the store is opened: a typo leaves no empty store)


def test_predict_optimizer_states_rows_refusals_and_pairing(tmp_path: Path) -> None:
    """Each precision gets a row per state asked for: priced where it applies (its optimizer bytes below the
    optimizer's as built, every other part of the split the same), refused with the reason where it does not (fp8
    states before compute capability 8.9, bf16-sr without bf16 weights); a state that is the mode's own is its
    default row. A measured 8bit row pairs with the 8bit prediction only."""
    from ampbench.precision.optimizer_state import missing
    from ampbench.report.predictions import table

    if missing():
        pytest.skip(missing())
    out = tmp_path / "p.json"
    code, stdout, err = cli("predict", "--gpu", "t4", "--workloads", "bert", "--preset", "tiny", "--precisions",
                            "fp32,pure-fp16", "--optimizer-state", "fp32,8bit,fp8,bf16-sr", "--db", str(tmp_path / "r.db"),
                            "--json", str(out))
    assert code == 0, err
    rows = {(r["precision"], r["optimizer_state"]): r for r in json.loads(out.read_text())}
    assert set(rows) == {(p, s) for p in ("fp32", "pure-fp16") for s in (None, "8bit", "fp8", "bf16-sr")} | {
        ("pure-fp16", "fp32")}
    for p in ("fp32", "pure-fp16"):
        base, eight = rows[(p, None)], rows[(p, "8bit")]
        assert eight["status"] == "ok" and eight["predicted_optimizer_bytes"] < base["predicted_optimizer_bytes"]
        for k in ("weights", "grads", "activation"):
            assert eight[f"predicted_{k}_bytes"] == base[f"predicted_{k}_bytes"]
        assert "compute capability >= 8.9" in rows[(p, "fp8")]["reason"]
        assert "it needs pure-bf16" in rows[(p, "bf16-sr")]["reason"]
    assert "fp32 states need fp32 weights" in rows[("pure-fp16", "fp32")]["reason"]
    assert "pure-fp16 8bit" in stdout
    measured = [{**{k: rows[("fp32", s)][k] for k in ("workload", "preset", "precision", "batch_size", "optimizer_state")},
                 "status": "ok", "device": "cuda:0", "device_name": "Tesla T4", "samples_per_s": 100.0} for s in ("8bit",)]
    lines = {(p["precision"], p["setting"]): p for p in table(list(rows.values()), measured)}
    batch = rows[("fp32", None)]["batch_size"]
    assert lines[("fp32", f"batch {batch}, eager, 8bit optimizer states")]["measured_samples_per_s"] == 100.0
    assert lines[("fp32", f"batch {batch}, eager")]["measured_samples_per_s"] is None


def test_bad_stores_and_optimizers_are_refused_before_anything_is_traced(tmp_path: Path) -> None:
    """--db a directory or a damaged file, and an SGD workload with --optimizer-state 8bit: one line, exit 2, at once
    (no tracing output, nothing stored); train refuses the latter before its progress bar."""
    (tmp_path / "dir.db").mkdir()
    (tmp_path / "bad.db").write_text("not sqlite")
    for db, said in ((tmp_path / "dir.db", "not a usable ampbench results store"),
                     (tmp_path / "bad.db", "not a usable ampbench results store")):
        code, out, err = cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny", "--db", str(db))
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1 and not out, err
    db = tmp_path / "r.db"
    code, out, err = cli("predict", "--gpu", "t4", "--workloads", "resnext", "--preset", "tiny", "--optimizer-state",
                         "8bit", "--db", str(db))
    assert code == 2 and "applies to torch.optim.Adam and AdamW" in err and "SGD" in err and not out, err
    assert Store(db).predictions() == []
    code, out, err = cli("train", "resnext", "--preset", "tiny", "--optimizer-state", "8bit")
    assert code == 2 and "applies to torch.optim.Adam and AdamW" in err and "epoch" not in out, (out, err)


def test_a_gpu_spec_with_a_fractional_sm_count_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "g.json"
    f.write_text(json.dumps({"name": "X", "tflops": {"fp32": 20}, "memory_gib": 24, "bandwidth_gbs": 900, "sms": 60.5,
                             "capability": "8.6"}))
    code, _, err = cli("predict", "--gpu-spec", str(f), "--db", str(tmp_path / "r.db"))
    assert code == 2 and "sms is a whole number" in err and len(err.strip().splitlines()) == 1


def test_a_model_that_reads_a_value_is_refused_in_one_line_naming_where(tmp_path: Path) -> None:
    model = tmp_path / "reads.py"
    model.write_text("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
                     "        super().__init__()\n        self.l = nn.Linear(8, 4)\n\n    def forward(self, x):\n"
                     "        if x.abs().max().item() > 100:\n            x = x / 100\n        return self.l(x)\n\n\n"
                     "def build():\n    return M()\n")
    code, out, err = cli("predict", "--gpu", "t4", "--model", f"{model}:build", "--input-shape", "8", "--num-classes",
                         "4", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "cannot be predicted: it reads a tensor's value" in err and "reads.py:11" in err


def test_a_routed_model_is_refused_in_one_line_naming_the_routing(tmp_path: Path) -> None:
    """A mixture of experts routes tokens with torch.nonzero (a boolean mask's indexing): predict printed torch's
    traceback ("The register_meta function for torch.nonzero() raises unimplemented")."""
    model = tmp_path / "moe.py"
    model.write_text("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
                     "        super().__init__()\n        self.gate = nn.Linear(8, 2)\n"
                     "        self.experts = nn.ModuleList(nn.Linear(8, 4) for _ in range(2))\n\n"
                     "    def forward(self, x):\n        top = self.gate(x).argmax(-1)\n"
                     "        out = x.new_zeros(x.shape[0], 4)\n        for i, e in enumerate(self.experts):\n"
                     "            out[top == i] = e(x[top == i])\n        return out\n\n\ndef build():\n"
                     "    return M()\n")
    code, out, err = cli("predict", "--gpu", "t4", "--model", f"{model}:build", "--input-shape", "8", "--num-classes",
                         "4", "--db", str(tmp_path / "r.db"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "cannot be predicted: its shapes depend on tensor values (torch.nonzero" in err and "moe.py:15" in err


@pytest.mark.parametrize("op, said", [
    (lambda x: torch.nonzero(x), "its shapes depend on tensor values (torch.nonzero"),
    (lambda x: x[x > 0], "its shapes depend on tensor values (torch.nonzero"),
    (lambda x: torch.unique(x), "it runs aten::_unique2, which has no meta kernel"),
    (lambda x: torch.masked_select(x, x > 0), "it runs aten::masked_select, which has no meta kernel"),
    (lambda x: torch.repeat_interleave(x.long()), "repeat_interleave by a tensor"),
    (lambda x: x.sum().item(), "it reads a tensor's value"),
])
def test_each_value_that_a_meta_tensor_lacks_is_named(op, said) -> None:
    from ampbench.predict.trace import _value_read

    with pytest.raises((RuntimeError, NotImplementedError)) as e:  # (torch's own error, on a meta tensor)
        op(torch.ones(8, device="meta"))
    assert said in (_value_read(e.value) or ""), str(e.value)


def test_a_batch_that_does_not_fit_is_oom_with_its_peak_and_the_largest_batch_that_fits() -> None:
    from ampbench.measure.gpus import lookup
    from ampbench.workloads import build_target
    from ampbench.workloads.data_options import DataOptions

    def build():
        return build_target("tabular-mlp", None, "tiny", DataOptions(), 0)

    gpu = lookup("t4")
    fits = predict_target("tabular-mlp", build, Question(("fp32",), 64), Machine(gpu))[0]
    big = fits["predicted_max_batch"] + 1
    row = predict_target("tabular-mlp", build, Question(("fp32",), big), Machine(gpu))[0]
    assert row["status"] == "oom" and "exceeds" in row["reason"] and f"{fits['predicted_max_batch']:,}" in row["reason"]
    assert row["predicted_peak_bytes"] > row["predicted_usable_bytes"] >= 0
    assert row["predicted_max_batch"] == fits["predicted_max_batch"] and "predicted_step_ms" not in row
    # how it trains that batch all the same: the fewest equal micro-batches whose accumulated step fits -- at least
    # as many as fit the largest batch alone (the earlier micro-batches' gradients are held), priced as that step
    n, micro = row["predicted_accumulated_micro_batches"], row["predicted_accumulated_batch"]
    fewest = next(n for n in range(2, big + 1) if big % n == 0 and big // n <= fits["predicted_max_batch"])
    assert n * micro == big and n >= fewest and row["predicted_accumulated_peak_bytes"] <= row["predicted_usable_bytes"]
    same = predict_target("tabular-mlp", build, Question(("fp32",), micro, grad_accum=n), Machine(gpu))[0]
    assert same["status"] == "ok" and same["grad_accum"] == n  # (the oracle: that step predicted as asked for)
    assert row["predicted_accumulated_step_ms"] == pytest.approx(same["predicted_step_ms"], rel=1e-9)
    assert row["predicted_accumulated_samples_per_s"] == pytest.approx(same["predicted_samples_per_s"], rel=1e-9)
    assert row["predicted_accumulated_peak_bytes"] == same["predicted_peak_bytes"]
    # beside a mode that fits, the console says what its "x fp32" is over: that accumulated step
    from rich.console import Console

    from ampbench.report.console import predicted_tables

    half = {**fits, "precision": "pure-bf16", "batch_size": big}
    console = Console(record=True, width=300)
    for part in predicted_tables([row, half], gpu, 300):
        console.print(part)
    said = " ".join(console.export_text().split())
    assert "fp32: predicted peak" in said and "x fp32 is over the step that trains this batch by gradient " \
                                                "accumulation" in said
    assert (f"it trains batch {big:,} a step as {n} x {micro:,} by gradient accumulation (ampbench train "
            f"--batch-size {micro} --grad-accum {n}): {same['predicted_step_ms']:,.1f} ms a step, "
            f"{same['predicted_samples_per_s']:,.0f} samples/s predicted") in said
    # a row predicted before accumulated steps were priced: the split within its largest batch, x fp32 as it was
    old = {k: v for k, v in row.items() if not k.startswith("predicted_accumulated")}
    console = Console(record=True, width=300)
    for part in predicted_tables([old, half], gpu, 300):
        console.print(part)
    said = " ".join(console.export_text().split())
    assert "x fp32 compares with its step at this batch all the same, which cannot run" in said
    assert (f"it trains batch {big:,} a step as {fewest} x {big // fewest:,} by gradient accumulation (ampbench "
            f"train --batch-size {big // fewest} --grad-accum {fewest})") in said
    console = Console(record=True, width=300)
    for part in predicted_tables([row], gpu, 300):  # (alone: nothing compares with it)
        console.print(part)
    assert "compares with" not in console.export_text()


@pytest.mark.slow
def test_a_billion_samples_are_answered_in_seconds_without_building_them(tmp_path: Path) -> None:
    """Nothing that grows with the batch is made on the host: a batch of 10^9 is traced on meta, priced and called
    oom with the largest batch that fits, in a process whose peak RSS stays under 1 GB."""
    import subprocess
    import sys
    import time

    # (the peak of this process's own memory, VmHWM: getrusage's ru_maxrss carries the forking parent's peak over
    # exec, so a pytest worker grown past 1 GB failed this test in a full run)
    script = ("import sys; from ampbench.cli import main\n"
              "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
              "hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
              "print('RSS', hwm.split()[1])\n")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", script, "predict", "--gpu", "a100-80gb", "--workloads", "tabular-mlp",
                        "--preset", "tiny", "--precisions", "fp32,amp-bf16", "--batch-size", "1000000000", "--db",
                        str(tmp_path / "r.db"), "--json", str(tmp_path / "p.json")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    rss_kib = int(r.stdout.rsplit("RSS", 1)[1])
    rows = json.loads((tmp_path / "p.json").read_text())
    assert {row["status"] for row in rows} == {"oom"} and all(row["predicted_max_batch"] > 0 for row in rows)
    assert rss_kib < 1024 * 1024 and time.perf_counter() - t0 < 60


def test_bound_agrees_with_the_notes_and_advice_never_recommends_the_mode_in_use() -> None:
    from ampbench.report.predictions import no_speedup_lines, why_no_speedup

    rows = predict_target("tabular-mlp", lambda: __import__("ampbench.workloads", fromlist=["x"]).build_target(
        "tabular-mlp", None, "tiny", __import__("ampbench.workloads.data_options", fromlist=["x"]).DataOptions(), 0),
        Question(("fp32", "amp-bf16", "pure-bf16")),
        Machine(__import__("ampbench.measure.gpus", fromlist=["x"]).lookup("a100-80gb")))
    for r in rows:
        assert (r["predicted_bound"] == "launch") == any(n.startswith("launch-bound") for n in r["notes"]), r
    memory = {"predicted_bound": "memory", "predicted_time_split": {"memory": 0.8}}
    assert "a half model (master-*/pure-*) halves" in why_no_speedup({**memory, "precision": "amp-bf16"})
    for mode in ("master-bf16", "pure-fp16"):
        assert "master-*/pure-*" not in why_no_speedup({**memory, "precision": mode})
    compute = {"predicted_bound": "compute", "predicted_time_split": {"compute": 0.8}}
    assert "half precision runs it" not in why_no_speedup({**compute, "precision": "amp-fp16"})
    lines = no_speedup_lines([{"status": "ok", "workload": "w", "preset": "p", "batch_size": 8, "precision": "pure-bf16",
                               "optimizer_state": "8bit", "predicted_speedup_vs_fp32": 0.9, **memory}])
    assert "pure-bf16 (8bit optimizer states)" in lines[0] and "master-*/pure-*" not in lines[0]


def test_a_launch_bound_line_per_execution_names_it_and_a_cure_it_does_not_run() -> None:
    """Four executions of one launch-bound mode read "no speedup predicted for amp-bf16, amp-bf16, amp-bf16, amp-bf16;
    ... try CUDA graphs or torch.compile" -- told to the rows that ran both. Now a line per execution, named, each
    told what it does not run yet."""
    from ampbench.report.predictions import no_speedup_lines

    launch = {"status": "ok", "workload": "w", "preset": "p", "batch_size": 8, "precision": "amp-bf16",
              "predicted_speedup_vs_fp32": 0.7, "predicted_bound": "launch", "predicted_time_split": {"launch": 0.95}}
    rows = [{**launch, "compile": c, "cuda_graphs": g} for c in ("off", "on") for g in ("off", "on")]
    lines = no_speedup_lines(rows)
    assert len(lines) == 4, lines
    eager, graphs, compiled, both = lines
    assert "for amp-bf16; " in eager and eager.endswith("try CUDA graphs or torch.compile (--cuda-graphs on, "
                                                       "--compile on), or a larger batch")
    assert "for amp-bf16 · cuda-graphs; " in graphs and graphs.endswith("try torch.compile (--compile on), or a larger "
                                                                       "batch")
    assert "for amp-bf16 · compile; " in compiled and compiled.endswith("try CUDA graphs (--cuda-graphs on), or a "
                                                                        "larger batch")
    assert "for amp-bf16 · compile+cuda-graphs; " in both and "--cuda-graphs on" not in both and "--compile on" not in both
    # the micro-batches a step are a setting of their own: batch 8 and batch 8 x 4 read "amp-bf16, amp-bf16" as one
    accumulated = no_speedup_lines([launch, {**launch, "grad_accum": 4}])
    assert [line.split(":")[0] for line in accumulated] == ["w (p, batch 8)", "w (p, batch 8 x 4 micro-batches a step)"]
    assert all("no speedup predicted for amp-bf16; " in line for line in accumulated)


def test_a_store_holding_only_predictions_shows_them_and_says_so(tmp_path: Path) -> None:
    """results, report and compare on a store predict wrote (nothing measured): the predictions, labelled predicted,
    and "only predictions" -- not "no results yet: run ampbench run first"."""
    db = tmp_path / "p.db"
    code, _, err = cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions",
                       "fp32,amp-fp16", "--db", str(db))
    assert code == 0, err
    for args in (["results"], ["report", "--format", "md", "--out", "-"], ["compare"]):
        code, out, err = cli(*args, "--db", str(db))
        assert code == 0 and "no results" not in err, (args, err)
        text = " ".join(out.split())
        assert "only predictions here" in text and "no GPU ran these" in text and "amp-fp16" in text, args
    code, out, err = cli("results", "--db", str(db), "--format", "json")
    assert code == 0 and {r["source"] for r in json.loads(out)} == {"predicted"}
    code, out, err = cli("report", "--db", str(db), "--out", str(tmp_path / "r.html"))
    assert code == 0 and "only predictions here" in (tmp_path / "r.html").read_text()


def test_host_us_prices_the_ops_at_your_hosts_time_and_says_so(tmp_path: Path) -> None:
    """--host-us F,B,P: each traced op issued at F (forward) or B (backward) microseconds, the fused optimizer at P per
    parameter; the rows and the console name the host. Oracle: a launch-bound step is the host's time, so the host
    share of a step predicted at twice a host's figures doubles, and the default host is the measured one."""
    out = tmp_path / "p.json"
    rows = {}
    for host in ("12,14,6", "24,28,12"):
        code, text, err = cli("predict", "--gpu", "h100-sxm", "--workloads", "tabular-mlp", "--preset", "small",
                              "--precisions", "fp32", "--host-us", host, "--db", str(tmp_path / "r.db"),
                              "--json", str(out))
        assert code == 0, err
        assert f"--host-us {host}" in text.replace("\n", " ")
        (rows[host],) = json.loads(out.read_text())
    slow, fast = rows["24,28,12"], rows["12,14,6"]
    assert slow["predicted_host_ms"] == pytest.approx(2 * fast["predicted_host_ms"])
    assert slow["predicted_gpu_ms"] == pytest.approx(fast["predicted_gpu_ms"])
    assert slow["predicted_bound"] == "launch" and slow["predicted_step_ms"] > 1.8 * fast["predicted_step_ms"]
    # (the workload's fused Adam is stepped directly: P times a GPU host's share per parameter, beyond its dispatch)
    assert fast["predicted_host"] == ("12/14 us per op, 3.45 us per parameter of the engine's direct fused step: "
                                      "--host-us 12,14,6")
    from ampbench.predict.cost import DIRECT_STEP_RATIO, MEASURED_HOST, Host

    assert Host.parse("12,14").fused_optimizer_us == round(MEASURED_HOST.fused_optimizer_us * 14 / 27.9, 1)
    assert Host.parse("12,14,6").direct_step_us == round(6 * DIRECT_STEP_RATIO, 2) == 3.45
    assert Host.parse("12,14,6,0.5").direct_step_us == 0.5


def test_predict_help_says_what_predict_does() -> None:
    """Its examples are ones predict takes (no Keras model: it traces PyTorch steps), its --host-us the form it
    parses (F,B[,P[,D]])."""
    code, out, err = cli("predict", "--help")
    flat = " ".join(out.split())
    assert code == 0 and "--keras-backend" not in flat and "F,B[,P[,D]]" in flat
    code, out, err = cli("predict", "--gpu", "h100-sxm", "--workloads", "tabular-mlp", "--host-us", "1,2,3,4,5")
    assert code == 2 and "F,B[,P[,D]]" in err


def test_an_execution_every_row_shares_is_in_the_title_not_on_each_row(tmp_path: Path, monkeypatch) -> None:
    """The GPU suite's ResNet-50 printed "fp32 · channels_last" on each of eight rows of every stacked part (16
    columns of 80): the execution the rows share is in the table's title, the rows name their precision."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("predict", "--workloads", "mnist-cnn", "--preset", "tiny", "--channels-last", "--gpu",
                         "h100-sxm", "--precisions", "fp32,amp-bf16", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert "mnist-cnn (tiny), batch 16, channels_last: predicted on h100-sxm" in out
    assert "· channels_last" not in out.split("± error")[0]
    rows = [line for line in out.splitlines() if line.startswith("│ fp32 ") or line.startswith("│ amp-bf16 ")]
    assert rows and all(line.split("│")[1].strip() in ("fp32", "amp-bf16") for line in rows)


def test_a_row_states_the_grouped_networks_misses_where_its_model_has_grouped_convolutions(tmp_path: Path) -> None:
    """resnext (32-group 3x3 convolutions at its tiny preset's 4 groups) on an A100: its rows' bands rest on DLE's
    ResNeXts and EfficientNets too (predicted 5-77 % too fast, error_bands.json ``grouped_steps``); mnist-cnn's, dense,
    do not."""
    out = tmp_path / "p.json"
    code, _, err = cli("predict", "--gpu", "a100-80gb", "--workloads", "resnext,mnist-cnn", "--preset", "tiny",
                       "--precisions", "tf32,amp-bf16", "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert code == 0, err
    rows = [r for r in json.loads(out.read_text()) if r["status"] == "ok"]
    assert {r["workload"] for r in rows} == {"resnext", "mnist-cnn"}
    for r in rows:
        said = "steps of networks with grouped or depthwise convolutions" in r["predicted_error_basis"]
        assert said == (r["workload"] == "resnext"), r
