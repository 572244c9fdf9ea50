"""Golden tests: what a run is, pinned across refactors of the harness.

For ~30 option sets, the run's identity (what ``--resume`` matches) and its cells in order with their keys (what
``--resume`` skips, what a stored row is) must stay exactly what they were when this file was written
(``golden/plans.json``, made by the code before the harness was layered); every bad option keeps its one line
and exit code (``golden/errors.json``); and a store written before the change still resumes
(``golden/store-before-layering.json``, an export of one tiny run). All in this process: fast, and each check
says which layer answered.

Regenerate only for a deliberate change of identity: ``python -m tests.bench.test_golden --write``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import cli

GOLDEN = Path(__file__).with_name("golden")
ROOT = Path(__file__).resolve().parents[2]
M = "tests/doc_fixtures/m.py"
RUN = ["run", "--dry-run", "--no-isolate"]

PLANS: dict[str, list[str]] = {
    "one-workload": ["--workloads", "mnist-cnn", "--precisions", "fp32,amp-bf16"],
    "aliases-and-order": ["--workloads", "tabular-mlp", "--precisions", "bf16,O1,fp32,O2,bf16-true"],
    "every-cpu-mode": ["--workloads", "bert", "--preset", "tiny"],
    "two-workloads-presets": ["--workloads", "mnist-cnn,bert", "--preset", "paper", "--precisions", "fp32,amp-fp16"],
    "batch-sizes": ["--workloads", "resnext", "--batch-size", "32,64", "--precisions", "fp32,master-bf16"],
    "measures": ["--workloads", "tabular-mlp", "--measure", "converge,throughput,inference", "--seeds", "2",
                 "--converge-steps", "50", "--inference-batch", "16", "--precisions", "fp32,amp-bf16"],
    "maxbatch": ["--workloads", "mnist-cnn", "--measure", "maxbatch", "--memory-budget", "2GiB", "--memory-margin", "0.1",
                 "--maxbatch-limit", "4096", "--precisions", "fp32,amp-fp16"],
    "repeats": ["--workloads", "bert", "--preset", "tiny", "--repeats", "3", "--precisions", "fp32,amp-bf16,pure-bf16"],
    "repeats-with-converge": ["--workloads", "mnist-cnn", "--repeats", "2", "--measure", "throughput,memory,converge",
                              "--precisions", "fp32,amp-bf16"],
    "single-mode-no-closing": ["--workloads", "unet", "--precisions", "amp-bf16"],
    "fp32-only": ["--workloads", "lstm-lm", "--precisions", "fp32"],
    "steps-warmup-seed": ["--workloads", "conv-dummy", "--steps", "7", "--warmup", "2", "--seed", "3",
                          "--precisions", "fp32,amp-bf16"],
    "executions": ["--workloads", "mnist-cnn", "--precisions", "fp32,amp-bf16", "--compile", "off,on",
                   "--memory-format", "contiguous,channels_last"],
    "compile-only": ["--workloads", "bert", "--preset", "tiny", "--compile", "on,max-autotune", "--precisions",
                     "fp32,master-bf16"],
    "memory-format-only": ["--workloads", "resnext", "--memory-format", "channels-last", "--precisions", "fp32"],
    "ddp-fsdp": ["--workloads", "bert", "--preset", "tiny", "--precisions", "fp32,amp-bf16", "--strategy", "ddp,fsdp",
                 "--nproc-per-node", "2"],
    "reduce-dtypes": ["--workloads", "bert", "--preset", "tiny", "--precisions", "amp-bf16", "--strategy", "ddp",
                      "--grad-reduce-dtype", "fp32,bf16", "--repeats", "2"],
    "fsdp-three": ["--workloads", "tabular-mlp", "--precisions", "master-bf16,fp32", "--strategy", "fsdp",
                   "--nproc-per-node", "3", "--measure", "throughput,memory,converge"],
    "two-machines": ["--workloads", "bert", "--preset", "tiny", "--precisions", "fp32", "--strategy", "ddp",
                     "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:29600"],
    "fp8-options": ["--workloads", "bert", "--preset", "tiny", "--precisions", "fp32,amp-bf16,fp8,fp8-rowwise",
                    "--fp8-filter", "dims", "--fp8-skip", "head,pooler"],
    "fp8-default": ["--workloads", "bert", "--preset", "tiny", "--precisions", "fp8-rowwise-gw-hp,fp32"],
    "loss-scale": ["--workloads", "mnist-cnn", "--precisions", "fp32,amp-fp16,master-fp16", "--loss-scale", "static:1024"],
    "workload-options": ["--workloads", "bert", "--preset", "tiny", "-o", "seq_len=32", "-o", "task=span",
                         "--precisions", "fp32"],
    "user-model": ["--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "2", "--precisions", "fp32,amp-bf16"],
    # Keras targets (pinned before the framework seam: a Keras cell's key holds its backend as keras_backend)
    "keras-beside-torch": ["--workloads", "conv-dummy,keras-conv-dummy", "--preset", "tiny", "--precisions",
                           "fp32,amp-fp16", "--repeats", "2"],
    "keras-model-backend": ["--model", "tests/doc_fixtures/my_keras.py:build", "--input-shape", "32,32,3", "--num-classes", "10",
                            "--keras-backend", "tensorflow", "--precisions", "fp32,mixed_bfloat16", "--measure",
                            "throughput,converge", "--seeds", "2"],
    "user-model-tokens": ["--model", f"{M}:encoder", "--input-shape", "16", "--vocab-size", "300", "--num-classes", "2",
                          "--preset", "tiny", "--precisions", "fp32,amp-bf16,master-bf16"],
    "user-model-regress": ["--model", f"{M}:reg", "--input-shape", "16,80", "--num-outputs", "3", "--precisions", "fp32"],
    "user-model-lm": ["--model", f"{M}:gpt", "--input-shape", "8", "--vocab-size", "50257", "--task", "lm",
                      "--preset", "tiny", "--precisions", "fp32,amp-bf16"],
    "user-batches-loss": ["--model", f"{M}:two_tower", "--batches", f"{M}:make_batch", "--loss", f"{M}:loss",
                          "--precisions", "fp32,amp-bf16", "--repeats", "2"],
    "data-dir": ["--workloads", "bert", "--preset", "tiny", "--data-dir", "tests/doc_fixtures/tweets", "--val-fraction",
                 "0.25", "--precisions", "fp32"],
    "user-data-dir": ["--model", f"{M}:encoder", "--input-shape", "16", "--vocab-size", "8000", "--data-dir",
                      "tests/doc_fixtures/tweets", "--preset", "tiny", "--precisions", "fp32,amp-bf16"],
    "hf-adapter": ["--workloads", "hf:gpt2", "--task", "lm", "-o", "n_layer=1", "-o", "n_embd=32", "-o", "n_head=2",
                   "--preset", "tiny", "--precisions", "fp32,amp-bf16"],
}


U = "tests/workloads/user_models.py"
P = "tests/bench/planted.py"
ERRORS: dict[str, list[str]] = {
    # run: targets, presets, modes, measures, sizes, numbers
    "run-unknown-workload": ["run", "--workloads", "mnist-cnnn"],
    "run-unknown-precision": ["run", "--workloads", "mnist-cnn", "--precisions", "fp33"],
    "run-bad-preset": ["run", "--preset", "huge"],
    "run-bad-measure": ["run", "--measure", "speed"],
    "run-empty-list": ["run", "--workloads", ","],
    "run-maxbatch-needs-budget": ["run", "--measure", "maxbatch", "--workloads", "mnist-cnn"],
    "run-bad-budget": ["run", "--memory-budget", "lots"],
    "run-steps-0": ["run", "--steps", "0"],
    "run-warmup-0": ["run", "--warmup", "0"],
    "run-repeats-0": ["run", "--repeats", "0"],
    "run-seeds-0": ["run", "--seeds", "0"],
    "run-converge-steps-0": ["run", "--converge-steps", "0"],
    "run-inference-batch-0": ["run", "--inference-batch", "0"],
    "run-maxbatch-limit-0": ["run", "--maxbatch-limit", "0"],
    "run-margin": ["run", "--memory-margin", "1.5"],
    "run-cell-timeout": ["run", "--cell-timeout", "0"],
    "run-batch-size-text": ["run", "--batch-size", "x"],
    "run-batch-size-0": ["run", "--batch-size", "0"],
    "run-device": ["run", "--device", "tpu"],
    "run-device-cuda": ["run", "--device", "cuda"],
    "run-resume-nothing": ["run", "--resume", "--workloads", "tabular-mlp"],
    "run-loss-scale": ["run", "--loss-scale", "sometimes"],
    "run-workloads-and-model": ["run", "--workloads", "mnist-cnn", "--model", "x.py:f"],
    "run-data-dir-two": ["run", "--workloads", "mnist-cnn,bert", "--data-dir", "."],
    "run-data-dir-missing": ["run", "--workloads", "mnist-cnn", "--data-dir", "/nonexistent"],
    "run-option": ["run", "--workloads", "mnist-cnn", "-o", "size=large"],
    "run-option-no-value": ["run", "--workloads", "bert", "-o", "task"],
    "run-data-option-for-registered": ["run", "--workloads", "mnist-cnn", "--vocab-size", "10"],
    "run-batches-without-model": ["run", "--workloads", "mnist-cnn", "--loss", f"{U}:l1_loss"],
    # run: axes, strategies, fp8
    "run-cuda-graphs-cpu": ["run", "--workloads", "mnist-cnn", "--cuda-graphs", "on"],
    "run-compile-value": ["run", "--workloads", "mnist-cnn", "--compile", "fast"],
    "run-memory-format-value": ["run", "--workloads", "mnist-cnn", "--memory-format", "nhwc"],
    "run-channels-last-vector": ["run", "--workloads", "tabular-mlp", "--memory-format", "channels_last", "--no-isolate"],
    "run-strategy-value": ["run", "--workloads", "bert", "--strategy", "horovod"],
    "run-nproc-0": ["run", "--workloads", "bert", "--strategy", "ddp", "--nproc-per-node", "0"],
    "run-nproc-without-strategy": ["run", "--workloads", "bert", "--nproc-per-node", "4"],  # (was dropped unsaid)
    "run-reduce-without-strategy": ["run", "--workloads", "bert", "--grad-reduce-dtype", "bf16"],
    "run-reduce-value": ["run", "--workloads", "bert", "--strategy", "ddp", "--grad-reduce-dtype", "fp8"],
    "run-nnodes-no-endpoint": ["run", "--workloads", "bert", "--strategy", "ddp", "--nnodes", "2"],
    "run-node-rank-alone": ["run", "--workloads", "bert", "--strategy", "ddp", "--node-rank", "1"],
    "run-nnodes-no-strategy": ["run", "--workloads", "bert", "--nnodes", "2", "--rdzv-endpoint", "h:1"],
    "run-nnodes-resume": ["run", "--workloads", "bert", "--strategy", "ddp", "--nnodes", "2", "--rdzv-endpoint",
                          "h:1", "--resume"],
    "run-nnodes-maxbatch": ["run", "--workloads", "bert", "--strategy", "ddp", "--nnodes", "2", "--rdzv-endpoint",
                            "h:1", "--measure", "maxbatch", "--memory-budget", "1GiB"],
    "run-fp8-options-without-fp8": ["run", "--workloads", "mnist-cnn", "--precisions", "amp-bf16", "--fp8-skip", "fc"],
    "run-fp8-filter-value": ["run", "--workloads", "bert", "--precisions", "fp8", "--fp8-filter", "all"],
    # run: user models
    "run-model-missing-file": ["run", "--model", "nofile.py:f"],
    "run-model-wrong-output": ["run", "--model", f"{U}:mlp", "--input-shape", "20", "--num-classes", "4", "--no-isolate"],
    "run-model-wrong-shape": ["run", "--model", f"{U}:mlp", "--input-shape", "21", "--num-classes", "3", "--no-isolate"],
    "run-model-no-classes": ["run", "--model", f"{U}:mlp", "--input-shape", "20", "--no-isolate"],
    "run-model-lm-no-vocab": ["run", "--model", f"{U}:mlp", "--input-shape", "20", "--task", "lm"],
    "run-model-task": ["run", "--model", f"{U}:mlp", "--input-shape", "20", "--task", "rank"],
    "run-model-classes-and-outputs": ["run", "--model", f"{U}:mlp", "--input-shape", "20", "--num-classes", "3",
                                      "--num-outputs", "1"],
    "run-model-batches-missing": ["run", "--model", f"{U}:two_inputs", "--batches", f"{U}:nope", "--no-isolate"],
    "run-model-batches-and-shape": ["run", "--model", f"{U}:two_inputs", "--batches", f"{U}:make_batch", "--input-shape",
                                    "8", "--no-isolate"],
    "run-model-planted-shape": ["run", "--model", f"{P}:ok", "--input-shape", "1,28,28", "--num-classes", "5",
                                "--no-isolate"],
    "run-model-bad-shape-text": ["run", "--model", f"{U}:mlp", "--input-shape", "1,x,28", "--num-classes", "10"],
    # train
    "train-no-target": ["train"],
    "train-unknown-precision": ["train", "mnist-cnn", "--precision", "fp9"],
    "train-tf32-cpu": ["train", "mnist-cnn", "--precision", "tf32", "--preset", "tiny"],
    "train-unknown-workload": ["train", "mnist-cnm"],
    "train-preset": ["train", "mnist-cnn", "--preset", "huge"],
    "train-data-dir": ["train", "mnist-cnn", "--data-dir", "/nonexistent"],
    "train-resume-no-checkpoint": ["train", "mnist-cnn", "--resume"],
    "train-epochs-0": ["train", "mnist-cnn", "--epochs", "0"],
    "train-option": ["train", "bert", "-o", "task"],
    "train-model-not-callable": ["train", "--model", "no_such_pkg.mod:f"],
    "train-strategy-endpoint": ["train", "tabular-mlp", "--preset", "tiny", "--strategy", "ddp", "--nnodes", "2"],
    "train-strategy-compression": ["train", "tabular-mlp", "--preset", "tiny", "--strategy", "ddp", "--precision",
                                   "master-bf16", "--grad-reduce-dtype", "fp16"],
    "train-reduce-without-strategy": ["train", "tabular-mlp", "--grad-reduce-dtype", "bf16"],
    "train-nproc-without-strategy": ["train", "tabular-mlp", "--nproc-per-node", "0"],  # (was dropped unsaid)
    "train-compile-value": ["train", "tabular-mlp", "--compile", "fast"],
    "train-checkpoint-is-file": ["train", "tabular-mlp", "--checkpoint", "README.md"],
    # diagnose
    "diagnose-unknown": ["diagnose", "nosuch"],
    "diagnose-check": ["diagnose", "mnist-cnn", "--checks", "nan"],
    "diagnose-tf32": ["diagnose", "mnist-cnn", "-p", "tf32"],
    "diagnose-precision": ["diagnose", "mnist-cnn", "-p", "fp33"],
    "diagnose-steps": ["diagnose", "mnist-cnn", "--steps", "0"],
    "diagnose-no-target": ["diagnose"],
    "diagnose-fp8-check-bf16": ["diagnose", "mnist-cnn", "-p", "amp-bf16", "--checks", "fp8"],
    # the other commands
    "list-what": ["list", "everything"],
    "hw-sizes": ["hw", "--sizes", "0"],
    "hw-sizes-text": ["hw", "--sizes", "a,b"],
    "report-format": ["report", "--format", "pdf"],
    "report-run-and-latest": ["report", "--run", "x", "--latest"],
    "results-format": ["results", "--format", "xml"],
    "results-run-and-all": ["results", "--run", "x", "--all"],
    "import-missing": ["import", "missing.json"],
    "unknown-option": ["run", "--fast"],
    "unknown-command": ["bench"],
}


def error(args: list[str], tmp: Path) -> dict[str, object]:
    code, _, err = cli(*args, *(["--db", str(tmp / "r.db")] if args[0] in DB_COMMANDS else []))
    return {"args": args, "code": code, "stderr": err.replace(str(tmp), "TMP")}


DB_COMMANDS = ("run", "diagnose", "hw", "report", "results", "import")


@pytest.mark.parametrize("name", list(ERRORS))
def test_bad_input_says_the_same_one_line_and_exit_code(name: str, tmp_path: Path, at_root: None) -> None:
    golden = json.loads((GOLDEN / "errors.json").read_text())[name]
    from ampbench.store import Store

    Store(tmp_path / "r.db").close()  # (commands that only read need a store to say what else is wrong)
    now = error(ERRORS[name], tmp_path)
    assert (now["code"], now["stderr"]) == (golden["code"], golden["stderr"])
    assert now["code"] == 2 and str(now["stderr"]).count("\n") == 1 and "Traceback" not in str(now["stderr"])


STORED_RUNS = [  # the runs of golden/store-before-layering.json, as they were started (relative to the repository)
    ["run", "--model", f"{M}:mlp", "--input-shape", "20", "--num-classes", "2", "--preset", "tiny", "--precisions",
     "fp32,amp-bf16", "--repeats", "2", "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report"],
    ["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16", "--measure",
     "throughput,converge", "--seeds", "1", "--converge-steps", "3", "--steps", "2", "--warmup", "1", "--no-isolate",
     "--no-report"],
]


def test_a_store_written_before_the_change_still_resumes(tmp_path: Path, at_root: None) -> None:
    """Its runs are found by identity and every one of their cells is already done: --resume runs nothing."""
    from ampbench.store import Store

    db = str(tmp_path / "r.db")
    saved = json.loads((GOLDEN / "store-before-layering.json").read_text())  # the raw stored runs and rows
    store = Store(db)
    store.import_runs(saved["runs"])
    for row in saved["rows"]:
        store.add(row)
    store.close()
    before = len(Store(db).rows())
    for args in STORED_RUNS:
        code, out, err = cli(*args, "--resume", "--db", db)
        assert code == 0, err
        assert "done before" in out and "running" not in out
    assert len(Store(db).rows()) == before == 7  # (2 modes x 2 repeats; 2 modes + the closing fp32)


def plan(args: list[str], tmp: Path) -> dict[str, object]:
    out = tmp / "plan.json"
    code, _, err = cli(*RUN, *args, "--db", str(tmp / "r.db"), "--json", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    return {"args": args, "identity": data["identity"], "keys": [c["key"] for c in data["cells"]],
            "cells": [" ".join(str(c[k]) for k in ("workload", "model", "preset", "precision") if c.get(k))
                      for c in data["cells"]]}


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # (keys hold --model and --data-dir as given: relative to the repository)


@pytest.mark.parametrize("name", list(PLANS))
def test_cell_keys_and_run_identity_are_what_they_were(name: str, tmp_path: Path, at_root: None) -> None:
    golden = json.loads((GOLDEN / "plans.json").read_text())[name]
    now = plan(PLANS[name], tmp_path)
    assert now["identity"] == golden["identity"]
    assert now["cells"] == golden["cells"]  # the same cells in the same order ...
    assert now["keys"] == golden["keys"]  # ... with the same keys


def write() -> None:
    import os
    import tempfile

    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        plans = {name: plan(args, Path(tmp)) for name, args in PLANS.items()}
    GOLDEN.mkdir(exist_ok=True)
    (GOLDEN / "plans.json").write_text(json.dumps(plans, indent=1) + "\n")
    print(f"wrote {len(plans)} plans to {GOLDEN / 'plans.json'}")
    from ampbench.store import Store

    errors = {}
    for name, args in ERRORS.items():
        with tempfile.TemporaryDirectory() as tmp:
            Store(Path(tmp) / "r.db").close()
            errors[name] = error(args, Path(tmp))
    (GOLDEN / "errors.json").write_text(json.dumps(errors, indent=1) + "\n")
    print(f"wrote {len(errors)} error lines to {GOLDEN / 'errors.json'}")
    if "--store" in sys.argv:  # (the store written before a change: only when that change is about to be made)
        with tempfile.TemporaryDirectory() as tmp:
            db = str(Path(tmp) / "r.db")
            for args in STORED_RUNS:
                code, _, err = cli(*args, "--db", db)
                assert code == 0, err
            from ampbench.store import Store

            store = Store(db)  # raw, as stored (an export merges repeats into one row per cell)
            raw = {"runs": [r.to_dict() for r in store.runs()], "rows": store.rows()}
            (GOLDEN / "store-before-layering.json").write_text(json.dumps(raw, indent=1) + "\n")
        print(f"wrote {GOLDEN / 'store-before-layering.json'}")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
