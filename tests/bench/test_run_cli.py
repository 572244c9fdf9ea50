"""`ampbench run` / results / export / import / hw from the command line, as a user runs them."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ampbench.store import ROW_KEYS, Store
from tests.conftest import in_process

PLANTED = str(Path(__file__).with_name("planted.py"))
REQUIRED = ("workload", "preset", "precision", "device", "device_name", "batch_size", "status", "reason",
            "samples_per_s", "step_ms_p50", "step_ms_p90", "peak_allocated_bytes", "peak_reserved_bytes",
            "skipped_steps", "final_loss", "metric", "speedup_vs_fp32", "env")


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "ampbench", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_must_show_run_writes_rows_with_every_key(tmp_path: Path) -> None:
    out, db = tmp_path / "out.json", tmp_path / "r.db"
    r = cli("run", "--workloads", "mnist-cnn", "--precisions", "fp32,amp-bf16", "--preset", "tiny", "--steps", "20",
            "--json", str(out), "--db", str(db))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [(row["precision"], row["status"]) for row in rows] == [("fp32", "ok"), ("amp-bf16", "ok")]
    for row in rows:
        assert set(REQUIRED) <= set(row) and set(ROW_KEYS) == set(row)
        assert row["device"] == "cpu" and row["batch_size"] == 16 and row["steps"] == 20
        assert row["samples_per_s"] > 0 and row["step_ms_p50"] <= row["step_ms_p90"]
        assert row["env"]["torch"] and row["env"]["hostname"]
    assert rows[0]["speedup_vs_fp32"] == 1.0 and rows[1]["speedup_vs_fp32"] > 0
    assert rows[1]["math_mode"] == "bf16" and rows[0]["math_mode"] == "fp32"
    assert "mnist-cnn (tiny)" in r.stdout and "speedup" in r.stdout
    assert "fp32 [closing baseline]" in r.stdout
    assert re.search(r": 2 ok, 0 not ok in \d+ s; stored in", r.stdout)  # (no estimate in the tests: no "expected")
    assert rows[0]["baseline_drift"] is not None and rows[1]["speedup_vs_fp32_noise"] >= rows[0]["baseline_drift"]
    # the store has the rows (fp32's closing measurement apart); results prints them merged in every format
    assert len(Store(db).rows()) == 3
    j = cli("results", "--db", str(db), "--format", "json")
    assert [x["precision"] for x in json.loads(j.stdout)] == ["fp32", "amp-bf16"]
    c = cli("results", "--db", str(db), "--format", "csv")
    assert c.stdout.splitlines()[0].startswith("run_id,cell_key,workload") and len(c.stdout.splitlines()) == 3
    t = cli("results", "--db", str(db), "--precisions", "bf16-mixed")
    assert "│ amp-bf16" in t.stdout and "│ fp32 " not in t.stdout
    assert re.search(r"│ amp-bf16 .*│ *\d\.\d\dx", t.stdout)  # speedup kept (fp32 filtered out of the view, not the maths)
    # export -> import into another store (another GPU's results end up in one place)
    assert cli("export", "--db", str(db), "--out", str(tmp_path / "x.json")).returncode == 0
    other = tmp_path / "other.db"
    imp = cli("import", str(tmp_path / "x.json"), str(out), "--db", str(other))
    assert imp.returncode == 0 and "1 new run, 2 new rows" in imp.stdout and "0 new runs, 0 new rows" in imp.stdout
    assert len(Store(other).rows()) == 2


def test_repeats_are_stored_apart_read_merged_and_resumable(tmp_path: Path) -> None:
    out, db = tmp_path / "out.json", tmp_path / "r.db"
    args = ("run", "--workloads", "tabular-mlp", "--precisions", "fp32,amp-bf16", "--preset", "tiny", "--steps", "8",
            "--repeats", "2", "--no-isolate", "--no-report", "--db", str(db))
    r = cli(*args, "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "amp-bf16 [repeat 2/2]" in r.stdout  # shown as text, not swallowed as rich markup
    assert len(Store(db).rows()) == 4
    rows = json.loads(out.read_text())["rows"]
    assert [row["precision"] for row in rows] == ["fp32", "amp-bf16"]
    for row in rows:
        assert len(row["samples_per_s_repeats"]) == 2 and row["samples_per_s"] in row["samples_per_s_repeats"]
        assert row["samples_per_s_noise"] is not None
    lo, hi = rows[1]["speedup_vs_fp32_range"]
    assert lo <= hi and rows[0]["speedup_vs_fp32_range"] is None
    again = cli(*args, "--resume")
    assert again.returncode == 0 and again.stdout.count("done before") == 4 and len(Store(db).rows()) == 4


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as c:
            return int(c.execute("SELECT count(*) FROM results").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_kill_9_keeps_finished_cells_and_resume_runs_the_rest(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    args = ["run", "--model", f"{PLANTED}:ok", "--input-shape", "3,4,4", "--num-classes", "5", "--preset", "tiny",
            "--precisions", "fp32,amp-bf16,pure-bf16", "--batch-size", "4", "--steps", "60",
            "--warmup", "1", "--db", str(db)]
    proc = subprocess.Popen([sys.executable, "-m", "ampbench", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while _count(db) < 1 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = Store(db).rows()
    assert 1 <= len(kept) < 4, "the run should have been killed in the middle"
    assert all(r["status"] == "ok" for r in kept)
    assert Store(db).latest_run().finished_at is None
    r = cli(*args, "--resume")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("done before") == len(kept)
    rows = Store(db).rows()
    assert sorted(x["precision"] for x in rows) == ["amp-bf16", "fp32", "fp32", "pure-bf16"]  # + closing
    assert {x["cell_key"]: x["created_at"] for x in kept}.items() <= {x["cell_key"]: x["created_at"] for x in rows}.items()
    assert len(Store(db).runs()) == 1 and Store(db).latest_run().finished_at is not None
    # an option changed by mistake finds nothing to resume: the refusal names what differs from the latest run
    other = [a if a != "fp32,amp-bf16,pure-bf16" else "fp32,amp-bf16" for a in args]
    r = cli(*other, "--resume")
    run_id = Store(db).latest_run().run_id
    assert r.returncode == 2 and r.stderr.strip().endswith(
        f"; the latest run, {run_id}, had precisions fp32, amp-bf16, pure-bf16 (these: fp32, amp-bf16)"), r.stderr


@pytest.mark.parametrize("args, expect", [
    (["--workloads", "mnist-cnnn"], "unknown workload 'mnist-cnnn'. Did you mean 'mnist-cnn'?"),
    (["--precisions", "fp33"], "fp33"),
    (["--preset", "huge"], "--preset 'huge': choose one of tiny, small, paper"),
    (["--measure", "speed"], "--measure speed: unknown measurement"),
    (["--measure", "maxbatch", "--workloads", "mnist-cnn"], "maxbatch on CPU needs --memory-budget"),
    (["--memory-budget", "lots"], "--memory-budget 'lots': expected a size like 2GiB"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--batch-size", "x"], "--batch-size 'x': expected integers"),
    (["--device", "tpu"], "--device 'tpu': expected cpu, cuda or cuda:N"),
    (["--device", "cuda"], "CUDA is not available"),
    (["--resume", "--workloads", "tabular-mlp"], "--resume: no earlier run"),
    (["--model", "nofile.py:f"], "nofile.py"),
    (["--model", f"{PLANTED}:ok", "--input-shape", "1,28,28", "--num-classes", "5"],
     "forward on a batch of shape (2, 1,28,28) failed"),
    (["--workloads", "mnist-cnn", "--model", "x.py:f"], "give --workloads or --model, not both"),
    (["--workloads", "mnist-cnn,bert", "--data-dir", "."], "--data-dir applies to one workload"),
    (["--workloads", "mnist-cnn", "-o", "size=large"], "workload 'mnist-cnn' has no option size"),
    # an option's value too, before any cell (it was an error row of a started run, exit 1)
    (["--workloads", "bert", "--preset", "tiny", "-o", "size=huge"], "bert size 'huge': choose one of tiny, small"),
    (["--loss-scale", "sometimes"], "--loss-scale 'sometimes': not valid"),
    (["--model", f"{PLANTED}:bf16", "--input-shape", "3,4,4", "--num-classes", "5"],
     "2 of the model's 2 floating-point parameters are bfloat16; build it in float32"),
    # what a training step needs of the model, before any cell (each cell failed at its first step, exit 1)
    (["--model", f"{PLANTED}:frozen", "--input-shape", "3,4,4", "--num-classes", "5", "--preset", "tiny",
      "--precisions", "fp32", "--measure", "inference"], "the model has no trainable parameter"),
    (["--model", f"{PLANTED}:sparse_bag", "--input-shape", "8", "--vocab-size", "100", "--num-classes", "2",
      "--preset", "tiny", "--precisions", "fp32"], "EmbeddingBag 'bag' has sparse=True (sparse gradients), which Adam"),
])
def test_bad_run_options_are_one_line_exit_2(tmp_path: Path, args: list[str], expect: str) -> None:
    r = in_process("run", "--db", str(tmp_path / "r.db"), *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert expect in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    if "--resume" not in args:  # (refused before the store: nothing stored, no run started)
        assert not (tmp_path / "r.db").exists() or not Store(tmp_path / "r.db").runs()


@pytest.mark.parametrize("args, expect", [
    (["results", "--format", "xml"], "--format 'xml': choose table, json or csv"),
    (["results"], "no results in"),
    (["results", "--run", "abc"], "no run 'abc'"),
    (["import", "missing.json"], "import: no file missing.json"),
    (["hw", "--sizes", "0"], "--sizes must be between 1 and 65536"),
])
def test_bad_store_commands_exit_2(tmp_path: Path, args: list[str], expect: str) -> None:
    from ampbench.store import Store
    from tests.conftest import cli as in_process

    Store(tmp_path / "r.db").close()  # an empty store (a missing one is another error: tests/store)
    code, _, err = in_process(*args, "--db", str(tmp_path / "r.db"))
    assert code == 2 and expect in err and len(err.strip().splitlines()) == 1


def test_hw_on_cpu_says_what_half_precision_can_do(tmp_path: Path) -> None:
    r = cli("hw", "--sizes", "64,128", "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "hw.json"))
    assert r.returncode == 0, r.stderr
    for word in ("half-precision hardware", "avx512_bf16", "TF32 in force", "verdict", "GEMM micro-benchmark", "tf32"):
        assert word in r.stdout
    probe = json.loads((tmp_path / "hw.json").read_text())
    modes = {g["math_mode"] for g in probe["gemm"]}
    # (every mode at both sizes, but a CPU's reference fp8 kernel -- per its probe -- at the first only, said so)
    skipped = [n for n in probe.get("notes") or [] if n.startswith("fp8 GEMM not run at n=128: ")]
    assert probe["precisions"]["tf32"]["ok"] is False and len(probe["gemm"]) == 2 * len(modes) - len(skipped)
    assert {"fp32", "bf16", "fp16"} <= modes <= {"fp32", "bf16", "fp16", "fp8"}
    assert len(Store(tmp_path / "r.db").hw()) == 1
    host = probe["host_ops"]  # (the host's time per op: on CPU tensors, the dispatch alone -- said so)
    assert host["device"] == "cpu" and host["ops"]["forward"] == 2 * 24 + 2 and host["forward_us_per_op"] > 0
    assert "host time per op" in r.stdout and "the dispatch alone" in r.stdout


def _tiny_run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("run", "--model", f"{PLANTED}:ok", "--input-shape", "3,4,4", "--num-classes", "5", "--preset", "tiny",
               "--precisions", "fp32", "--steps", "2", "--warmup", "1", "--no-isolate", "--db", str(tmp_path / "r.db"),
               *extra)


@pytest.mark.parametrize("option", ["--json", "--report-path"])
def test_outputs_are_checked_before_the_run(tmp_path: Path, option: str) -> None:
    r = _tiny_run(tmp_path, option, str(tmp_path))
    assert r.returncode == 2 and f"{option} {tmp_path} is a directory: give a file path" in r.stderr
    assert "ampbench run" not in r.stdout and not (tmp_path / "r.db").exists()  # nothing ran, nothing stored
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("bad", [("run", "--precisions", "fp33"), ("run", "--memory-format", "weird"),
                                 ("run", "--compile", "maybe"), ("train", "--precision", "fp33"),
                                 ("diagnose", "--precision", "fp33"), ("diagnose", "--checks", "nonfinite,foo")])
def test_bad_axes_fail_before_the_users_model_file_is_imported(tmp_path: Path, bad: tuple[str, str, str]) -> None:
    """A model file can take long to import and build (a large model, a download cache): a misspelt mode or axis
    value is one line before any of it runs."""
    marker = tmp_path / "imported"
    model = tmp_path / "m.py"
    model.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('yes')\n"
                     "import torch\n\ndef f():\n    return torch.nn.Linear(4, 2)\n")
    command, *option = bad
    r = cli(command, "--model", f"{model}:f", "--input-shape", "4", "--num-classes", "2", *option,
            *(["--no-isolate"] if command == "run" else []),
            *(["--db", str(tmp_path / "r.db")] if command != "train" else []))
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert option[1].split(",")[-1] in r.stderr and not marker.exists()


def test_exit_codes_say_whether_cells_errored(tmp_path: Path) -> None:
    ok = _tiny_run(tmp_path)
    assert ok.returncode == 0 and "1 cell (fp32)" in ok.stdout  # and "1 cell", not "1 cells"
    crashed = cli("run", "--model", f"{PLANTED}:crash", "--input-shape", "3,4,4", "--num-classes", "5", "--preset",
                  "tiny", "--precisions", "fp32", "--steps", "2", "--warmup", "1", "--db", str(tmp_path / "c.db"),
                  "--no-report")
    assert crashed.returncode == 1, crashed.stdout + crashed.stderr
    assert "1 cell errored" in crashed.stderr and "SIGSEGV" in crashed.stderr
    diverged = cli("run", "--model", f"{PLANTED}:nan", "--input-shape", "3,4,4", "--num-classes", "5", "--preset",
                   "tiny", "--precisions", "fp32", "--steps", "2", "--warmup", "1", "--db", str(tmp_path / "d.db"),
                   "--no-report", "--no-isolate")
    assert diverged.returncode == 0  # a diverged cell is a measurement, not a failure of the run


def test_corrupt_data_is_bad_input_before_any_cell(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "t10k-images-idx3-ubyte.gz").write_bytes(b"not gzip")
    (data / "t10k-labels-idx1-ubyte.gz").write_bytes(b"nope")
    r = cli("run", "--workloads", "mnist-cnn", "--data-dir", str(data), "--precisions", "fp32", "--preset", "tiny",
            "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and "t10k-images-idx3-ubyte.gz: cannot read" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "ampbench run" not in r.stdout


def test_user_text_with_brackets_is_printed_as_written(tmp_path: Path) -> None:
    """rich markup must not eat [bold] in a path or 'ampbench[timm]' in an error."""
    odd = tmp_path / "[bold]models"
    odd.mkdir()
    model = odd / "m.py"
    model.write_text(Path(PLANTED).read_text())
    r = cli("run", "--model", f"{model}:ok", "--input-shape", "3,4,4", "--num-classes", "5", "--preset", "tiny",
            "--precisions", "fp32", "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report",
            "--db", str(odd / "r.db"))
    assert r.returncode == 0, r.stderr
    assert "[bold]models" in r.stdout
    r = cli("run", "--workloads", "timm:resnet18", "--precisions", "fp32", "--db", str(tmp_path / "t.db"))
    if importlib.util.find_spec("timm") is None:  # timm absent (CI): the install hint keeps its brackets
        assert r.returncode == 2 and "pip install 'ampbench[timm]'" in r.stderr


def test_report_to_stdout_and_export_to_a_directory(tmp_path: Path) -> None:
    assert _tiny_run(tmp_path, "--no-report").returncode == 0
    r = cli("report", "--db", str(tmp_path / "r.db"), "--format", "md", "--out", "-")
    assert r.returncode == 0 and r.stdout.startswith("## ampbench results") and "report:" not in r.stdout
    r = cli("export", "--db", str(tmp_path / "r.db"), "--out", str(tmp_path))
    assert r.returncode == 2 and "is a directory: give a file path" in r.stderr and not list(tmp_path.glob("*.tmp"))


def test_hw_checks_the_store_before_probing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not sqlite" * 100)
    t = time.perf_counter()
    r = cli("hw", "--db", str(bad))
    assert r.returncode == 2 and "not a usable ampbench results store" in r.stderr
    assert "GEMM" not in r.stdout and time.perf_counter() - t < 60


@pytest.mark.parametrize(("extra", "said"), [(["--steps", "5"], True), (["--steps", "6"], False),
                                             (["--steps", "3", "--repeats", "2"], False),
                                             (["--steps", "3", "--measure", "memory"], False)])
def test_a_run_too_short_for_a_noise_estimate_says_so_before_it_runs(tmp_path: Path, extra: list[str],
                                                                       said: bool) -> None:
    """Under 6 timed steps a cell measures no noise, and with one measurement a cell no speedup of the run is claimed:
    said in the plan, not first by the tables' "(noise unknown)" after the run (repeats measure it; a run that times
    nothing has no speedups)."""
    from tests.conftest import cli

    code, out, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16",
                         "--dry-run", "--no-isolate", "--db", str(tmp_path / "r.db"), *extra)
    assert code == 0, err
    note = ("a cell measures its noise over 6 or more timed steps; with fewer, and one measurement a cell, no speedup "
            "of this run is claimed (--steps 6, or --repeats 3)")
    assert (note in " ".join(out.split())) == said, out  # (in the plan, on standard output: stderr is for errors)
