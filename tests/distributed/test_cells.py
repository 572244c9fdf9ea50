"""Distributed cells in `ampbench run` (2 ranks, gloo, CPU): rows with their keys, the bytes they send, a
crashing rank as a status naming it, no orphan after kill -9, bad options refused up front."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ampbench.bench import CellSpec
from ampbench.bench.ranks import run_distributed
from ampbench.bench.runner import strategy_problem
from ampbench.precision.support import supported
from ampbench.workloads import create_workload
from tests.conftest import in_process

FP8_PROBLEM = supported("fp8-tensorwise", "cpu").reason or None
"""Why fp8 cannot run on this CPU (no torchao, or no fp8 matmul kernel: AVX2 and AVX-512 CPUs without FP16/AMX)."""


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ampbench", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_run_with_strategies_writes_one_merged_row_per_cell(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    # (one precision: every strategy x reduce dtype is a torchrun launch of two ranks, seconds each on CI's CPUs; the
    # precision axis crosses the distribution axis in test_convergence_and_inference_are_measured_across_ranks)
    r = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "amp-bf16", "--strategy",
            "ddp,fsdp", "--grad-reduce-dtype", "fp32,bf16", "--nproc-per-node", "2", "--steps", "4", "--warmup", "1",
            "--device", "cpu", "--db", str(tmp_path / "r.db"), "--json", str(out), "--no-report")
    assert r.returncode == 0, r.stderr
    rows = {(x["precision"], x["strategy"], x["grad_reduce_dtype"]): x for x in json.loads(out.read_text())["rows"]}
    assert set(rows) == {(p, s, d) for p in ("amp-bf16",) for s, d in
                         ((None, None), ("ddp", "fp32"), ("ddp", "bf16"), ("fsdp", "fp32"), ("fsdp", "bf16"))}
    numel = sum(p.numel() for p in create_workload("tabular-mlp", "tiny", None, 0).model.parameters())
    for (_, strategy, reduce), row in rows.items():
        assert row["status"] == "ok", row["reason"]
        if strategy is None:
            assert row["world_size"] == 1 and row["comm_bytes_per_step"] is None and row["scaling_efficiency"] is None
            continue
        assert row["world_size"] == 2 and len(row["ranks"]) == 2
        slowest = min(x["samples_per_s"] for x in row["ranks"])
        assert row["samples_per_s"] == pytest.approx(2 * slowest)
        assert row["scaling_efficiency"] is None  # CPU ranks share the cores (see test_scaling_efficiency_...)
        size = 4 if reduce == "fp32" else 2
        if strategy == "ddp":  # ring all-reduce: 2 (N-1)/N x the gradient bytes
            assert row["comm_bytes_per_step"] == numel * size
        else:  # fp32 all-gather of the parameters + reduce-scatter of the gradients: (N-1)/N each
            assert row["comm_bytes_per_step"] == (numel * 4 + numel * size) // 2
    said = " ".join(r.stdout.split())
    assert "x 1 process, ddp x2, fsdp x2" in said
    again = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "amp-bf16", "--strategy",
                "ddp,fsdp", "--grad-reduce-dtype", "fp32,bf16", "--nproc-per-node", "2", "--steps", "4", "--warmup", "1",
                "--device", "cpu", "--db", str(tmp_path / "r.db"), "--no-report", "--resume")
    assert again.returncode == 0 and again.stdout.count("done before") == 5, again.stdout  # --resume: nothing left to run
    assert "distributed: fastest across ranks:" in said and "sends 0.50x the bytes per step" in said


@pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))
def test_an_fsdp_fp8_cell_compiles_and_counts_its_weights_all_gathered_in_fp8() -> None:
    """Compiled, as fp8 cells on CUDA are by default (torchao's precomputed fp8 scales broke this: not used)."""
    spec = CellSpec.of(workload="tabular-mlp", preset="tiny", precision="fp8-tensorwise", fp8_filter="dims",
                    batch_size=None, device="cpu", steps=3, warmup=1, measures=("throughput",), strategy="fsdp",
                    nproc=2, compile="on")
    row = run_distributed(spec, timeout=300)
    assert row["status"] == "ok", row["reason"]
    assert row["compile"] == "on" and row["torch_compile"] and row["world_size"] == 2
    assert row["fp8_layers"].startswith("1/3 converted")  # body.4 (16x32); body.0 (32x14) and out (1x16) are not
    numel = sum(p.numel() for p in create_workload("tabular-mlp", "tiny", None, 0).model.parameters())
    fp8 = 16 * 32  # body.4's weight: all-gathered in 1 byte per element, the rest in fp32; gradients in fp32
    assert row["comm_bytes_per_step"] == ((numel - fp8) * 4 + fp8 + numel * 4) // 2


def test_a_crashing_rank_is_a_status_that_names_it() -> None:
    spec = CellSpec.of(workload="tabular-mlp", preset="tiny", precision="fp32", batch_size=None, device="cpu", steps=3,
                    warmup=1, strategy="ddp", nproc=2)
    row = run_distributed(spec, timeout=120, crash_rank=1)
    assert row["status"] in ("oom", "error") and row["reason"].startswith("rank 1: process killed by SIGKILL"), row["reason"]
    assert row["strategy"] == "ddp" and row["world_size"] == 2


def endpoint_ports(n: int) -> str:
    """127.0.0.1:P with P .. P+n-1 all free, below Linux's ephemeral range (32768+): the ports of a run over several
    machines are P + i, and an ephemeral port (any outgoing connection's, gloo's among them) could hold one of them."""
    import random
    import socket

    for _ in range(200):
        p = random.randrange(20000, 32000 - n)
        socks = []
        try:
            for q in range(p, p + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", q))
            return f"127.0.0.1:{p}"
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def _tagged(tag: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if tag.encode() in (d / "environ").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_no_orphan_rank_survives_a_kill_9_of_the_run(tmp_path: Path) -> None:
    tag = f"AMPBENCH_ORPHAN_TEST={uuid.uuid4().hex}"
    env = {**os.environ, tag.split("=")[0]: tag.split("=")[1]}
    # what `ampbench run` does for a distributed cell (runner.execute -> run_distributed), with a cell that runs long
    driver = ("from ampbench.bench import CellSpec; from ampbench.bench.ranks import run_distributed; "
              "run_distributed(CellSpec.of(workload='tabular-mlp', preset='tiny', precision='fp32', batch_size=None, "
              "device='cpu', steps=10**6, warmup=1, strategy='ddp', nproc=2))")
    run = subprocess.Popen([sys.executable, "-c", driver], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(_tagged(tag)) < 4:  # the run, torchrun and 2 ranks
        time.sleep(0.5)
    assert len(_tagged(tag)) >= 4, "the ranks never started"
    time.sleep(10)  # the ranks past their imports, in the process group, training
    assert len(_tagged(tag)) >= 4 and run.poll() is None
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.time() + 30
    while time.time() < deadline and _tagged(tag):
        time.sleep(0.5)
    left = _tagged(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"orphans left: {left}"


@pytest.mark.parametrize("args, says", [
    (["--strategy", "dpp"], "--strategy dpp: choose from ddp, fsdp"),
    (["--strategy", "ddp", "--nproc-per-node", "0"], "--nproc-per-node must be >= 1"),
    (["--strategy", "fsdp", "--measure", "throughput,maxbatch", "--memory-budget", "1GiB", "--nnodes", "2",
      "--rdzv-endpoint", "h:1"], "--measure maxbatch with --nnodes > 1 is not supported"),
    (["--grad-reduce-dtype", "bf16"], "--grad-reduce-dtype applies to distributed cells"),
    (["--strategy", "ddp", "--grad-reduce-dtype", "int8"], "--grad-reduce-dtype int8: choose from fp32, bf16, fp16"),
])
def test_bad_distributed_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    r = in_process("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--device", "cpu", "--db",
                   str(tmp_path / "r.db"), *args)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_unsupported_pairs_are_rows_with_the_reason() -> None:
    spec = CellSpec.of(workload="bert", preset="tiny", precision="master-bf16", batch_size=None, device="cpu",
                    strategy="ddp", nproc=2, grad_reduce_dtype="fp16")
    assert "compression applies to fp32 gradients" in (strategy_problem(spec) or "")
    assert strategy_problem(CellSpec.of(workload="bert", preset="tiny", precision="master-bf16", batch_size=None,
                                     device="cpu", strategy="fsdp", nproc=2)) is None


def test_scaling_efficiency_divides_by_world_size_times_the_one_process_cell_on_cuda() -> None:
    from ampbench.store import derive

    def row(strategy: str | None, sps: float, device: str = "cuda:0") -> dict[str, object]:
        return {"run_id": "r", "workload": "w", "preset": "small", "batch_size": 8, "device_name": "GPU", "device": device,
                "precision": "amp-bf16", "status": "ok", "samples_per_s": sps, "strategy": strategy,
                "world_size": 4 if strategy else 1, "grad_reduce_dtype": None}

    rows = derive([row(None, 100.0), row("ddp", 360.0), row("fsdp", 300.0)])
    assert [r["scaling_efficiency"] for r in rows] == [None, pytest.approx(0.9), pytest.approx(0.75)]
    assert derive([row(None, 100.0, "cpu"), row("ddp", 150.0, "cpu")])[1]["scaling_efficiency"] is None


def test_the_distributed_advice_says_when_one_process_ran_faster_and_the_console_drops_an_empty_scaling_column() -> None:
    """On a CPU the ranks share the cores one process already used: 2 ranks ran 1,214 samples/s where one process ran
    1,714 (bert tiny, this machine), and the advice called the ranks "fastest" with no word of it; the scaling column was
    '-' on every row (the efficiency is CUDA's only)."""
    from rich.console import Console

    from ampbench.report.console import results_tables
    from ampbench.report.strategies import strategy_summary
    from ampbench.store import derive

    def row(strategy: str | None, precision: str, sps: float, device: str) -> dict[str, object]:
        return {"run_id": "r", "workload": "w", "preset": "small", "batch_size": 8, "device_name": "D", "device": device,
                "precision": precision, "status": "ok", "samples_per_s": sps, "samples_per_s_noise": 0.03,
                "strategy": strategy, "world_size": 2 if strategy else 1, "grad_reduce_dtype": None}

    cpu = derive([row(None, "fp32", 1704.0, "cpu"), row(None, "master-bf16", 1714.0, "cpu"),
                  row("ddp", "fp32", 1214.0, "cpu"), row("fsdp", "fp32", 466.0, "cpu")])
    said = strategy_summary(cpu)
    assert said is not None and said.startswith("fastest across ranks: fp32 · ddp x2, 1,214 samples/s")
    assert "slower than one process: master-bf16 ran 1,714 samples/s (0.71x; the ranks share this CPU's cores)" in said
    gpu = derive([row(None, "fp32", 100.0, "cuda:0"), row("ddp", "fp32", 180.0, "cuda:0")])
    said = strategy_summary(gpu)
    assert said is not None and "slower than one process" not in said and "scaling efficiency 0.90" in said

    def text(rows: list[dict[str, object]]) -> str:
        console = Console(width=200, record=True)
        for t in results_tables(rows, width=200):
            console.print(t)
        return console.export_text()

    assert "scaling" not in text(cpu) and "ddp x2" in text(cpu)
    assert "scaling" in text(gpu) and "0.90" in text(gpu)


def test_convergence_and_inference_are_measured_across_ranks() -> None:
    """converge in a distributed cell: every rank trains the seeds in its own data order; the row carries rank 0's
    curves, and rank 0's forward latency under the strategy (FSDP's all-gathers included)."""
    spec = CellSpec.of(workload="tabular-mlp", preset="tiny", precision="master-bf16", batch_size=None, device="cpu",
                    steps=3, warmup=1, strategy="fsdp", nproc=2, measures=("throughput", "converge", "inference"),
                    converge_steps=20, seeds=2)
    row = run_distributed(spec, timeout=300)
    assert row["status"] == "ok", row["reason"]
    conv = row["converge"]
    assert conv["seeds"] == [0, 1] and not any(conv["diverged"]) and len(conv["losses"][0]) == 20
    assert conv["losses"][0][-1] < conv["losses"][0][0]  # it learns
    assert set(row["inference"]) == {"1", "16"} and row["inference"]["1"]["p50_ms"] > 0  # rank 0's forward latency


def test_train_with_a_strategy_resumes_exactly(tmp_path: Path) -> None:
    """ampbench train --strategy fsdp (2 ranks by torchrun): 3 epochs straight == 2 epochs, checkpoint, resume to 3."""
    common = ["train", "mnist-cnn", "--preset", "tiny", "--max-steps", "3", "--strategy", "fsdp", "--precision", "amp-fp16",
              "--device", "cpu"]
    straight = cli(*common, "--epochs", "3", "--json", str(tmp_path / "s.json"))
    assert straight.returncode == 0, straight.stderr[-2000:]
    first = cli(*common, "--epochs", "2", "--checkpoint", str(tmp_path / "ck"))
    assert first.returncode == 0, first.stderr[-2000:]
    assert (tmp_path / "ck" / "current" / "ampbench.pt").exists()
    resumed = cli(*common, "--epochs", "3", "--checkpoint", str(tmp_path / "ck"), "--resume", "--json", str(tmp_path / "r.json"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = json.loads((tmp_path / "s.json").read_text()), json.loads((tmp_path / "r.json").read_text())
    assert (a["strategy"], a["world_size"]) == ("fsdp", 2) and b["resumed_from_epoch"] == 2
    assert b["final_loss"] == a["final_loss"] and b["test_metric"] == a["test_metric"] and b["loss_scale"] == a["loss_scale"]
    assert "fsdp x2: samples/s of all ranks" in " ".join(straight.stdout.split())
    # A checkpoint the ranks could not resume is refused before torchrun starts them, in one line with exit 2 (each
    # rank said it, then torchrun's traceback and failure table followed, exit 1).
    for extra, says in ((["--precision", "amp-bf16"], "written for precision 'amp-fp16', this run is 'amp-bf16'"),
                        (["--strategy", "ddp"], "was saved with strategy 'fsdp' on 2 ranks; this run is 'ddp' on 2"),
                        (["--nproc-per-node", "1"], "this run is 'fsdp' on 1: resume with the same ones"),
                        (["--epochs", "2"], "is already at epoch 3 of 2: nothing to train")):
        r = cli(*common, "--epochs", "3", "--checkpoint", str(tmp_path / "ck"), "--resume", *extra)
        assert r.returncode == 2 and says in r.stderr and r.stdout == "", (extra, r.stderr[-2000:])
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_split_too_small_for_one_step_is_refused_before_the_ranks_start() -> None:
    """The split holds fewer micro-batches than one step: the ranks refused it, each saying so, and torchrun added its
    traceback and ChildFailedError table, exit 1. Now the launcher refuses it in one line, exit 2 (a refusal the ranks
    still make alone is said once: tests/launch/test_torchrun.py)."""
    r = cli("train", "tabular-mlp", "--preset", "tiny", "--strategy", "ddp", "--precision", "amp-bf16", "--device", "cpu",
            "--grad-accum", "1000")
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("error: --grad-accum 1000:") == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and "ChildFailedError" not in r.stderr and r.stdout == ""


def test_train_over_two_machines_is_two_launchers_meeting_at_node_0(tmp_path: Path) -> None:
    """--nnodes 2: the same command on each machine with its --node-rank (here both on this one, 1 rank each): one
    world of 2 ranks; node 0 holds global rank 0, which alone prints and writes --json. (About one run in six, the
    two launchers on this machine took ~2 minutes to meet, cause not found: the timeouts allow for it.)"""
    endpoint = endpoint_ports(1)
    common = [sys.executable, "-m", "ampbench", "train", "tabular-mlp", "--preset", "tiny", "--epochs", "1", "--strategy",
              "ddp", "--precision", "amp-bf16", "--device", "cpu", "--nproc-per-node", "1", "--nnodes", "2",
              "--rdzv-endpoint", endpoint]
    other = subprocess.Popen([*common, "--node-rank", "1", "--json", str(tmp_path / "b.json")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    first = subprocess.run([*common, "--node-rank", "0", "--json", str(tmp_path / "a.json")], capture_output=True,
                           text=True, timeout=300)
    out1, err1 = other.communicate(timeout=300)
    assert first.returncode == 0 and other.returncode == 0, (first.stderr[-2000:], err1[-2000:])
    result = json.loads((tmp_path / "a.json").read_text())
    assert (result["strategy"], result["world_size"]) == ("ddp", 2)
    assert not (tmp_path / "b.json").exists() and "ddp x2" not in out1


@pytest.mark.parametrize("args, says", [
    (["--strategy", "ddp", "--nnodes", "2"], "--rdzv-endpoint None: give HOST:PORT of node 0"),
    (["--strategy", "ddp", "--node-rank", "1"], "--node-rank/--rdzv-endpoint apply with --nnodes > 1"),
    (["--nnodes", "2", "--rdzv-endpoint", "h:1"], "--nnodes applies with --strategy ddp or fsdp"),
    (["--strategy", "ddp", "--precision", "master-bf16", "--grad-reduce-dtype", "fp16"],
     "compression applies to fp32 gradients"),
])
def test_bad_train_strategy_options_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    r = in_process("train", "tabular-mlp", "--preset", "tiny", "--device", "cpu", *args)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_run_over_two_machines_node_0_stores_the_rows(tmp_path: Path) -> None:
    """ampbench run --nnodes 2 (two launchers on this one machine, 1 rank each): node 0 runs the one-process cells and
    stores every row, with world size 2; node 1 lends its rank to each distributed cell and stores nothing."""
    common = ["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--strategy", "ddp,fsdp",
              "--nproc-per-node", "1", "--nnodes", "2", "--rdzv-endpoint", endpoint_ports(2), "--steps", "3",
              "--warmup", "1", "--device", "cpu", "--no-report", "--cell-timeout", "150"]
    env = {**os.environ, "COLUMNS": "200"}
    launch = [sys.executable, "-m", "ampbench", *common, "--node-rank"]
    logs = [open(tmp_path / f"node{i}.{k}", "w+") for i in (0, 1) for k in ("out", "err")]  # noqa: SIM115
    node0 = subprocess.Popen([*launch, "0", "--db", str(tmp_path / "n0.db"), "--json", str(tmp_path / "a.json")],
                             stdout=logs[0], stderr=logs[1], text=True, env=env)
    node1 = subprocess.Popen([*launch, "1", "--db", str(tmp_path / "n1.db")], stdout=logs[2], stderr=logs[3], text=True,
                             env=env)
    deadline = time.time() + 400  # (a node that failed ends the test at once, not after the others' cell timeouts)
    while time.time() < deadline and (node0.poll() is None or node1.poll() is None):
        if node0.poll() not in (None, 0) or node1.poll() not in (None, 0):
            break
        time.sleep(0.5)
    for p in (node0, node1):
        if p.poll() is None:
            p.kill()
        p.wait()
    for f in logs:
        f.seek(0)
    err0, out1, err1 = logs[1].read(), logs[2].read(), logs[3].read()
    for f in logs:
        f.close()
    assert node0.returncode == 0 and node1.returncode == 0, (node0.returncode, node1.returncode, err0[-2000:],
                                                             out1[-1000:], err1[-2000:])
    rows = json.loads((tmp_path / "a.json").read_text())["rows"]
    assert {(r["strategy"], r["world_size"], r["status"]) for r in rows} == {(None, 1, "ok"), ("ddp", 2, "ok"), ("fsdp", 2, "ok")}
    assert "lent 1 rank(s) to 2 distributed cells" in " ".join(out1.split()) and not (tmp_path / "n1.db").exists()
    lent = [line.split() for line in out1.splitlines() if line.strip().startswith("lent")]  # each cell, as it ends
    assert [words[-2:] for words in lent] == [["ddp", "x2"], ["fsdp", "x2"]], out1


@pytest.mark.parametrize("with_group", [False, True])
def test_a_rank_leaves_with_its_code_its_output_flushed_and_its_group_left(tmp_path: Path, with_group: bool) -> None:
    """launch.rank.leave: a rank ends without the interpreter's teardown (where gloo's threads sometimes abort a
    rank whose work is done: SIGABRT, taken by torchrun for a failure), its buffered output written, the group left."""
    join = ("import torch.distributed as dist; dist.init_process_group('gloo', init_method="
            f"'file://{tmp_path / 'pg'}', rank=0, world_size=1); " if with_group else "")
    code = (f"{join}import sys; from ampbench.launch.rank import leave; print('done', end=''); "
            "sys.stderr.write('said'); leave(3)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # (buffered, as a rank's pipes are)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert (r.returncode, r.stdout, r.stderr.strip().splitlines()[-1:]) == (3, "done", ["said"])


def test_resume_over_several_machines_is_refused(tmp_path: Path) -> None:
    r = cli("run", "--workloads", "tabular-mlp", "--strategy", "ddp", "--nnodes", "2", "--rdzv-endpoint", "h:1", "--resume",
            "--device", "cpu", "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and "--resume with --nnodes > 1 is not supported" in r.stderr


def test_largest_batch_is_searched_across_ranks() -> None:
    """maxbatch in a distributed cell: each trial a torchrun of its own, fitting when every rank fits. The search
    is the row's ``maxbatch`` phase (it was left for the launcher to count as ``launch``), the phases adding up."""
    from ampbench.bench.ranks import run_cell_distributed

    spec = CellSpec.of(workload="tabular-mlp", preset="tiny", precision="amp-bf16", batch_size=None, device="cpu", steps=3,
                    warmup=1, strategy="ddp", nproc=2, measures=("throughput", "maxbatch"), memory_budget=2**30,
                    maxbatch_limit=32)  # (each trial is a torchrun of two ranks: seconds on CI's CPUs)
    row = run_cell_distributed(spec, timeout=300)
    assert row["status"] == "ok", row["reason"]
    assert row["measures"] == ["throughput", "maxbatch"] and row["max_batch"] == 32 and row["max_batch_limit_hit"]
    assert [t[0] for t in row["max_batch_trials"]] == [16, 32] and all(t[1] and t[2] > 0 for t in row["max_batch_trials"])
    assert row["max_batch_samples_per_s"] > 0
    assert row["phases_s"]["maxbatch"] > 0 and row["wall_s"] == pytest.approx(sum(row["phases_s"].values()))


def test_a_merged_row_counts_every_ranks_flops_the_recompute_too() -> None:
    """Two ranks' rows of one checkpointed DDP cell: the world's FLOPs a step, the model's and the recompute's alike
    (the recompute was one rank's beside the model's two: 8.9M against 53.7M)."""
    from ampbench.bench.ranks import merge

    rank = {"status": "ok", "samples_per_s": 100.0, "flops_per_step": 26_840_064, "recomputed_flops_per_step": 8_912_896}
    row = merge({0: {**rank, "rank": 0}, 1: {**rank, "rank": 1, "samples_per_s": 90.0}})
    assert (row["flops_per_step"], row["recomputed_flops_per_step"]) == (2 * 26_840_064, 2 * 8_912_896)
    assert row["samples_per_s"] == 180.0 and row["world_size"] == 2
    plain = merge({0: {**rank, "rank": 0, "recomputed_flops_per_step": None}, 1: {**rank, "rank": 1}})
    assert plain["recomputed_flops_per_step"] is None  # (rank 0's: a cell without checkpointing has none)
