"""PyTorch models under ampbench's own precision recipes (the default framework: a target no other framework claims).

- :mod:`~ampbench.frameworks.torch.cell`   one cell measured in this process (the engine, the measures, the row)
- :mod:`~ampbench.frameworks.torch.train`  ``ampbench train`` of a PyTorch model (epochs, checkpoints, resume)
- :mod:`~ampbench.frameworks.torch.command`  the train and diagnose verbs: the request checked, then trained here (or
  in torchrun's ranks) or diagnosed

The workloads themselves (:mod:`ampbench.workloads`), the precision engine (:mod:`ampbench.precision`), the
execution axes and torch.distributed strategies are PyTorch's too; they are packages of their own because they are
large, and nothing outside PyTorch's cells imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ampbench.seam import CellRunner, Commands, ForkServer, Options, WorkloadEntry


@dataclass(frozen=True)
class Torch:
    name: str = "torch"
    cell_module: str = "ampbench.frameworks.torch.cell"
    own_process: bool = False
    backends: tuple[str, ...] = ()
    backend_help: str = ""
    predicted: bool = True

    def cells(self) -> CellRunner:
        from ampbench.frameworks.torch import cell  # lazy: torch, torch.utils.flop_counter

        return cell  # (a module: its functions are the protocol's methods)

    def owns_workload(self, workload: str) -> bool:
        return True  # (asked last: what no other framework claims)

    def owns_model(self, model: str, preset: str | None, seed: int, backend_given: bool) -> bool:
        return True

    def backend(self, given: str | None, owned: bool, otherwise: str) -> str | None:
        return None

    def missing(self, backend: str | None) -> str | None:
        return None  # (ampbench's own dependency)

    def fork_server(self, device: str, backend: str | None) -> ForkServer | None:
        # (importing torch and the cell module touches no GPU; torch._dynamo, which every cell's first optimizer
        # imports, kept only where the server checks that it did not either)
        return ForkServer((self.cell_module,), warm=("torch._dynamo",))

    def check(self, what: str, precisions: tuple[str, ...] | list[str], options: Options) -> None:
        return None  # (every mode and option is PyTorch's; RunConfig checks them against the device)

    def precisions(self, modes: tuple[str, ...]) -> tuple[str, ...]:
        return modes

    def workloads(self) -> list[WorkloadEntry]:
        from ampbench.workloads import get_spec, list_workloads  # lazy: torch

        out = []
        for name in list_workloads():
            spec = get_spec(name)
            out.append(WorkloadEntry(name, spec.description, spec.paper, spec.data, ", ".join(spec.options()) or "-"))
        return out

    def describe(self, backend: str | None) -> str:
        return self.name

    def setting(self, backend: str | None) -> str | None:
        return None

    def commands(self) -> Commands:
        from ampbench.frameworks.torch import command  # lazy: torch

        return command  # (a module: its functions are the protocol's methods)

    def diagnose_checks(self) -> tuple[str, ...] | None:
        return None

    def row_keys(self) -> dict[str, Any]:
        return {}

    def row_types(self) -> dict[str, type]:
        return {}


FRAMEWORK = Torch()
