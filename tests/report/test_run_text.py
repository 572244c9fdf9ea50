"""When a plain progress line (a log, CI) is due: a cell's quick phases leave none, a slow or stuck one is named."""

from __future__ import annotations

from ampbench.progress import Event
from ampbench.report.run_text import PLAIN_AFTER, PLAIN_EVERY, PlainProgress


def shown(events: list[tuple[float, Event]]) -> list[tuple[float, str]]:
    plain = PlainProgress()
    return [(t, e.text()) for t, e in events if plain.due(e, now=t)]


def test_a_cells_quick_phases_leave_no_line() -> None:
    phases = ["opening the device", "building the workload", "first step", "memory step (saved activations)",
              "FLOP count step", "reading the measurements"]
    events = [(0.3 * k, Event(p)) for k, p in enumerate(phases)]
    events += [(2.0 + 0.1 * i, Event("timed steps", i, 20)) for i in range(21)]
    assert shown(events) == []


def test_a_slow_step_meter_is_shown_then_every_plain_every_and_at_its_last_step() -> None:
    events = [(0.0, Event("first step"))] + [(1.0 + i, Event("timed steps", i, 30)) for i in range(31)]
    got = shown(events)
    # the meter began at t=1: a line once it has run PLAIN_AFTER, then every PLAIN_EVERY, then its last step
    first = 1.0 + PLAIN_AFTER
    assert [t for t, _ in got] == [first, first + PLAIN_EVERY, first + 2 * PLAIN_EVERY, 31.0]
    assert got[0][1] == f"timed steps: step {int(PLAIN_AFTER)}/30" and got[-1][1] == "timed steps: step 30/30"


def test_a_silent_phase_is_named_by_its_heartbeat() -> None:
    # phases.py's heartbeat reports a phase that said nothing for 10 s, with the same name and its elapsed time
    events = [(0.0, Event("building the workload")), (0.5, Event("memory step (saved activations)")),
              (10.5, Event("memory step (saved activations)", detail="(10 s in this phase)")),
              (20.5, Event("memory step (saved activations)", detail="(20 s in this phase)"))]
    assert shown(events) == [(10.5, "memory step (saved activations) (10 s in this phase)"),
                             (20.5, "memory step (saved activations) (20 s in this phase)")]


def test_a_measure_shown_once_is_not_repeated_and_a_new_cell_starts_afresh() -> None:
    plain = PlainProgress()
    assert not plain.due(Event("convergence", 0, 100, detail="seed 1/2"), now=0.0)
    assert plain.due(Event("convergence", 60, 100, detail="seed 1/2"), now=6.0)  # a seed is not a new measure:
    assert not plain.due(Event("convergence", 0, 100, detail="seed 2/2"), now=7.0)  # its line waits PLAIN_EVERY
    assert plain.due(Event("convergence", 100, 100, detail="seed 2/2"), now=8.0)  # (its last step)
    assert not plain.due(Event("convergence", 100, 100, detail="seed 2/2"), now=8.5)  # said already
    plain.start()  # the next cell's first measure, named as this one's, is new: it waits PLAIN_AFTER again
    assert not plain.due(Event("convergence", 1, 100, detail="seed 1/2"), now=9.0)


def test_a_last_step_right_after_the_first_line_is_not_a_second_line() -> None:
    """bert (small) on the CPU: "step 19/20, ~0 s left" at 5 s, then "step 20/20" 0.26 s later."""
    plain = PlainProgress()
    assert not plain.due(Event("timed steps", 0, 20), now=0.0) and plain.due(Event("timed steps", 19, 20), now=5.0)
    assert not plain.due(Event("timed steps", 20, 20), now=5.26)  # (its line said it was ending)
