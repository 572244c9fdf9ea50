"""What ``ampbench predict`` is asked, parsed and checked once (as ``run``'s :class:`~ampbench.bench.config.RunConfig`
is), and the predictions it makes: the targets (``run``'s :class:`~ampbench.command_requests.Target`, at the presets ``run``
gives them on a GPU), the axes (precisions, batch sizes, optimizer states, layout), the GPUs (``--gpu a,b,c`` or
``all``: each target traced once per batch and precision, priced on every GPU) and their prices (``--prices``).

Every check runs at construction, before anything is traced: the GPU, the options, each target's data, a target of a
framework that runs apart (predict traces PyTorch steps), the ``--model`` preset, each target built on meta and its
optimizer checked for every optimizer state asked for. :meth:`PredictConfig.predict` then traces and prices each
target x batch size (``ampbench.predict.rows``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.bench.suites import EntrySettings, named_note, suite_entries, suite_settings
from ampbench.cells import route
from ampbench.command_options import PredictDistribution, PredictGpus, PredictTargets
from ampbench.command_requests import Target
from ampbench.errors import AmpbenchError
from ampbench.execution.axes import parse_axis
from ampbench.execution.checkpointing import check_blocks
from ampbench.measure.gpus import Gpu, lookup
from ampbench.precision import list_precisions, optimizer_state, resolve
from ampbench.precision.fp8 import Fp8Options
from ampbench.predict.cost import MEASURED_HOST, Host
from ampbench.predict.parallel import Fabric, fabric
from ampbench.predict.rows import Machine, Question, check_target, either_of, find_gpus, gpu_suggestions, predict_target
from ampbench.values import parse_batch_sizes, parse_grad_accums, parse_list, parse_unique, says_all
from ampbench.workloads import DataOptions, build_target
from ampbench.workloads.user import check_preset as check_model_preset


def parse_predicted_precisions(value: str | None) -> tuple[str, ...]:
    """Names or aliases -> canonical names, in the order given; default: every mode but fp8 (torchao, an optional
    extra; ask for the fp8 modes by name, or ``all``: every mode)."""
    if value is None:
        return tuple(p for p in list_precisions() if not p.startswith("fp8"))
    names = parse_list(value, "precisions")
    if says_all(names):
        return tuple(list_precisions())
    return tuple(dict.fromkeys(resolve(p) for p in names))


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

    gpus: tuple[Gpu, ...]
    targets: tuple[Target, ...]
    precisions: tuple[str, ...]
    batch_sizes: tuple[int | None, ...] = (None,)
    optimizer_states: tuple[str | None, ...] = (None,)
    channels_last: bool = False
    prices: dict[str, float] = field(default_factory=dict)
    """USD per hour by GPU key (``--prices FILE``): the cost per million samples of each row on a priced GPU."""
    inference: bool = False
    """The forward alone (``--inference``): latency per batch, memory and the largest batch of inference."""
    gpus_per_node: int = 1
    nodes: int = 1
    strategy: str | None = None
    """ddp over ``gpus_per_node`` x ``nodes`` GPUs (the batch is each rank's), or None: one GPU."""
    interconnect: str | None = None
    fp8: Fp8Options | None = None
    """What the fp8 modes convert (``--fp8-skip``, ``--fp8-filter``), as ``run`` converts it; None: the defaults."""
    host: Host = MEASURED_HOST
    """The host that issues the ops (``--host-us``): its time sets a launch-bound step."""
    executions: tuple[tuple[str, str], ...] = (("off", "off"),)
    """The (compile, cuda_graphs) values predicted (``--compile``, ``--cuda-graphs``): each combination, as ``run``
    makes its cells."""
    checkpointing: tuple[str, ...] = ("off",)
    """The ``--checkpointing`` values predicted (each with every execution and precision)."""
    settings: tuple[EntrySettings, ...] = ()
    """The default GPU suite's, per target: the batch (on a GPU of the suite's reference memory) and layout ``run``
    gives it where the user said nothing (named targets too, at the size people train them: ``named_entry``); empty
    where no target has any."""
    notes: tuple[str, ...] = ()
    """What was taken for the user where they said nothing (the console says it)."""
    grad_accums: tuple[int, ...] = (1,)
    """Micro-batches of each batch size a step accumulates (``--grad-accum``; 1: none)."""
    built: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)
    """Each target's workload on meta, built once when checked (a user's factory runs once, however many GPUs)."""

    @property
    def gpu(self) -> Gpu:
        """The first GPU (the only one, for one)."""
        return self.gpus[0]

    @classmethod
    def from_strings(cls, *, data: DataOptions | None = None, **options: Any) -> PredictConfig:
        """The config of ``ampbench predict``'s options given as keywords, the command line's names (each a field of
        one of its sections: :class:`~ampbench.command_options.PredictGpus`, ``PredictTargets``,
        ``PredictDistribution``); ``data``: what a ``--model`` is fed."""
        s = route({"gpus": PredictGpus, "targets": PredictTargets, "spread": PredictDistribution}, options,
                  "PredictConfig.from_strings()")
        return cls.from_options(s["gpus"], s["targets"], s["spread"], data or DataOptions())

    @classmethod
    def from_options(cls, on: PredictGpus, asked: PredictTargets, spread: PredictDistribution,
                     data: DataOptions) -> PredictConfig:
        """The config the command line's sections say: parsed here, every check made before anything is traced."""
        gpu, gpu_spec, prices, host_us = on.gpu, on.gpu_spec, on.prices, on.host_us
        a = asked
        workloads, model, preset, precisions, batch_size = a.workloads, a.model, a.preset, a.precisions, a.batch_size
        optimizer_state, fp8_skip, fp8_filter, seed = a.optimizer_state, a.fp8_skip, a.fp8_filter, a.seed
        inference, channels_last, compile, cuda_graphs = a.inference, a.channels_last, a.compile, a.cuda_graphs
        checkpointing = parse_axis(a.checkpointing, "checkpointing")
        gpus_per_node, nodes, strategy, interconnect = spread.gpus_per_node, spread.nodes, spread.strategy, \
            spread.interconnect
        host = Host.parse(host_us) if host_us is not None else MEASURED_HOST
        executions = tuple(itertools.product(parse_axis(compile, "compile"), parse_axis(cuda_graphs, "cuda_graphs")))
        gpus = find_gpus(gpu, gpu_spec)
        priced = load_prices(prices, gpus) if prices is not None else {}
        names = parse_predicted_precisions(precisions)
        fp8 = Fp8Options.for_modes(names, fp8_skip, fp8_filter)
        sizes = parse_batch_sizes(batch_size)
        states = parse_optimizer_states(optimizer_state, names)
        if model is not None and workloads:
            raise AmpbenchError("give --workloads or --model, not both")
        # the cells `ampbench run` measures on a GPU: named workloads at --preset (default: the size people train them
        # at, their GPU suite entry's where they have one), else the GPU suite
        wanted = parse_unique(workloads, "workloads") if (workloads or "").strip(", ") else []  # (",," names none)
        entries = suite_entries(wanted, preset, "cuda") if not model else ()
        settings = suite_settings(entries, None)
        if model:
            targets: tuple[Target, ...] = (Target(workload=None, model=model, preset=preset or "small", seed=seed,
                                                  data=data),)
        else:  # (a suite entry's workload options where the user gave none of the same name)
            targets = tuple(Target(workload=e.workload, preset=e.preset, seed=seed, data=data.with_defaults(e.options))
                            for e in entries)
        for t in targets:
            t.check_data()
            if not t.framework.predicted:
                raise AmpbenchError(f"predict traces PyTorch training steps; {t.label} is a {t.framework.name} target "
                                    "(measure it with ampbench run)")
        if model is not None:
            check_model_preset(model, preset, seed)  # (only a preset the user gave: "small" is then just the label)
        if inference and checkpointing != ("off",):
            raise AmpbenchError("--checkpointing recomputes activations in a training step's backward; --inference "
                                "predicts the forward alone (no backward): leave one of them out")
        grad_accums = parse_grad_accums(a.grad_accum)
        if inference and grad_accums != (1,):
            raise AmpbenchError("--grad-accum accumulates a training step's gradients; --inference predicts the forward "
                                "alone (no backward): leave one of them out")
        if inference and states != (None,):
            raise AmpbenchError("--optimizer-state applies to training; --inference predicts the forward alone (no "
                                "optimizer)")
        if strategy not in (None, "ddp", "fsdp"):
            raise AmpbenchError(f"--strategy {strategy}: predict takes ddp or fsdp (as run --strategy runs them)")
        for flag, n in (("--gpus", gpus_per_node), ("--nodes", nodes)):
            if n < 1:
                raise AmpbenchError(f"{flag} {n}: give a count >= 1 (--gpus: GPUs per machine, --nodes: machines)")
        many = gpus_per_node * nodes > 1
        if many and inference:
            raise AmpbenchError(f"--gpus {gpus_per_node} --nodes {nodes} predicts training over many GPUs; --inference "
                                "one GPU's forward: leave one of them out")
        if strategy is not None and not many:
            raise AmpbenchError(f"--strategy {strategy} needs more than one GPU: add --gpus N (and --nodes M for "
                                "several machines)")
        sized = named_note(wanted, preset, "cuda", batch_given=batch_size is not None) if not model else None
        notes: tuple[str, ...] = (sized,) if sized else ()  # (named workloads at the size people train them)
        if many and strategy is None:  # (data parallel: what most people mean by training on 8 GPUs)
            strategy = "ddp"
            notes += (f"{gpus_per_node * nodes} GPUs and no --strategy: predicted as DDP (data parallel: each GPU "
                      "holds the whole model and trains its own batch); --strategy fsdp shards the model instead",)
        config = cls(gpus, targets, names, sizes, states, channels_last, priced, inference, gpus_per_node, nodes,
                     strategy, interconnect, fp8, host, executions, checkpointing, settings, notes, grad_accums)
        config.fabrics()  # (each GPU's fabric checked now: NVLink where asked, the interconnect for the nodes)
        for k, t in enumerate(targets):  # every target built (on meta) and its optimizer checked before any tracing
            config.built[k] = check_target(config.builder(t), list(names), states, trains=not inference)
            for policy in (c for c in checkpointing if c != "off"):
                check_blocks(config.built[k].model, t.label, policy)
        return config

    @staticmethod
    def builder(target: Target) -> Callable[[], Any]:
        """Builds the target's workload (``predict_target`` builds it on meta)."""
        return lambda: build_target(target.workload, target.model, target.preset, target.data, target.seed,
                                    preset_given=False)

    def fabrics(self) -> dict[str, Fabric]:
        """Each GPU's fabric under ``--strategy`` (none on one GPU); one line for a fabric that cannot be."""
        if self.strategy is None:
            return {}
        return {g.key: fabric(g, self.gpus_per_node, self.nodes, self.interconnect, self.strategy) for g in self.gpus}

    def predict(self, tracing: Callable[[Target], Any] | None = None) -> list[dict[str, Any]]:
        """The predicted rows of every target x batch size x precision (x optimizer state). ``tracing(target)``: a
        context manager entered around each trace (the CLI's status line)."""
        rows: list[dict[str, Any]] = []
        fabrics = self.fabrics()
        for k, t in enumerate(self.targets):
            build = self.builder(t)
            entry = self.settings[k] if self.settings else EntrySettings()
            sizes = (entry.batch,) if entry.batch is not None and self.batch_sizes == (None,) else self.batch_sizes
            channels_last = self.channels_last or entry.memory_format == "channels_last"
            for size in sizes:
                traces: dict[Any, Any] = {}  # (traced once, priced on every GPU and accumulation)
                for n in self.grad_accums:
                    question = Question(self.precisions, size, channels_last, t.preset, self.optimizer_states,
                                        self.inference, self.fp8, self.executions, self.checkpointing, n)
                    with tracing(t) if tracing is not None else contextlib.nullcontext():
                        for gpu in self.gpus:
                            machine = Machine(gpu, fabrics.get(gpu.key), self.host, self.prices.get(gpu.key))
                            rows += predict_target(t.label, build, question, machine, traces,
                                                   built=self.built.get(k))
        return rows


def load_prices(path: Path, gpus: tuple[Gpu, ...]) -> dict[str, float]:
    """``--prices FILE``: the user's own USD per hour per GPU, as JSON (``{"a100-80gb": 1.89, ...}``) or CSV (``gpu,
    usd_per_hour`` lines); every key a known GPU (or this prediction's --gpu-spec), every price > 0."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise AmpbenchError(f"--prices {path}: cannot read it ({e.strerror or e})") from None
    try:
        data = json.loads(text)
    except ValueError:
        rows = [line.split(",") for line in text.splitlines() if line.strip() and not line.startswith("#")]
        if rows and rows[0][0].strip().lower() in ("gpu", "key"):
            rows = rows[1:]
        if any(len(r) != 2 for r in rows):
            raise AmpbenchError(f"--prices {path}: expected JSON {{\"gpu\": usd_per_hour}} or CSV lines gpu,usd_per_hour"
                                ) from None
        data = {r[0].strip(): r[1].strip() for r in rows}
    if not isinstance(data, dict) or not data:
        raise AmpbenchError(f"--prices {path}: expected JSON {{\"gpu\": usd_per_hour}} or CSV lines gpu,usd_per_hour")
    keys = {g.key for g in gpus}
    out: dict[str, float] = {}
    for key, value in data.items():
        k = str(key).strip().lower()
        if k not in keys and lookup(k) is None:  # (a known GPU this prediction leaves out: its price is not needed)
            close = gpu_suggestions(k)
            hint = f"did you mean {either_of(close)}? " if close else ""
            raise AmpbenchError(f"--prices {path}: {key!r} is not a known GPU ({hint}ampbench list gpus; this "
                                f"prediction's: {', '.join(sorted(keys))})")
        try:
            price = float(value)
        except (TypeError, ValueError):
            price = -1.0
        if not price > 0 or price == float("inf"):
            raise AmpbenchError(f"--prices {path}: {key}'s price must be a number of USD per hour > 0, got {value!r}")
        out[k] = price
    return out
