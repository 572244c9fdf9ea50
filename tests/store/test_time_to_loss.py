"""Time to fp32's loss: the steps each seed needs to fp32's parity loss, at the measured step time.

Oracles: curves whose trailing mean crosses the target at a step written out by hand; a mode with fp32's very curves
at twice its speed is exactly 2x sooner, one that needs twice the steps at 1.5x the speed 0.75x; the numbers the
advisor and the tables print are these keys. A real CPU run checks the keys against its own stored curves.
"""

from __future__ import annotations

import math

import pytest

from ampbench.report.advisor import advise
from ampbench.store.derive import derive, parity_bound
from ampbench.store.time_to_loss import reach_step, step_seconds, text
from tests.report.conftest import _row


def _curve(n: int, stretch: float = 1.0, floor: float = 0.5) -> list[float]:
    """A loss falling from 2.5 towards ``floor``; ``stretch`` 2: the same fall over twice the steps."""
    return [floor + 2.0 * math.exp(-i / (10.0 * stretch)) for i in range(n)]


def _conv(curves: list[list[float]]) -> dict:
    n = len(curves[0])
    return {"steps": n, "seeds": list(range(len(curves))), "curve_steps": list(range(1, n + 1)), "losses": curves,
            "final_losses": [sum(c[-max(1, n // 10):]) / max(1, n // 10) for c in curves],
            "diverged": [False] * len(curves), "skipped_steps": [0] * len(curves)}


def _rows(mode_curves: list[list[float]], mode_ms: float, base_curves: list[list[float]] | None = None,
          precision: str = "amp-bf16") -> list[dict]:
    base_curves = base_curves or [_curve(100), _curve(100, floor=0.51)]
    return derive([_row("r", "w", "fp32", 1000.0, converge=_conv(base_curves), step_ms_mean=10.0),
                   _row("r", "w", precision, 2000.0, converge=_conv(mode_curves), step_ms_mean=mode_ms)])


def test_reach_step_is_the_first_trailing_mean_at_or_below_the_target() -> None:
    losses = [10.0 - i for i in range(20)]  # 10, 9, ..., -9; k = 2: the mean of points i-1 and i is 10.5 - i
    steps = list(range(1, 21))
    # 10.5 - i <= 3.0 first at i = 7.5 -> i = 8, step 9
    assert reach_step(steps, losses, 3.0) == 9
    assert reach_step(steps, losses, 10.5) == 2  # (the first full window, at point 1)
    assert reach_step(steps, losses, -100.0) is None
    assert reach_step(steps, [*losses[:5], math.nan, *losses[6:]], 3.0) == 9  # (a NaN outside the window)
    assert reach_step(steps, [*losses[:8], math.nan, *losses[9:]], 3.0) == 11  # (windows holding it never count)


def test_the_same_curves_twice_as_fast_reach_fp32s_loss_exactly_twice_as_soon() -> None:
    fp32, mode = _rows([_curve(100), _curve(100, floor=0.51)], 5.0)
    mean, tol = parity_bound(fp32)  # type: ignore[misc]
    assert mode["fp32_loss_target"] == pytest.approx(mean + tol)
    assert mode["steps_to_fp32_loss"] == fp32["steps_to_fp32_loss"] < 100
    assert mode["time_to_fp32_loss_vs_fp32"] == pytest.approx(2.0)
    assert mode["time_to_fp32_loss_s"] == pytest.approx(mode["steps_to_fp32_loss"] * 0.005)
    assert fp32["time_to_fp32_loss_vs_fp32"] == pytest.approx(1.0)
    assert text(mode) == f"2.00x ({mode['steps_to_fp32_loss']} steps)"
    assert text({**mode, "speedup_vs_fp32_noise": 0.04}) == f"2.00x ±4% ({mode['steps_to_fp32_loss']} steps)"
    assert mode["energy_to_fp32_loss_j"] is None  # (no power reading: a CPU row)
    fp32_w, mode_w = derive([{**fp32, "mean_power_w": 400.0}, {**mode, "mean_power_w": 600.0}])
    assert mode_w["energy_to_fp32_loss_j"] == pytest.approx(mode["steps_to_fp32_loss"] * 0.005 * 600.0)
    assert fp32_w["energy_to_fp32_loss_j"] == pytest.approx(fp32["steps_to_fp32_loss"] * 0.010 * 400.0)


def test_a_mode_needing_twice_the_steps_at_1_5x_the_speed_is_later() -> None:
    """Its curve falls over twice the steps (the first-order fall: the step where it meets the target doubles, to
    within the window's rounding); at 1.5x the speed it gets there 0.75x as soon."""
    base = [_curve(200), _curve(200, floor=0.51)]
    fp32, mode = _rows([_curve(200, 2.0), _curve(200, 2.0, floor=0.51)], 10 / 1.5, base_curves=base)
    s_base, s_mode = fp32["steps_to_fp32_loss"], mode["steps_to_fp32_loss"]
    assert s_mode == pytest.approx(2 * s_base, abs=20)  # (a 20-point trailing window, on both)
    assert mode["time_to_fp32_loss_vs_fp32"] == pytest.approx(s_base * 10 / (s_mode * 10 / 1.5))
    assert mode["time_to_fp32_loss_vs_fp32"] < 1
    advice = advise([fp32, mode])  # (still advised on its speed and final-loss parity: the later arrival is said)
    later = 1 / mode["time_to_fp32_loss_vs_fp32"]
    assert f"fp32's loss {later:.2f}x later ({s_mode} steps; fp32 {s_base})" in advice.evidence


def test_a_mode_that_never_gets_there_says_so_and_no_time() -> None:
    fp32, mode = _rows([_curve(100, floor=0.9), _curve(100, floor=0.9)], 5.0)
    assert mode["steps_to_fp32_loss"] is None and mode["time_to_fp32_loss_vs_fp32"] is None
    assert mode["seeds_reaching_fp32_loss"] == 0 and text(mode) == "not in 100 steps"
    _, half = _rows([_curve(100), _curve(100, floor=0.9)], 5.0)
    assert half["seeds_reaching_fp32_loss"] == 1 and text(half) == "1 of 2 seeds in 100 steps"
    no_curves = derive([_row("r", "w", "fp32", 1000.0, converge={"final_losses": [1.0], "diverged": [False]}),
                        _row("r", "w", "amp-bf16", 2000.0, converge={"final_losses": [1.0], "diverged": [False]})])
    assert all(r["fp32_loss_target"] is None and text(r) == "-" for r in no_curves)


def test_the_advice_says_how_much_sooner_at_equal_loss() -> None:
    fp32, mode = _rows([_curve(100), _curve(100, floor=0.51)], 5.0)
    advice = advise([fp32, mode])
    steps = mode["steps_to_fp32_loss"]
    assert advice.recommended == "amp-bf16" and f"fp32's loss 2.00x sooner ({steps} steps; fp32 {steps})" in advice.evidence


def test_a_parity_mode_one_seed_of_which_never_got_there_says_so_in_the_advice() -> None:
    """The verdict judges the seeds' mean final loss (0.49 and 0.54: mean 0.515, within fp32's 0.505 + 0.021), the time
    each seed: the advice is "converges like fp32" and says the second seed never reached fp32's loss."""
    fp32, mode = _rows([_curve(100, floor=0.49), _curve(100, floor=0.54)], 5.0)
    assert mode["converge_verdict"] == "parity" and mode["seeds_reaching_fp32_loss"] == 1
    advice = advise([fp32, mode])
    assert advice.recommended == "amp-bf16" and advice.label == "converges like fp32"
    assert advice.evidence.endswith("final loss within fp32's seed spread, fp32's loss reached by 1 of 2 seeds in "
                                    "100 steps"), advice.evidence


def test_step_seconds_prefers_the_timed_mean() -> None:
    assert step_seconds({"step_ms_mean": 20.0, "samples_per_s": 1.0, "batch_size": 4}) == pytest.approx(0.02)
    assert step_seconds({"samples_per_s": 800.0, "batch_size": 16, "world_size": 2}) == pytest.approx(0.04)
    assert step_seconds({"samples_per_s": None}) is None


def test_a_real_run_times_its_own_curves(tmp_path) -> None:
    """A CPU run with convergence: each row's steps are where its own stored curves cross the target, and the time
    ratio is fp32's steps x mean step over its own."""
    from ampbench.store import Store
    from tests.conftest import cli

    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16",
                       "--measure", "throughput,converge", "--steps", "3", "--warmup", "1", "--seeds", "2",
                       "--converge-steps", "60", "--no-isolate", "--no-report", "--db", str(tmp_path / "r.db"))
    # (60 steps: in 20 this MLP's per-batch losses, 0.36-1.93, fall by less than fp32's seed spread -- inconclusive)
    assert code == 0, err
    rows = {r["precision"]: r for r in derive(Store(tmp_path / "r.db").rows())}
    target = rows["fp32"]["fp32_loss_target"]
    for r in rows.values():
        conv = r["converge"]
        reached = [reach_step(conv["curve_steps"], c, target) for c in conv["losses"]]
        assert r["seeds_reaching_fp32_loss"] == sum(s is not None for s in reached)
        if None not in reached:
            assert r["steps_to_fp32_loss"] == sorted(reached)[0]  # (two seeds: the lower median)
    fp32, amp = rows["fp32"], rows["amp-bf16"]
    if amp["time_to_fp32_loss_vs_fp32"] is not None:
        assert amp["time_to_fp32_loss_vs_fp32"] == pytest.approx(
            fp32["steps_to_fp32_loss"] * fp32["step_ms_mean"] / (amp["steps_to_fp32_loss"] * amp["step_ms_mean"]))
