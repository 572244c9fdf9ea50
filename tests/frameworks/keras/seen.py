"""A job for tests/frameworks/keras/test_launch.py, in a module that imports nothing (its test module imports torch)."""

from __future__ import annotations

import os
import sys


def seen(payload: dict[str, object]) -> dict[str, object]:
    """In the cell's process: what is loaded (by the server, before the job) and set."""
    return {"server": os.getppid(), "keras": "keras" in sys.modules, "torch": "torch" in sys.modules,
            "backend": os.environ.get("KERAS_BACKEND"), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
