"""TensorBoard files read back with tensorboard's own EventAccumulator: the tags each command writes hold the
stored values (the row, the training result, the diagnosis), and bad input is one line, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import cli

pytest.importorskip("tensorboard")


def _read(path: Path) -> object:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(path), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    ea.Reload()
    return ea


def _scalars(ea: object, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in ea.Scalars(tag)]  # type: ignore[attr-defined]


def test_run_writes_one_tensorboard_run_per_cell_with_the_stored_values(tmp_path: Path) -> None:
    from ampbench.store import Store
    from ampbench.store.derive import derive

    db, board = tmp_path / "r.db", tmp_path / "tb"
    code, out, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16",
                         "--measure", "throughput,converge", "--steps", "3", "--warmup", "1", "--seeds", "2",
                         "--converge-steps", "6", "--no-isolate", "--no-report", "--db", str(db), "--tensorboard",
                         str(board))
    assert code == 0, err
    store = Store(db, create=False)
    run_id = store.runs()[-1].run_id
    raw = {(r["precision"], bool(r.get("closing_baseline"))): r for r in store.rows(run_id)}  # (as each cell stored it)
    rows = derive(store.rows(run_id), store.hw())
    group = board / run_id / "tabular-mlp_tiny"
    assert sorted(p.name for p in group.iterdir()) == ["amp-bf16_b16", "fp32_b16", "fp32_b16_repeat_1_closing"]
    for row in rows:
        if row.get("closing_baseline"):
            continue
        ea = _read(group / f"{row['precision']}_b16")
        conv = row["converge"]
        for seed, losses in zip(conv["seeds"], conv["losses"]):
            got = _scalars(ea, f"converge/loss/seed_{seed}")
            assert [s for s, _ in got] == conv["curve_steps"]
            assert [v for _, v in got] == pytest.approx(losses, rel=1e-6)  # (TensorBoard stores float32)
        mean = [sum(c[i] for c in conv["losses"]) / 2 for i in range(6)]
        assert [v for _, v in _scalars(ea, "converge/loss")] == pytest.approx(mean, rel=1e-6)
        stored = raw[(row["precision"], False)]
        assert _scalars(ea, "throughput/samples_per_s") == [(0, pytest.approx(stored["samples_per_s"], rel=1e-6))]
        if row["precision"] != "fp32":
            assert _scalars(ea, "ratio/speedup_vs_fp32") == [(0, pytest.approx(row["speedup_vs_fp32"], rel=1e-6))]
        # MFU as read through the store (null where hw measured a GEMM above the peak: not logged then)
        assert _scalars(ea, "throughput/mfu") == ([(0, pytest.approx(row["mfu"], rel=1e-6))] if row["mfu"] else [])
    assert "TensorBoard: 3 cells written" in out


def test_the_derived_ratios_and_mfu_go_to_each_cells_run(tmp_path: Path) -> None:
    """The max-batch ratio was looked up as "max_batch_vs_fp32", a key no row has: it was never written."""
    from ampbench.tensorboard import RunLogger

    row = {"run_id": "r", "workload": "w", "preset": "tiny", "precision": "amp-bf16", "batch_size": 8,
           "speedup_vs_fp32": 1.5, "memory_saving_vs_fp32": 0.4, "max_batch_ratio_vs_fp32": 1.8, "mfu": None}
    board = RunLogger(tmp_path)
    board.ratios([row, {**row, "precision": "pure-bf16", "mfu": 0.3}])
    ea = _read(tmp_path / "r" / "w_tiny" / "amp-bf16_b8")
    assert _scalars(ea, "ratio/max_batch_ratio_vs_fp32") == [(0, pytest.approx(1.8))]
    assert ea.Tags()["scalars"] and "throughput/mfu" not in ea.Tags()["scalars"]  # type: ignore[attr-defined]
    assert _scalars(_read(tmp_path / "r" / "w_tiny" / "pure-bf16_b8"), "throughput/mfu") == [(0, pytest.approx(0.3))]


def test_train_logs_each_step_and_epoch(tmp_path: Path) -> None:
    import json

    board = tmp_path / "tb"
    code, out, err = cli("train", "tabular-mlp", "--preset", "tiny", "--epochs", "2", "--precision", "amp-fp16",
                         "--device", "cpu", "--tensorboard", str(board), "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    result = json.loads((tmp_path / "r.json").read_text())
    ea = _read(board)
    losses = _scalars(ea, "train/loss")
    assert [s for s, _ in losses] == list(range(1, result["steps"] + 1))
    scales = _scalars(ea, "train/loss_scale")
    assert scales[-1][1] == result["loss_scale"]
    found = [v for _, v in _scalars(ea, "train/found_inf")]
    assert sum(found) == result["skipped_steps"] == _scalars(ea, "train/skipped_steps")[-1][1]
    assert [s for s, _ in _scalars(ea, "epoch/loss")] == [1, 2]
    assert _scalars(ea, "epoch/loss")[-1][1] == pytest.approx(result["history"][-1]["loss"], rel=1e-6)
    assert {"epoch/test_loss", "epoch/samples_per_s", "epoch/lr", "epoch/memory_rss_bytes"} <= set(ea.Tags()["scalars"])


def test_train_logs_the_gradient_norm_it_clips_once_a_step(tmp_path: Path) -> None:
    """--max-grad-norm with --grad-accum 2: one norm per optimizer step (not per micro-batch), the norm before the clip."""
    import json

    board = tmp_path / "tb"
    code, out, err = cli("train", "tabular-mlp", "--preset", "tiny", "--epochs", "1", "--precision", "amp-bf16",
                         "--device", "cpu", "--grad-accum", "2", "--batch-size", "8", "--max-grad-norm", "1e-6",
                         "--tensorboard", str(board), "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    result = json.loads((tmp_path / "r.json").read_text())
    norms = _scalars(_read(board), "train/grad_norm")
    assert [s for s, _ in norms] == list(range(1, result["steps"] + 1)) and result["grad_accum"] == 2
    assert all(v > 1e-6 for _, v in norms)  # (the norm before clipping: every step's clip acted)


def test_diagnose_writes_the_gradient_and_activation_histograms(tmp_path: Path) -> None:
    import json

    board = tmp_path / "tb"
    code, out, err = cli("diagnose", "mnist-cnn", "--preset", "tiny", "--checks", "gradients,activations", "--db",
                         str(tmp_path / "d.db"), "--json", str(tmp_path / "d.json"), "--tensorboard", str(board))
    assert code == 0, err
    d = json.loads((tmp_path / "d.json").read_text())["details"]
    (run,) = list(board.iterdir())
    ea = _read(run)
    h = ea.Histograms("gradients/all_params")[0].histogram_value  # type: ignore[attr-defined]
    g = d["gradients"]
    counts = g["param_histogram"]
    assert h.num == sum(counts) and list(h.bucket) == counts  # bucket k: log2 |g| in [lo + k, lo + k + 1)
    assert list(h.bucket_limit) == [b + 1 for b in g["bins_log2"]]
    assert _scalars(ea, "zeros/gradients/all_params") == [(0, g["param_zeros"])]
    # zeros/* is a count on every tag (was: a fraction on per-layer tags): every value is a zero or in a bin
    for item, group in [*((p, "params") for p in g["params"]), *((x, "activation_grads") for x in g["layers"])]:
        assert item["zeros"] + sum(item["histogram"]) == item["numel"]
        assert _scalars(ea, f"zeros/gradients/{group}/{item['name']}") == [(0, item["zeros"])]
    layer = d["activations"][0]
    a = ea.Histograms(f"activations/{layer['name']}")[0].histogram_value  # type: ignore[attr-defined]
    assert list(a.bucket) == layer["histogram"]


def test_bad_directory_and_missing_extra_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    afile = tmp_path / "f"
    afile.write_text("x")
    for args in (["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--db", str(tmp_path / "r.db")],
                 ["train", "tabular-mlp", "--preset", "tiny"], ["diagnose", "mnist-cnn", "--preset", "tiny"]):
        for bad, says in ((afile, "is a file"), (afile / "sub", "cannot write there")):
            code, out, err = cli(*args, "--tensorboard", str(bad))
            assert code == 2 and err.count("\n") == 1 and says in err, (args, err)
    assert not (tmp_path / "r.db").exists()  # refused before any work
    code, _, err = cli("diagnose", "mnist-cnn", "--checks", "tensorcore", "--tensorboard", str(tmp_path / "tb"))
    assert code == 2 and "--checks gradients,activations" in err
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    code, _, err = cli("train", "tabular-mlp", "--preset", "tiny", "--tensorboard", str(tmp_path / "tb"))
    assert code == 2 and "ampbench[tensorboard]" in err and err.count("\n") == 1




def test_writing_event_files_imports_no_tensorflow(tmp_path: Path) -> None:
    """torch's SummaryWriter imports TensorFlow when it is installed (seconds and ~480 MB in a PyTorch run): ours does
    not, and what it writes reads back with tensorboard's own reader."""
    import subprocess

    code = ("import sys; from ampbench.tensorboard import RunLogger, TrainLogger, write_diagnosis; "
            f"t = TrainLogger({str(tmp_path / 't')!r}); t.step(1, {{'loss': 2.5}}); t.epoch(0, {{'loss': 2.0}}); "
            "t.close(); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    ea = _read(tmp_path / "t")
    assert _scalars(ea, "train/loss") == [(1, 2.5)] and _scalars(ea, "epoch/loss") == [(0, 2.0)]
