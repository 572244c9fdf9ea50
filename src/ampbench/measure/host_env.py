"""What a row's environment says about the machine and the run, whatever the framework measured it: one list for
PyTorch's cells (:func:`ampbench.measure.env.environment`) and Keras's (``frameworks/keras/cell.py``), each adding its
own framework's facts. Torch-free: a Keras cell's process never imports torch."""

from __future__ import annotations

import os
import platform
import socket
from datetime import datetime, timezone
from typing import Any

import ampbench
from ampbench.cpuinfo import cpu_name

RUN_ENV = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "CUDA_VISIBLE_DEVICES")
"""Environment variables that change what a run measures (a CPU's ISA capped, the GPUs visible): recorded where set,
lower-cased."""


def host_environment(device: str) -> dict[str, Any]:
    """The device asked for, ampbench's and Python's versions, the machine (host, platform, CPU, its core count), when,
    and the variables of :data:`RUN_ENV` that are set."""
    out: dict[str, Any] = {
        "device": device,
        "ampbench": ampbench.__version__,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
    }
    out.update({var.lower(): os.environ[var] for var in RUN_ENV if os.environ.get(var) is not None})
    return out
