"""``ampbench hw``'s tables: what the probe says is printed as written."""

from __future__ import annotations

from rich.console import Console

from ampbench.report.hw import hw_tables


def test_a_modes_refusal_and_the_verdict_are_text_not_markup() -> None:
    """Where torchao is missing the fp8 modes say "pip install 'ampbench[fp8]'": its [fp8] was read as a markup tag
    and dropped."""
    probe = {"device_name": "CPU [test]", "device": "cpu", "cpu_half_hardware": {"avx512_bf16": False},
             "env": {"cpu": "CPU [test]", "torch": "2.x", "python": "3.x", "torch_threads": 2, "tf32_matmul": False,
                     "tf32_cudnn": True, "tf32_override_env": ""},
             "peaks": None, "gemm": [], "verdict": "fp16 is slower [emulated]",
             "precisions": {"fp32": {"ok": True, "reason": "", "note": ""},
                            "fp8-rowwise": {"ok": False, "reason": "pip install 'ampbench[fp8]' (torchao)", "note": ""}}}
    console = Console(record=True, width=200)
    for part in hw_tables(probe, "cpu"):
        console.print(part)
    text = console.export_text()
    assert "no fp8-rowwise: pip install 'ampbench[fp8]' (torchao)" in text, text
    assert "fp16 is slower [emulated]" in text and "CPU [test]" in text


def test_the_gemm_tables_title_is_one_line_above_its_narrow_table() -> None:
    """rich wrapped it to the four-column table's width: "GEMM micro-benchmark (random normal n / x n @ n x n)"."""
    probe = {"device_name": "CPU", "device": "cpu", "cpu_half_hardware": {"avx512_bf16": False},
             "env": {"cpu": "CPU", "torch": "2.x", "python": "3.x", "torch_threads": 2, "tf32_matmul": False,
                     "tf32_cudnn": True, "tf32_override_env": ""},
             "peaks": None, "verdict": "v", "precisions": {"fp32": {"ok": True, "reason": "", "note": ""}},
             "gemm": [{"size": 64, "math_mode": "fp32", "tflops": 0.08, "fraction_of_peak": 0.24}]}
    console = Console(record=True, width=100)
    for part in hw_tables(probe, "cpu"):
        console.print(part)
    lines = console.export_text().splitlines()
    at = lines.index("GEMM micro-benchmark (random normal n x n @ n x n)")
    assert lines[at + 1].startswith("┏") and len(lines[at + 1]) < 40 and lines[0] == "CPU (cpu)"


def test_modes_with_the_same_verdict_and_reason_share_a_line() -> None:
    """The fp16 note ("fp16 math is emulated ...") was said under each of the three fp16 modes, fp8's under each of
    three: one line per verdict and reason, naming its modes."""
    note = "CPU (x86_64) has no AVX512-FP16/AMX-FP16: fp16 math is emulated and slower than fp32 here"
    modes = {"fp32": {"ok": True, "reason": "", "note": ""}, "tf32": {"ok": False, "reason": "no TF32 on CPU", "note": ""},
             **{m: {"ok": True, "reason": "", "note": note} for m in ("amp-fp16", "master-fp16", "pure-fp16")},
             "amp-bf16": {"ok": True, "reason": "", "note": ""}}
    probe = {"device_name": "CPU", "device": "cpu", "cpu_half_hardware": {"avx512_bf16": True},
             "env": {"cpu": "CPU", "torch": "2.x", "python": "3.x", "torch_threads": 2, "tf32_matmul": False,
                     "tf32_cudnn": True, "tf32_override_env": ""},
             "peaks": None, "verdict": "v", "gemm": [], "precisions": modes}
    console = Console(record=True, width=300)
    for part in hw_tables(probe, "cpu"):
        console.print(part)
    text = console.export_text()
    assert text.count(note) == 1 and f"ok amp-fp16, master-fp16, pure-fp16: {note}" in text
    assert "ok fp32, amp-bf16 " in text and "no tf32: no TF32 on CPU" in text


def test_a_rate_under_a_thousandth_of_a_tflop_is_not_printed_as_zero() -> None:
    """An AMX Xeon's per-tensor fp8 GEMM (a reference kernel) ran 0.000107 TFLOP/s at n=256: the table read "0.000",
    a measured rate shown as none. Rates from 0.001 on keep three decimals."""
    probe = {"device_name": "CPU", "device": "cpu", "cpu_half_hardware": {"avx512_bf16": True},
             "env": {"cpu": "CPU", "torch": "2.x", "python": "3.x", "torch_threads": 2, "tf32_matmul": False,
                     "tf32_cudnn": True, "tf32_override_env": ""},
             "peaks": None, "verdict": "v", "precisions": {"fp32": {"ok": True, "reason": "", "note": ""}},
             "gemm": [{"size": 256, "math_mode": "fp32", "tflops": 0.2431, "fraction_of_peak": 0.73},
                      {"size": 256, "math_mode": "fp8", "tflops": 0.000107, "fraction_of_peak": None}]}
    console = Console(record=True, width=100)
    for part in hw_tables(probe, "cpu"):
        console.print(part)
    rows = {line.split("│")[2].strip(): line.split("│")[3].strip()
            for line in console.export_text().splitlines() if line.count("│") == 5}
    assert rows == {"fp32": "0.243", "fp8": "0.00011"}, rows
