"""The advisor on stores with known numbers."""

from __future__ import annotations

from ampbench.report.advisor import advise
from ampbench.store import derive


def _row(precision: str, sps: float | None, peak: int = 1000, status: str = "ok", verdict_losses: list[float] | None = None,
         device: str = "cuda:0", **kw: object) -> dict[str, object]:
    r: dict[str, object] = {"run_id": "r", "workload": "w", "preset": "small", "batch_size": 64, "device_name": "GPU",
                            "device": device, "precision": precision, "status": status, "reason": "" if status == "ok" else
                            "boom", "samples_per_s": sps, "peak_allocated_bytes": peak, "step_ms_p50": 50.0,
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


def test_convergence_failure_of_the_fastest_mode_skips_it() -> None:
    rows = [_row("fp32", 100.0, verdict_losses=[1.0, 1.01, 0.99]),
            _row("pure-fp16", 400.0, verdict_losses=[2.0, 2.1, 2.2]),
            _row("amp-bf16", 250.0, 600, verdict_losses=[1.0, 1.0, 1.01])]
    a = advise(derive(rows))
    assert a.recommended == "amp-bf16" and a.convergence_checked and a.label == "converges like fp32"
    assert a.evidence.endswith("final loss within fp32's seed spread")


def test_ties_prefer_less_memory_then_the_simpler_recipe() -> None:
    a = advise(derive([_row("fp32", 100.0), _row("amp-fp16", 200.0, 600), _row("master-fp16", 201.0, 500)]))
    assert a.recommended == "master-fp16"  # within 2%: less memory wins
    a = advise(derive([_row("fp32", 100.0), _row("amp-fp16", 200.0, 600), _row("amp-bf16", 199.0, 600)]))
    assert a.recommended == "amp-bf16"  # same memory: bf16 autocast needs no loss scaling


def test_missing_fp32_baseline() -> None:
    a = advise(derive([_row("amp-fp16", 200.0), _row("amp-bf16", 150.0)]))
    assert a.recommended == "amp-fp16" and "no fp32 baseline" in a.evidence


def test_all_modes_failed() -> None:
    a = advise(derive([_row("fp32", None, status="oom"), _row("amp-fp16", None, status="diverged")]))
    assert a.recommended is None and a.label == "nothing ran"
    assert "fp32 oom (boom)" in a.evidence and "amp-fp16 diverged" in a.evidence


def test_nothing_converged_like_fp32() -> None:
    a = advise(derive([_row("fp32", 100.0, status="oom"), _row("amp-fp16", 200.0, verdict_losses=[1.0])]))
    assert a.recommended is None and "no-baseline" in a.evidence


def test_no_mode_helps_on_a_cpu_without_half_hardware() -> None:
    env = {"device": "cpu", "cpu_half_hardware": {"avx512_bf16": False, "amx_bf16": False, "avx512_fp16": False,
                                                  "amx_fp16": False}}
    rows = [_row("fp32", 100.0, device="cpu", env=env), _row("amp-bf16", 60.0, device="cpu", env=env)]
    a = advise(derive(rows))
    assert a.recommended == "fp32" and a.label == "no mode helps"
    assert "CPU without AVX512-BF16/FP16 or AMX: half precision is slower here" in a.evidence


def test_launch_bound_small_model_on_gpu() -> None:
    rows = [_row("fp32", 100.0, step_ms_p50=1.2), _row("amp-fp16", 101.0, step_ms_p50=1.19)]
    a = advise(derive(rows))
    assert a.recommended == "fp32" and "launch-bound" in a.evidence


def test_memory_saving_alone_is_worth_it_when_not_slower() -> None:
    a = advise(derive([_row("fp32", 100.0, 1000), _row("amp-bf16", 100.5, 700)]))
    assert a.recommended == "amp-bf16" and "30% less memory" in a.evidence
