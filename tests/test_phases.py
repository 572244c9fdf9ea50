"""Where a cell's wall time goes: phases back to back (adding up to the cell's wall time, checked against a clock
around the whole launch), a long phase visible while it runs, a timed-out cell naming the phase it was in."""

from __future__ import annotations

import time

import pytest

from ampbench import phases, progress
from ampbench.launch import ChildProcess, Job


def test_phases_add_up_to_the_clock_and_accumulate() -> None:
    with phases.clock() as c:
        phases.enter("a")
        time.sleep(0.02)
        phases.enter("b")
        time.sleep(0.01)
        phases.enter("a")
        time.sleep(0.01)
        got = c.stop()
    assert list(got) == ["a", "b"] and got["a"] > got["b"] > 0
    assert sum(got.values()) == pytest.approx(time.perf_counter() - c.t0, abs=0.01)


def test_launched_phases_add_up_to_spawn_to_exit() -> None:
    inside = {"build": 2.0, "timed_steps": 3.0}
    out = phases.launched(inside, spawned_at=100.0, started_at=100.5, returned_at=107.0, exited_at=108.25)
    assert out == {"process_start": 0.5, "import": 1.5, "build": 2.0, "timed_steps": 3.0, "teardown": 1.25}
    assert sum(out.values()) == pytest.approx(8.25)


@pytest.mark.parametrize("isolate", [False, True], ids=["in process", "child process"])
def test_a_runs_cells_phases_add_up_to_what_a_clock_around_the_launch_saw(isolate: bool) -> None:
    """Oracle: perf_counter around the runner's launch of each cell (its process's fork and exit included when
    isolated, and the fork server's own start in the first cell's process_start)."""
    from ampbench.bench import RunConfig
    from ampbench.bench.runner import execute
    from ampbench.launch import close_zygotes

    close_zygotes()  # (this test's first cell starts the run's fork server)
    config = RunConfig.of(device="cpu", workloads=("tabular-mlp",), presets=("tiny",), precisions=("fp32", "amp-bf16"),
                          measures=("throughput",), steps=3, warmup=2)
    for n, spec in enumerate(config.cells()[:2]):
        t0 = time.perf_counter()
        row = execute(spec, isolate)
        outside = time.perf_counter() - t0
        assert row["status"] == "ok", row["reason"]
        got = row["phases_s"]
        assert sum(got.values()) == pytest.approx(row["wall_s"], abs=1e-9)
        assert row["wall_s"] <= outside and row["wall_s"] == pytest.approx(outside, abs=0.25)
        if isolate:
            assert list(got)[:2] == ["process_start", "import"] and list(got)[-1] == "teardown"
            if n:  # (forked from the fork server, which imported torch: no interpreter start, no imports)
                assert got["process_start"] + got["import"] < 1.0
        else:
            assert "process_start" not in got


def test_a_long_phase_reports_itself_while_it_runs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(phases, "LONG_S", 0.3)
    seen: list[progress.Event] = []
    with progress.reporting_to(seen.append), phases.clock():
        phases.enter("memory_step", "memory step (saved activations)")
        time.sleep(1.6)
    beats = [e for e in seen if e.detail.endswith("s in this phase)")]
    assert beats and beats[0].what == "memory step (saved activations)"
    assert beats[0].text().startswith("memory step (saved activations) (")


def sleeper(payload: dict[str, object]) -> dict[str, object]:
    """A job stuck in a phase (for the timeout test)."""
    phases.enter("flop_count", "FLOP count step")
    time.sleep(60)
    return {}


def test_a_timed_out_cell_names_the_phase_it_was_in() -> None:
    r = ChildProcess(timeout=6).run(Job("tests.test_phases:sleeper"))
    assert r["_killed"] and r["_failed"].startswith("timed out after 6 s") and "'FLOP count step'" in r["_failed"]


def test_the_verbose_line_adds_up_with_its_short_phases_together() -> None:
    """"wall 0.9 s = build 0.8" left 0.1 s unsaid: the phases under 0.05 s are said together where they add up to
    0.05 s or more, so the line's terms add up to its wall time (to rounding)."""
    from ampbench.report.run_text import phases_line

    phases = {"build": 0.8, "first_step": 0.03, "memory_step": 0.04, "timed_steps": 0.01, "teardown": 0.02}
    line = phases_line({"phases_s": phases, "wall_s": sum(phases.values())})
    assert line == "wall 0.9 s = build 0.8 + 4 shorter phases 0.1"
    terms = [float(t.split()[-1]) for t in line.split(" = ")[1].split(" + ")]
    assert sum(terms) == pytest.approx(sum(phases.values()), abs=0.1)
    assert phases_line({"phases_s": {"build": 0.8, "open": 0.01}, "wall_s": 0.81}) == "wall 0.8 s = build 0.8"
