"""The environment recorded with every result row: what ran, where, with which versions and flags."""

from __future__ import annotations

import os
from typing import Any

import torch

from ampbench.cpuinfo import cpu_name
from ampbench.errors import AmpbenchError
from ampbench.measure.cpu import cpu_facts
from ampbench.measure.host_env import host_environment
from ampbench.precision.tf32_flags import read_tf32


def resolve_device(name: str | None) -> torch.device:
    """``None`` -> cuda when present, else cpu. Raises AmpbenchError for names torch does not accept."""

    if name is None:
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise AmpbenchError(f"--device {name!r}: expected cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise AmpbenchError(f"--device {name}: CUDA is not available here (CPU-only torch or no GPU); use --device cpu")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if dev.index >= torch.cuda.device_count():
            raise AmpbenchError(f"--device {name}: only {torch.cuda.device_count()} GPU(s) visible")
    elif dev.type != "cpu":
        raise AmpbenchError(f"--device {name!r}: ampbench runs on cpu or cuda")
    return dev


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


def nvml_info(device: torch.device) -> dict[str, Any]:
    """Driver, clocks, power limit and this process's memory from NVML (nvidia-ml-py), when available."""
    try:
        import pynvml  # nvidia-ml-py; lazy: pynvml
    except ImportError:
        return {"nvml": "not installed (pip install nvidia-ml-py)"}
    try:
        pynvml.nvmlInit()
    except Exception as e:  # no driver / no permission: say so in the row, measure without it
        return {"nvml": f"unavailable: {e}"}
    out: dict[str, Any] = {"nvml": "ok"}
    try:
        h = nvml_handle(pynvml, device)
        out["driver"] = _s(pynvml.nvmlSystemGetDriverVersion())
        for key, fn in (
            ("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            ("sm_clock_max_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
            ("mem_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            ("power_limit_w", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
            ("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            ("memory_total_bytes", lambda: pynvml.nvmlDeviceGetMemoryInfo(h).total),
        ):
            try:
                out[key] = fn()
            except Exception:  # a field this GPU/driver does not report: leave it out
                continue
    finally:
        pynvml.nvmlShutdown()
    return out


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def nvml_handle(pynvml: Any, device: torch.device) -> Any:
    """NVML handle of a torch device, by UUID (CUDA_VISIBLE_DEVICES renumbers torch's indices, not NVML's)."""
    try:
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # older torch without .uuid, MIG instances: fall back to the index
        return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def process_gpu_memory(device: torch.device) -> int | None:
    """Bytes NVML says this process holds on the GPU (CUDA context + allocator), or None."""
    try:
        import pynvml  # lazy: pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        h = nvml_handle(pynvml, device)
        pid = os.getpid()
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == pid and p.usedGpuMemory is not None:
                return int(p.usedGpuMemory)
        return None
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def device_gpu_memory(device: torch.device) -> int | None:
    """Bytes in use on the whole GPU (total - free, from cudaMemGetInfo). Unlike NVML's per-process
    list this works inside containers, whose PIDs NVML cannot match; it also counts other processes."""
    try:
        free, total = torch.cuda.mem_get_info(device)
    except Exception:  # no CUDA / a driver that refuses: the row says null
        return None
    return int(total - free)


def environment(device: torch.device) -> dict[str, Any]:
    """Everything needed to interpret a number later. TF32 flags are read as they are *now*:
    call this inside the precision's forward context to record what the GEMMs ran with."""
    tf32 = read_tf32()
    env: dict[str, Any] = {
        **host_environment(str(device)),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "tf32_matmul": tf32.matmul,
        "tf32_cudnn": tf32.cudnn,
        "tf32_api": tf32.api,
        "tf32_override_env": tf32.as_dict()["override_env"],
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({
            "capability": f"{props.major}.{props.minor}",
            "memory_total_bytes": int(props.total_memory),
            "multiprocessors": props.multi_processor_count,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        })
        env.update(nvml_info(device))
    else:
        env.update(cpu_facts())  # half-precision hardware and theoretical peak: the probe `ampbench hw` shows
    return env
