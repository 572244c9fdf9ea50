"""Workloads: the classic mixed-precision experiments as ready models + data, and user models.

Names are imported on first use (:mod:`ampbench.lazy`); the first one looked up registers every workload
(:mod:`~ampbench.workloads.factory` imports the families, one module each), so the registry lists them all. A module
that needs only :mod:`~ampbench.workloads.data_options` (the cell identity) imports no workload, and no torch.
"""

from ampbench.lazy import exports


def _register() -> None:
    import ampbench.workloads.factory  # noqa: F401  (imports every family: each registers its workloads; lazy: torch)


_NAMES = {"PRESETS": "base", "Metric": "base", "Workload": "base", "DataOptions": "data_options", "get_spec": "registry",
          "list_workloads": "registry", **{n: "factory" for n in ("build_target", "create_model", "create_user_workload",
                                                                   "create_workload")}}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = exports(__name__, _NAMES, before=_register)
