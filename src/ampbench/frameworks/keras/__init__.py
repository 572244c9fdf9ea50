"""Keras 3 models measured under Keras's own mixed precision policies, on the TensorFlow, JAX or PyTorch backend.

A Keras cell is a cell of its own framework (see docs/architecture.md, "Adding a framework"): the runner starts it
in a child process (a Keras backend is chosen before keras is imported, so the backend is part of the cell's
identity), :mod:`ampbench.frameworks.keras.cell` measures it there and returns a row like a PyTorch cell's, with the Keras
fields added. Modules:

- :mod:`~ampbench.frameworks.keras.backends`  which backend, installed or not, chosen before import; versions; TF32 switches
- :mod:`~ampbench.frameworks.keras.policy`    ampbench's precision names <-> Keras's dtype policies; what is refused and why
- :mod:`~ampbench.frameworks.keras.workloads` ``keras-conv-dummy`` and the user's ``--model`` factory returning a keras.Model
- :mod:`~ampbench.frameworks.keras.cell`      one cell measured: fit's train step timed, memory, inference, convergence
- :mod:`~ampbench.frameworks.keras.memory`    the backends' GPU memory trackers, RSS growth on a CPU, out-of-memory on any backend
- :mod:`~ampbench.frameworks.keras.train`     ``ampbench train`` of a Keras model (epochs under the policy, in its own process)
- :mod:`~ampbench.frameworks.keras.diagnose`  ``ampbench diagnose`` of a Keras model: the nonfinite, policy and tensorcore checks
- :mod:`~ampbench.frameworks.keras.command`   the train and diagnose verbs: the request checked, its job in a child process

Nothing here imports keras at module import: the backend must be set first (:func:`backends.activate`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.frameworks.keras.backends import fork_server, missing, resolve_backend
from ampbench.frameworks.keras.policy import POLICIES, check_precisions, refuse_torch_only
from ampbench.seam import CellRunner, Commands, ForkServer, Options, WorkloadEntry

ROW_KEYS = {
    "keras_backend": "Keras cells: the backend Keras ran on (torch, tensorflow, jax), part of the cell's identity. Null "
                     "for PyTorch cells.",
    "keras_version": "Keras cells: the Keras version.",
    "backend_version": "Keras cells: the version of the backend's framework (TensorFlow, JAX or PyTorch).",
    "keras_policy": "Keras cells: the dtype policy the model was built under (float32, mixed_float16, mixed_bfloat16, "
                    "float16, bfloat16).",
    "loss_scaled": "Keras cells: whether compile() wrapped the optimizer in a LossScaleOptimizer (mixed_float16 only); "
                   "`loss_scale` is its final dynamic scale.",
    "jit_compile": "Keras cells: the model's jit_compile after its first train step (Keras's per-backend default: XLA "
                   "on TensorFlow/JAX where it applies).",
    "keras_params": "Keras cells: the model's weight count (trainable and not).",
    "keras_output_dtype": "Keras cells: the compute dtype of the model's last layer (float32 when pinned, as Keras's "
                          "mixed precision guide asks).",
}
"""The row keys only Keras cells fill (the store's ROW_KEYS include them through the framework registry)."""
ROW_TYPES = {**dict.fromkeys(("keras_backend", "keras_version", "backend_version", "keras_policy", "jit_compile",
                              "keras_output_dtype"), str), "keras_params": int, "loss_scaled": bool}
"""What each of them holds (the store's row validation reads it)."""


@dataclass(frozen=True)
class Keras:
    name: str = "keras"
    cell_module: str = "ampbench.frameworks.keras.cell"
    own_process: bool = True
    backends: tuple[str, ...] = ("torch", "tensorflow", "jax")
    backend_help: str = ("Keras models (keras-* workloads, a --model returning a keras.Model): torch (default), "
                         "tensorflow or jax.")
    predicted: bool = False

    def cells(self) -> CellRunner:
        from ampbench.frameworks.keras import cell  # lazy: numpy

        return cell  # (a module: its functions are the protocol's methods)

    def owns_workload(self, workload: str) -> bool:
        from ampbench.frameworks.keras.workloads import is_keras_workload  # lazy: numpy

        return is_keras_workload(workload)

    def owns_model(self, model: str, preset: str | None, seed: int, backend_given: bool) -> bool:
        from ampbench.frameworks.keras.workloads import is_keras_model  # lazy: numpy

        return backend_given or is_keras_model(model, preset, seed)

    def backend(self, given: str | None, owned: bool, otherwise: str) -> str | None:
        return resolve_backend(given, owned, otherwise)

    def missing(self, backend: str | None) -> str | None:
        return missing(backend or "")

    def fork_server(self, device: str, backend: str | None) -> ForkServer | None:
        return fork_server(self.cell_module, device, backend)

    def check(self, what: str, precisions: tuple[str, ...] | list[str], options: Options) -> None:
        check_precisions(precisions, f"{what} (a Keras model)")
        refuse_torch_only(what, options)

    def precisions(self, modes: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in modes if p in POLICIES)

    def workloads(self) -> list[WorkloadEntry]:
        from ampbench.frameworks.keras.workloads import KERAS_WORKLOADS  # lazy: numpy

        return [WorkloadEntry(i.name, i.description + " (extra: ampbench[keras])", i.paper, "none (random by design)")
                for i in KERAS_WORKLOADS.values()]

    def describe(self, backend: str | None) -> str:
        return f"{self.name}/{backend}" if backend else self.name

    def setting(self, backend: str | None) -> str | None:
        return f"keras on {backend}"  # (Keras compiles its own train step: no PyTorch execution axis)

    def commands(self) -> Commands:
        from ampbench.frameworks.keras import command  # lazy: torch

        return command  # (a module: its functions are the protocol's methods)

    def diagnose_checks(self) -> tuple[str, ...] | None:
        from ampbench.frameworks.keras.diagnose import KERAS_CHECKS  # lazy: torch

        return KERAS_CHECKS

    def row_keys(self) -> dict[str, str]:
        return ROW_KEYS

    def row_types(self) -> dict[str, type]:
        return ROW_TYPES


FRAMEWORK = Keras()
