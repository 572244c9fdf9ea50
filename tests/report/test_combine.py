"""Advice across execution axes: the fastest converging combination against fp32 eager, and what each
change bought alone and on top of the other."""

from __future__ import annotations

from ampbench.report.advisor import advise
from ampbench.report.markdown import render_markdown
from ampbench.store import derive


def _row(precision: str, sps: float, compile: str = "off", memory_format: str = "contiguous",
         losses: list[float] | None = None, **kw: object) -> dict[str, object]:
    r: dict[str, object] = {"run_id": "r", "cell_key": f"{precision}-{compile}-{memory_format}", "workload": "w",
                            "preset": "small", "batch_size": 64, "device_name": "GPU", "device": "cuda:0",
                            "precision": precision, "status": "ok", "reason": "", "samples_per_s": sps,
                            "samples_per_s_noise": 0.01, "peak_allocated_bytes": 1000, "step_ms_p50": 50.0,
                            "compile": compile, "memory_format": memory_format, "cuda_graphs": "off",
                            "measures": ["throughput", "memory"] + (["converge"] if losses else [])}
    if losses is not None:
        r["converge"] = {"final_losses": losses, "diverged": [False] * len(losses)}
    r.update(kw)
    return r


def test_fastest_combination_and_the_single_change_that_buys_most() -> None:
    rows = [_row("fp32", 100.0), _row("fp32", 160.0, "on", compile_s=41.5, compile_cache="miss"),
            _row("amp-bf16", 120.0), _row("amp-bf16", 190.0, "on", compile_s=39.0),
            _row("fp32", 101.0, memory_format="channels_last")]
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16"  # the precision advice is made among the eager rows
    assert a.combination == "amp-bf16 + compile"
    ev = a.combination_evidence or ""
    assert ev.startswith("1.90x fp32 eager")  # (the line names the combination before it: "amp-bf16 + compile
    # amp-bf16 + compile: 1.90x ..." said it twice)
    assert "speed only, convergence not checked" in ev
    assert "amp-bf16 adds 1.19x on top of compile, compile adds 1.58x on top of amp-bf16" in ev
    assert "the single change that buys most: compile (1.60x alone; the others alone: amp-bf16 1.20x, channels_last 1.01x)" in ev
    assert "compiling took 39.0 s" in ev


def test_a_combination_on_a_convergence_run_fp32_learned_nothing_from_says_inconclusive() -> None:
    """fp32's loss 2.30 -> 2.30 (its first loss against its final one, 2% tolerance): every verdict inconclusive, the
    combination judged on speed and said so -- not "converges like fp32", not "not checked"."""
    flat = {"steps": 20, "curve_steps": list(range(1, 21)), "losses": [[2.3] * 20], "final_losses": [2.3],
            "diverged": [False]}
    rows = [_row(p, sps, c, losses=[2.3], converge=flat) for p, sps, c in
            (("fp32", 100.0, "off"), ("fp32", 160.0, "on"), ("amp-bf16", 120.0, "off"), ("amp-bf16", 190.0, "on"))]
    a = advise(derive(rows))
    assert a.combination == "amp-bf16 + compile" and a.label == "speed only, convergence inconclusive"
    assert "speed only, convergence inconclusive (fp32 itself did not learn)" in (a.combination_evidence or "")


def test_a_combination_must_converge_and_may_take_its_precisions_verdict() -> None:
    good, bad = [1.0, 1.01, 0.99], [2.0, 2.1, 2.2]
    rows = [_row("fp32", 100.0, losses=good), _row("fp32", 150.0, "on"),
            _row("pure-bf16", 130.0, losses=bad), _row("pure-bf16", 300.0, "on"),
            _row("amp-bf16", 110.0, losses=good), _row("amp-bf16", 170.0, "on")]
    a = advise(derive(rows))
    assert a.combination == "amp-bf16 + compile"  # pure-bf16 + compile is faster, but pure-bf16 did not converge
    assert "convergence from amp-bf16 at another execution" in (a.combination_evidence or "")


def test_no_combination_beyond_the_noise_keeps_fp32_eager() -> None:
    rows = [_row("fp32", 100.0, samples_per_s_noise=0.1), _row("fp32", 110.0, "on", samples_per_s_noise=0.1)]
    a = advise(derive(rows))
    assert a.combination == "fp32"
    assert "within this measurement's noise" in (a.combination_evidence or "")
    # printed after the combination's name, it reads as one sentence ("fastest combination: fp32 the fastest
    # combination, fp32 + compile, measured ..." did not)
    from ampbench.report.console import advice_lines

    line = next(x for x in advice_lines(derive(rows)) if "fastest combination:" in x)
    assert "fastest combination: [bold green]fp32[/] (nothing measurably faster) fp32 + compile, the fastest measured, " \
           "ran 1.10x fp32 eager, within this measurement's noise" in line, line


def test_a_combination_of_unmeasured_noise_is_not_claimed() -> None:
    """Cells of 3 timed steps measure no noise: compile's 1.60x over fp32 eager is said, not credited (with a
    measured noise, the same speeds are: the oracle)."""
    def rows(noise: float | None) -> list[dict[str, object]]:
        return [_row("fp32", 100.0, steps=3, samples_per_s_noise=noise),
                _row("fp32", 160.0, "on", steps=3, samples_per_s_noise=noise)]

    assert advise(derive(rows(0.01))).combination == "fp32 + compile"
    a = advise(derive(rows(None)))
    assert a.combination == "fp32"
    assert (a.combination_evidence or "").startswith(
        "(nothing measurably faster) fp32 + compile, the fastest measured, ran 1.60x fp32 eager, not claimed, noise not "
        "measured: 3 timed steps a cell, an estimate takes 6 or more, or --repeats 3")


def test_without_fp32_eager_nothing_is_credited() -> None:
    a = advise(derive([_row("fp32", 150.0, "on"), _row("amp-bf16", 170.0, "on")]))
    assert a.combination is None and a.evidence.startswith("amp-bf16: (at compile) ")  # one execution: no combination
    assert a.reason.startswith("(at compile) ")  # (the lines that lead with "use amp-bf16" do not say it twice)
    a = advise(derive([_row("fp32", 150.0, "on"), _row("fp32", 120.0, memory_format="channels_last")]))
    assert a.combination == "none" and "no fp32 eager cell" in (a.combination_evidence or "")


def test_without_fp32_each_change_is_said_against_its_own_precisions_eager_cell() -> None:
    """``run --precisions amp-bf16 --checkpointing off,blocks,selective`` (the fourth H200 lease's BERT-base cells):
    no fp32 eager cell ranks the combinations, and each checkpointing is still said against amp-bf16 eager -- its
    speed and peak memory (oracle: the ratios by hand)."""
    gib = 2**30
    rows = [_row("amp-bf16", 3782.0, peak_allocated_bytes=int(7.1 * gib)),
            _row("amp-bf16", 2050.0, peak_allocated_bytes=int(2.5 * gib), checkpointing="blocks", cell_key="b"),
            _row("amp-bf16", 1502.0, peak_allocated_bytes=int(5.1 * gib), checkpointing="selective", cell_key="s")]
    a = advise(derive(rows))
    assert a.combination == "none"
    text = a.combination_evidence or ""
    assert text.startswith("(no fp32 eager cell ran ok")
    blocks, selective = 2050 / 3782, 1502 / 3782  # 0.54x, 0.40x
    assert (f"amp-bf16 + checkpointing {blocks:.2f}x, 2.5 GiB ({1 - 2.5 / 7.1:.0%} less), amp-bf16 + "
            f"selective-checkpointing {selective:.2f}x, 5.1 GiB ({1 - 5.1 / 7.1:.0%} less)") in text
    assert "**fastest combination: none**: (no fp32 eager cell" in render_markdown(rows, {"run_id": "r"})


def test_markdown_names_each_cells_execution() -> None:
    md = render_markdown(derive([_row("fp32", 100.0), _row("fp32", 160.0, "on", compile_s=2.0),
                                 _row("amp-bf16", 190.0, "on")]))
    assert "| precision | execution | status |" in md and "| vs fp32 eager |" in md
    assert "| fp32 | compile | ok (compile 2.0 s) |" in md
    assert "**fastest combination: amp-bf16 + compile**" in md


def test_the_least_memory_combination_is_said_where_it_is_not_the_fastest() -> None:
    """GPU rows (the allocator's peak): amp-bf16 + checkpointing holds least, amp-bf16 eager runs fastest; fp32 +
    checkpointing holds nearly as little (within 2%: the fewer changes would win) but not within the tie."""
    gib = 2**30
    rows = [_row("fp32", 100.0, peak_allocated_bytes=20 * gib, max_batch=256),
            _row("amp-bf16", 230.0, peak_allocated_bytes=12 * gib, max_batch=440),
            _row("fp32", 72.0, peak_allocated_bytes=6 * gib, checkpointing="blocks", max_batch=900,
                 cell_key="fp32-ck"),
            _row("amp-bf16", 160.0, peak_allocated_bytes=4 * gib, checkpointing="blocks", max_batch=1400,
                 cell_key="amp-ck")]
    a = advise(derive(rows))
    assert a.combination == "amp-bf16"
    assert a.least_memory == ("least memory: amp-bf16 + checkpointing, 4.0 GiB against fp32 eager's 20.0 GiB (80% "
                              "less), at 1.60x fp32 eager's speed; largest batch 256 -> 1,400")
    md = render_markdown(rows, {"run_id": "r"})
    assert "**least memory**: amp-bf16 + checkpointing, 4.0 GiB" in md
    # a saving under 10% is not advised on (GPT-2's large vocabulary: 5% less at 0.70x the speed)
    small = [dict(r) for r in rows]
    for r in small:
        r["peak_allocated_bytes"] = 20 * gib if r.get("checkpointing") != "blocks" else int(18.5 * gib)
    assert advise(derive(small)).least_memory is None
    # where the fastest combination is also the leanest, its line says it: no second line
    lean = [r for r in rows if r["precision"] == "fp32" or r.get("checkpointing") == "blocks"]
    lean[-1]["samples_per_s"] = 260.0
    assert advise(derive(lean)).least_memory is None
    # memory ties (within 2%) go to the faster, then the fewer changes: fp32 + checkpointing at 0.72x holds 1% more
    # than amp-bf16 + checkpointing at 1.60x; seen on a CPU GPT, 19.3 MiB at 0.77x picked over 19.1 MiB at 1.02x
    tie = [dict(r) for r in rows]
    tie[2]["peak_allocated_bytes"] = int(4.04 * gib)
    tie[3]["samples_per_s"] = 160.0  # (as first given: the lean case above set it to 260)
    assert (advise(derive(tie)).least_memory or "").startswith("least memory: amp-bf16 + checkpointing, 4.0 GiB")
    # the precision advice's own mode at its execution: its line has said that memory (the CPU CNN's master-bf16
    # eager, "49% less memory" in both lines)
    from ampbench.execution import Execution
    from ampbench.report.combine import least_memory

    lean = [_row("fp32", 100.0, peak_allocated_bytes=20 * gib),
            _row("master-bf16", 119.0, peak_allocated_bytes=10 * gib, samples_per_s_noise=0.2),  # (within noise)
            _row("fp32", 50.0, memory_format="channels_last", peak_allocated_bytes=20 * gib, cell_key="fp32-cl")]
    assert (least_memory(derive(lean)) or "").startswith("least memory: master-bf16, 10.0 GiB")
    assert least_memory(derive(lean), advised=("master-bf16", Execution())) is None
    tie[3]["samples_per_s"] = 73.0  # (then alike in speed: the one change fewer)
    tie[1]["samples_per_s"] = 90.0  # (fp32 eager the fastest: its line is not this one)
    assert (advise(derive(tie)).least_memory or "").startswith("least memory: fp32 + checkpointing, 4.0 GiB")


def test_a_ratio_is_never_printed_as_zero() -> None:
    """The advice's ratios: two decimals, whole numbers from 10x, two significant digits below 0.01x (an emulated fp16
    step on a CPU at 1/200 of fp32's speed read "0.00x")."""
    from ampbench.report.combine import times

    assert [times(v) for v in (12.4, 1.234, 0.05, 0.0045, 0.01)] == ["12x", "1.23x", "0.05x", "0.0045x", "0.01x"]
