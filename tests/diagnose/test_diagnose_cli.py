from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.report import build_report
from ampbench.store import SCHEMA_VERSION, Store
from tests.conftest import in_process

PLANTED = str(Path(__file__).with_name("planted.py"))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """In a process of its own: what torch's C++ prints to the process's stderr (the profiler's) shows there."""
    return subprocess.run([sys.executable, "-m", "ampbench", *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="200"))


def test_diagnose_user_model_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    r = cli("diagnose", "--model", f"{PLANTED}:poisoned", "-p", "fp32", "--steps", "3", "--db", str(tmp_path / "r.db"),
            "--json", str(out), "--checks", "nonfinite,tensorcore,profile")
    assert r.returncode == 0, r.stderr
    progress = [ln for ln in r.stdout.splitlines() if ln.startswith("  check ")]
    assert progress[:2] == ["  check 1/3: nonfinite ...", progress[1]] and len(progress) == 6  # (a log: both lines)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and ln not in progress]
    assert "1. ERROR   NaN/Inf first appears in the backward of block.1 (Poison) at step 1" in lines[1]
    assert "USDT" not in r.stdout + r.stderr
    d = json.loads(out.read_text())
    assert d["findings"][0]["check"] == "nonfinite" and d["details"]["profile"]["trace"]
    assert Path(d["details"]["profile"]["trace"]).exists()  # the Chrome trace
    assert json.loads(Path(d["details"]["profile"]["trace"]).read_text())["traceEvents"]
    assert len(Store(tmp_path / "r.db").diagnoses()) == 1


@pytest.mark.parametrize("args, expect", [
    (["nosuch"], "unknown workload 'nosuch'"),
    (["mnist-cnn", "--checks", "nan"], "--checks 'nan': unknown check nan"),
    (["mnist-cnn", "-p", "tf32"], "--precision tf32 cannot run on cpu"),
    (["mnist-cnn", "-p", "fp33"], "fp33"),
    (["mnist-cnn", "--steps", "0"], "--steps must be >= 1"),
    ([], "give a WORKLOAD name (see: ampbench list workloads) or --model file.py:factory\n"),
    (["mnist-cnn", "--model", "x.py:f"], "give a WORKLOAD name or --model, not both (got mnist-cnn and --model x.py:f)"),
    (["--model", "missing.py:f"], "missing.py"),
])
def test_bad_targets_and_options_exit_2(tmp_path: Path, args: list[str], expect: str) -> None:
    r = in_process("diagnose", *args, "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and expect in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    if "WORKLOAD" in expect:  # (refused before the store is opened: no empty store left behind)
        assert not (tmp_path / "r.db").exists()


def test_report_shows_the_diagnosis_of_its_workload(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert in_process("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "2",
                      "--warmup", "1", "--no-isolate", "--db", str(db), "--no-report").returncode == 0
    assert in_process("diagnose", "tabular-mlp", "--preset", "tiny", "--checks", "tensorcore,activations", "--db",
                      str(db)).returncode == 0
    _, page = build_report(Store(db))
    assert "Diagnostics: amp-fp16" in page and "activations fit fp16" in page


def test_store_migrates_a_version_1_file(tmp_path: Path) -> None:
    import sqlite3

    from ampbench.store.sqlite import MIGRATIONS

    c = sqlite3.connect(tmp_path / "old.db")
    c.executescript(MIGRATIONS[0])
    c.execute("PRAGMA user_version = 1")
    c.execute("INSERT INTO runs VALUES ('r1', 't', NULL, 'h', 'cpu', 'cpu', NULL, '{}')")
    c.commit()
    c.close()
    s = Store(tmp_path / "old.db")
    assert s.schema_version == SCHEMA_VERSION and [r.run_id for r in s.runs()] == ["r1"]
    s.add_diagnosis({"target": "w", "precision": "fp32", "device_name": "cpu", "findings": []})
    assert s.diagnoses("w")[0]["target"] == "w"
    s.add_predictions([{"workload": "w", "precision": "fp32", "gpu": "a100-80gb", "batch_size": 8}])  # (version 3)
    assert [p["gpu"] for p in s.predictions(["w"])] == ["a100-80gb"] and s.predictions(gpu="t4") == []
