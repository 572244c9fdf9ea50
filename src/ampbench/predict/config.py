"""What ``ampbench predict`` is asked, parsed and checked once (as ``run``'s :class:`~ampbench.bench.config.RunConfig`
is), and the predictions it makes: the targets (``run``'s :class:`~ampbench.command_requests.Target`, at the presets ``run``
gives them on a GPU), the axes (precisions, batch sizes, optimizer states, layout) and the GPU.

Every check runs at construction, before anything is traced: the GPU, the options, each target's data, a target of a
framework that runs apart (predict traces PyTorch steps), the ``--model`` preset, each target built on meta and its
optimizer checked for every optimizer state asked for. :meth:`PredictConfig.predict` then traces and prices each
target x batch size (``ampbench.predict.run``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampbench.bench.config import parse_batch_sizes, parse_list
from ampbench.bench.suites import with_presets
from ampbench.command_requests import Target
from ampbench.errors import AmpbenchError
from ampbench.measure.peaks import GpuSpec
from ampbench.precision import list_precisions, optimizer_state, resolve
from ampbench.predict.run import check_target, find_gpu, predict_target
from ampbench.workloads import DataOptions, build_target
from ampbench.workloads.user import check_preset as check_model_preset


def parse_predicted_precisions(value: str | None) -> tuple[str, ...]:
    """Names or aliases -> canonical names, in the order given; default: every mode but fp8 (not predicted yet)."""
    if value is None:
        return tuple(p for p in list_precisions() if not p.startswith("fp8"))
    return tuple(resolve(p) for p in parse_list(value, "precisions"))


def parse_optimizer_states(value: str | None, precisions: tuple[str, ...]) -> tuple[str | None, ...]:
    """``--optimizer-state``'s states, checked (names; torchao installed when one is not a mode's own), after None
    (the optimizer as the workload builds it)."""
    given = tuple(dict.fromkeys(optimizer_state.check_name(s) for s in parse_list(value, "optimizer-state")))
    problem = optimizer_state.missing_for(list(precisions), given)
    if problem:
        raise AmpbenchError(f"--optimizer-state {value}: {problem}")
    return (None, *given)


@dataclass(frozen=True)
class PredictConfig:
    """A checked ``ampbench predict``: build it with :meth:`from_strings` (the command line's values)."""

    gpu: GpuSpec
    targets: tuple[Target, ...]
    precisions: tuple[str, ...]
    batch_sizes: tuple[int | None, ...] = (None,)
    optimizer_states: tuple[str | None, ...] = (None,)
    channels_last: bool = False

    @classmethod
    def from_strings(cls, *, gpu: str | None = None, gpu_spec: Path | None = None, workloads: str | None = None,
                     model: str | None = None, preset: str | None = None, precisions: str | None = None,
                     batch_size: str | None = None, optimizer_state: str | None = None, channels_last: bool = False,
                     data: DataOptions | None = None, seed: int = 0) -> PredictConfig:
        spec = find_gpu(gpu, gpu_spec)
        names = parse_predicted_precisions(precisions)
        sizes = parse_batch_sizes(batch_size)
        states = parse_optimizer_states(optimizer_state, names)
        data = data or DataOptions()
        if model is not None and workloads:
            raise AmpbenchError("give --workloads or --model, not both")
        # the cells `ampbench run` measures on a GPU: named workloads at --preset (default small), else the GPU suite
        wanted = [w.strip() for w in (workloads or "").split(",") if w.strip()]
        names_presets = list(zip(*with_presets(wanted, preset, "cuda"))) if not model else [(None, preset or "small")]
        targets = tuple(Target(workload=w, model=model if w is None else None, preset=p, seed=seed, data=data)
                        for w, p in names_presets)
        for t in targets:
            t.check_data()
            if not t.framework.predicted:
                raise AmpbenchError(f"predict traces PyTorch training steps; {t.label} is a {t.framework.name} target "
                                    "(measure it with ampbench run)")
        if model is not None:
            check_model_preset(model, preset, seed)  # (only a preset the user gave: "small" is then just the label)
        config = cls(spec, targets, names, sizes, states, channels_last)
        for t in targets:  # every target built (on meta) and its optimizer checked before any tracing
            check_target(config.builder(t), list(names), states)
        return config

    @staticmethod
    def builder(target: Target) -> Callable[[], Any]:
        """Builds the target's workload (``predict_target`` builds it on meta)."""
        return lambda: build_target(target.workload, target.model, target.preset, target.data, target.seed,
                                    preset_given=False)

    def predict(self, tracing: Callable[[Target], Any] | None = None) -> list[dict[str, Any]]:
        """The predicted rows of every target x batch size x precision (x optimizer state). ``tracing(target)``: a
        context manager entered around each trace (the CLI's status line)."""
        rows: list[dict[str, Any]] = []
        for t in self.targets:
            build = self.builder(t)
            for size in self.batch_sizes:
                with tracing(t) if tracing is not None else contextlib.nullcontext():
                    rows += predict_target(t.label, build, list(self.precisions), self.gpu, size, self.channels_last,
                                           preset=t.preset, optimizer_states=self.optimizer_states)
        return rows
