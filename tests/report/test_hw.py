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
