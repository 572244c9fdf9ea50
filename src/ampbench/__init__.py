"""ampbench: mixed precision training for PyTorch, done right and measured."""

__version__ = "0.1.0"

from ampbench.errors import AmpbenchError, TrainingDivergedError, UnsupportedPrecisionError
from ampbench.precision import LossScaleConfig, MixedPrecision, list_precisions, supported
from ampbench.workloads import Workload, create_workload, list_workloads

__all__ = [
    "AmpbenchError",
    "LossScaleConfig",
    "MixedPrecision",
    "TrainingDivergedError",
    "UnsupportedPrecisionError",
    "Workload",
    "__version__",
    "create_workload",
    "list_precisions",
    "list_workloads",
    "supported",
]
