"""ampbench.values: the command line's values parsed (torch-free), and the option sections' parsed() built on them --
each wrong value one line naming its flag."""

from __future__ import annotations

import pytest

from ampbench.cells import LaunchOptions, MeasureSettings
from ampbench.command_options import LaunchArgs, MeasureOptions
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
    with pytest.raises(AmpbenchError, match="expected integers"):
        parse_batch_sizes("64,big")


def test_the_measure_section_parses_into_the_cells_settings_with_the_devices_default_steps() -> None:
    got = MeasureOptions(measure="memory,throughput", memory_budget="1KiB", seeds=2).parsed((7, 2))
    assert got == MeasureSettings(("throughput", "memory"), 7, 2, 0, 1024, seeds=2, converge_steps=None)
    given = MeasureOptions(steps=5, warmup=1).parsed((7, 2))
    assert (given.steps, given.warmup) == (5, 1)
    with pytest.raises(AmpbenchError, match="--warmup must be >= 1"):
        MeasureOptions(warmup=0).parsed((7, 2))


def test_the_launch_section_parses_with_this_machines_place() -> None:
    assert LaunchArgs(isolate=False, cell_timeout=5.0).parsed(1, "host:29500") == LaunchOptions(
        False, 5.0, 1, "host:29500", None)
    assert LaunchArgs().parsed() == LaunchOptions()
    with pytest.raises(AmpbenchError, match="--cell-timeout must be > 0"):
        LaunchArgs(cell_timeout=0).parsed()
