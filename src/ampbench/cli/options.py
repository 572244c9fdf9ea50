"""Options several commands share, as ``Annotated`` aliases a command's parameters take.

Those ``ampbench run`` has too are derived from its declared fields (:mod:`ampbench.run_options`, via
:func:`ampbench.cli.declared.alias`): an option's flags and help are written once. What a ``--model`` (or an
hf:/timm: adapter) is fed is the same for run, train, diagnose and predict, and checked the same way
(:meth:`ampbench.workloads.DataOptions.check_targets`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ampbench.cli.declared import alias
from ampbench.run_options import DataArgs, MeasureOptions, RecipeArgs, RunOutput, TargetOptions, TorchOptions

Opt = Optional  # typer needs Optional[...] on py3.10

ModelOpt = alias(TargetOptions, "model")
BackendOpt = alias(TargetOptions, "backend")
InputShapeOpt = alias(DataArgs, "input_shape")
VocabSizeOpt = alias(DataArgs, "vocab_size")
NumClassesOpt = alias(DataArgs, "num_classes")
NumOutputsOpt = alias(DataArgs, "num_outputs")
TaskOpt = alias(DataArgs, "task")
BatchesOpt = alias(DataArgs, "batches")
LossOpt = alias(DataArgs, "loss")
OptionOpt = alias(DataArgs, "option")
DataDirOpt = alias(DataArgs, "data_dir")
ValFractionOpt = alias(DataArgs, "val_fraction")
PresetOpt = Annotated[Opt[str], typer.Option(help="tiny | small | paper (default: small).")]
DeviceOpt = alias(MeasureOptions, "device")
SeedOpt = Annotated[int, typer.Option(help="Seed for model init and data.")]
DbOpt = alias(RunOutput, "db")
LossScaleOpt = alias(RecipeArgs, "loss_scale")
BatchSizeOpt = Annotated[Opt[int], typer.Option(help="Batch size (default: the workload's).")]
WorkloadArg = Annotated[Opt[str], typer.Argument(help="Workload name (ampbench list workloads); or use --model.")]


def mode_option(default_help: str) -> Any:
    """The one precision mode of train and diagnose (``--precision``, ``--precisions`` and ``-p`` all work)."""
    return Annotated[str, typer.Option("--precision", "--precisions", "-p", help=default_help)]


def json_option(what: str) -> Any:
    """``--json FILE``: what the command writes there."""
    return Annotated[Opt[Path], typer.Option("--json", help=f"Write {what} as JSON.")]

Fp8SkipOpt = alias(RecipeArgs, "fp8_skip")
Fp8FilterOpt = alias(RecipeArgs, "fp8_filter")
OptimizerStateOpt = Annotated[Opt[str], typer.Option("--optimizer-state", help="Adam/AdamW state precision: fp32, "
                             "bf16, bf16-sr (pure-bf16), 8bit, 4bit, fp8 (torchao; default: the optimizer as built, its "
                             "states in the dtype of the weights it steps).")]
OptimizerStatesOpt = alias(RecipeArgs, "optimizer_state")
NprocOpt = alias(TorchOptions, "nproc_per_node")
NnodesOpt = alias(TorchOptions, "nnodes")
NodeRankOpt = alias(TorchOptions, "node_rank")
RdzvOpt = alias(TorchOptions, "rdzv_endpoint")
TensorboardOpt = alias(RunOutput, "tensorboard")

MODEL_EXAMPLES = """

Your model, any shape (synthetic learnable data unless --data-dir or --batches):

  --model m.py:mlp --input-shape 20 --num-classes 2            (feature vectors)

  --model m.py:cnn --input-shape 3,224,224 --num-classes 1000  (images)

  --model m.py:encoder --input-shape 128 --vocab-size 30522 --num-classes 2   (token ids)

  --model m.py:regressor --input-shape 16,80 --num-outputs 3   (regression, MSE)

  --model m.py:gpt --input-shape 256 --vocab-size 50257 --task lm   (next-token LM)

  --model m.py:two_tower --batches m.py:make_batch [--loss m.py:loss]   (any inputs)

  --model k.py:build --input-shape 32,32,3 --num-classes 10 --keras-backend tensorflow   (a Keras 3 model)

  hf:gpt2 --task lm -o n_layer=2   (as the workload: HF transformers from a config, no download)
"""


# -- ampbench run and predict (run's options are all derived: ampbench.run_options) ------------------------------------
WorkloadsOpt = alias(TargetOptions, "workloads")
PrecisionsOpt = alias(RecipeArgs, "precisions")
RunPresetOpt = alias(TargetOptions, "preset")
BatchSizesOpt = alias(MeasureOptions, "batch_size")
RunSeedOpt = alias(MeasureOptions, "seed")
