"""Workloads: the classic mixed-precision experiments as ready models + data, and user models.

Importing this package registers every workload (one module per family).
"""

# Registration order is the order `ampbench list` shows.
# isort: off
from ampbench.workloads import vision, nlp, tabular  # noqa: F401
# isort: on
from ampbench.workloads.base import PRESETS, Metric, Workload
from ampbench.workloads.factory import build_target, create_model, create_user_workload, create_workload
from ampbench.workloads.options import DataOptions
from ampbench.workloads.registry import get_spec, list_workloads

__all__ = ["PRESETS", "DataOptions", "Metric", "Workload", "build_target", "create_model", "create_user_workload",
           "create_workload",
           "get_spec", "list_workloads"]
