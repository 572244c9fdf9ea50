"""A process started before its turn (:mod:`ampbench.launch.turn`): it works while the previous one runs, and its own
turn comes only after that process has exited; without a hold, a child's turn is at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ampbench.launch import Forked, Job
from ampbench.launch import turn as turn_mod
from ampbench.launch.process import _zygote

PRELOAD = ("ampbench.bench.jobs", "ampbench.frameworks.torch.cell")
HERE = "tests.launch.test_turn"


def previous(payload: dict[str, object]) -> dict[str, object]:
    time.sleep(float(payload.get("s", 1.0)))  # type: ignore[arg-type]
    return {"ended_at": time.time()}


def next_cell(payload: dict[str, object]) -> dict[str, object]:
    held, ahead_at = turn_mod.held(), time.time()
    turn_mod.wait()
    turn_at = time.time()
    time.sleep(float(payload.get("after", 0.0)))  # type: ignore[arg-type]
    child = subprocess.run([sys.executable, "-c", f"import os; print(os.environ.get({turn_mod.ENV!r}))"],
                           capture_output=True, text=True).stdout.strip()
    return {"held": held, "ahead_at": ahead_at, "turn_at": turn_at, "its_child_sees": child}


def crash_ahead(payload: dict[str, object]) -> dict[str, object]:
    raise RuntimeError("the build failed before its turn")


def test_a_held_child_works_while_the_previous_runs_and_its_turn_comes_after_that_ones_exit() -> None:
    launcher = Forked(PRELOAD)
    a = launcher.start(Job(f"{HERE}:previous", {"s": 1.0}))
    b = launcher.start(Job(f"{HERE}:next_cell"), held=True)
    assert a is not None and b is not None
    a_row, a_stamps = a.wait()
    b.go()
    b_row, b_stamps = b.wait()
    assert a_stamps is not None and b_stamps is not None
    assert b_row["held"] and b_row["ahead_at"] < a_row["ended_at"]  # (it ran while the previous one did)
    assert b_row["turn_at"] >= a_stamps["exited_at"] and b_stamps["turn_at"] >= a_stamps["exited_at"]
    assert b_stamps["spawned_at"] < b_stamps["turn_at"] <= b_stamps["exited_at"]
    assert b_row["its_child_sees"] == "None"  # (the processes it starts after its turn are not held)


def test_a_child_not_held_has_its_turn_at_once_and_wait_gives_a_held_one_its_turn() -> None:
    launcher = Forked(PRELOAD)
    now = launcher.start(Job(f"{HERE}:next_cell"))
    assert now is not None
    row, stamps = now.wait()
    assert not row["held"] and row["turn_at"] - row["ahead_at"] < 0.5 and stamps is not None
    assert "turn_at" not in stamps
    held = launcher.start(Job(f"{HERE}:next_cell"), held=True)
    assert held is not None
    time.sleep(0.5)
    asked = time.time()  # (its turn comes when it is waited for, not before -- however late the fork started it)
    row, stamps = held.wait()  # (no go(): waiting for it is its turn)
    assert row["held"] and row["ahead_at"] <= row["turn_at"] and row["turn_at"] >= asked
    assert stamps is not None and "turn_at" in stamps


def test_the_timeout_counts_from_the_turn() -> None:
    held = Forked(PRELOAD, timeout=2.0).start(Job(f"{HERE}:next_cell", {"after": 0.5}), held=True)
    assert held is not None
    time.sleep(2.5)  # (longer than its timeout, before its turn)
    row, _ = held.wait()
    assert "_failed" not in row and row["held"]
    late = Forked(PRELOAD, timeout=1.0).start(Job(f"{HERE}:next_cell", {"after": 30.0}), held=True)
    assert late is not None
    t = time.perf_counter()
    row, _ = late.wait()
    assert row["_killed"] and row["_failed"].startswith("timed out after 1 s") and time.perf_counter() - t < 15


def test_a_held_child_that_fails_before_its_turn_says_so_at_its_turn() -> None:
    held = Forked(PRELOAD).start(Job(f"{HERE}:crash_ahead"), held=True)
    assert held is not None
    row, stamps = held.wait()
    assert not row["_killed"] and "the build failed before its turn" in row["_failed"] and stamps is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_cancel_ends_a_held_child_and_leaves_nothing() -> None:
    held = Forked(PRELOAD).start(Job(f"{HERE}:next_cell"), held=True)
    assert held is not None and held.pid is not None
    z = _zygote(PRELOAD)
    assert z is not None
    children = f"/proc/{z.proc.pid}/task/{z.proc.pid}/children"
    assert str(held.pid) in Path(children).read_text().split()
    held.cancel()
    with pytest.raises(ProcessLookupError):
        os.kill(held.pid, 0)  # (killed and reaped by the server: no zombie left)
    assert str(held.pid) not in Path(children).read_text().split() and not held.tmp.exists()
