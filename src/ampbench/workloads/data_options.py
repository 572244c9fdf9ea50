"""What the user says of a target's data: the options of ``--model`` (and the hf:/timm: adapters) and real data.

A plain value (no torch): the CLI builds it once, the run's config and every cell carry it, and
:func:`ampbench.workloads.factory.build_target` turns a target and it into a Workload -- one path for ``run``,
``train`` and ``diagnose``. Field metadata say when a field is left out of a cell's key and a run's identity
(:func:`ampbench.cells.flat`): fields added after keys were first stored are left out at their default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ampbench.errors import AmpbenchError

DEFAULT = "default"
"""Key metadata: left out while the field holds its default (a field added after keys were first stored)."""


@dataclass(frozen=True)
class DataOptions:
    """What the user said of the data of a ``--model`` (or an hf:/timm: adapter), and real data for any target."""

    input_shape: str | None = None
    """Per-sample input shape as given (``20``, ``3,224,224``)."""
    num_classes: int | None = None
    vocab_size: int | None = field(default=None, metadata={"cell": DEFAULT})
    num_outputs: int | None = field(default=None, metadata={"cell": DEFAULT})
    task: str | None = field(default=None, metadata={"cell": DEFAULT})
    batches: str | None = field(default=None, metadata={"cell": DEFAULT})
    """``file.py:make_batch``: the user's data (with a model)."""
    loss: str | None = field(default=None, metadata={"cell": DEFAULT})
    """``file.py:fn``: the user's loss (with a model)."""
    data_dir: str | None = None
    val_fraction: float | None = field(default=None, metadata={"cell": DEFAULT, "run": DEFAULT})
    """Share of --data-dir data held out for testing when it comes as one split (None: the workload's default)."""
    options: tuple[tuple[str, Any], ...] = ()
    """Workload options (``-o KEY=VALUE``), sorted by key."""

    def with_defaults(self, options: tuple[tuple[str, Any], ...]) -> DataOptions:
        """These options with ``options`` (a suite entry's workload options) where they give none of the same name."""
        if not options:
            return self
        return replace(self, options=tuple(sorted({**dict(options), **dict(self.options)}.items())))

    def described(self) -> dict[str, Any]:
        """What the user said of a --model's (or adapter's) data, as keywords of the workload factories."""
        return {"input_shape": self.input_shape, "num_classes": self.num_classes, "vocab_size": self.vocab_size,
                "num_outputs": self.num_outputs, "task": self.task}

    def given(self) -> list[str]:
        """The data options set, as command-line flags."""
        from ampbench.workloads.tasks import DataSpec  # lazy: torch

        return DataSpec.of(**self.described()).given()

    def check_targets(self, workloads: list[str] | tuple[str, ...], model: str | None) -> None:
        """These options apply to these targets: --model and the adapters describe their data, registered workloads
        (and the default suite) have their own; --batches/--loss need --model; a --task contradiction fails before
        anything is built (hf: configs have a vocabulary of their own). One-line AmpbenchError otherwise."""
        from ampbench.workloads.tasks import DataSpec  # lazy: torch

        data = DataSpec.of(**self.described())
        given = data.given()
        registered = [w for w in workloads if ":" not in w]
        if model is None and given and (registered or not workloads):
            raise AmpbenchError(f"{', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --model and the "
                                f"hf:/timm: adapters, not to {', '.join(registered) or 'the default suite'} (their data "
                                "are their own)")
        if model is None and (self.batches or self.loss):
            raise AmpbenchError("--batches/--loss apply to --model only")
        if data.task is not None:
            data.resolve("--task", need_shape=False, need_vocab=not any(w.startswith("hf:") for w in workloads))


def parse_options(items: Iterable[str] | None) -> dict[str, object]:
    """``-o KEY=VALUE`` (repeatable) -> {key: value}; a value of digits is an int (as cell keys store it), else the
    string; the last of a repeated key wins."""
    out: dict[str, object] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AmpbenchError(f"--option {item!r}: expected KEY=VALUE (e.g. --option task=span)")
        out[key.replace("-", "_")] = int(value) if value.isdigit() else value
    return out


def check_one_target(workload: str | None, model: str | None) -> None:
    """A command that works on one target got exactly one: a WORKLOAD name or ``--model`` (one line saying which
    was wrong: "not both" was said when neither was given)."""
    if workload is None and model is None:
        raise AmpbenchError("give a WORKLOAD name (see: ampbench list workloads) or --model file.py:factory")
    if workload is not None and model is not None:
        raise AmpbenchError(f"give a WORKLOAD name or --model, not both (got {workload} and --model {model})")
