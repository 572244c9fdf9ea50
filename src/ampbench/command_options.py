"""The options of ``ampbench run``, ``train``, ``diagnose`` and ``predict``, each declared once: a dataclass field whose metadata
holds its flags and help.

The command line is derived from these fields (:func:`ampbench.cli.declared.command`: one typer option per field, in
the order declared, one help panel per section), and the library reads the same objects
(:meth:`ampbench.bench.config.RunConfig.from_options`, :meth:`ampbench.command_requests.TrainRequest.of`,
:meth:`~ampbench.command_requests.DiagnoseRequest.of`), so an option is written here and read there -- nowhere else.
An option two commands take is one field: the second section takes it with :func:`same` (``predict`` takes
``run``'s targets and axes so).

The sections follow who owns the option: the targets, the data, how to measure, the recipes, the PyTorch engine's
execution and distribution axes (:class:`TorchArgs`: the PyTorch framework's; a target of another framework
refuses them), how cells are launched, and what the command writes. Values are as the command line gives them
(strings, numbers); parsing and every check is the library's. One name per thing: a raw section is ``<Thing>Args``
and parses into ``<Thing>Options`` (``DataArgs.parsed() -> DataOptions``, ``RecipeArgs`` -> ``RecipeOptions``,
``MeasureArgs`` -> ``MeasureOptions``, ``LaunchArgs`` -> ``LaunchOptions``); the targets and the PyTorch axes
(``TargetArgs``, ``TorchArgs``) become the run's ``Targets`` and ``Axes`` with the device, in ``RunConfig``.
Torch-free: the command line starts without torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from ampbench import seam
from ampbench.cells import LaunchOptions, MeasureOptions, RecipeOptions, route
from ampbench.errors import AmpbenchError
from ampbench.measure.gpus import predictable
from ampbench.values import parse_measures, parse_size
from ampbench.workloads.data_options import DataOptions, parse_options


@dataclass(frozen=True)
class Flag:
    """How a field appears on the command line."""

    help: str
    names: tuple[str, ...] | Callable[[], tuple[tuple[str, ...], str]] = ()
    """The flags (none: typer's own, ``--field-name``, and ``--no-field-name`` for a bool); or a function giving
    (flags, help) when the command line is built (the registered frameworks' ``--<framework>-backend``)."""
    cli_default: Any = ...
    """The command line's default where it is not the library's (``...``: the field's)."""
    argument: bool = False
    """A positional argument, not an option."""

    def resolved(self) -> tuple[tuple[str, ...], str]:
        if callable(self.names):
            return self.names()
        return self.names, self.help


def opt(default: Any, help: str, *names: str, cli_default: Any = ...,
        flags: Callable[[], tuple[tuple[str, ...], str]] | None = None, argument: bool = False) -> Any:
    """A field that is a command-line option (``flags``: its flags and help known when the command line is built)."""
    return field(default=default, metadata={"cli": Flag(help, flags or names, cli_default, argument)})


def same(section: type, name: str) -> Any:
    """The option ``section`` declares as ``name``, taken by another section (another command) as it is."""
    (f,) = [f for f in fields(section) if f.name == name]
    return field(default=f.default, metadata=f.metadata)


def _backend_flags() -> tuple[tuple[str, ...], str]:
    """``--<framework>-backend`` of every framework with backends: one option, which each framework resolves for its
    own targets."""
    chosen = [fw for fw in seam.all_frameworks() if fw.backends]
    return tuple(f"--{fw.name}-backend" for fw in chosen), " ".join(fw.backend_help for fw in chosen)


ADAPTERS = ("hf:", "timm:")
"""Targets named like a --model but built as workloads: Hugging Face configs and timm models."""


def adapter_as_workload(section: Any, workload_field: str) -> None:
    """A ``--model hf:gpt2`` (or ``timm:...``) is the adapter ``--workloads hf:gpt2`` names: moved there, where no
    workload was given (both given: the "not both" line of the command says so)."""
    model = getattr(section, "model", None)
    if model and str(model).lower().startswith(ADAPTERS) and not getattr(section, workload_field):
        object.__setattr__(section, workload_field, model)
        object.__setattr__(section, "model", None)


NPROC_DEFAULT = 2
"""--nproc-per-node's default (run, train, diagnose): two ranks per machine."""


def check_nproc_given(strategy: str | None, nproc: int) -> None:
    """--nproc-per-node applies with --strategy: a count given without one was dropped unsaid (one process per cell,
    ``run``; ``train`` ran anyway). AmpbenchError (exit 2) otherwise."""
    if strategy is None and nproc != NPROC_DEFAULT:
        raise AmpbenchError(f"--nproc-per-node {nproc} applies with --strategy ddp or fsdp")


@dataclass(frozen=True)
class TargetArgs:
    PANEL: ClassVar[str] = "What to measure"

    workloads: str | None = opt(None, "Comma-separated workloads (default: the device's suite).")
    model: str | None = opt(None, "Your model: file.py:factory or pkg.mod:factory (returns an nn.Module, an "
                                  "ampbench.Workload or a keras.Model); hf:<config> and timm:<model> as --workloads.")
    preset: str | None = opt(None, "tiny | small | paper (default: small, or the suite's own).")
    backend: str | None = opt(None, "", flags=_backend_flags)

    def __post_init__(self) -> None:
        adapter_as_workload(self, "workloads")


@dataclass(frozen=True)
class DataArgs:
    """What a ``--model`` (or an hf:/timm: adapter) is fed: the same for run, train, diagnose and predict."""

    PANEL: ClassVar[str] = "Your model's data"

    input_shape: str | None = opt(None, "Per-sample input shape: 20 (features), 3,224,224 (an image), 16,80 (a "
                                        "sequence of vectors), 128 with --vocab-size (token ids).")
    vocab_size: int | None = opt(None, "Token inputs: int64 ids in [1, V), 0 left for padding (--task lm: [0, V)); "
                                       "hf: default: the config's vocabulary.")
    num_classes: int | None = opt(None, "Classification (the default task): output (batch, N) logits.")
    num_outputs: int | None = opt(None, "Regression: output (batch, K), MSE loss, RMSE metric.")
    task: str | None = opt(None, "classify | regress | lm (output (batch, seq, vocab), next-token targets; needs "
                                 "--vocab-size).")
    batches: str | None = opt(None, "Your data: file.py:make_batch, make_batch(batch_size, generator) -> (inputs, "
                                    "targets); inputs a tensor, tuple or dict.")
    loss: str | None = opt(None, "Your loss: file.py:fn, fn(output, targets) -> scalar tensor.")
    data_dir: Path | None = opt(None, "Real data (format per workload).")
    val_fraction: float | None = opt(None, "Share of --data-dir data held out for testing when it comes as one split "
                                           "(default 0.2; tabular/text 0.1).")
    option: list[str] | None = opt(None, "Workload option KEY=VALUE (hf: config fields; tokenizer=word|byte|bpe for a "
                                         "text CSV).", "--option", "-o")

    def parsed(self) -> DataOptions:
        """These options parsed (``-o KEY=VALUE`` included): what every command's request holds."""
        return parsed_data(self)


def parsed_data(section: Any) -> DataOptions:
    """A command's data section (:class:`DataArgs`, :class:`PredictData`) parsed, field by field by name: the one
    mapping from the command line's data options to :class:`~ampbench.workloads.data_options.DataOptions` (a section
    without real data -- predict's -- has no ``--data-dir`` nor ``--val-fraction``)."""
    data_dir = getattr(section, "data_dir", None)
    return DataOptions(input_shape=section.input_shape, num_classes=section.num_classes,
                       vocab_size=section.vocab_size, num_outputs=section.num_outputs, task=section.task,
                       batches=section.batches, loss=section.loss,
                       data_dir=None if data_dir is None else str(data_dir),
                       val_fraction=getattr(section, "val_fraction", None),
                       options=tuple(sorted(parse_options(section.option).items())))


@dataclass(frozen=True)
class MeasureArgs:
    PANEL: ClassVar[str] = "How to measure"

    device: str | None = opt(None, "cpu, cuda or cuda:N (default: cuda if present).")
    measure: str | None = opt(None, "throughput,memory,maxbatch,converge,inference.")
    batch_size: str | None = opt(None, "Batch size(s), comma-separated (default: the workload's).")
    steps: int | None = opt(None, "Timed steps per cell (default: 20 on a CPU and a GPU).")
    warmup: int | None = opt(None, "Untimed warm-up steps, >= 1 (default: 3 on a CPU and a GPU).")
    repeats: int = opt(1, "Throughput measurements per cell, interleaved across precisions; the advisor then needs "
                          "every repeat to agree.")
    seed: int = opt(0, "Seed for model init and data (converge: first of --seeds seeds).")
    memory_budget: str | None = opt(None, "Memory a cell may use, e.g. 2GiB (over it: oom).")
    memory_margin: float | None = opt(None, "maxbatch: peak must stay below (1-margin) x limit (default: 0.05 on a GPU, "
                                            "0.25 on a CPU, whose RSS peak varies between runs).")
    maxbatch_limit: int = opt(65536, "Largest batch maxbatch tries.")
    seeds: int | None = opt(None, "converge: seeds per precision (default by preset: tiny 2, small 3, paper 3).")
    converge_steps: int | None = opt(None, "converge: training steps per seed (default by preset: tiny 30, small "
                                           "200, paper the workload's epochs).")
    inference_batch: int | None = opt(None, "inference: the large batch (default: the training batch).")
    grad_accum: str | None = opt(None, "Micro-batches of each batch size a timed step accumulates, as train "
                                       "--grad-accum runs them (comma-separated: each beside the others, 1 the plain "
                                       "step): samples/s over batch x N, memory with the earlier micro-batches' "
                                       "gradients held, max batch the largest micro-batch.", "--grad-accum")

    def parsed(self, default_steps: tuple[int, int]) -> MeasureOptions:
        """How each cell is measured, parsed and checked (one line naming the option); ``default_steps``: the timed
        and warm-up steps of the run's device where the command line said none (:func:`ampbench.bench.suites.
        default_steps`). The device and the batch sizes are the run's, parsed with it."""
        timed, warmup = default_steps
        return MeasureOptions(parse_measures(self.measure), timed if self.steps is None else self.steps,
                               warmup if self.warmup is None else self.warmup, self.seed,
                               parse_size(self.memory_budget, "memory-budget"), self.memory_margin,
                               self.maxbatch_limit, seeds=self.seeds, converge_steps=self.converge_steps,
                               inference_batch=self.inference_batch)


@dataclass(frozen=True)
class RecipeArgs:
    PANEL: ClassVar[str] = "Precisions"

    precisions: str | None = opt(None, "Modes or aliases, or all (default: every mode the device runs; on a CPU "
                                       "the emulated fp8 modes only when named, or with all).", "--precisions",
                                 "--precision")
    loss_scale: str | None = opt(None, "none | dynamic | hysteresis[:N] | static:V.")
    fp8_skip: str | None = opt(None, "fp8 modes: Linear layers kept in bf16, name substrings, comma-separated (e.g. "
                                     "head,lm_head).")
    fp8_filter: str | None = opt(None, "fp8 modes: auto (multiple-of-16 dims and torchao's size thresholds) or dims "
                                       "(only the multiple-of-16 rule).")
    optimizer_state: str | None = opt(None, "Axis: Adam/AdamW state precisions, comma-separated: fp32, bf16, bf16-sr, "
                                            "8bit, 4bit, fp8 (torchao); each runs beside the optimizer as built, with "
                                            "every mode it applies to.", "--optimizer-state")

    def parsed(self) -> RecipeOptions:
        """What the recipes take beyond the mode's name, parsed (``--fp8-skip`` split at its commas) and checked (a bad
        loss scale or fp8 filter is one line). The modes and the optimizer states are the run's axes, parsed with
        the device they run on."""
        return RecipeOptions(self.loss_scale, tuple(s.strip() for s in (self.fp8_skip or "").split(",") if s.strip()),
                             self.fp8_filter)


@dataclass(frozen=True)
class TorchArgs:
    """The PyTorch engine's execution and distribution axes (PyTorch targets only)."""

    PANEL: ClassVar[str] = "PyTorch: execution and distribution"

    compile: str | None = opt(None, "Execution axis: off,on,max-autotune (torch.compile; default off). Each value runs "
                                    "every precision.")
    memory_format: str | None = opt(None, "Execution axis: contiguous,channels_last (models with (N,C,H,W) inputs; "
                                          "default contiguous).")
    cuda_graphs: str | None = opt(None, "Execution axis: off,on (CUDA only; default off): the compiled "
                                        "forward/backward replayed as CUDA graphs.")
    checkpointing: str | None = opt(None, "Execution axis: off,blocks,selective (activation checkpointing: each "
                                          "repeated block's activations recomputed in the backward -- selective: "
                                          "only what costs no FLOPs, the matmul/conv/attention outputs kept; "
                                          "default off).")
    strategy: str | None = opt(None, "Distributed: ddp,fsdp (torch.distributed over --nproc-per-node ranks; "
                                     "one-process cells run too, as the scaling baseline).")
    nproc_per_node: int = opt(NPROC_DEFAULT, "With --strategy: ranks per machine (torchrun).")
    grad_reduce_dtype: str | None = opt(None, "Distributed: fp32,bf16,fp16 (the dtype gradients are reduced in; "
                                              "default: their own).")
    nnodes: int = opt(1, "With --strategy: machines (the same command on each, with its --node-rank; node 0 prints "
                         "and stores).")
    node_rank: int = opt(0, "With --nnodes > 1: this machine's rank.")
    rdzv_endpoint: str | None = opt(None, "With --nnodes > 1: HOST:PORT of node 0, the same on every machine "
                                          "(torchrun's static rendezvous; run: cell i at PORT + i).")


@dataclass(frozen=True)
class LaunchArgs:
    PANEL: ClassVar[str] = "How cells are launched"

    isolate: bool | None = opt(None, "Run each cell in a child process (an OOM or crash becomes a row).",
                               cli_default=True)
    """None (library callers): on CUDA yes, on CPU no; the command line isolates by default."""
    cell_timeout: float | None = opt(None, "Seconds before an isolated cell is stopped (status error).")
    build_ahead: bool | None = opt(None, "Build the next cell's workload on the host while this one measures (default: "
                                         "on for isolated GPU cells; on a CPU it would share the cores the steps are "
                                         "timed on).")

    def parsed(self, node_rank: int = 0, endpoint: str | None = None) -> LaunchOptions:
        """How cells are started, checked (a timeout <= 0 is one line); ``node_rank`` and ``endpoint``: this machine's
        place among several (:class:`TorchArgs`' ``--node-rank`` and ``--rdzv-endpoint``)."""
        return LaunchOptions(self.isolate, self.cell_timeout, node_rank, endpoint, self.build_ahead)


@dataclass(frozen=True)
class RunOptions:
    """Everything ``ampbench run`` is told about what to measure, by section."""

    targets: TargetArgs = field(default_factory=TargetArgs)
    recipe: RecipeArgs = field(default_factory=RecipeArgs)
    measure: MeasureArgs = field(default_factory=MeasureArgs)
    data: DataArgs = field(default_factory=DataArgs)
    torch: TorchArgs = field(default_factory=TorchArgs)
    launch: LaunchArgs = field(default_factory=LaunchArgs)

    @classmethod
    def of(cls, **values: Any) -> RunOptions:
        """From flat keywords (each a field of one section, as on the command line); an unknown name is a TypeError."""
        return cls(**route({f.name: f.default_factory for f in fields(cls)}, values,  # type: ignore[misc]
                           "RunOptions.of()"))


@dataclass(frozen=True)
class RunOutput:
    """What ``ampbench run`` writes and how it reports (not what it measures)."""

    PANEL: ClassVar[str] = "Output"

    db: Path | None = opt(None, "Results store (default: $AMPBENCH_DB or the user data dir).")
    json_out: Path | None = opt(None, "Write the run's rows as JSON (for ampbench import); with --dry-run, the plan: "
                                      "each cell with its key.", "--json")
    resume: bool = opt(False, "Continue the last run with these options.")
    label: str | None = opt(None, "Free-text label stored with the run.")
    report: bool = opt(True, "Write the HTML report at the end.")
    report_path: Path | None = opt(None, "Where (default: <db dir>/reports/RUN.html).")
    dry_run: bool = opt(False, "Check everything (options, each workload built and checked) and print the plan; run "
                               "and store nothing.", "--dry-run")
    tensorboard: Path | None = opt(None, "Write TensorBoard event files under DIR (needs ampbench[tensorboard]; "
                                         "docs/tensorboard.md).", "--tensorboard")
    verbose: bool = opt(False, "After each cell, where its wall time went: its phases (process start, import, "
                               "build, setup, first step, memory and FLOP steps, warm-up, timed steps, teardown).",
                        "--verbose")


# -- ampbench train and ampbench diagnose: one target each --------------------------------------------------------------
@dataclass(frozen=True)
class CommandTarget:
    """The one workload (or ``--model``) a train or diagnose works on."""

    PANEL: ClassVar[str] = "What to train or diagnose"

    workload: str | None = opt(None, "Workload name (ampbench list workloads); or use --model.", argument=True)
    model: str | None = same(TargetArgs, "model")
    preset: str | None = opt(None, "tiny | small | paper (default: small).")
    seed: int = opt(0, "Seed for model init, data order and dropout.")
    backend: str | None = same(TargetArgs, "backend")

    def __post_init__(self) -> None:
        adapter_as_workload(self, "workload")


@dataclass(frozen=True)
class TrainSettings:
    PANEL: ClassVar[str] = "Training"

    precision: str = opt("amp-bf16", "Precision mode or alias.", "--precision", "--precisions", "-p")
    epochs: int | None = opt(None, "Epochs (default: the workload's).")
    batch_size: int | None = opt(None, "Batch size (default: the workload's).")
    max_steps: int | None = opt(None, "Cap on steps per epoch (quick runs).")
    grad_accum: int = opt(1, "Micro-batches of --batch-size per optimizer step (gradient accumulation: a step's "
                             "gradients are those of batch x N samples, unscaled and checked once).", "--grad-accum")
    max_grad_norm: float | None = opt(None, "Clip the gradients' total L2 norm to this each step, after unscaling (in "
                                            "master-* modes the fp32 master gradients').", "--max-grad-norm")
    device: str | None = same(MeasureArgs, "device")
    loss_scale: str | None = same(RecipeArgs, "loss_scale")
    fp8_skip: str | None = same(RecipeArgs, "fp8_skip")
    fp8_filter: str | None = same(RecipeArgs, "fp8_filter")
    optimizer_state: str | None = opt(None, "Adam/AdamW state precision: fp32, bf16, bf16-sr (pure-bf16), 8bit, 4bit, "
                                            "fp8 (torchao; default: the optimizer as built, its states in the dtype of "
                                            "the weights it steps).", "--optimizer-state")
    compile: str | None = opt(None, "off | on | max-autotune: train the torch.compile'd model (the first step, which "
                                    "compiles, is timed apart). Default off; on for fp8 on CUDA.", "--compile")
    checkpointing: str | None = opt(None, "off | blocks | selective: activation checkpointing, each repeated block's "
                                          "activations recomputed in the backward (less memory, a forward more; "
                                          "selective: only what costs no FLOPs). Default off.",
                                    "--checkpointing")
    checkpoint: Path | None = opt(None, "Directory for checkpoint.pt, written each epoch.")
    resume: bool = opt(False, "Resume from --checkpoint DIR.")
    json_out: Path | None = opt(None, "Write the final metrics as JSON.", "--json")
    tensorboard: Path | None = same(RunOutput, "tensorboard")


@dataclass(frozen=True)
class TrainDistribution:
    PANEL: ClassVar[str] = "Distributed (PyTorch)"

    strategy: str | None = opt(None, "ddp | fsdp: train over --nproc-per-node ranks (torchrun); --batch-size is per "
                                     "rank.", "--strategy")
    nproc_per_node: int = same(TorchArgs, "nproc_per_node")
    grad_reduce_dtype: str | None = opt(None, "With --strategy: fp32 | bf16 | fp16 (default: the gradients' own dtype).",
                                        "--grad-reduce-dtype")
    nnodes: int = same(TorchArgs, "nnodes")
    node_rank: int = same(TorchArgs, "node_rank")
    rdzv_endpoint: str | None = same(TorchArgs, "rdzv_endpoint")


@dataclass(frozen=True)
class DiagnoseSettings:
    PANEL: ClassVar[str] = "Diagnosis"

    precision: str = opt("amp-fp16", "Mode to diagnose (name or alias).", "--precision", "--precisions", "-p")
    steps: int = opt(20, "Training steps per check (NaN search, policy trials, profile).")
    checks: str | None = opt(None, "nonfinite,gradients,activations,policy,tensorcore,profile,fp8 (fp8: the fp8 modes "
                                   "only).")
    batch_size: int | None = same(TrainSettings, "batch_size")
    device: str | None = same(MeasureArgs, "device")
    fp8_skip: str | None = same(RecipeArgs, "fp8_skip")
    fp8_filter: str | None = same(RecipeArgs, "fp8_filter")
    optimizer_state: str | None = same(TrainSettings, "optimizer_state")
    json_out: Path | None = opt(None, "Write the diagnosis as JSON.", "--json")
    trace: Path | None = opt(None, "Chrome trace of the profiled steps (default: <db dir>/traces/).")
    db: Path | None = opt(None, "Store the diagnosis here (the HTML report shows it).")
    tensorboard: Path | None = same(RunOutput, "tensorboard")


# -- ampbench predict ---------------------------------------------------------------------------------------------------
def _gpu_flags() -> tuple[tuple[str, ...], str]:
    """``--gpu``'s help names the catalogue's GPUs (read when the command line is built)."""
    return ("--gpu",), ("The GPU(s), comma-separated, or all: " + ", ".join(g.key for g in predictable())
                        + " (case-insensitive; ampbench list gpus).")


@dataclass(frozen=True)
class PredictGpus:
    PANEL: ClassVar[str] = "GPUs"

    gpu: str | None = opt(None, "", flags=_gpu_flags)
    gpu_spec: Path | None = opt(None, "Another GPU, as JSON: name, tflops {fp32, tf32, fp16, bf16, fp8}, memory_gib, "
                                      "bandwidth_gbs, sms, capability.", "--gpu-spec")
    prices: Path | None = opt(None, "Your USD per hour per GPU, as JSON {\"a100-80gb\": 1.89, ...} or CSV lines "
                                    "gpu,usd_per_hour: adds the cost per million samples.", "--prices")
    host_us: str | None = opt(None, "Your host's microseconds, F,B[,P[,D]]: forward and backward per op, per "
                                    "parameter of a fused optimizer.step() and of the engine's direct fused step "
                                    "(ampbench hw --device cuda measures them; default: the lent H200 machine's "
                                    "24.1,27.9,11.6,6.7). A launch-bound step is its host's time.",
                              "--host-us")


@dataclass(frozen=True)
class PredictDistribution:
    PANEL: ClassVar[str] = "Many GPUs"

    gpus_per_node: int = opt(1, "GPUs per machine (with --strategy; --batch-size is each GPU's).", "--gpus")
    nodes: int = opt(1, "Machines (with --strategy).", "--nodes")
    strategy: str | None = opt(None, "ddp: the gradients all-reduced in DDP's buckets over the GPUs; fsdp: FSDP2 as run "
                                     "wraps the model (the parameters all-gathered, the gradients reduce-scattered, "
                                     "the optimizer sharded).", "--strategy")
    interconnect: str | None = opt(None, "The slowest link the collectives cross: nvlink | pcie within a machine "
                                         "(default nvlink where the GPU has it), infiniband | ethernet across machines "
                                         "(default infiniband).", "--interconnect")


@dataclass(frozen=True)
class PredictTargets:
    """What ``predict`` traces: ``run``'s targets and axes (the same flags, declared there)."""

    PANEL: ClassVar[str] = "What to predict"

    workloads: str | None = same(TargetArgs, "workloads")
    model: str | None = same(TargetArgs, "model")
    preset: str | None = same(TargetArgs, "preset")
    precisions: str | None = same(RecipeArgs, "precisions")
    batch_size: str | None = same(MeasureArgs, "batch_size")
    optimizer_state: str | None = same(RecipeArgs, "optimizer_state")
    fp8_skip: str | None = same(RecipeArgs, "fp8_skip")
    fp8_filter: str | None = same(RecipeArgs, "fp8_filter")
    seed: int = same(MeasureArgs, "seed")
    inference: bool = opt(False, "Predict the forward alone (eval mode, no autograd, the half modes' models in half): "
                                 "latency per batch, samples/s, memory, largest batch.", "--inference")
    channels_last: bool = opt(False, "Trace with channels-last inputs and weights (4-D inputs), as --memory-format "
                                     "channels_last runs.", "--channels-last")
    compile: str | None = opt(None, "off,on,max-autotune: predict the step torch.compile runs (the model's forward "
                                    "and backward as Inductor's fused kernels; max-autotune's GEMMs as cuBLAS's), as "
                                    "run's --compile cells. Each value predicts every precision.")
    cuda_graphs: str | None = opt(None, "off,on: the compiled forward and backward replayed as CUDA graphs (no host "
                                        "time per kernel), as run's --cuda-graphs cells.")
    checkpointing: str | None = opt(None, "off,blocks,selective: the step with each repeated block's activations "
                                          "recomputed in the backward (a forward more, less memory; selective: only "
                                          "what costs no FLOPs), as run's --checkpointing cells.")
    grad_accum: str | None = opt(None, "Micro-batches of --batch-size per optimizer step, as train --grad-accum runs "
                                       "them (comma-separated: each beside the others, 1 the plain step): the step's "
                                       "time and samples/s over batch x N samples, the peak and largest batch a "
                                       "micro-batch's.", "--grad-accum")

    def __post_init__(self) -> None:
        adapter_as_workload(self, "workloads")


@dataclass(frozen=True)
class PredictData:
    """What a ``--model`` is fed (no real data: nothing is read, nothing computed)."""

    PANEL: ClassVar[str] = "Your model's data"

    input_shape: str | None = same(DataArgs, "input_shape")
    vocab_size: int | None = same(DataArgs, "vocab_size")
    num_classes: int | None = same(DataArgs, "num_classes")
    num_outputs: int | None = same(DataArgs, "num_outputs")
    task: str | None = same(DataArgs, "task")
    batches: str | None = same(DataArgs, "batches")
    loss: str | None = same(DataArgs, "loss")
    option: list[str] | None = same(DataArgs, "option")

    def parsed(self) -> DataOptions:
        return parsed_data(self)


@dataclass(frozen=True)
class PredictOutput:
    PANEL: ClassVar[str] = "Output"

    db: Path | None = same(RunOutput, "db")
    json_out: Path | None = opt(None, "Write the predicted rows as JSON.", "--json")
    csv_out: Path | None = opt(None, "Write the GPUs side by side as CSV: a line per workload, batch and precision; per "
                                     "GPU its status, samples/s, x fp32, peak bytes, max batch, J/sample, USD per "
                                     "million samples.", "--csv")
