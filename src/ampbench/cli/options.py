"""Options several commands share, as ``Annotated`` aliases a command's parameters take.

Those ``ampbench run`` has too are derived from its declared fields (:mod:`ampbench.command_options`, via
:func:`ampbench.cli.declared.alias`): an option's flags and help are written once. What a ``--model`` (or an
hf:/timm: adapter) is fed is the same for run, train, diagnose and predict, and checked the same way
(:meth:`ampbench.workloads.DataOptions.check_targets`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ampbench.cli.declared import alias
from ampbench.command_options import DataArgs, MeasureOptions, RecipeArgs, RunOutput, TargetOptions

Opt = Optional  # typer needs Optional[...] on py3.10

ModelOpt = alias(TargetOptions, "model")
InputShapeOpt = alias(DataArgs, "input_shape")
VocabSizeOpt = alias(DataArgs, "vocab_size")
NumClassesOpt = alias(DataArgs, "num_classes")
NumOutputsOpt = alias(DataArgs, "num_outputs")
TaskOpt = alias(DataArgs, "task")
BatchesOpt = alias(DataArgs, "batches")
LossOpt = alias(DataArgs, "loss")
OptionOpt = alias(DataArgs, "option")
DbOpt = alias(RunOutput, "db")


def json_option(what: str) -> Any:
    """``--json FILE``: what the command writes there."""
    return Annotated[Opt[Path], typer.Option("--json", help=f"Write {what} as JSON.")]


OptimizerStatesOpt = alias(RecipeArgs, "optimizer_state")

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


# -- ampbench run and predict (run's options are all derived: ampbench.command_options) ------------------------------------
WorkloadsOpt = alias(TargetOptions, "workloads")
PrecisionsOpt = alias(RecipeArgs, "precisions")
RunPresetOpt = alias(TargetOptions, "preset")
BatchSizesOpt = alias(MeasureOptions, "batch_size")
RunSeedOpt = alias(MeasureOptions, "seed")
