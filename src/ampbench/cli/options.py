"""Options several commands share, declared once (typer has no parameter groups: these Annotated aliases are them).

What a ``--model`` (or an hf:/timm: adapter) is fed is the same for run, train and diagnose, and checked the same
way (:meth:`ampbench.workloads.DataOptions.check_targets`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ampbench import seam

Opt = Optional  # typer needs Optional[...] on py3.10

ModelOpt = Annotated[Opt[str], typer.Option("--model", help="Your model: file.py:factory or pkg.mod:factory "
                                            "(returns an nn.Module, an ampbench.Workload or a keras.Model).")]


def _backend_option() -> Any:
    """``--<framework>-backend`` of every framework with backends (:mod:`ampbench.seam`): one parameter,
    ``backend``, which each framework resolves for its own targets."""

    chosen = [fw for fw in seam.all_frameworks() if fw.backends]
    return Annotated[Opt[str], typer.Option(*(f"--{fw.name}-backend" for fw in chosen),
                                            help=" ".join(fw.backend_help for fw in chosen))]


BackendOpt = _backend_option()
InputShapeOpt = Annotated[Opt[str], typer.Option(help="Per-sample input shape: 20 (features), 3,224,224 (an image), "
                                                 "16,80 (a sequence of vectors), 128 with --vocab-size (token ids).")]
VocabSizeOpt = Annotated[Opt[int], typer.Option(help="Token inputs: int64 ids in [1, V), 0 left for padding (--task lm: "
                                                "[0, V)); hf: default: the config's vocabulary.")]
NumClassesOpt = Annotated[Opt[int], typer.Option(help="Classification (the default task): output (batch, N) logits.")]
NumOutputsOpt = Annotated[Opt[int], typer.Option(help="Regression: output (batch, K), MSE loss, RMSE metric.")]
TaskOpt = Annotated[Opt[str], typer.Option(help="classify | regress | lm (output (batch, seq, vocab), next-token "
                                           "targets; needs --vocab-size).")]
BatchesOpt = Annotated[Opt[str], typer.Option(help="Your data: file.py:make_batch, make_batch(batch_size, generator) -> "
                                              "(inputs, targets); inputs a tensor, tuple or dict.")]
LossOpt = Annotated[Opt[str], typer.Option(help="Your loss: file.py:fn, fn(output, targets) -> scalar tensor.")]
OptionOpt = Annotated[Opt[list[str]], typer.Option("--option", "-o", help="Workload option KEY=VALUE (hf: config "
                                                   "fields; tokenizer=word|byte|bpe for a text CSV).")]
DataDirOpt = Annotated[Opt[Path], typer.Option(help="Real data (format per workload).")]
ValFractionOpt = Annotated[Opt[float], typer.Option(help="Share of --data-dir data held out for testing when it comes as "
                                                    "one split (default 0.2; tabular/text 0.1).")]
PresetOpt = Annotated[Opt[str], typer.Option(help="tiny | small | paper (default: small).")]
DeviceOpt = Annotated[Opt[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")]
SeedOpt = Annotated[int, typer.Option(help="Seed for model init and data.")]
DbOpt = Annotated[Opt[Path], typer.Option(help="Results store (default: $AMPBENCH_DB or the user data dir).")]
LossScaleOpt = Annotated[Opt[str], typer.Option(help="none | dynamic | hysteresis[:N] | static:V.")]
BatchSizeOpt = Annotated[Opt[int], typer.Option(help="Batch size (default: the workload's).")]
WorkloadArg = Annotated[Opt[str], typer.Argument(help="Workload name (ampbench list workloads); or use --model.")]


def mode_option(default_help: str) -> Any:
    """The one precision mode of train and diagnose (``--precision``, ``--precisions`` and ``-p`` all work)."""
    return Annotated[str, typer.Option("--precision", "--precisions", "-p", help=default_help)]


def json_option(what: str) -> Any:
    """``--json FILE``: what the command writes there."""
    return Annotated[Opt[Path], typer.Option("--json", help=f"Write {what} as JSON.")]

Fp8SkipOpt = Annotated[Opt[str], typer.Option(help="fp8 modes: Linear layers kept in bf16, name substrings, "
                                               "comma-separated (e.g. head,lm_head).")]
Fp8FilterOpt = Annotated[Opt[str], typer.Option(help="fp8 modes: auto (multiple-of-16 dims and torchao's size "
                                                "thresholds) or dims (only the multiple-of-16 rule).")]
OptimizerStateOpt = Annotated[Opt[str], typer.Option("--optimizer-state", help="Adam/AdamW state precision: fp32, "
                             "bf16, bf16-sr (pure-bf16), 8bit, 4bit, fp8 (torchao; default: the optimizer as built, its "
                             "states in the dtype of the weights it steps).")]
OptimizerStatesOpt = Annotated[Opt[str], typer.Option("--optimizer-state", help="Axis: Adam/AdamW state precisions, "
                              "comma-separated: fp32, bf16, bf16-sr, 8bit, 4bit, fp8 (torchao); each runs beside the "
                              "optimizer as built, with every mode it applies to.")]
NprocOpt = Annotated[int, typer.Option("--nproc-per-node", help="With --strategy: ranks per machine (torchrun).")]
NnodesOpt = Annotated[int, typer.Option("--nnodes", help="With --strategy: machines (the same command on each, with its "
                                        "--node-rank; node 0 prints and stores).")]
NodeRankOpt = Annotated[int, typer.Option("--node-rank", help="With --nnodes > 1: this machine's rank.")]
RdzvOpt = Annotated[Opt[str], typer.Option("--rdzv-endpoint", help="With --nnodes > 1: HOST:PORT of node 0, the same "
                                           "on every machine (torchrun's static rendezvous; run: cell i at PORT + i).")]

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


# -- ampbench run ------------------------------------------------------------------------------------------------------
WorkloadsOpt = Annotated[Opt[str], typer.Option(help="Comma-separated workloads (default: the device's suite).")]
PrecisionsOpt = Annotated[Opt[str], typer.Option("--precisions", "--precision", help="Modes or aliases (default: all "
                                                 "the device runs).")]
RunPresetOpt = Annotated[Opt[str], typer.Option("--preset", help="tiny | small | paper (default: small, or the suite's "
                                                "own).")]
BatchSizesOpt = Annotated[Opt[str], typer.Option("--batch-size", help="Batch size(s), comma-separated (default: the "
                                                 "workload's).")]
StepsOpt = Annotated[Opt[int], typer.Option(help="Timed steps per cell (default: 20 on CPU, 50 on GPU).")]
WarmupOpt = Annotated[Opt[int], typer.Option(help="Untimed warm-up steps, >= 1 (default: 3 on CPU, 10 on GPU).")]
MeasureOpt = Annotated[Opt[str], typer.Option(help="throughput,memory,maxbatch,converge,inference.")]
RepeatsOpt = Annotated[int, typer.Option(help="Throughput measurements per cell, interleaved across precisions; the "
                                         "advisor then needs every repeat to agree.")]
RunJsonOpt = Annotated[Opt[Path], typer.Option("--json", help="Write the run's rows as JSON (for ampbench import); with "
                                               "--dry-run, the plan: each cell with its key.")]
ResumeOpt = Annotated[bool, typer.Option(help="Continue the last run with these options.")]
RunSeedOpt = Annotated[int, typer.Option(help="Seed for model init and data (converge: first of --seeds seeds).")]
RunDataDirOpt = Annotated[Opt[Path], typer.Option("--data-dir", help="Real data for the one workload (format per "
                                                  "workload).")]
CompileAxisOpt = Annotated[Opt[str], typer.Option("--compile", help="Execution axis: off,on,max-autotune (torch.compile; "
                                                  "default off). Each value runs every precision.")]
MemoryFormatOpt = Annotated[Opt[str], typer.Option("--memory-format", help="Execution axis: contiguous,channels_last "
                                                   "(models with (N,C,H,W) inputs; default contiguous).")]
CudaGraphsOpt = Annotated[Opt[str], typer.Option("--cuda-graphs", help="Execution axis: off,on (CUDA only; default "
                                                 "off): the compiled forward/backward replayed as CUDA graphs.")]
StrategiesOpt = Annotated[Opt[str], typer.Option("--strategy", help="Distributed: ddp,fsdp (torch.distributed over "
                                                 "--nproc-per-node ranks; one-process cells run too, as the scaling "
                                                 "baseline).")]
ReduceDtypesOpt = Annotated[Opt[str], typer.Option("--grad-reduce-dtype", help="Distributed: fp32,bf16,fp16 (the dtype "
                                                   "gradients are reduced in; default: their own).")]
MemoryBudgetOpt = Annotated[Opt[str], typer.Option(help="Memory a cell may use, e.g. 2GiB (over it: oom).")]
MemoryMarginOpt = Annotated[float, typer.Option(help="maxbatch: peak must stay below (1-margin) x limit.")]
MaxbatchLimitOpt = Annotated[int, typer.Option(help="Largest batch maxbatch tries.")]
SeedsOpt = Annotated[Opt[int], typer.Option(help="converge: seeds per precision (default by preset: tiny 2, "
                                             "small 3, paper 3).")]
ConvergeStepsOpt = Annotated[Opt[int], typer.Option(help="converge: training steps per seed (default by preset: tiny "
                                                     "30, small 200, paper the workload's epochs).")]
InferenceBatchOpt = Annotated[Opt[int], typer.Option(help="inference: the large batch (default: the training batch).")]
IsolateOpt = Annotated[bool, typer.Option(help="Run each cell in a child process (an OOM or crash becomes a row).")]
CellTimeoutOpt = Annotated[Opt[float], typer.Option(help="Seconds before an isolated cell is stopped (status error).")]
LabelOpt = Annotated[Opt[str], typer.Option(help="Free-text label stored with the run.")]
ReportOpt = Annotated[bool, typer.Option(help="Write the HTML report at the end.")]
ReportPathOpt = Annotated[Opt[Path], typer.Option("--report-path", help="Where (default: <db dir>/reports/RUN.html).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Check everything (options, each workload built and checked) "
                                         "and print the plan; run and store nothing.")]
TensorboardOpt = Annotated[Opt[Path], typer.Option("--tensorboard", help="Write TensorBoard event files under DIR "
                                                   "(needs ampbench[tensorboard]; docs/tensorboard.md).")]
