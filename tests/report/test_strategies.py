"""The distributed summary judges speeds against their noise before it ranks them (:mod:`ampbench.report.strategies`):
a 3-step DDP cell's 0.71x against one process, or its 2 % lead over FSDP, is no finding."""

from __future__ import annotations

import math
from typing import Any

from ampbench.report.strategies import strategy_summary
from ampbench.store import derive


def _row(strategy: str | None, precision: str, sps: float, noise: float | None, steps: int = 20) -> dict[str, Any]:
    return {"run_id": "r", "workload": "w", "preset": "small", "batch_size": 8, "device_name": "D", "device": "cpu",
            "precision": precision, "status": "ok", "samples_per_s": sps, "samples_per_s_noise": noise, "steps": steps,
            "strategy": strategy, "world_size": 2 if strategy else 1, "grad_reduce_dtype": None}


def test_cells_within_the_noise_of_the_fastest_are_named_beside_it_and_a_clear_loser_is_not() -> None:
    rows = derive([_row(None, "fp32", 900.0, 0.02), _row("ddp", "amp-bf16", 1214.0, 0.03),
                   _row("ddp", "fp32", 1190.0, 0.03), _row("fsdp", "fp32", 466.0, 0.03)])
    said = strategy_summary(rows)
    assert said is not None and said.startswith("fastest across ranks: amp-bf16 · ddp x2, 1,214 samples/s")
    # oracle: 1,214 / 1,190 = 1.02x, inside 1 + 2 * hypot(3 %, 3 %) = 1.085x; 1,214 / 466 = 2.6x beyond it
    assert 1214 / 1190 < 1 + 2 * math.hypot(0.03, 0.03) < 1214 / 466
    assert "(within the noise of it: fp32 · ddp x2 1,190 samples/s)" in said
    assert "466" not in said and "one process" not in said  # (the one process ran slower: nothing to say)


def test_one_process_is_called_faster_only_beyond_the_noise() -> None:
    """1,714 against 1,214 samples/s (1.41x): a finding at 3 % noise, none at 25 % (the band is 1 + 2 x 35 % = 1.71x)."""
    clear = strategy_summary(derive([_row(None, "fp32", 1714.0, 0.03), _row("ddp", "fp32", 1214.0, 0.03)]))
    assert clear is not None and "-- slower than one process: fp32 ran 1,714 samples/s (0.71x; the ranks share" in clear
    noisy = strategy_summary(derive([_row(None, "fp32", 1714.0, 0.25), _row("ddp", "fp32", 1214.0, 0.25)]))
    assert noisy is not None and "slower than one process" not in noisy
    assert "-- not measurably faster than one process: fp32 ran 1,714 samples/s (0.71x; the ranks share this CPU's " \
           "cores; ±35%; a gain counts beyond 1.71x)" in noisy


def test_without_a_noise_estimate_nothing_is_ranked_or_called_slower() -> None:
    """3 timed steps a cell: no noise estimate (it takes 6), so neither the order of the DDP cells nor one process's
    lead is claimed, and the summary says why."""
    rows = derive([_row(None, "fp32", 1714.0, None, steps=3), _row("ddp", "amp-bf16", 1300.0, None, steps=3),
                   _row("ddp", "fp32", 1214.0, None, steps=3)])
    said = strategy_summary(rows)
    assert said is not None and said.startswith("fastest across ranks: amp-bf16 · ddp x2, 1,300 samples/s (not judged "
                                                "against the other cells, noise not measured: 3 timed steps a cell")
    assert "slower than one process" not in said and "not measurably faster than one process" in said


def test_a_disturbed_fp32_baseline_ranks_nothing() -> None:
    """fp32 DDP's closing baseline moved 40 % (seen on a busy CPU): its speed is no ruler for the others."""
    base = _row("ddp", "fp32", 1214.0, 0.02) | {"baseline_drift": 0.40}
    said = strategy_summary(derive([_row("ddp", "amp-bf16", 1300.0, 0.02), base]))
    assert said is not None and "(not judged against the other cells, fp32's own measurements disagree by 40%" in said
