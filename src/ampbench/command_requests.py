"""What ``train`` and ``diagnose`` are asked to do, parsed and checked once, as ``run``'s :class:`RunConfig` is.

:class:`Target` is the one workload (or the user's ``--model``) a command works on: its framework and backend
(:func:`ampbench.seam.of_command`) and the data options, checked against it. :class:`TrainRequest` and
:class:`DiagnoseRequest` add each command's options; every check -- of one option or of options together, and the
files the command will write -- runs in ``__post_init__``, in the order the command line has always reported them,
so a request the CLI would refuse cannot be built and the command function only dispatches and prints.

What a request means to its target's framework is the framework's: its commands' ``train_plan``/``diagnose_plan``
(:mod:`ampbench.seam`) checks the options it cannot take and returns what its ``train``/``diagnose`` runs (a PyTorch
target: the :class:`ampbench.frameworks.torch.train.TrainConfig`; a Keras one: the cell its child process runs), so
the command has no branch per framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench import seam
from ampbench.bench.config import fp8_compiles_by_default
from ampbench.command_options import (
    NPROC_DEFAULT,
    CommandTarget,
    DataArgs,
    DiagnoseSettings,
    TrainDistribution,
    TrainSettings,
    check_nproc_given,
)
from ampbench.diagnose import applicable_checks, parse_checks
from ampbench.errors import AmpbenchError
from ampbench.launch import check_nodes
from ampbench.measure.env import resolve_device
from ampbench.paths import check_output_file
from ampbench.precision import Fp8Options, resolve
from ampbench.precision.optimizer_state import check as check_optimizer_state
from ampbench.precision.scaling import LossScaleConfig
from ampbench.tensorboard import open_dir
from ampbench.workloads import DataOptions
from ampbench.workloads.data_options import check_one_target


@dataclass(frozen=True)
class Target:
    """One registered workload (or adapter) or the user's ``--model``, with the data options that describe it."""

    workload: str | None = None
    model: str | None = None
    preset: str | None = None
    seed: int = 0
    data: DataOptions = field(default_factory=DataOptions)
    backend_given: str | None = None
    """``--<framework>-backend`` as given (None: the framework's default, for a framework with backends)."""
    framework: seam.Framework = field(init=False, repr=False, compare=False)
    backend: str | None = field(init=False)

    def __post_init__(self) -> None:
        check_one_target(self.workload, self.model)  # (before the command opens its store: nothing written on a typo)
        fw, backend = seam.of_command(self.workload, self.model, self.backend_given, self.preset, self.seed)
        object.__setattr__(self, "framework", fw)
        object.__setattr__(self, "backend", backend)

    def check_data(self) -> None:
        """The data options apply to this target (one line otherwise)."""
        self.data.check_targets([self.workload] if self.workload else [], self.model)

    @property
    def label(self) -> str:
        return self.workload or f"user:{self.model}"

    @classmethod
    def of(cls, target: CommandTarget, data: DataArgs) -> Target:
        """The target the command line's declared options say (:mod:`ampbench.command_options`)."""
        return cls(target.workload, target.model, target.preset, target.seed, data.parsed(), target.backend)

    @property
    def what(self) -> str:
        """How an error line names it."""
        return self.workload or f"--model {self.model}"


@dataclass(frozen=True)
class Launch:
    """``--strategy`` over ``--nproc-per-node`` ranks on ``--nnodes`` machines (torchrun); kept out of the results."""

    strategy: str | None = None
    nproc: int = NPROC_DEFAULT
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None

    def __post_init__(self) -> None:
        if self.nproc < 1:
            raise AmpbenchError(f"--nproc-per-node must be >= 1, got {self.nproc}")
        check_nproc_given(self.strategy, self.nproc)
        check_nodes(self.strategy, self.nnodes, self.node_rank, self.rdzv_endpoint)

    def given(self) -> bool:
        return self.strategy is not None


@dataclass(frozen=True)
class TrainRequest:
    """``ampbench train``: one target trained in one precision mode, checked at construction."""

    target: Target
    precision: str = "amp-bf16"
    epochs: int | None = None
    batch_size: int | None = None
    max_steps: int | None = None
    grad_accum: int = 1
    """Micro-batches per optimizer step (--grad-accum)."""
    max_grad_norm: float | None = None
    checkpointing: str | None = None
    """--checkpointing as given (None: off)."""
    device: str | None = None
    json_out: Path | None = None
    checkpoint: Path | None = None
    resume: bool = False
    tensorboard: Path | None = None
    launch: Launch = field(default_factory=Launch)
    loss_scale: str | None = None
    compile: str | None = None
    """--compile as given (None: off, or on for fp8 on CUDA: :attr:`compile_mode`)."""
    fp8_skip: str | None = None
    fp8_filter: str | None = None
    grad_reduce_dtype: str | None = None
    optimizer_state: str | None = None
    argv: tuple[str, ...] = ()
    """The command line (``--strategy``: torchrun runs it again in each rank)."""
    plan: Any = field(init=False, default=None, repr=False, compare=False)
    """What the target's framework trains (its ``train_plan``, checked)."""

    def __post_init__(self) -> None:
        resolve(self.precision)  # a bad name fails before any data is built
        if self.loss_scale is not None:  # (and a bad loss scale: it failed after the model was built and announced)
            LossScaleConfig.parse(self.loss_scale)
        object.__setattr__(self, "plan", self.target.framework.commands().train_plan(self))
        check_output_file(self.json_out, "--json")
        self.target.check_data()

    @classmethod
    def of(cls, target: CommandTarget, data: DataArgs, s: TrainSettings, d: TrainDistribution,
           argv: tuple[str, ...] = ()) -> TrainRequest:
        """The request the command line's declared options say (:mod:`ampbench.command_options`)."""
        resolve(s.precision)  # (a misspelt mode: one line before --model's file is imported to find its framework)
        return cls(Target.of(target, data),
                   precision=s.precision, epochs=s.epochs, batch_size=s.batch_size, max_steps=s.max_steps,
                   grad_accum=s.grad_accum, max_grad_norm=s.max_grad_norm, checkpointing=s.checkpointing,
                   device=s.device, json_out=s.json_out,
                   checkpoint=s.checkpoint, resume=s.resume,
                   tensorboard=s.tensorboard,
                   launch=Launch(d.strategy, d.nproc_per_node, d.nnodes, d.node_rank, d.rdzv_endpoint),
                   loss_scale=s.loss_scale, compile=s.compile, fp8_skip=s.fp8_skip, fp8_filter=s.fp8_filter,
                   grad_reduce_dtype=d.grad_reduce_dtype, optimizer_state=s.optimizer_state, argv=argv)

    def given(self) -> seam.Options:
        """What was given of the options some framework cannot take."""
        return seam.Options(loss_scale=self.loss_scale is not None, compile=self.compile is not None,
                            strategy=self.launch.given(), checkpoint=self.checkpoint is not None or self.resume,
                            tensorboard=self.tensorboard is not None,
                            fp8=self.fp8_skip is not None or self.fp8_filter is not None,
                            optimizer_state=self.optimizer_state is not None, grad_accum=self.grad_accum != 1,
                            max_grad_norm=self.max_grad_norm is not None,
                            checkpointing=self.checkpointing is not None,
                            data_dir=self.target.data.data_dir is not None, option=bool(self.target.data.options))

    @property
    def compile_mode(self) -> str:
        """--compile as given; without it off, except fp8 on CUDA: on (torchao's float8 is built to be compiled)."""
        if self.compile is not None:
            return self.compile.strip()
        return "on" if fp8_compiles_by_default(False, str(resolve_device(self.device)), [self.precision]) else "off"

    def fp8(self) -> Fp8Options | None:
        return Fp8Options.for_modes([self.precision], self.fp8_skip, self.fp8_filter)


@dataclass(frozen=True)
class DiagnoseRequest:
    """``ampbench diagnose``: one target's checks in one precision mode, checked at construction."""

    target: Target
    precision: str = "amp-fp16"
    steps: int = 20
    checks: str | None = None
    """Comma-separated check names as given (None: every check that applies: :attr:`wanted`)."""
    batch_size: int | None = None
    device: str | None = None
    fp8_skip: str | None = None
    fp8_filter: str | None = None
    json_out: Path | None = None
    trace: Path | None = None
    tensorboard: Path | None = None
    optimizer_state: str | None = None
    wanted: tuple[str, ...] = field(init=False, default=())
    plan: Any = field(init=False, default=None, repr=False, compare=False)
    """What the target's framework diagnoses (its ``diagnose_plan``, checked)."""

    def __post_init__(self) -> None:
        fw = self.target.framework
        object.__setattr__(self, "wanted", parse_checks(self.checks) if self.checks is not None else
                           fw.diagnose_checks() or applicable_checks(self.precision))
        object.__setattr__(self, "plan", fw.commands().diagnose_plan(self))
        self.fp8()
        check_optimizer_state(self.precision, self.optimizer_state)
        self.target.check_data()
        check_output_file(self.json_out, "--json", "diagnosis.json")
        check_output_file(self.trace, "--trace", "trace.json")
        if self.tensorboard is not None:
            open_dir(self.tensorboard)
            if not {"gradients", "activations"} & set(self.wanted):
                raise AmpbenchError("--tensorboard writes the gradients and activations checks' histograms: add "
                                    "--checks gradients,activations (or leave --checks out)")

    @classmethod
    def of(cls, target: CommandTarget, data: DataArgs, s: DiagnoseSettings) -> DiagnoseRequest:
        """The request the command line's declared options say (:mod:`ampbench.command_options`)."""
        resolve(s.precision)  # (as TrainRequest.of: before --model's file is imported)
        if s.checks is not None:
            parse_checks(s.checks)
        return cls(Target.of(target, data),
                   precision=s.precision, steps=s.steps, checks=s.checks, batch_size=s.batch_size, device=s.device,
                   fp8_skip=s.fp8_skip, fp8_filter=s.fp8_filter, json_out=s.json_out, trace=s.trace,
                   tensorboard=s.tensorboard, optimizer_state=s.optimizer_state)

    def given(self) -> seam.Options:
        """What was given of the options some framework cannot take."""
        return seam.Options(fp8=self.fp8_skip is not None or self.fp8_filter is not None, trace=self.trace is not None,
                            tensorboard=self.tensorboard is not None, optimizer_state=self.optimizer_state is not None,
                            data_dir=self.target.data.data_dir is not None, option=bool(self.target.data.options))

    def fp8(self) -> Fp8Options | None:
        return Fp8Options.for_modes([self.precision], self.fp8_skip, self.fp8_filter)

    def mp_options(self) -> dict[str, Any] | None:
        """The MixedPrecision keywords the checks that train build with (fp8 options, the optimizer's state)."""
        fp8 = self.fp8()
        out = {**({"fp8": fp8} if fp8 else {}), **({"optimizer_state": self.optimizer_state} if self.optimizer_state else {})}
        return out or None
