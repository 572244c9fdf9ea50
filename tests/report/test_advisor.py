"""The advisor on stores with known numbers."""

from __future__ import annotations

import pytest

from ampbench.report.advisor import advise
from ampbench.store import derive
from ampbench.store.derive import below_fp32


def _row(precision: str, sps: float | None, peak: int = 1000, status: str = "ok", verdict_losses: list[float] | None = None,
         device: str = "cuda:0", **kw: object) -> dict[str, object]:
    r: dict[str, object] = {"run_id": "r", "workload": "w", "preset": "small", "batch_size": 64, "device_name": "GPU",
                            "device": device, "precision": precision, "status": status, "reason": "" if status == "ok" else
                            "boom", "samples_per_s": sps, "peak_allocated_bytes": peak, "step_ms_p50": 50.0,
                            "steps": 20, "samples_per_s_noise": None if sps is None else 0.002,  # (20 steps' noise)
                            "measures": ["throughput", "memory"] + (["converge"] if verdict_losses else [])}
    if verdict_losses is not None:
        r["converge"] = {"final_losses": verdict_losses, "diverged": [False] * len(verdict_losses)}
    r.update(kw)
    return r


def test_fastest_mode_with_evidence_speed_only() -> None:
    a = advise(derive([_row("fp32", 100.0, 1000, max_batch=590), _row("amp-fp16", 290.0, 540, max_batch=1120),
                       _row("amp-bf16", 250.0, 540)]))
    assert a.recommended == "amp-fp16" and a.label == "speed only, convergence not checked"
    assert a.evidence == "amp-fp16: 2.90x faster than fp32, 46% less memory, batch 590 → 1,120"


def test_a_convergence_run_fp32_learned_nothing_from_is_speed_only_and_says_why() -> None:
    """fp32 10.84 -> 10.84 in 30 steps: no mode is "converges like fp32" on it; the advice is speed only, names the
    two losses and the fix, and a pure mode (which needs its own parity verdict) stays out, saying why."""
    flat = [10.84] * 30
    conv = {"steps": 30, "curve_steps": list(range(1, 31)), "losses": [flat, flat], "final_losses": [10.84, 10.84],
            "diverged": [False, False]}
    rows = [_row("fp32", 100.0, 1000, verdict_losses=[10.84], converge=conv),
            _row("amp-bf16", 150.0, 900, verdict_losses=[10.84], converge=conv),
            _row("pure-bf16", 190.0, 600, verdict_losses=[10.84], converge=conv)]
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and a.label == "speed only, convergence inconclusive" and not a.convergence_checked
    assert "convergence inconclusive: fp32's loss did not fall by more than the parity tolerance (0.217) in 30 steps " \
           "(10.84 → 10.84): a mode that learned nothing would pass; raise --converge-steps" in a.evidence, a.evidence
    assert "pure-bf16 ran 1.27x faster but is not recommended: its convergence was inconclusive" in a.evidence
    # where no mode helps, the advice still says why every verdict reads "inconclusive" (it said nothing of it)
    slow = [rows[0], _row("amp-bf16", 80.0, 900, verdict_losses=[10.84], converge=conv)]
    a = advise(derive(slow))
    assert a.label == "no mode helps" and a.reason.endswith(
        "; convergence inconclusive: fp32's loss did not fall by more than the parity tolerance (0.217) in 30 steps "
        "(10.84 → 10.84): a mode that learned nothing would pass; raise --converge-steps"), a.reason


def test_the_console_markdown_and_html_lines_name_the_pick_once() -> None:
    """They say "use amp-fp16" already: the evidence follows without its own "amp-fp16: " (it said the mode twice;
    the HTML's recommendations table and advice box still did)."""
    from ampbench.report.console import advice_lines
    from ampbench.report.html import render_html
    from ampbench.report.markdown import render_markdown

    rows = derive([_row("fp32", 100.0, 1000), _row("amp-fp16", 290.0, 540)])
    assert advise(rows).reason == "2.90x faster than fp32, 46% less memory"
    (line,) = advice_lines(rows)
    assert line.count("amp-fp16") == 1 and line.endswith(")[/] 2.90x faster than fp32, 46% less memory"), line
    text = render_markdown(rows, {"run_id": "r"})
    assert "**use amp-fp16** (speed only, convergence not checked): 2.90x faster than fp32" in text, text
    html = render_html(rows)
    assert "amp-fp16: 2.90x" not in html and html.count("2.90x faster than fp32, 46% less memory") == 2


def test_convergence_failure_of_the_fastest_mode_skips_it() -> None:
    rows = [_row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99]),
            _row("pure-fp16", 400.0, verdict_losses=[2.0, 2.1, 2.2]),
            _row("amp-bf16", 250.0, 600, verdict_losses=[1.0, 1.0, 1.01])]
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and a.convergence_checked and a.label == "converges like fp32"
    assert a.evidence.endswith("final loss within fp32's seed spread")


def test_a_mode_ending_below_fp32s_spread_is_not_said_to_train_like_fp32() -> None:
    """Parity judges the final loss against fp32's mean + tolerance: a mode far below it (a Keras CNN in pure-fp16,
    1.96 against fp32's 2.23) passes, but "within fp32's seed spread" and "converges like fp32" were false."""
    rows = [_row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99]), _row("amp-bf16", 250.0, 600, verdict_losses=[0.5, 0.52])]
    a = advise(derive(rows))
    tol = 3 * 0.01  # (3 seed-to-seed standard deviations of fp32's [1.0, 1.01, 0.99], above 2 % of its loss)
    assert a.recommended == "amp-bf16" and a.label == "converges, below fp32's loss"
    assert a.evidence.endswith(f"final loss 0.51, below fp32's 1 by more than its seed spread ({tol:.2g}): it did not "
                               "train as fp32 does (a longer --converge-steps run shows whether it stays ahead)"), a.evidence
    # at the edge of the spread it is parity as ever
    edge = [_row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99]), _row("amp-bf16", 250.0, 600, verdict_losses=[0.971])]
    a = advise(derive(edge))
    assert a.label == "converges like fp32" and a.evidence.endswith("final loss within fp32's seed spread")
    assert below_fp32(edge[1], edge[0]) is None
    assert below_fp32({"converge": {"final_losses": [0.969]}}, edge[0]) == (0.969, 1.0, pytest.approx(tol))


def test_ties_prefer_less_memory_then_the_simpler_recipe() -> None:
    a = advise(derive([_row("fp32", 100.0), _row("amp-fp16", 200.0, 600), _row("master-fp16", 201.0, 500)]))
    assert a.recommended == "master-fp16"  # within 2%: less memory wins
    a = advise(derive([_row("fp32", 100.0), _row("amp-fp16", 200.0, 600), _row("amp-bf16", 199.0, 600)]))
    assert a.recommended == "amp-bf16"  # same memory: bf16 autocast needs no loss scaling
    # memory within MIN_MEMORY_SAVING of the least is the same memory: the simpler recipe (was master-bf16, for 2%)
    a = advise(derive([_row("fp32", 100.0, 1000), _row("amp-bf16", 129.0, 430), _row("master-bf16", 127.0, 420)]))
    assert a.recommended == "amp-bf16", a.evidence


def test_missing_fp32_baseline() -> None:
    a = advise(derive([_row("amp-fp16", 200.0), _row("amp-bf16", 150.0)]))
    assert a.recommended == "amp-fp16" and "no fp32 baseline" in a.evidence
    assert "the fastest measured" in a.evidence


def test_without_fp32_the_pick_is_not_called_the_fastest_when_a_left_out_mode_ran_faster() -> None:
    """pure-bf16 (which needs its own convergence verdict) ran faster: amp-bf16 was "the fastest measured" beside
    "pure-bf16 ran 1.11x faster but is not recommended"."""
    a = advise(derive([_row("amp-bf16", 123_860.0), _row("pure-bf16", 136_994.0)]))
    assert a.recommended == "amp-bf16" and "the fastest measured" not in a.evidence, a.evidence
    assert "the fastest mode that needs no convergence verdict of its own (no fp32 baseline" in a.evidence
    assert a.evidence.endswith("pure-bf16 ran 1.11x faster but is not recommended: run --measure converge first")


def test_a_run_without_fp32_has_no_ratio_columns_in_its_tables() -> None:
    """Every mode's "speedup" and "mem vs fp32" were "-" (console, Markdown, HTML); with fp32 they are there."""
    import re

    from rich.console import Console

    from ampbench.report.console import results_tables
    from ampbench.report.html import render_html
    from ampbench.report.markdown import render_markdown

    for with_fp32, rows in ((False, derive([_row("amp-bf16", 150.0, 600), _row("pure-bf16", 160.0, 500)])),
                            (True, derive([_row("fp32", 100.0, 1000), _row("amp-bf16", 150.0, 600)]))):
        out = Console(width=160, record=True)
        for t in results_tables(rows, width=160):
            out.print(t)
        console = out.export_text()
        assert ("speedup" in console and "mem vs fp32" in console) is with_fp32, console
        assert ("1.50x" in console) is with_fp32
        md = render_markdown(rows, {"run_id": "r"})
        header = next(line for line in md.splitlines() if line.startswith("| precision"))
        rule = md.splitlines()[md.splitlines().index(header) + 1]
        assert header.count("|") == rule.count("|"), (header, rule)
        assert ("speedup vs fp32" in header and "memory vs fp32" in header) is with_fp32, header
        html = render_html(rows)
        heads = re.findall(r"<th[^>]*>([^<]*)</th>", html)
        assert ("speedup vs fp32" in heads and "vs fp32" in heads) is with_fp32, heads


def test_all_modes_failed() -> None:
    a = advise(derive([_row("fp32", None, status="oom"), _row("amp-fp16", None, status="diverged")]))
    assert a.recommended is None and a.label == "nothing ran"
    assert "fp32 oom (boom)" in a.evidence and "amp-fp16 diverged" in a.evidence


def test_no_convergence_verdict_without_fp32_says_why_not_that_nothing_converged() -> None:
    a = advise(derive([_row("fp32", 100.0, status="oom"), _row("amp-fp16", 200.0, verdict_losses=[1.0])]))
    assert a.recommended is None and a.label == "no fp32 baseline"
    assert a.evidence.endswith("and fp32 ended oom (boom)"), a.evidence
    # the README's optimizer-state example ran amp-bf16 and pure-bf16 only: it said "no mode converged like fp32"
    a = advise(derive([_row("amp-bf16", 150.0, verdict_losses=[1.0]), _row("pure-bf16", 160.0, verdict_losses=[1.1])]))
    assert a.recommended is None and a.label == "no fp32 baseline"
    assert a.evidence.endswith("fp32 did not run: add fp32 to --precisions"), a.evidence
    fp32 = _row("fp32", 100.0, verdict_losses=[1.0], converge={"final_losses": [float("nan")], "diverged": [True]})
    a = advise(derive([fp32, _row("amp-bf16", 150.0, verdict_losses=[1.0])]))
    assert a.recommended is None and a.evidence.endswith("fp32 itself diverged"), a.evidence
    # a mode judged worse than fp32 leaves fp32 the pick, as before
    a = advise(derive([_row("fp32", 100.0, verdict_losses=[1.0, 1.0]), _row("amp-fp16", 200.0, verdict_losses=[9.0])]))
    assert a.recommended == "fp32" and a.label == "no mode helps"


def test_no_mode_helps_on_a_cpu_without_half_hardware() -> None:
    env = {"device": "cpu", "cpu_half_hardware": {"avx512_bf16": False, "amx_bf16": False, "avx512_fp16": False,
                                                  "amx_fp16": False}}
    rows = [_row("fp32", 100.0, device="cpu", env=env), _row("amp-bf16", 60.0, device="cpu", env=env)]
    a = advise(derive(rows))
    assert a.recommended == "fp32" and a.label == "no mode helps"
    assert a.evidence.startswith("CPU without half-precision math hardware (bf16 math is emulated")
    assert a.evidence.endswith("half precision is slower here")
    from ampbench.report.console import advice_lines  # (the line says fp32 once: "fp32 (no mode helps) fp32: ...")

    (line,) = advice_lines(derive(rows))
    assert "(no mode helps)[/] CPU without" in line and "fp32: CPU" not in line, line


@pytest.mark.parametrize("flag,unit", [("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16")])
def test_cpu_claims_come_from_the_recorded_probe(flag: str, unit: str) -> None:
    """An AMX CPU is never described as lacking AMX: the words come from the row's recorded flags."""
    hw = {"avx512_bf16": True, "amx_bf16": flag == "amx_bf16", "avx512_fp16": False, "amx_fp16": False}
    fpc = {"fp32": 64.0, "bf16": 1024.0 if flag == "amx_bf16" else 128.0, "fp16": 64.0}
    env = {"device": "cpu", "cpu_half_hardware": hw, "cpu_peak": {"flops_per_cycle": fpc}}
    rows = [_row("fp32", 100.0, device="cpu", env=env, achieved_tflops=0.1, math_mode="fp32", device_name="CPU X",
                 conv_flops_share=0.0),
            _row("amp-bf16", 101.0, device="cpu", env=env, achieved_tflops=0.1, math_mode="bf16", device_name="CPU X",
                 conv_flops_share=0.0)]
    a = advise(derive(rows))
    assert a.recommended == "fp32" and "without AMX" not in a.evidence
    assert a.evidence.startswith(f"no half-precision mode ran faster than fp32 for this model, on a CPU where bf16 "
                                 f"matmuls run on {unit}"), a.evidence
    assert f"bf16 matmuls run on {unit} (peak {fpc['bf16'] / 64:g}x fp32's)" in a.evidence
    hw_probe = [{"device_name": "CPU X", "gemm": [{"size": 1024, "math_mode": "fp32", "tflops": 0.4},
                                                  {"size": 1024, "math_mode": "bf16", "tflops": 1.6}],
                 "gemm_vs_fp32": {"bf16": 4.0}}]
    a = advise(derive(rows, hw_probe))  # with `ampbench hw`'s GEMMs: the gap is explained
    # fp32's matmuls take 0.1/0.4 = 25% of its step at the measured GEMM speed: 1 / (0.75 + 0.25/4) = 1.23x at most
    assert "its matmuls are ~25% of fp32's step" in a.evidence and "amp-bf16 could gain ~1.23x at most" in a.evidence
    assert "(measured 1.01x)" in a.evidence


def test_launch_bound_small_model_on_gpu() -> None:
    rows = [_row("fp32", 100.0, step_ms_p50=1.2), _row("amp-fp16", 101.0, step_ms_p50=1.19)]
    a = advise(derive(rows))
    assert a.recommended == "fp32" and "launch-bound" in a.evidence


def test_memory_saving_alone_is_worth_it_when_not_slower() -> None:
    a = advise(derive([_row("fp32", 100.0, 1000), _row("amp-bf16", 100.5, 700)]))
    assert a.recommended == "amp-bf16" and "30% less memory" in a.evidence


def test_a_gain_inside_the_noise_keeps_fp32_and_says_so() -> None:
    rows = [_row("fp32", 100.0, samples_per_s_noise=0.08), _row("amp-bf16", 107.0, samples_per_s_noise=0.05)]
    a = advise(derive(rows))
    assert a.recommended == "fp32" and a.label == "within noise"
    # (the ratio's noise: both cells' combined, sqrt(0.08^2 + 0.05^2) = 9.4%; a gain counts beyond 1 + 2 x 9.4%)
    assert a.evidence == ("amp-bf16 measured 1.07x faster, within this measurement's noise (±9%; a gain counts "
                          "beyond 1.19x); rerun with --repeats 3 to settle it")


def test_a_clear_gain_on_a_noisy_measurement_still_wins() -> None:
    rows = [_row("fp32", 100.0, samples_per_s_noise=0.08), _row("amp-bf16", 130.0, samples_per_s_noise=0.05)]
    assert advise(derive(rows)).recommended == "amp-bf16"  # 1.30 > 1 + 2 x 9.4%


def test_quiet_measurement_keeps_the_5_percent_rule() -> None:
    rows = [_row("fp32", 100.0, samples_per_s_noise=0.005), _row("amp-bf16", 106.0, samples_per_s_noise=0.005)]
    assert advise(derive(rows)).recommended == "amp-bf16"


def _rep(precision: str, speeds: list[float], peak: int = 1000) -> list[dict[str, object]]:
    key = f"{precision}-key"
    return [_row(precision, s, peak, repeat=i, cell_key=key if i == 0 else f"{key}-{i}",
                 repeat_of=None if i == 0 else key, samples_per_s_noise=0.01) for i, s in enumerate(speeds)]


def test_repeats_must_all_agree() -> None:
    rows = _rep("fp32", [100.0, 100.0, 100.0]) + _rep("amp-bf16", [112.0, 97.0, 110.0])
    a = advise(derive(rows))  # median 1.10x, but one repeat was slower than fp32's next to it
    assert a.recommended == "fp32" and a.label == "within noise"
    assert "repeats ranged 0.97-1.12x" in a.evidence and "more --repeats" in a.evidence
    rows = _rep("fp32", [100.0, 104.0, 96.0]) + _rep("amp-bf16", [112.0, 108.0, 104.0])
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and "1.08x faster than fp32 (repeats 1.04-1.12x)" in a.evidence


def test_noise_never_grants_a_slower_mode_or_a_wider_tie() -> None:
    rows = [_row("fp32", 100.0, 1000, samples_per_s_noise=0.2), _row("pure-bf16", 92.0, 500, samples_per_s_noise=0.2)]
    a = advise(derive(rows))  # 8% slower: inside the ±28% noise, but noise is no evidence of equal speed
    assert a.recommended == "fp32" and a.label == "no mode helps"
    rows = [_row("fp32", 100.0, samples_per_s_noise=0.01), _row("amp-fp16", 200.0, 800, samples_per_s_noise=0.1),
            _row("master-fp16", 185.0, 500, samples_per_s_noise=0.1)]
    assert advise(derive(rows)).recommended == "amp-fp16"  # 7.5% apart: not a tie, however noisy


def test_speedup_text_shows_noise_or_range_and_colours_only_beyond_it() -> None:
    from ampbench.report.console import speedup_text

    d = {r["precision"]: r for r in derive([_row("fp32", 100.0, samples_per_s_noise=0.08),
                                            _row("amp-bf16", 107.0, samples_per_s_noise=0.05),
                                            _row("amp-fp16", 150.0, samples_per_s_noise=0.05)])}
    assert speedup_text(d["amp-bf16"]) == ("1.07x ±9%", "same")
    assert speedup_text(d["amp-fp16"]) == ("1.50x ±9%", "faster")
    assert speedup_text(d["fp32"]) == ("1.00x", "same")
    assert speedup_text(dict(d["fp32"], baseline_drift=0.031)) == ("1.00x (moved 3%)", "same")
    rows = derive(_rep("fp32", [100.0, 100.0]) + _rep("amp-bf16", [80.0, 85.0]))
    assert speedup_text(rows[1]) == ("0.80x (0.80-0.85)", "slower")


def test_a_difference_of_unmeasured_noise_is_neither_a_gain_nor_a_loss() -> None:
    """The reported case: a --steps 3 DDP run on a busy CPU, whose cells measure no noise (two blocks of 2 steps
    take 4) and whose strategy has no closing fp32 baseline: amp-bf16 "1.91x", coloured faster and open to the
    advice, while the one-process cells of the same run said 0.76x. Oracle: the same speeds with a measured 2% noise
    are claimed, so only the missing estimate withholds the claim."""
    from ampbench.report.console import speedup_text

    def rows(noise: float | None) -> list[dict[str, object]]:
        return [_row(p, sps, peak, steps=3, samples_per_s_noise=noise, strategy="ddp", world_size=2)
                for p, sps, peak in (("fp32", 100.0, 1000), ("amp-bf16", 191.0, 1000), ("amp-fp16", 50.0, 1000))]

    measured = {r["precision"]: r for r in derive(rows(0.02))}
    assert speedup_text(measured["amp-bf16"]) == ("1.91x ±3%", "faster")
    assert speedup_text(measured["amp-fp16"]) == ("0.50x ±3%", "slower")
    assert advise(derive(rows(0.02))).recommended == "amp-bf16"
    unmeasured = {r["precision"]: r for r in derive(rows(None))}
    assert unmeasured["amp-bf16"]["speedup_vs_fp32_noise"] is None
    assert speedup_text(unmeasured["amp-bf16"]) == ("1.91x (noise unknown)", "same")
    assert speedup_text(unmeasured["amp-fp16"]) == ("0.50x (noise unknown)", "same")
    assert speedup_text(unmeasured["fp32"]) == ("1.00x", "same")
    a = advise(derive(rows(None)))
    assert a.recommended == "fp32" and a.label == "noise unknown"
    assert a.evidence == ("amp-bf16 measured 1.91x faster, not claimed, noise not measured: 3 timed steps a cell, an "
                          "estimate takes 6 or more, or --repeats 3")
    # picked for its memory at fp32's speed: the ratio is said with why it is not judged
    lean = derive([_row("fp32", 100.0, 1000, steps=3, samples_per_s_noise=None),
                   _row("amp-bf16", 101.0, 500, steps=3, samples_per_s_noise=None)])
    assert advise(lean).evidence == ("amp-bf16: 1.01x the speed of fp32 (noise not measured: 3 timed steps a cell, an "
                                     "estimate takes 6 or more, or --repeats 3), 50% less memory")
    # cells of 5 steps (two blocks: no estimate) whose fp32 moved 5 % between its two measurements: that one
    # difference stands for no noise either
    drift = [_row("fp32", 100.0, steps=5, samples_per_s_noise=None, baseline_drift=0.05),
             _row("amp-bf16", 191.0, steps=5, samples_per_s_noise=None)]
    d = derive(drift)
    assert d[1]["speedup_vs_fp32_noise"] is None and advise(d).label == "noise unknown"
    assert advise(d).evidence.endswith("noise not measured: 5 timed steps a cell, an estimate takes 6 or more, or "
                                       "--repeats 3")
    # a row stored with enough steps but no noise (stored before the key existed): no step count to blame
    old = derive([_row("fp32", 100.0, samples_per_s_noise=None), _row("amp-bf16", 191.0, samples_per_s_noise=None)])
    assert advise(old).evidence.endswith("not claimed, noise not measured: --repeats 3 measures it")


def test_a_max_batch_search_stopped_at_its_limit_bounds_the_ratio_and_two_such_give_none() -> None:
    """A search that stops at --maxbatch-limit found a lower bound. tabular-mlp tiny on a CPU: every mode
    ">=65,536", each shown "(1.00x)" -- equal batches that nobody measured. Oracle: the bound follows from which
    search stopped (the mode's: its real ratio is larger; fp32's: smaller), the value is the two batches' quotient."""
    from rich.console import Console

    from ampbench.report.console import results_tables
    from ampbench.report.html import _batch_ratio

    def rows(fp32_hit: bool, mode_hit: bool) -> dict[str, dict[str, object]]:
        return {r["precision"]: r for r in derive([
            _row("fp32", 100.0, 1000, max_batch=590, max_batch_limit_hit=fp32_hit),
            _row("amp-fp16", 290.0, 540, max_batch=1120, max_batch_limit_hit=mode_hit)])}

    found = rows(False, False)["amp-fp16"]
    assert found["max_batch_ratio_vs_fp32"] == pytest.approx(1120 / 590) and found["max_batch_ratio_bound"] is None
    above = rows(False, True)["amp-fp16"]
    assert (above["max_batch_ratio_vs_fp32"], above["max_batch_ratio_bound"]) == (pytest.approx(1120 / 590), ">=")
    below = rows(True, False)["amp-fp16"]
    assert below["max_batch_ratio_bound"] == "<="
    both = rows(True, True)
    assert both["amp-fp16"]["max_batch_ratio_vs_fp32"] is None and both["amp-fp16"]["max_batch_ratio_bound"] is None

    def table(r: dict[str, dict[str, object]]) -> str:
        console = Console(width=160, record=True)
        for t in results_tables(list(r.values())):
            console.print(t)
        return console.export_text()

    assert ">=1,120 (>=1.90x)" in table(rows(False, True)) and "1,120 (<=1.90x)" in table(rows(True, False))
    text = table(both)
    assert ">=1,120" in text and "x)" not in text.split("max batch")[-1]  # (no ratio beside two lower bounds)
    assert advise(list(rows(False, True).values())).evidence.endswith("batch 590 → >=1,120")
    assert _batch_ratio(rows(False, True)["amp-fp16"]) == '<span class="good">&gt;=1.90x</span>'
    assert _batch_ratio(rows(True, False)["amp-fp16"]) == '<span class="">&lt;=1.90x</span>'  # (not called better)
    assert _batch_ratio(both["amp-fp16"]) == "–"


def test_a_disturbed_baseline_cannot_make_every_mode_look_faster() -> None:
    """A-B-A: fp32 ran at half speed in its first cell (another process was busy) and at full speed
    when timed again after the other modes; the 1.9x 'gain' is the baseline's, not amp-bf16's."""
    rows = _rep("fp32", [52.0, 100.0]) + [_row("amp-bf16", 99.0, samples_per_s_noise=0.01)]
    rows[1]["closing_baseline"] = True
    d = derive(rows)
    assert d[0]["samples_per_s"] == 100.0 and d[0]["baseline_drift"] == pytest.approx(48 / 52)
    assert d[1]["speedup_vs_fp32"] == pytest.approx(0.99)  # against the undisturbed fp32
    a = advise(d)
    assert a.recommended == "fp32" and a.label == "no mode helps", a.evidence
    # a disturbed closing measurement instead: the first one stands, the drift still widens the noise
    rows = _rep("fp32", [100.0, 52.0]) + [_row("amp-bf16", 110.0, 500, samples_per_s_noise=0.01)]
    rows[1]["closing_baseline"] = True
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and a.evidence == (
        "amp-bf16: 1.10x the speed of fp32 (not claimed: fp32's own measurements disagree by 48%: the baseline was "
        "disturbed), 50% less memory")


def test_pure_half_is_advised_only_with_its_own_convergence_verdict() -> None:
    """pure-* keeps no fp32 weights: neither its speed nor its memory recommends it without a parity verdict."""
    a = advise(derive([_row("fp32", 100.0), _row("pure-bf16", 180.0)]))
    assert a.recommended == "fp32" and a.label == "no mode helps"
    a = advise(derive([_row("fp32", 100.0), _row("amp-bf16", 150.0, 700), _row("pure-bf16", 180.0, 500)]))
    assert a.recommended == "amp-bf16"
    assert a.evidence.endswith("pure-bf16 ran 1.20x faster but is not recommended: run --measure converge first")
    a = advise(derive([_row("fp32", 100.0, verdict_losses=[1.0, 1.0]), _row("pure-bf16", 180.0, verdict_losses=[1.0, 1.0])]))
    assert a.recommended == "pure-bf16" and a.label == "converges like fp32"


def test_the_default_run_never_says_use_pure_bf16_at_a_gain_inside_the_noise() -> None:
    """The reported case: pure-bf16 1.02x fp32 ('within noise'), half the memory, no convergence measured."""
    a = advise(derive([_row("fp32", 100.0, 1000, samples_per_s_noise=0.03),
                       _row("pure-bf16", 102.0, 500, samples_per_s_noise=0.03)]))
    assert a.recommended == "fp32" and "pure-bf16" not in (a.recommended or "")
    # with its parity verdict the same memory saving recommends it, for memory, at fp32's speed
    a = advise(derive([_row("fp32", 100.0, 1000, samples_per_s_noise=0.03, verdict_losses=[1.0, 1.0]),
                       _row("pure-bf16", 102.0, 500, samples_per_s_noise=0.03, verdict_losses=[1.0, 1.0])]))
    assert a.recommended == "pure-bf16" and "50% less memory" in a.evidence and "faster" not in a.evidence


def test_a_measurably_faster_mode_beats_a_faster_looking_noisy_one() -> None:
    """conv-dummy small on this CPU, 3 repeats: pure-bf16 looked fastest (1.40x) but one repeat was
    slower than fp32's; amp-bf16 was faster in every repeat (1.17x)."""
    rows = (_rep("fp32", [600.0, 610.0, 500.0], 1000) + _rep("amp-bf16", [713.0, 714.0, 710.0], 510)
            + _rep("master-bf16", [848.0, 604.0, 870.0], 500))  # (measured as pure-bf16, which needs a verdict now)
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and "faster than fp32 (repeats" in a.evidence


def test_expected_speedup_only_where_a_gemm_benchmark_can_predict_it() -> None:
    """Matmul models with a faster half GEMM: yes. Convolution models, or emulated (slower) half GEMMs: no
    number (seen: 1.10x "expected" for a conv model measured at 2.5x; 0.02x for an fp16 CNN measured 0.16x)."""
    hw = [{"device_name": "CPU X", "gemm": [{"size": 1024, "math_mode": "fp32", "tflops": 0.4}],
           "gemm_vs_fp32": {"bf16": 4.0, "fp16": 0.01}}]

    def rows(conv: float) -> list[dict[str, object]]:
        kw = dict(device="cpu", device_name="CPU X", achieved_tflops=0.2, conv_flops_share=conv)
        return [_row("fp32", 100.0, math_mode="fp32", **kw), _row("amp-bf16", 150.0, math_mode="bf16", **kw),
                _row("amp-fp16", 20.0, math_mode="fp16", **kw)]

    by = {r["precision"]: r for r in derive(rows(0.0), hw)}
    assert by["amp-bf16"]["expected_speedup_vs_fp32"] == pytest.approx(1 / (0.5 + 0.5 / 4))  # g = 0.2 / 0.4
    assert by["amp-fp16"]["expected_speedup_vs_fp32"] is None and by["fp32"]["expected_speedup_vs_fp32"] is None
    assert all(r["expected_speedup_vs_fp32"] is None for r in derive(rows(0.6), hw))


def test_fp8_is_never_recommended_without_its_convergence() -> None:
    rows = [_row("fp32", 100.0), _row("amp-bf16", 200.0, 600, math_mode="bf16"),
            _row("fp8-tensorwise", 300.0, 600, math_mode="fp8")]
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16"
    assert "fp8-tensorwise ran 1.50x faster but is not recommended: run --measure converge first" in a.evidence
    checked = [_row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99]),
               _row("amp-bf16", 200.0, 600, verdict_losses=[1.0, 1.0, 1.01], math_mode="bf16"),
               _row("fp8-tensorwise", 300.0, 600, verdict_losses=[1.0, 1.0, 1.0], math_mode="fp8")]
    a = advise(derive(checked))
    assert a.recommended == "fp8-tensorwise" and "1.50x the speed of the best bf16 mode (amp-bf16)" in a.evidence
    diverging = [*checked[:2], _row("fp8-rowwise", 300.0, 600, verdict_losses=[3.0, 3.1, 3.2], math_mode="fp8")]
    assert advise(derive(diverging)).recommended == "amp-bf16"


def test_fp8_compiled_by_default_is_advised_at_its_execution() -> None:
    """fp8 on CUDA compiles by default: its rows exist only at compile, beside compiled fp32 and amp-bf16. The
    precision advice (eager) says what fp8 did there, against the compiled bf16 mode, never eager rows."""
    auto = {"compile": "on", "compiled_by_default": True}
    rows = [_row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99]),
            _row("amp-bf16", 200.0, 600, verdict_losses=[1.0, 1.0, 1.01], math_mode="bf16"),
            _row("fp32", 150.0, verdict_losses=[1.0, 1.01, 0.99], **auto),
            _row("amp-bf16", 300.0, 600, verdict_losses=[1.0, 1.0, 1.01], math_mode="bf16", **auto),
            _row("fp8-tensorwise", 450.0, 600, verdict_losses=[1.0, 1.0, 1.0], math_mode="fp8", **auto)]
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and a.evidence.startswith("amp-bf16: 2.00x faster than fp32")
    assert "fp8 ran at compile only: there, fp8-tensorwise (fp8-tensorwise: 3.00x faster than fp32" in a.evidence
    assert "1.50x the speed of the best bf16 mode (amp-bf16)" in a.evidence  # 450 / 300, both compiled
    unchecked = [*rows[:4], _row("fp8-tensorwise", 450.0, 600, math_mode="fp8", **auto)]  # (no converge data)
    b = advise(derive(unchecked))
    assert "fp8-tensorwise ran 1.50x faster but is not recommended: run --measure converge first" in b.evidence


def test_a_converge_only_run_gives_its_verdicts_not_every_mode_failed() -> None:
    rows = [_row("fp32", None, verdict_losses=[1.0, 1.01, 0.99]), _row("amp-bf16", None, verdict_losses=[1.0, 1.0, 1.01]),
            _row("pure-fp16", None, verdict_losses=[3.0, 3.1, 3.2])]
    a = advise(derive(rows))
    assert a.recommended is None and a.label == "speed not measured" and a.convergence_checked
    # (the label says "speed not measured": the evidence does not say it again)
    assert a.evidence == ("convergence: fp32 baseline, amp-bf16 parity, pure-fp16 worse; run --measure throughput to "
                          "compare speed")


AVX2 = {"cpu_half_hardware": {"avx512_bf16": False, "amx_bf16": False, "avx512_fp16": False, "amx_fp16": False}}
AMX = {"cpu_half_hardware": {"avx512_bf16": True, "amx_bf16": True, "avx512_fp16": False, "amx_fp16": False}}


def _cpu(precision: str, sps: float, env: dict[str, object], math: str, **kw: object) -> dict[str, object]:
    return _row(precision, sps, device="cpu", env=env, math_mode=math, samples_per_s_noise=0.02, **kw)


def test_a_speedup_the_probe_says_cannot_be_is_not_claimed() -> None:
    """AVX2-only EPYC under load (seen): master-bf16 "23x faster" and amp-bf16 "2.21x (repeats 1.41-2.21x)" while
    bf16 is emulated there (hand loops interleaved: 0.3x). Such a gain is not claimed: the row says it is doubtful
    and why, the advice keeps fp32 and says how to re-run."""
    rows = derive([_cpu("fp32", 100.0, AVX2, "fp32", samples_per_s_repeats=[100.0, 104.0, 98.0]),
                   _cpu("amp-bf16", 221.0, AVX2, "bf16", samples_per_s_repeats=[141.0, 221.0, 190.0]),
                   _cpu("master-bf16", 2300.0, AVX2, "bf16", samples_per_s_repeats=[2300.0, 900.0, 1500.0])])
    by = {r["precision"]: r for r in rows}
    assert "contradicts the probe" in by["amp-bf16"]["speedup_vs_fp32_doubt"]
    assert "bf16 math is emulated on this CPU" in by["master-bf16"]["speedup_vs_fp32_doubt"]
    a = advise(rows)
    assert a.recommended == "fp32" and a.label == "noisy"
    assert "not claimed" in a.evidence and "idle machine" in a.evidence and "23x" in a.evidence
    from ampbench.report.console import speedup_text

    assert speedup_text(by["amp-bf16"]) == ("2.21x (1.41-2.12) (doubtful)", "same")


def test_the_same_gain_on_bf16_hardware_is_claimed() -> None:
    rows = derive([_cpu("fp32", 100.0, AMX, "fp32", samples_per_s_repeats=[100.0, 104.0, 98.0]),
                   _cpu("amp-bf16", 221.0, AMX, "bf16", samples_per_s_repeats=[221.0, 230.0, 210.0])])
    assert rows[1]["speedup_vs_fp32_doubt"] is None
    a = advise(rows)
    assert a.recommended == "amp-bf16" and a.evidence.startswith("amp-bf16: 2.21x faster than fp32")


def test_a_gain_over_fp32_measurements_that_disagree_is_not_claimed() -> None:
    """fp32 timed twice around the other modes, 40% apart: its baseline was disturbed, so a 1.6x gain against it
    (beyond its noise estimate, which drift only widens in quadrature) is not claimed on a GPU either."""
    rows = derive([_row("fp32", 100.0, baseline_drift=0.4, samples_per_s_noise=0.01),
                   _row("amp-bf16", 160.0, samples_per_s_noise=0.01, math_mode="bf16")])
    assert "disagree by 40%" in rows[1]["speedup_vs_fp32_doubt"]
    assert advise(rows).recommended == "fp32"
    steady = derive([_row("fp32", 100.0, baseline_drift=0.05, samples_per_s_noise=0.01),
                     _row("amp-bf16", 160.0, samples_per_s_noise=0.01, math_mode="bf16")])
    assert steady[1]["speedup_vs_fp32_doubt"] is None and advise(steady).recommended == "amp-bf16"


# -- the half type and the energy, from what was measured ------------------------------------------------------------
def _h200_rows() -> list[dict[str, object]]:
    """The default GPU suite as the lent H200 measured it (benchmarks/results/h200/truth/runs.json)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200" / "truth" / "runs.json"
    return [r for r in json.loads(path.read_text())["rows"] if not r.get("closing_baseline")]


def _of(rows: list[dict[str, object]], workload: str) -> list[dict[str, object]]:
    return derive([r for r in rows if r["workload"] == workload])


def test_the_half_type_is_the_one_measured_faster_on_a_convnet_and_bf16_where_they_tie() -> None:
    """On the H200: UNet's amp-fp16 ran 1.17x amp-bf16's speed (its FLOPs are convolutions: cuDNN's bf16 kernels are
    slower there), so fp16, with the reason; the transformers ran both alike, so bf16 (no loss scale). Never a rule
    preferring one whatever was measured: the same rows with the speeds swapped say bf16."""
    rows = _h200_rows()
    unet = advise(_of(rows, "unet")).half_type
    assert unet is not None and unet.startswith("half type: fp16 -- amp-fp16 ran 1.17x amp-bf16's speed")
    assert "convolutions" in unet and "cuDNN" in unet and "loss scaling" in unet
    for workload in ("gpt2", "bert", "vit"):
        said = advise(_of(rows, workload)).half_type
        assert said is not None and said.startswith("half type: bf16 -- fp16 and bf16 ran alike"), (workload, said)
    swapped = [dict(r, samples_per_s={"amp-fp16": 938.0, "amp-bf16": 1097.1}.get(str(r["precision"]), r["samples_per_s"]))
               for r in rows if r["workload"] == "unet"]
    said = advise(derive(swapped)).half_type
    assert said is not None and said.startswith("half type: bf16 -- amp-bf16 ran 1.17x amp-fp16's speed")


def test_no_half_type_without_both_amp_modes_and_a_noisy_difference_is_a_tie() -> None:
    assert advise(derive([_row("fp32", 100.0), _row("amp-bf16", 200.0)])).half_type is None
    noisy = [_row("fp32", 100.0), _row("amp-fp16", 230.0, samples_per_s_noise=0.05),
             _row("amp-bf16", 210.0, samples_per_s_noise=0.05)]  # (1.10x, inside 2 x 7%)
    said = advise(derive(noisy)).half_type
    assert said is not None and said.startswith("half type: bf16 -- neither ran measurably faster here (amp-fp16 1.10x")
    assert "a difference counts beyond 14%" in said and "alike" not in said  # (noise grants no equality either)
    close = [_row("fp32", 100.0), _row("amp-fp16", 211.0, samples_per_s_noise=0.05),
             _row("amp-bf16", 210.0, samples_per_s_noise=0.05)]  # (1.005x: within 2 %, alike whatever the noise)
    assert (advise(derive(close)).half_type or "").startswith("half type: bf16 -- fp16 and bf16 ran alike here "
                                                              "(amp-fp16 1.00x amp-bf16's speed, within 2%)")



def test_the_half_types_noise_holds_how_far_the_machine_moved_over_the_run() -> None:
    """A CPU run (a transformer + GRU on this AMX Xeon) measured fp32 at 391 samples/s, then 13 % off at its close;
    amp-fp16 370 and amp-bf16 417, each ~3 % noisy within its cell. The advice said "amp-bf16 ran 1.13x amp-fp16's
    speed here", a difference the run's own drift covers. Oracle: 2 x the root of 3 %, 3 % and 13 % squared = 27 %."""
    rows = [_row("fp32", 391.0, samples_per_s_noise=0.03, device="cpu", cell_key="fp32-key"),
            _row("amp-fp16", 370.0, samples_per_s_noise=0.03, device="cpu"),
            _row("amp-bf16", 417.0, samples_per_s_noise=0.03, device="cpu")]
    steady = advise(derive(rows)).half_type  # (no closing baseline: within-cell noise alone, 2 x 4.2 %)
    assert steady is not None and steady.startswith("half type: bf16 -- amp-bf16 ran 1.13x amp-fp16's speed here")
    closing = _row("fp32", 391.0 * 0.87, device="cpu", closing_baseline=True, cell_key="fp32-key-1",
                   repeat_of="fp32-key")
    said = advise(derive([*rows, closing])).half_type
    assert said == ("half type: bf16 -- neither ran measurably faster here (amp-fp16 0.89x amp-bf16's speed, inside "
                    "this measurement's noise: a difference counts beyond 27%); bf16 keeps fp32's range, so no loss "
                    "scale to manage"), said

def test_where_amp_fp16_diverged_and_amp_bf16_trained_the_half_type_is_bf16_saying_why() -> None:
    """The H200's ResNet-50 (both leases): amp-fp16 diverged, amp-bf16 trained -- bf16, with fp16's reason in one
    clause; no line where amp-bf16 did not train either."""
    rows = _of(_h200_rows(), "resnet50")
    assert {str(r["precision"]): r["status"] for r in rows}["amp-fp16"] == "diverged"
    said = advise(rows).half_type
    assert said is not None and said.startswith("half type: bf16 -- amp-fp16 diverged here (training diverged: loss "
                                                "scale fell below 1 at step 18)")
    assert "where amp-bf16 trained" in said
    neither = [dict(r, status="diverged") if r["precision"] == "amp-bf16" else r for r in rows]
    assert advise(derive(neither)).half_type is None


def test_a_half_type_or_the_most_efficient_mode_judged_worse_is_never_the_pick() -> None:
    """amp-fp16 ran 1.3x amp-bf16's speed for the fewest joules, but its convergence was judged worse: the half-type
    line said "fp16" and the energy line named it. Now the verdict decides; a tie of verdicts leaves speed to it."""
    fp32 = _row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99], joules_per_sample=1.0, mean_power_w=500.0)
    fast = _row("amp-fp16", 260.0, verdict_losses=[2.0, 2.1], joules_per_sample=0.4, mean_power_w=500.0)
    slow = _row("amp-bf16", 200.0, verdict_losses=[1.0, 1.0], joules_per_sample=0.5, mean_power_w=500.0)
    a = advise(derive([fp32, fast, slow]))
    assert a.half_type == ("half type: bf16 -- amp-fp16's convergence was worse here, amp-bf16's parity (amp-fp16 "
                           "ran 1.30x amp-bf16's speed)"), a.half_type
    assert (a.energy or "").startswith("most energy-efficient: amp-bf16, 0.500 J"), a.energy
    both = advise(derive([fp32, fast, {**slow, "converge": {"final_losses": [2.0, 2.1], "diverged": [False] * 2}}]))
    assert (both.half_type or "").startswith("half type: fp16 -- amp-fp16 ran 1.30x amp-bf16's speed")


def test_the_most_energy_efficient_mode_is_the_fewest_joules_a_sample() -> None:
    """H200 GPT-2: the mode with the fewest joules per sample, against fp32's (oracle: the rows' own numbers);
    never a mode that needs its own convergence verdict without one; none without measured energy."""
    rows = _of(_h200_rows(), "gpt2")
    ok = [r for r in rows if r["status"] == "ok"]
    best = min(ok, key=lambda r: r["joules_per_sample"])
    base = next(r for r in ok if r["precision"] == "fp32")
    said = advise(rows).energy
    assert said is not None and said.startswith(f"most energy-efficient: {best['precision']}, ")
    assert f"{base['joules_per_sample'] / best['joules_per_sample']:.1f}x more" in said
    pure = [_row("fp32", 100.0, joules_per_sample=1.0, mean_power_w=500.0),
            _row("amp-bf16", 200.0, joules_per_sample=0.5, mean_power_w=500.0),
            _row("pure-bf16", 300.0, joules_per_sample=0.3, mean_power_w=500.0)]
    assert advise(derive(pure)).energy.startswith("most energy-efficient: amp-bf16")  # type: ignore[union-attr]
    assert advise(derive([_row("fp32", 100.0), _row("amp-bf16", 200.0)])).energy is None


def test_modes_whose_joules_lie_within_the_noise_of_the_fewest_are_not_told_apart() -> None:
    """H200 BERT: master-bf16 0.1645 J a sample, amp-bf16 0.1656, amp-fp16 0.1657 -- 1 % apart, with 0.3-0.7 % noise
    in their speeds (joules are power over speed): the line named master-bf16 as the most efficient on 1 %. Now the
    simpler recipe among those the noise cannot tell apart, the others beside it. Oracle: the band recomputed from
    the rows (max of 2 % and 2 x the two cells' combined noise), and a clear difference still decides."""
    import math

    rows = _of(_h200_rows(), "bert")
    ok = {r["precision"]: r for r in rows if r["status"] == "ok"}
    least = min(ok.values(), key=lambda r: r["joules_per_sample"])
    assert least["precision"] == "master-bf16"
    for p in ("amp-bf16", "amp-fp16"):
        band = max(0.02, 2 * math.hypot(ok[p]["samples_per_s_noise"], least["samples_per_s_noise"]))
        assert ok[p]["joules_per_sample"] <= least["joules_per_sample"] * (1 + band)
    said = advise(rows).energy or ""
    assert said.startswith("most energy-efficient: amp-bf16, 0.166 J a sample at 625 W (fp32: 0.974 J, 5.9x more; "
                           "within the noise of it: "), said
    assert "amp-fp16 0.166 J" in said and "master-bf16 0.164 J" in said
    clear = [_row("fp32", 100.0, joules_per_sample=1.0, mean_power_w=500.0),
             _row("amp-bf16", 200.0, joules_per_sample=0.5, mean_power_w=500.0),
             _row("master-bf16", 210.0, joules_per_sample=0.45, mean_power_w=500.0)]  # 11 % fewer, 0.3 % noise
    assert advise(derive(clear)).energy == ("most energy-efficient: master-bf16, 0.450 J a sample at 500 W (fp32: 1.00 J, "
                                            "2.2x more)")
    # speeds of unmeasured noise (3 timed steps): nothing tells the modes apart, fp32 included, and it says so
    blind = [{**r, "samples_per_s_noise": None, "steps": 3} for r in clear]
    assert advise(derive(blind)).energy == (
        "most energy-efficient: amp-bf16, 0.500 J a sample at 500 W (noise not measured, not told apart from it: "
        "fp32 1.00 J, master-bf16 0.450 J)")


def test_a_half_type_difference_of_unmeasured_noise_picks_neither() -> None:
    rows = [_row("fp32", 100.0), _row("amp-fp16", 250.0), _row("amp-bf16", 200.0)]
    assert (advise(derive(rows)).half_type or "").startswith("half type: fp16 -- amp-fp16 ran 1.25x amp-bf16's speed")
    blind = [{**r, "samples_per_s_noise": None, "steps": 3} for r in rows]
    assert advise(derive(blind)).half_type == (
        "half type: bf16 -- amp-fp16 ran 1.25x amp-bf16's speed, not judged (noise not measured: 3 timed steps a cell, "
        "an estimate takes 6 or more, or --repeats 3); bf16 keeps fp32's range, so no loss scale to manage")


def test_a_max_batch_run_without_speed_says_the_batches() -> None:
    """--measure maxbatch alone: the advice said only "convergence: fp32 not checked, amp-bf16 not checked"."""
    rows = derive([_row("fp32", None, max_batch=760, measures=["maxbatch"]),
                   _row("amp-bf16", None, max_batch=1776, measures=["maxbatch"]),
                   _row("pure-bf16", None, max_batch=None, measures=["maxbatch"])])
    a = advise(rows)
    assert a.recommended is None and a.label == "speed not measured"
    assert a.evidence == ("largest batch: fp32 760, amp-bf16 1,776 (2.34x fp32's), pure-bf16 none; run --measure "
                          "throughput to compare speed"), a.evidence
    bound = advise(derive([_row("fp32", None, max_batch=760, measures=["maxbatch"]),
                           _row("amp-bf16", None, max_batch=65536, max_batch_limit_hit=True, measures=["maxbatch"])]))
    assert bound.evidence.startswith("largest batch: fp32 760, amp-bf16 >=65,536 (>=86x fp32's);")  # (as tables)
    conv = advise(derive([_row("fp32", None, verdict_losses=[1.0, 1.0]), _row("amp-bf16", None, verdict_losses=[1.0, 1.0])]))
    assert conv.evidence.startswith("convergence: fp32 baseline, amp-bf16 parity; run --measure throughput")


def test_fp32_alone_or_beside_modes_it_cannot_recommend_is_not_no_mode_helps() -> None:
    """A run of fp32 alone read "no half-precision mode ran faster than fp32 for this model"; fp32 beside a faster
    pure-bf16 without a convergence verdict read the same, though one did run faster."""
    cpu = dict(device="cpu")
    a = advise(derive([_row("fp32", 100.0, **cpu)]))
    assert (a.recommended, a.label) == ("fp32", "fp32 alone")
    assert a.reason == ("only fp32 ran: nothing to compare it with -- --precisions names the modes to run beside it "
                        "(ampbench list: those this device runs)")
    a = advise(derive([_row("fp32", 100.0, **cpu), _row("pure-bf16", 150.0, 500, **cpu)]))
    assert (a.recommended, a.label) == ("fp32", "no mode helps")
    assert a.reason == ("no other mode may be recommended: pure-bf16 (1.50x fp32's speed; it needs its own "
                        "convergence verdict: run --measure converge first)"), a.reason
    a = advise(derive([_row("fp32", 100.0, verdict_losses=[1.0, 1.0]), _row("amp-fp16", 200.0, verdict_losses=[9.0])]))
    assert a.reason == "no other mode may be recommended: amp-fp16 (2.00x fp32's speed; its convergence was worse)"
    # with a mode that ran and is no faster, the reason is as before
    assert advise(derive([_row("fp32", 100.0, **cpu), _row("amp-bf16", 90.0, **cpu)])).label == "no mode helps"


def test_the_half_type_names_the_device_s_convolution_library_and_a_large_ratio_as_the_tables_do() -> None:
    """On this AMX Xeon, mnist-cnn small's amp-bf16 ran 47x amp-fp16's speed (oneDNN's fp16 convolutions: 273 ms a
    step against 5.8): said "46.96x" where the tables say "47x"; and a CPU whose fp16 convolutions won would have been
    told of "this GPU's ... (cuDNN)"."""
    cpu = [_row("fp32", 100.0, device="cpu"), _row("amp-fp16", 2.3, samples_per_s_noise=0.05, device="cpu"),
           _row("amp-bf16", 108.0, samples_per_s_noise=0.05, device="cpu")]
    said = advise(derive(cpu)).half_type
    assert said is not None and said.startswith("half type: bf16 -- amp-bf16 ran 47x amp-fp16's speed")  # 108 / 2.3
    conv = [_row("fp32", 100.0, device="cpu"),
            _row("amp-fp16", 150.0, samples_per_s_noise=0.02, device="cpu", conv_flops_share=0.9),
            _row("amp-bf16", 100.0, samples_per_s_noise=0.02, device="cpu", conv_flops_share=0.9)]
    said = advise(derive(conv)).half_type
    assert said is not None and said.startswith("half type: fp16 -- amp-fp16 ran 1.50x amp-bf16's speed (90% of its "
                                                "FLOPs are convolutions, and this CPU's bf16 convolution kernels "
                                                "(oneDNN) run slower")
    assert "GPU" not in said and "cuDNN" not in said
