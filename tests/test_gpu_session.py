"""benchmarks/gpu_session.sh, dry-run on a CPU: every stage prints its commands, and each command's arguments are
ones ampbench (or the benchmark script) takes -- a GPU session's minutes are not spent on a typo."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli

ROOT = Path(__file__).resolve().parents[1]


def _dry_run(stage: str = "all") -> list[list[str]]:
    r = subprocess.run(["bash", "benchmarks/gpu_session.sh", "--dry-run", stage], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [shlex.split(line) for line in r.stdout.splitlines() if line.strip() and not line.startswith("#")]


def test_every_stage_prints_its_commands() -> None:
    r = subprocess.run(["bash", "benchmarks/gpu_session.sh", "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    stages = re.findall(r"^# stage (\w+)$", r.stdout, re.M)
    script = (ROOT / "benchmarks" / "gpu_session.sh").read_text()
    assert stages == re.search(r'^STAGES="([^"]+)"', script, re.M).group(1).split()  # type: ignore[union-attr]
    assert not (ROOT / "out" / "gpu" / "dry-run").exists()


def _on_cpu(args: list[str], db: Path) -> list[str]:
    """A GPU run's arguments as the CPU can check them: cpu for cuda, CUDA graphs off, a fresh store, a dry run."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--resume":
            i += 1
            continue
        if a in ("--device", "--db", "--cuda-graphs") and i + 1 < len(args):
            out += [a, {"--device": "cpu", "--db": str(db), "--cuda-graphs": "off"}[a]]
            i += 2
            continue
        if a == "--preset" and any(w.startswith("keras-") for w in args[args.index("--workloads") + 1].split(",")):
            # (a Keras target is validated by a training step of its model on 2 samples: the paper preset's
            # 800-pixel convolutions take ~35 s of CPU there; the preset's name is checked by the runs without Keras)
            out += [a, "tiny"]
            i += 2
            continue
        if a == "--keras-backend" and importlib.util.find_spec(args[i + 1]) is None:
            out += [a, "torch"]  # (the backend is checked installed at parse time; this machine may not have jax)
            i += 2
            continue
        out.append(a)
        i += 1
    if "--workloads" in args and "hf:gpt2" in args[args.index("--workloads") + 1].split(",") and "--option" not in args:
        # (the check forward of GPT-2 at 1,024 tokens is ~12 s of CPU: one block of it validates the same arguments)
        out += ["--option", "n_layer=1"]
    return [*out, "--dry-run", "--no-isolate"]  # (PyTorch targets validated in this process: a parse check)


_SESSION = _dry_run()
_RUNS = list(dict.fromkeys(tuple(c[1:]) for c in _SESSION if c[:2] == ["ampbench", "run"]))
"""The session's runs, each once (stages repeat some: truth and rest both end with Lambda's configuration)."""


def _others() -> list[list[str]]:
    """The session's other ampbench commands, each once (the lease and predict stages predict the same cells)."""
    out, seen = [], set()
    for args in (c[1:] for c in _SESSION if c[0] == "ampbench" and c[1] != "run"):
        key = tuple(a for i, a in enumerate(args) if a != "--json" and (i == 0 or args[i - 1] != "--json"))
        if key not in seen:
            seen.add(key)
            out.append(args)
    return out


_OTHERS = _others()


def test_the_session_has_its_runs_and_other_commands() -> None:
    assert len(_RUNS) >= 10
    fp8 = [a for a in _RUNS if "--precisions" in a and "fp8" in a[a.index("--precisions") + 1]]
    assert fp8 and all(a[a.index("--fp8-filter") + 1] == "dims" for a in fp8)  # (auto converts none of BERT-large)
    assert {c[0] for c in _OTHERS} == {"hw", "predict", "compare", "export", "report", "diagnose"}


# (one test per command: the two workers share them)
@pytest.mark.parametrize("args", _RUNS, ids=lambda a: " ".join(a)[:60])
def test_every_ampbench_run_of_the_session_parses(args: tuple[str, ...], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from ampbench.bench.estimate import ENV_OFF

    monkeypatch.setenv(ENV_OFF, "1")  # (arguments checked, not the length of a BERT-large run: test_estimate's job)
    code, out, err = cli(*_on_cpu(list(args), tmp_path / "r.db"))
    assert code == 0, (args, err)


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one run (what the session's compare, report and export read), made once per worker."""
    db = tmp_path_factory.mktemp("session") / "r.db"
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "2",
                       "--warmup", "1", "--no-isolate", "--no-report", "--db", str(db))
    assert code == 0, err
    from ampbench.store import Store

    return db, Store(db, create=False).runs()[-1].run_id


@pytest.mark.parametrize("args", _OTHERS, ids=lambda a: " ".join(a)[:60])
def test_the_other_ampbench_commands_of_the_session_run(args: list[str], tmp_path: Path,
                                                        stored_run: tuple[Path, str]) -> None:
    db, run_id = stored_run
    args = [run_id if a == "RUN" else str(tmp_path / Path(a).name)
            if a.startswith(("benchmarks/results/", "out/gpu/")) and a != "out/gpu/results.db" else a for a in args]
    args = [str(db) if a == "out/gpu/results.db" else "cpu" if a == "cuda" else a for a in args]
    if args[0] == "hw":
        args.append("--no-gemm")
    code, out, err = cli(*args)
    assert code == 0, (args, err)


@pytest.mark.parametrize("script", ["engine_overhead.py", "host_overhead.py", "harness_overhead.py", "grad_reduce.py",
                                    "op_times.py"])
def test_the_benchmark_scripts_take_the_sessions_options(script: str) -> None:
    calls = [c for c in _dry_run() if (len(c) > 1 and c[1] == f"benchmarks/{script}") or
             (len(c) > 3 and c[3] == f"benchmarks/{script}")]
    assert calls
    helped = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert helped.returncode == 0, helped.stderr
    for call in calls:
        for flag in (a for a in call if a.startswith("--")):
            assert flag in helped.stdout, (script, flag)


def test_help_lists_every_stage_with_what_it_does_and_its_time() -> None:
    """--help (not "unknown stage --help"): each stage, one line on what it measures and its time, the dry-run's
    placeholders."""
    r = subprocess.run(["bash", "benchmarks/gpu_session.sh", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "unknown stage" not in r.stderr
    script = (ROOT / "benchmarks" / "gpu_session.sh").read_text()
    blocks = {b.split()[0]: b for b in re.split(r"\n(?=  [a-z])", r.stdout) if b.startswith("  ")}
    for stage in re.search(r'^STAGES="([^"]+)"', script, re.M).group(1).split():  # type: ignore[union-attr]
        assert stage in blocks and re.search(r"~\d+ min", blocks[stage]), stage
    assert "--dry-run placeholders: RUN stands for" in r.stdout
