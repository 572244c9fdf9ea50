"""Precision engine: one name = one recipe, loss scaling, fp32 master weights.

Importing this package registers every recipe (one module each).
"""

# Registration order is the order `ampbench list` shows.
# isort: off
from ampbench.precision import fp32, amp, master_recipes, pure, fp8  # noqa: F401
# isort: on
from ampbench.precision.base import Precision
from ampbench.precision.engine import MixedPrecision, StepRecord
from ampbench.precision.fp8 import Fp8Options
from ampbench.precision.registry import (
                                         advised_only_with_verdict,
                                         aliases_of,
                                         get,
                                         half_gradients,
                                         is_fp8,
                                         list_precisions,
                                         preference,
                                         register,
                                         resolve,
)
from ampbench.precision.scaling import LossScaleConfig, LossScaler
from ampbench.precision.support import Support, cpu_half_hardware, cpu_name, supported

__all__ = [
    "Fp8Options",
    "LossScaleConfig",
    "LossScaler",
    "MixedPrecision",
    "Precision",
    "StepRecord",
    "Support",
    "advised_only_with_verdict",
    "aliases_of",
    "cpu_half_hardware",
    "cpu_name",
    "get",
    "half_gradients",
    "is_fp8",
    "list_precisions",
    "preference",
    "register",
    "resolve",
    "supported",
]
