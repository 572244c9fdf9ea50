"""The peak a measurement is divided by: MFU = achieved FLOP/s / the dense peak for the math the GEMMs actually ran
in (cf. nanoGPT's ``estimate_mfu``, which divides by A100's 312 bf16 TFLOP/s). A GPU's peaks are its row of the GPU
catalogue (:mod:`ampbench.measure.gpus`, with their sources); a CPU's, its theoretical peak. Tensor Core
generations by compute capability.
"""

from __future__ import annotations

from ampbench.measure.gpus import for_device


def peak_tflops(device_name: str | None, math_mode: str | None, device_type: str = "cuda") -> float | None:
    """Dense peak TFLOP/s for ``math_mode``: the GPU catalogue's for a GPU; for the CPU this process runs on, its
    theoretical peak (:func:`ampbench.measure.cpu.cpu_peak`)."""
    if math_mode is None:
        return None
    if device_type == "cpu":
        from ampbench.measure.cpu import cpu_peak  # lazy: torch

        peak = cpu_peak()
        return None if peak is None else peak.tflops.get(math_mode)
    entry = for_device(device_name)
    return None if entry is None else entry.math_tflops(math_mode)


def math_mode_of(compute_dtype_name: str, tf32_matmul: bool) -> str:
    """Math of the GEMMs: a half compute dtype names itself; fp32 GEMMs are tf32 when TF32 is in force."""
    if compute_dtype_name in ("fp16", "bf16", "fp8"):
        return compute_dtype_name
    return "tf32" if tf32_matmul else "fp32"


# Tensor Core generation by compute capability major.minor (NVIDIA architecture whitepapers).
TENSOR_CORE_GENERATION: dict[tuple[int, int], str] = {
    (7, 0): "1st gen (Volta): fp16",
    (7, 2): "1st gen (Volta/Xavier): fp16",
    (7, 5): "2nd gen (Turing): fp16, int8",
    (8, 0): "3rd gen (Ampere): fp16, bf16, tf32",
    (8, 6): "3rd gen (Ampere): fp16, bf16, tf32",
    (8, 7): "3rd gen (Ampere/Orin): fp16, bf16, tf32",
    (8, 9): "4th gen (Ada): fp16, bf16, tf32, fp8",
    (9, 0): "4th gen (Hopper): fp16, bf16, tf32, fp8",
    (10, 0): "5th gen (Blackwell): fp16, bf16, tf32, fp8, fp4",
    (12, 0): "5th gen (Blackwell): fp16, bf16, tf32, fp8, fp4",
}


def tensor_core_generation(capability: tuple[int, int]) -> str:
    if capability in TENSOR_CORE_GENERATION:
        return TENSOR_CORE_GENERATION[capability]
    if capability[0] < 7:
        return "none (compute capability < 7.0)"
    return f"unknown (compute capability {capability[0]}.{capability[1]})"
