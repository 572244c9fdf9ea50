"""Progress events: from a loop (Steps), across a child process and torchrun's ranks (in order, rank 0 only), into
the run's callback, and what a tiny run with convergence reports."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from ampbench import progress
from ampbench.launch import ChildProcess, Job, Torchrun

SLOW_CELL = '''
import os, time
from ampbench import progress

def slow(payload):
    meter = progress.Steps("timed steps", payload["n"], detail=f"rank {os.environ.get('RANK', '-')}", every=0.0)
    for i in range(payload["n"]):
        time.sleep(payload["sleep"])
        meter(i + 1)
    progress.report("done", detail="bye")
    return {"rank": int(os.environ.get("RANK", "0")), "n": payload["n"]}
'''


@pytest.fixture
def slow_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "slow_cell.py").write_text(SLOW_CELL)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "slow_cell:slow"


def test_a_child_process_s_events_reach_the_parent_in_order(slow_module: str) -> None:
    seen: list[progress.Event] = []
    t0 = time.perf_counter()
    r = ChildProcess(timeout=60, on_progress=seen.append).run(Job(slow_module, {"n": 6, "sleep": 0.15}))
    assert r == {"rank": 0, "n": 6}
    steps = [e for e in seen if e.what == "timed steps"]
    assert [e.i for e in steps] == list(range(0, 7)) and all(e.n == 6 for e in steps)
    assert seen[-1] == progress.Event("done", detail="bye")
    assert steps[0].eta_s is None and all(e.eta_s is not None and e.eta_s >= 0 for e in steps[1:])
    assert steps[-1].eta_s == 0
    assert time.perf_counter() - t0 < 30


def test_events_arrive_while_the_child_still_runs(slow_module: str) -> None:
    """Progress is live: the first step's event is seen before the child's last step is done."""
    arrival: list[float] = []
    t0 = time.perf_counter()
    ChildProcess(timeout=60, on_progress=lambda e: arrival.append(time.perf_counter() - t0)).run(
        Job(slow_module, {"n": 8, "sleep": 0.5}))
    total = time.perf_counter() - t0
    assert arrival and arrival[1] < total - 2.0  # (step 1 of 8 half-second steps: seconds before the end)


def test_torchrun_reports_rank_0_only(slow_module: str) -> None:
    seen: list[progress.Event] = []
    res = Torchrun(2, timeout=120, on_progress=seen.append).run(Job(slow_module, {"n": 3, "sleep": 0.05}))
    assert sorted(res.ranks) == [0, 1], res.stderr[-2000:]
    details = {e.detail for e in seen if e.what == "timed steps"}
    assert details == {"rank 0"}


def test_a_nested_launch_reports_to_the_same_place(slow_module: str) -> None:
    """A launch without a callback of its own, inside a block that listens (a cell's max-batch trial started from
    the run's process): its events reach that listener."""
    seen: list[progress.Event] = []
    with progress.reporting_to(seen.append):
        ChildProcess(timeout=60).run(Job(slow_module, {"n": 2, "sleep": 0.0}))
    assert [e.i for e in seen if e.what == "timed steps"] == [0, 1, 2]


def test_tail_reads_a_half_written_line_once_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("")
    seen: list[progress.Event] = []
    tail = progress.Tail(path, seen.append, poll=0.01)
    line = json.dumps({"what": "warm-up", "i": 1, "n": 2, "detail": "", "eta_s": 0.5})
    with open(path, "a") as f:
        f.write(line[:10])
        f.flush()
        time.sleep(0.1)
        assert seen == []
        f.write(line[10:] + "\nnot json\n")
    tail.stop()
    assert seen == [progress.Event("warm-up", 1, 2, "", 0.5)]


def test_nothing_listens_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    assert not progress.listening()
    progress.report("anything")  # a no-op
    assert not progress.Steps("x", 3).on


def test_event_text() -> None:
    assert progress.Event("convergence", 40, 200, "seed 2/3", 12.2).text() == \
        "convergence seed 2/3: step 40/200, ~12 s left"
    assert progress.Event("max batch", detail="trial at batch 256").text() == "max batch trial at batch 256"
    assert progress.Event("timed steps", 20, 20, eta_s=0.0).text() == "timed steps: step 20/20"
    assert progress.duration(5400) == "1.5 h" and progress.duration(600) == "10 min"


def test_a_run_reports_every_phase_of_its_cells_in_order() -> None:
    """The harness in this process (no isolation) and in child processes: the same events, in the cell's order."""
    from ampbench.bench import RunConfig, run
    from ampbench.store import Store

    for isolate in (False, True):
        config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32",),
                              measures=("throughput", "converge"), steps=4, warmup=2, seeds=1, converge_steps=5,
                              extra={"isolate": isolate})
        events = []
        store = Store(":memory:")
        _, rows = run(config, store, on_event=events.append)
        assert rows[0]["status"] == "ok"
        phases = [e.phase for e in events]
        assert phases[0] == "start" and phases[-1] == "done" and set(phases[1:-1]) == {"progress"}
        whats = [e.progress.what for e in events if e.phase == "progress"]
        order = ["building the workload", "setting up the model", "first step",
                 "memory step (saved activations, FLOPs)", "warm-up", "timed steps", "convergence"]
        assert "FLOP count step" not in whats  # (an eager cell counts its FLOPs in its memory step)
        firsts = [whats.index(w) for w in order]
        assert firsts == sorted(firsts), whats
        timed = [e.progress.i for e in events if e.phase == "progress" and e.progress.what == "timed steps"]
        assert timed[0] == 0 and timed[-1] == 4 and timed == sorted(timed)
        # warm-up counts as the row does: the first step was the first of its 2 (it said 0/1 .. 1/1 of "warmup 2")
        warm = [(e.progress.i, e.progress.n) for e in events if e.phase == "progress" and e.progress.what == "warm-up"]
        assert warm[0] == (1, 2) and warm[-1] == (2, 2) and rows[0]["warmup"] == 2


def test_plain_progress_lines_when_not_a_terminal(tmp_path: Path, with_estimate: None) -> None:
    from tests.conftest import cli

    code, out, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "3",
                         "--warmup", "1", "--no-isolate", "--no-report", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    assert "expected to take ~" in out
    # the end says how long the cells took beside that estimate (so a wrong estimate shows)
    assert re.search(r": 1 ok, 0 not ok in \d+ s \(expected ~\d+ s\); stored in", out), out
    code, out, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--measure",
                         "maxbatch", "--memory-budget", "64MiB", "--maxbatch-limit", "32", "--no-isolate", "--no-report",
                         "--db", str(tmp_path / "r.db"))
    assert code == 0, err  # (what the estimate left out is said beside it: a search took 10 s where it said ~1 s)
    assert re.search(r"0 not ok in \d+ s \(expected ~\d+ s without the max-batch search\); stored in", out), out
    assert "running tabular-mlp (tiny) fp32" in out and "ok          tabular-mlp (tiny) fp32" in out
    # a cell of quick phases leaves its start and end in a log, not a line per phase (run_text.PlainProgress)
    assert "timed steps" not in out and "building the workload" not in out and "first step" not in out
