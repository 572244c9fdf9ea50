"""ampbench: mixed precision training for PyTorch, done right and measured."""

__version__ = "0.1.0"

from ampbench.errors import AmpbenchError, TrainingDivergedError, UnsupportedPrecisionError
from ampbench.precision import LossScaleConfig, MixedPrecision, list_precisions, supported

__all__ = [
    "AmpbenchError",
    "LossScaleConfig",
    "MixedPrecision",
    "TrainingDivergedError",
    "UnsupportedPrecisionError",
    "__version__",
    "list_precisions",
    "supported",
]
