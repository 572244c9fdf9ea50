"""Data: in-memory tensor datasets, seeded synthetic data, and real-format readers."""

from ampbench.data.errors import DataError
from ampbench.data.tensors import TensorData

__all__ = ["DataError", "TensorData"]
