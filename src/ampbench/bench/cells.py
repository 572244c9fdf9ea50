"""What a benchmark cell measured, apart from where and when: THE identity rows are compared by.

A cell is workload x preset x precision x batch size x execution (compile, memory format, CUDA graphs) x
distribution (strategy, world size, gradient reduce dtype), plus whether it was compiled because fp8 on
CUDA compiles by default. Two rows are the same cell, measured on two devices or in two runs, exactly when
their :class:`CellId` is equal; a precision's baseline is its cell with the precision fp32. Planning writes
these fields into every row (``CellSpec.cell_id().to_row()``), and every reader -- derived ratios, the
advisor, reports, the cross-device comparison -- groups rows by this one definition, never by a key of its
own (a comparison keyed on four fields put an FSDP x2 row where the one-process row belonged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ampbench.execution.options import Execution, strategy_label

IDENTITY_KEYS = ("workload", "preset", "precision", "batch_size", "compile", "memory_format", "cuda_graphs", "strategy",
                 "world_size", "grad_reduce_dtype", "compiled_by_default")
"""The row keys that say which cell a row is (ROW_KEYS documents each)."""


@dataclass(frozen=True)
class CellId:
    """One cell's identity. Rows from before an axis existed read as that axis's default."""

    workload: str
    preset: str
    precision: str
    batch_size: int | None
    execution: Execution = field(default_factory=Execution)
    strategy: str | None = None
    world_size: int = 1
    grad_reduce_dtype: str | None = None
    compiled_by_default: bool = False

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> CellId:
        strategy = row.get("strategy") or None
        return cls(workload=str(row.get("workload") or ""), preset=str(row.get("preset") or ""),
                   precision=str(row.get("precision") or ""), batch_size=row.get("batch_size"),
                   execution=Execution.of(row), strategy=strategy,
                   world_size=int(row.get("world_size") or 1) if strategy else 1,
                   grad_reduce_dtype=row.get("grad_reduce_dtype") if strategy else None,
                   compiled_by_default=bool(row.get("compiled_by_default")))

    def to_row(self) -> dict[str, Any]:
        """The identity keys of a row (compiled_by_default null unless true, as rows have always stored it)."""
        return {"workload": self.workload, "preset": self.preset, "precision": self.precision,
                "batch_size": self.batch_size, **self.execution.to_row(), "strategy": self.strategy,
                "world_size": self.world_size, "grad_reduce_dtype": self.grad_reduce_dtype,
                "compiled_by_default": self.compiled_by_default or None}

    def but(self, **changes: Any) -> CellId:
        return replace(self, **changes)

    @property
    def baseline(self) -> CellId:
        """The fp32 cell this cell's precision is compared with: the same everything else."""
        return replace(self, precision="fp32")

    @property
    def eager_baseline(self) -> CellId:
        """fp32 at the default execution (not compiled by default), same distribution: the baseline of every change."""
        return replace(self, precision="fp32", execution=Execution(), compiled_by_default=False)

    @property
    def single_process(self) -> CellId:
        """The same cell on one process (the scaling baseline of a distributed cell)."""
        return replace(self, strategy=None, world_size=1, grad_reduce_dtype=None)

    @property
    def setting(self) -> CellId:
        """Everything but the precision: the cells whose precisions are compared side by side."""
        return replace(self, precision="")

    def describe(self, with_batch: bool = True) -> str:
        """How reports name a setting: 'batch 64, eager', 'batch 32, compile, fsdp x2 (bf16 reduce)'."""
        parts = [f"batch {self.batch_size}"] if with_batch and self.batch_size is not None else []
        parts.append(self.execution.label)
        if self.compiled_by_default:
            parts[-1] += " (fp8 on CUDA: compiled by default)"
        if self.strategy:
            parts.append(strategy_label({"strategy": self.strategy, "world_size": self.world_size,
                                         "grad_reduce_dtype": self.grad_reduce_dtype}))
        return ", ".join(parts)


def measured_on(row: Mapping[str, Any]) -> tuple[Any, Any]:
    """(run, device) a row was measured in: with its CellId, what one stored measurement is."""
    return row.get("run_id"), row.get("device_name")
