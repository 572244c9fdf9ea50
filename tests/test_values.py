"""ampbench.values: the command line's values parsed (torch-free), and the option sections' parsed() built on them --
each wrong value one line naming its flag."""

from __future__ import annotations

import pytest

from ampbench.cells import LaunchOptions, MeasureOptions
from ampbench.command_options import LaunchArgs, MeasureArgs
from ampbench.errors import AmpbenchError
from ampbench.values import parse_batch_sizes, parse_list, parse_measures, parse_size


def test_lists_sizes_measures_and_batches() -> None:
    assert parse_list(None, "x") == [] and parse_list(" a, b ,", "x") == ["a", "b"]
    with pytest.raises(AmpbenchError, match="--x is empty"):
        parse_list(" , ", "x")
    assert parse_size("2GiB", "memory-budget") == 2 * 2**30 and parse_size("512 MB", "m") == 512 * 10**6
    assert parse_size("1e9", "m") == 10**9 and parse_size(None, "m") is None
    with pytest.raises(AmpbenchError, match="--memory-budget '2 parsecs'"):
        parse_size("2 parsecs", "memory-budget")
    assert parse_measures("memory,throughput,memory") == ("throughput", "memory")  # (canonical order, once each)
    with pytest.raises(AmpbenchError, match="--measure speed: unknown measurement"):
        parse_measures("speed")
    assert parse_batch_sizes("64,128") == (64, 128) and parse_batch_sizes(None) == (None,)
    assert parse_batch_sizes("64,128,64") == (64, 128)  # (a size given twice: one cell, not two runs of it)
    with pytest.raises(AmpbenchError, match="expected integers"):
        parse_batch_sizes("64,big")


def test_the_measure_section_parses_into_the_cells_settings_with_the_devices_default_steps() -> None:
    got = MeasureArgs(measure="memory,throughput", memory_budget="1KiB", seeds=2).parsed((7, 2))
    assert got == MeasureOptions(("throughput", "memory"), 7, 2, 0, 1024, seeds=2, converge_steps=None)
    given = MeasureArgs(steps=5, warmup=1).parsed((7, 2))
    assert (given.steps, given.warmup) == (5, 1)
    with pytest.raises(AmpbenchError, match="--warmup must be >= 1"):
        MeasureArgs(warmup=0).parsed((7, 2))


def test_the_launch_section_parses_with_this_machines_place() -> None:
    assert LaunchArgs(isolate=False, cell_timeout=5.0).parsed(1, "host:29500") == LaunchOptions(
        False, 5.0, 1, "host:29500", None)
    assert LaunchArgs().parsed() == LaunchOptions()
    with pytest.raises(AmpbenchError, match="--cell-timeout must be > 0"):
        LaunchArgs(cell_timeout=0).parsed()


def test_one_router_takes_flat_options_to_their_sections() -> None:
    """RunOptions.of, RunConfig.of and the command line's sections route through cells.route: each value to the
    section whose field it names, absent ones at their defaults, an unknown name a TypeError naming the caller."""
    from ampbench.cells import route
    from ampbench.command_options import RunOptions

    built = route({"measure": MeasureArgs, "launch": LaunchArgs}, {"steps": 4, "cell_timeout": 9.0}, "f()")
    assert built == {"measure": MeasureArgs(steps=4), "launch": LaunchArgs(cell_timeout=9.0)}
    with pytest.raises(TypeError, match=r"f\(\) got unknown options: stepz"):
        route({"measure": MeasureArgs}, {"stepz": 4}, "f()")
    options = RunOptions.of(steps=4, precisions="fp32", cell_timeout=9.0)
    assert (options.measure.steps, options.recipe.precisions, options.launch.cell_timeout) == (4, "fp32", 9.0)
    with pytest.raises(TypeError, match="RunOptions.of"):
        RunOptions.of(stepz=4)


def test_grad_accum_values() -> None:
    from ampbench.values import parse_grad_accums

    assert parse_grad_accums(None) == (1,) and parse_grad_accums(4) == (4,) and parse_grad_accums("1,4,4") == (1, 4)
    for bad, said in (("0", "--grad-accum 0: give the micro-batches"), ("1,x", "expected integers >= 1"),
                      (True, "expected integers >= 1")):
        with pytest.raises(AmpbenchError, match=said):
            parse_grad_accums(bad)
