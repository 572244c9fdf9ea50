"""Command line: thin layer over the library (parse, validate, print).

Every user error is one line on stderr and exit code 2, never a traceback. Text that comes from users or
data (names, paths, reasons) is escaped before rich prints it: ``ampbench[timm]`` stays as written.

Exit codes: 0 success (for ``run``: every cell ok, or a status that is a measurement -- oom, diverged,
unsupported); 1 ``run`` finished but some cells errored (a crash, a timeout, data that failed while
running); 2 bad input, found before any work started; 130 interrupted.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import ampbench
from ampbench.errors import AmpbenchError
from ampbench.paths import STDOUT, check_output_dir, check_output_file, write_text_atomic

app = typer.Typer(
    name="ampbench",
    help="Mixed precision training for PyTorch, measured: every precision mode side by side.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(width=None if sys.stdout.isatty() else 160)  # logs and CI: wide tables, not 80 columns
err_console = Console(stderr=True)


def plural(n: int, word: str) -> str:
    """'1 cell', '2 cells'."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _version(value: bool) -> None:
    if value:
        import torch

        console.print(f"ampbench {ampbench.__version__} (torch {torch.__version__})")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],  # noqa: UP045 (typer needs Optional on py3.10)
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """ampbench: how much faster, how much less memory, does it still converge, which mode to use."""


@app.command("list")
def list_cmd(
    what: Annotated[str, typer.Argument(help="What to list: precisions, workloads or all.")] = "all",
) -> None:
    """List precision modes (aliases, what each does) and workloads (presets, data, paper config)."""
    choices = ("all", "precisions", "workloads")
    if what not in choices:
        raise AmpbenchError(f"cannot list {what!r}: choose one of {', '.join(choices)}")
    if what in ("all", "precisions"):
        _list_precisions()
    if what in ("all", "workloads"):
        _list_workloads()


def _list_workloads() -> None:
    from ampbench.workloads import PRESETS, get_spec, list_workloads

    table = Table(title=f"Workloads (presets: {', '.join(PRESETS)})", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("what it is", overflow="fold")
    table.add_column("paper preset", overflow="fold")
    table.add_column("--data-dir", overflow="fold")
    table.add_column("options")
    for name in list_workloads():
        spec = get_spec(name)
        table.add_row(name, spec.description, spec.paper, spec.data, ", ".join(spec.options()) or "-")
    table.add_row("timm:<model>", "any timm image model, random init (optional extra: ampbench[timm])", "-",
                  "as --model: images", "timm.create_model arguments")
    table.add_row("hf:<type>", "HF transformers from a config (hf:bert, hf:gpt2 --task lm), no download "
                  "(extra: ampbench[hf])", "-", "as --model: text CSV, corpus", "config fields, tokenizer")
    table.add_row("--model F:fn", "your own model, any shape: --input-shape, --vocab-size, --num-classes | "
                  "--num-outputs | --task lm, or --batches F:make_batch (ampbench run --help)", "-",
                  "MNIST IDX / CIFAR-10, text,label CSV (token models), train.txt (--task lm)", "tokenizer")
    console.print(table)


def _list_precisions() -> None:
    from ampbench.precision import get, list_precisions, supported
    table = Table(title="Precision modes", title_justify="left")
    table.add_column("name", style="bold cyan", no_wrap=True)
    table.add_column("aliases", no_wrap=True)
    table.add_column("loss scale", no_wrap=True)
    table.add_column("what it does")
    table.add_column("on this machine")
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in list_precisions():
        recipe = get(name)
        sup = supported(name, device)
        here = f"[green]ok[/] ({device})" if sup.ok else f"[red]no[/]: {sup.reason}"
        if sup.ok and sup.note:
            here += f" [yellow]{sup.note}[/]"
        table.add_row(name, ", ".join(recipe.aliases), recipe.default_loss_scale, recipe.summary, here)
    console.print(table)


def _train_compile(value: str | None, precision: str, device: str) -> str:
    """--compile as given; without it off, except fp8 on CUDA: on (torchao's float8 is built to be compiled)."""
    from ampbench.bench.config import fp8_compiles_by_default
    from ampbench.measure.env import resolve_device

    if value is not None:
        return value.strip()
    return "on" if fp8_compiles_by_default(False, str(resolve_device(device)), [precision]) else "off"


def _parse_options(items: list[str] | None) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AmpbenchError(f"--option {item!r}: expected KEY=VALUE (e.g. --option task=span)")
        out[key.replace("-", "_")] = int(value) if value.isdigit() else value
    return out


Opt = Optional  # typer needs Optional[...] on py3.10

# What a --model (or an hf:/timm: adapter) is fed: the same options, checked the same way, for run, train, diagnose.
ModelOpt = Annotated[Opt[str], typer.Option("--model", help="Your model: file.py:factory or pkg.mod:factory "
                                            "(returns an nn.Module, or an ampbench.Workload).")]
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

Fp8SkipOpt = Annotated[Opt[str], typer.Option(help="fp8 modes: Linear layers kept in bf16, name substrings, "
                                               "comma-separated (e.g. head,lm_head).")]
Fp8FilterOpt = Annotated[Opt[str], typer.Option(help="fp8 modes: auto (multiple-of-16 dims and torchao's size "
                                                "thresholds) or dims (only the multiple-of-16 rule).")]
NprocOpt = Annotated[int, typer.Option("--nproc-per-node", help="With --strategy: ranks per machine (torchrun).")]
NnodesOpt = Annotated[int, typer.Option("--nnodes", help="With --strategy: machines (the same command on each, with its "
                                        "--node-rank; node 0 prints and stores).")]
NodeRankOpt = Annotated[int, typer.Option("--node-rank", help="With --nnodes > 1: this machine's rank.")]
RdzvOpt = Annotated[Opt[str], typer.Option("--rdzv-endpoint", help="With --nnodes > 1: HOST:PORT of node 0, the same "
                                           "on every machine (torchrun's static rendezvous; run: cell i at PORT + i).")]


def fp8_options(precisions: list[str], skip: str | None, filter: str | None) -> dict[str, object]:
    """--fp8-skip/--fp8-filter, refused unless an fp8 mode is asked for."""
    from ampbench.precision import get
    from ampbench.precision.fp8 import check_filter

    if skip is None and filter is None:
        return {}
    if not any(get(p).math_mode == "fp8" for p in precisions):
        raise AmpbenchError("--fp8-skip/--fp8-filter apply to the fp8 modes (fp8-tensorwise, fp8-rowwise, "
                            "fp8-rowwise-gw-hp); none is asked for")
    if filter is not None:
        check_filter(filter, "--fp8-filter")
    out: dict[str, object] = {"fp8_skip": tuple(x.strip() for x in (skip or "").split(",") if x.strip())}
    if filter is not None:
        out["fp8_filter"] = filter
    return out


MODEL_EXAMPLES = """

Your model, any shape (synthetic learnable data unless --data-dir or --batches):

  --model m.py:mlp --input-shape 20 --num-classes 2            (feature vectors)

  --model m.py:cnn --input-shape 3,224,224 --num-classes 1000  (images)

  --model m.py:encoder --input-shape 128 --vocab-size 30522 --num-classes 2   (token ids)

  --model m.py:regressor --input-shape 16,80 --num-outputs 3   (regression, MSE)

  --model m.py:gpt --input-shape 256 --vocab-size 50257 --task lm   (next-token LM)

  --model m.py:two_tower --batches m.py:make_batch [--loss m.py:loss]   (any inputs)

  hf:gpt2 --task lm -o n_layer=2   (as the workload: HF transformers from a config, no download)
"""


def user_data(workload_names: list[str], model: str | None, input_shape: str | None, vocab_size: int | None,
              num_classes: int | None, num_outputs: int | None, task: str | None, batches: str | None,
              loss: str | None) -> dict[str, object]:
    """The --model data options, refused with one line where they cannot apply (a registered workload)."""
    from ampbench.workloads.tasks import DataSpec

    data = DataSpec.of(input_shape, vocab_size, num_classes, num_outputs, task)
    given = data.given()
    registered = [w for w in workload_names if ":" not in w]
    if model is None and given and (registered or not workload_names):
        raise AmpbenchError(f"{', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --model and the hf:/timm: "
                            "adapters, not to "
                            f"{', '.join(registered) or 'the default suite'} (their data are their own)")
    if model is None and (batches or loss):
        raise AmpbenchError("--batches/--loss apply to --model only")
    if data.task is not None:  # a bad --task or a contradiction fails before anything is built (hf: configs have a vocabulary)
        data.resolve("--task", need_shape=False, need_vocab=not any(w.startswith("hf:") for w in workload_names))
    return {"input_shape": input_shape, "vocab_size": vocab_size, "num_classes": num_classes,
            "num_outputs": num_outputs, "task": task, "batches": batches, "loss": loss}


def load_workload(workload: str | None, model: str | None, preset: str | None, data_dir: Path | None, seed: int,
                  user: dict[str, object], options: list[str] | None, val_fraction: float | None = None):
    """A workload by name, or the user's ``--model`` (exactly one of the two)."""
    from ampbench.workloads import create_user_workload, create_workload
    from ampbench.workloads.tasks import DataSpec

    if (workload is None) == (model is None):
        raise AmpbenchError("give a WORKLOAD name (see: ampbench list workloads) or --model file.py:factory, not both")
    if model is not None:
        return create_user_workload(model, data_dir=data_dir, preset=preset, seed=seed, val_fraction=val_fraction,
                                    options=_parse_options(options), **user)  # type: ignore[arg-type]
    data = {k: v for k, v in user.items() if k not in ("batches", "loss")}
    return create_workload(workload, preset or "small", data_dir, seed, val_fraction,  # type: ignore[arg-type]
                           data=DataSpec.of(**data), **_parse_options(options))  # type: ignore[arg-type]


def _header(wl) -> str:  # type: ignore[no-untyped-def]
    about = ", ".join(p for p in (wl.description, f"preset {wl.preset}") if p)
    return f"[bold]{escape(wl.name)}[/] ({escape(about)})"


@app.command("train", epilog=MODEL_EXAMPLES)
def train_cmd(
    workload: Annotated[Optional[str], typer.Argument(help="Workload name (ampbench list workloads).")] = None,  # noqa: UP045
    precision: Annotated[str, typer.Option("--precision", "-p", help="Precision mode or alias.")] = "amp-bf16",
    preset: Annotated[Opt[str], typer.Option(help="tiny | small | paper (default: small).")] = None,
    epochs: Annotated[Optional[int], typer.Option(help="Epochs (default: the workload's).")] = None,  # noqa: UP045
    batch_size: Annotated[Optional[int], typer.Option(help="Batch size (default: the workload's).")] = None,  # noqa: UP045
    data_dir: Annotated[Optional[Path], typer.Option(help="Real data (format per workload).")] = None,  # noqa: UP045
    val_fraction: Annotated[Optional[float], typer.Option(help="Share of --data-dir data held out for testing when it "  # noqa: UP045
                                                      "comes as one split (default 0.2; tabular/text 0.1).")] = None,
    checkpoint: Annotated[Optional[Path], typer.Option(help="Directory for checkpoint.pt, written each epoch.")] = None,  # noqa: UP045
    resume: Annotated[bool, typer.Option(help="Resume from --checkpoint DIR.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for init, data order and dropout.")] = 0,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the final metrics as JSON.")] = None,  # noqa: UP045
    device: Annotated[Optional[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,  # noqa: UP045
    loss_scale: Annotated[Optional[str], typer.Option(help="none | dynamic | hysteresis[:N] | static:V.")] = None,  # noqa: UP045
    max_steps: Annotated[Optional[int], typer.Option(help="Cap on steps per epoch (quick runs).")] = None,  # noqa: UP045
    model: ModelOpt = None,
    input_shape: InputShapeOpt = None,
    vocab_size: VocabSizeOpt = None,
    num_classes: NumClassesOpt = None,
    num_outputs: NumOutputsOpt = None,
    task: TaskOpt = None,
    batches: BatchesOpt = None,
    loss: LossOpt = None,
    option: OptionOpt = None,
    fp8_skip: Fp8SkipOpt = None,
    fp8_filter: Fp8FilterOpt = None,
    compile: Annotated[Opt[str], typer.Option("--compile", help="off | on | max-autotune: train the torch.compile'd "
                                              "model (the first step, which compiles, is timed apart). Default off; "
                                              "on for fp8 on CUDA.")] = None,
    strategy: Annotated[Opt[str], typer.Option("--strategy", help="ddp | fsdp: train over --nproc-per-node ranks "
                                               "(torchrun); --batch-size is per rank.")] = None,
    nproc_per_node: NprocOpt = 2,
    grad_reduce_dtype: Annotated[Opt[str], typer.Option("--grad-reduce-dtype", help="With --strategy: fp32 | bf16 | "
                                                        "fp16 (default: the gradients' own dtype).")] = None,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = 0,
    rdzv_endpoint: RdzvOpt = None,
) -> None:
    """Train a workload (or your --model) in one precision mode; evaluate train/test metrics at the end."""
    import json

    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from ampbench.precision import resolve
    from ampbench.train import TrainConfig, train

    resolve(precision)  # fail fast on a bad name, before building data
    auto_compile = compile is None
    compile = _train_compile(compile, precision, device)
    if strategy is not None and nproc_per_node < 1:
        raise AmpbenchError(f"--nproc-per-node must be >= 1, got {nproc_per_node}")
    from ampbench.launch import check_nodes, is_rank

    check_nodes(strategy, nnodes, node_rank, rdzv_endpoint)
    rank_worker = strategy is not None and is_rank()  # a rank torchrun started
    config = TrainConfig(precision=precision, epochs=epochs, batch_size=batch_size, seed=seed, device=device,
                         loss_scale=loss_scale, checkpoint_dir=checkpoint, resume=resume, max_steps_per_epoch=max_steps,
                         compile=compile.strip(), strategy=strategy, grad_reduce_dtype=grad_reduce_dtype,
                         **fp8_options([precision], fp8_skip, fp8_filter))  # type: ignore[arg-type]
    if not resume:  # (with --resume the checkpoint must already be there: train() says so)
        check_output_dir(checkpoint, "--checkpoint", "checkpoint.pt")
    check_output_file(json_out, "--json")
    user = user_data([workload] if workload else [], model, input_shape, vocab_size, num_classes, num_outputs, task,
                     batches, loss)
    if strategy is not None and not rank_worker:  # validated here, once; then torchrun starts the ranks
        load_workload(workload, model, preset, data_dir, seed, user, option, val_fraction)
        raise typer.Exit(_launch_train_ranks(nproc_per_node, nnodes, node_rank, rdzv_endpoint))
    if rank_worker:
        _join_process_group(device)
    wl = load_workload(workload, model, preset, data_dir, seed, user, option, val_fraction)
    console.print(f"{_header(wl)} in [bold cyan]{resolve(precision)}[/]")
    if auto_compile and compile == "on":
        console.print("[dim]fp8 on CUDA: training the torch.compile'd model (torchao's float8 is built to be compiled); "
                      "--compile off trains it eager[/]")
    with Progress(TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task("train", total=None, epoch="-", info="")

        def on_progress(p) -> None:  # type: ignore[no-untyped-def]
            bar.update(task, total=p.steps, completed=p.step, epoch=f"{p.epoch}/{p.epochs}",
                       info=f"loss {p.loss:.4f}  scale {p.scale:g}  {p.samples_per_s:,.0f} samples/s")

        result = train(wl, config, on_progress)
    m = result.metric_name or "metric"
    fmt = (lambda v: f"{v:.2%}") if m in ("accuracy", "exact_match", "pixel_accuracy") else (lambda v: f"{v:.4g}")
    parts = [f"train {m} {fmt(result.train_metric)}" if result.train_metric is not None else "",
             f"test {m} {fmt(result.test_metric)}" if result.test_metric is not None else ""]
    resumed = f" (resumed at epoch {result.resumed_from_epoch})" if result.resumed_from_epoch else ""
    if result.compile_s is not None:
        resumed += f" (compiled: first step {result.compile_s:.1f} s, left out of samples/s)"
    if result.strategy:
        resumed += f" ({result.strategy} x{result.world_size}: samples/s of all ranks)"
    console.print(escape(f"{result.precision} on {result.device}{resumed}: {'  '.join(p for p in parts if p)}  "
                         f"final loss {result.final_loss:.4f}  {result.samples_per_s:,.0f} samples/s  "
                         f"{plural(result.steps_trained, 'step')} trained, skipped steps {result.skipped_steps}"))
    if json_out is not None and not console.quiet:  # (one rank writes it)
        write_text_atomic(json_out, json.dumps(result.to_dict(), indent=2))
        console.print(f"wrote {escape(str(json_out))}")



def _launch_train_ranks(nproc: int, nnodes: int, node_rank: int, endpoint: str | None) -> int:
    """`ampbench train --strategy S`: the same command in ``nproc`` ranks per machine started by torchrun (global
    rank 0 prints); the launcher dies with this process and the ranks with the launcher. Returns its exit code."""
    from ampbench.launch import relaunch

    return relaunch(_invocation, nproc, nnodes, node_rank, endpoint)


def _join_process_group(device: str | None) -> None:
    """A rank of `ampbench train --strategy`: dies with its launcher, joins the process group on its device; ranks
    other than 0 print nothing."""
    import torch.distributed as dist

    from ampbench.launch import die_with_launcher, join_process_group

    die_with_launcher()  # no rank outlives its launcher
    join_process_group(device)
    if dist.get_rank() != 0:
        console.quiet = True


def _open_store(db: Path | None, create: bool = True):  # type: ignore[no-untyped-def]
    """The results store; ``create=False`` for commands that only read (a missing file is an error, not a new store)."""
    from ampbench.store import Store

    return Store(db, create=create)


@app.command("run", epilog=MODEL_EXAMPLES)
def run_cmd(
    workloads: Annotated[Opt[str], typer.Option(help="Comma-separated workloads (default: the device's suite).")] = None,
    precisions: Annotated[Opt[str], typer.Option(help="Modes or aliases (default: all the device runs).")] = None,
    preset: Annotated[Opt[str], typer.Option(help="tiny | small | paper (default: small, or the suite's own).")] = None,
    batch_size: Annotated[Opt[str], typer.Option(help="Batch size(s), comma-separated (default: the workload's).")] = None,
    steps: Annotated[Opt[int], typer.Option(help="Timed steps per cell (default: 20 on CPU, 50 on GPU).")] = None,
    warmup: Annotated[Opt[int], typer.Option(help="Untimed warm-up steps, >= 1 (default: 3 on CPU, 10 on GPU).")] = None,
    measure: Annotated[Opt[str], typer.Option(help="throughput,memory,maxbatch,converge,inference.")] = None,
    repeats: Annotated[int, typer.Option(help="Throughput measurements per cell, interleaved across precisions; "
                                         "the advisor then needs every repeat to agree.")] = 1,
    device: Annotated[Opt[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,
    db: Annotated[Opt[Path], typer.Option(help="Results store (default: $AMPBENCH_DB or the user data dir).")] = None,
    json_out: Annotated[Opt[Path], typer.Option("--json", help="Write the run's rows as JSON (for ampbench import); with "
                                                "--dry-run, the plan: each cell with its key.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the last run with these options.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for model init and data (converge: first of --seeds seeds).")] = 0,
    model: ModelOpt = None,
    input_shape: InputShapeOpt = None,
    vocab_size: VocabSizeOpt = None,
    num_classes: NumClassesOpt = None,
    num_outputs: NumOutputsOpt = None,
    task: TaskOpt = None,
    batches: BatchesOpt = None,
    loss: LossOpt = None,
    data_dir: Annotated[Opt[Path], typer.Option(help="Real data for the one workload (format per workload).")] = None,
    val_fraction: Annotated[Opt[float], typer.Option(help="Share of --data-dir data held out for testing when it comes "
                                                     "as one split (default 0.2; tabular/text 0.1).")] = None,
    option: OptionOpt = None,
    loss_scale: Annotated[Opt[str], typer.Option(help="none | dynamic | hysteresis[:N] | static:V.")] = None,
    fp8_skip: Fp8SkipOpt = None,
    fp8_filter: Fp8FilterOpt = None,
    compile: Annotated[Opt[str], typer.Option("--compile", help="Execution axis: off,on,max-autotune (torch.compile; "
                                              "default off). Each value runs every precision.")] = None,
    memory_format: Annotated[Opt[str], typer.Option("--memory-format", help="Execution axis: contiguous,channels_last "
                                                    "(models with (N,C,H,W) inputs; default contiguous).")] = None,
    cuda_graphs: Annotated[Opt[str], typer.Option("--cuda-graphs", help="Execution axis: off,on (CUDA only; default "
                                                  "off): the compiled forward/backward replayed as CUDA graphs.")] = None,
    strategy: Annotated[Opt[str], typer.Option("--strategy", help="Distributed: ddp,fsdp (torch.distributed over "
                                               "--nproc-per-node ranks; one-process cells run too, as the scaling "
                                               "baseline).")] = None,
    nproc_per_node: NprocOpt = 2,
    grad_reduce_dtype: Annotated[Opt[str], typer.Option("--grad-reduce-dtype", help="Distributed: fp32,bf16,fp16 "
                                                        "(the dtype gradients are reduced in; default: their own).")] = None,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = 0,
    rdzv_endpoint: RdzvOpt = None,
    memory_budget: Annotated[Opt[str], typer.Option(help="Memory a cell may use, e.g. 2GiB (over it: oom).")] = None,
    memory_margin: Annotated[float, typer.Option(help="maxbatch: peak must stay below (1-margin) x limit.")] = 0.05,
    maxbatch_limit: Annotated[int, typer.Option(help="Largest batch maxbatch tries.")] = 65536,
    seeds: Annotated[int, typer.Option(help="converge: seeds per precision.")] = 3,
    converge_steps: Annotated[int, typer.Option(help="converge: training steps per seed.")] = 200,
    inference_batch: Annotated[Opt[int], typer.Option(help="inference: the large batch (default: the training batch).")] = None,
    isolate: Annotated[bool, typer.Option(help="Run each cell in a child process (an OOM or crash becomes a row).")] = True,
    cell_timeout: Annotated[Opt[float], typer.Option(help="Seconds before an isolated cell is stopped (status error).")] = None,
    label: Annotated[Opt[str], typer.Option(help="Free-text label stored with the run.")] = None,
    report: Annotated[bool, typer.Option(help="Write the HTML report at the end.")] = True,
    report_path: Annotated[Opt[Path], typer.Option("--report-path", help="Where (default: <db dir>/reports/RUN.html).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check everything (options, each workload built and "
                                          "checked) and print the plan; run and store nothing.")] = False,
) -> None:
    """Measure every precision side by side: speed, memory, largest batch, convergence, inference, MFU."""
    from ampbench.bench import run as run_bench
    from ampbench.bench.config import RunConfig
    from ampbench.store import export_data, write_json

    config = RunConfig.from_strings(
        device=device, workloads=workloads, precisions=precisions, preset=preset, batch_size=batch_size, steps=steps,
        warmup=warmup, measure=measure, repeats=repeats, seed=seed, model=model, input_shape=input_shape,
        vocab_size=vocab_size, num_classes=num_classes, num_outputs=num_outputs, task=task, batches=batches, loss=loss,
        data_dir=data_dir, val_fraction=val_fraction, options=option, loss_scale=loss_scale, fp8_skip=fp8_skip,
        fp8_filter=fp8_filter, compile=compile, memory_format=memory_format, cuda_graphs=cuda_graphs, strategy=strategy,
        nproc_per_node=nproc_per_node, grad_reduce_dtype=grad_reduce_dtype, nnodes=nnodes, node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint, memory_budget=memory_budget, memory_margin=memory_margin,
        maxbatch_limit=maxbatch_limit, seeds=seeds, converge_steps=converge_steps, inference_batch=inference_batch,
        isolate=isolate, cell_timeout=cell_timeout)
    if nnodes > 1 and resume:
        raise AmpbenchError("--resume with --nnodes > 1 is not supported: the other machines cannot know which cells node "
                            "0 already stored; run again without --resume")
    dev, measures, points = config.device, config.measure.measures, config.axes.executions
    check_output_file(json_out, "--json", "run.json")  # before the run, not after an hour of it
    if report:
        check_output_file(report_path, "--report-path", "report.html")
    from ampbench.bench.runner import lend_ranks, validate_inputs

    validate_inputs(config)  # a bad --model, --data-dir or missing extra fails now with one line, not once per cell
    if node_rank > 0:  # this machine lends its ranks to node 0's run, which stores the rows
        n = lend_ranks(config)
        console.print(f"node {node_rank}: lent {nproc_per_node} rank(s) to {plural(n, 'distributed cell')} of node 0's "
                      f"run at {escape(str(rdzv_endpoint))}; its rows are stored there")
        return
    if dry_run:  # a store that exists is checked (never created, never written)
        from ampbench.store import default_db_path

        path = db if db is not None else default_db_path()
        if path.exists():
            _open_store(path, create=False).close()
        _plan_header(config, points, dev, measures, path)
        for spec in config.cells():
            console.print(f"  {escape(_cell_text(spec, config))}", highlight=False)
        console.print("dry run: nothing was run or stored")
        if json_out is not None:  # the plan, machine-readable: the run's identity and each cell with its key
            import json

            plan = {"identity": config.identity(), "cells": [{"key": c.key(), **c.to_dict()} for c in config.cells()]}
            write_text_atomic(json_out, json.dumps(plan, indent=1))
            console.print(f"wrote the plan to {escape(str(json_out))}")
        return
    store = _open_store(db)
    _plan_header(config, points, dev, measures, store.path)
    info, rows = _run_with_progress(run_bench, config, store, resume, label)
    for table in _results_tables(rows):
        console.print(table)
    bad = [r for r in rows if r["status"] != "ok"]
    errored = [r for r in rows if r["status"] == "error"]
    console.print(f"run [bold]{info.run_id}[/]: {len(rows) - len(bad)} ok, {len(bad)} not ok; stored in "
                  f"{escape(str(store.path))} (ampbench results / export)")
    for advice in _advice(rows):
        console.print(advice)
    if json_out is not None:
        write_json(export_data(store, [info.run_id]), json_out)
        console.print(f"wrote {escape(str(json_out))}")
    if report:
        from ampbench.report import write_report

        path = write_report(store, report_path, info.run_id)
        console.print(f"report: [bold]{escape(str(path))}[/]")
    if errored:  # exit code 1: the run finished, but cells errored (see the reasons); oom/diverged are measurements
        err_console.print(f"[red]{plural(len(errored), 'cell')} errored[/]: " + escape("; ".join(
            f"{r['workload']} {r['precision']}: {r.get('reason') or 'no reason'}" for r in errored[:3])
            + (" ..." if len(errored) > 3 else "")), highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _plan_header(config, points, dev, measures, store_path) -> None:  # type: ignore[no-untyped-def]
    cells = config.cells()
    closing = sum(c.closing for c in cells)
    extra_cells = (f" x {config.axes.repeats} repeats" if config.axes.repeats > 1 and any(c.repeat for c in cells) else
                   f" + {closing} closing fp32" if closing else "")
    axes = f" x {', '.join(p.label for p in points)}" if len(points) > 1 or not points[0].is_default else ""
    if config.axes.strategies != (None,):
        world = config.axes.nproc * config.axes.nnodes
        axes += " x " + ", ".join(f"{s} x{world}" if s else "1 process" for s in config.axes.strategies)
    console.print(f"[bold]ampbench run[/]: {plural(len(cells), 'cell')} ({', '.join(config.axes.precisions)}{axes}{extra_cells}) "
                  f"on [bold]{dev}[/], measuring {','.join(measures)}; store {escape(str(store_path))}")
    for note in config.left_out():
        console.print(f"[dim]{escape(note)}[/]")
    if config.axes.fp8_compile:
        console.print("[dim]fp8 on CUDA: the fp8 cells run torch.compile'd (torchao's float8 is built to be compiled), "
                      "beside compiled fp32 and amp-bf16 references; --compile off times fp8 eager[/]")


def _cell_text(s, config) -> str:  # type: ignore[no-untyped-def]
    """One cell as the progress lines and the dry run name it (plain text: escape it before rich prints it)."""
    what = f"{s.label} ({s.preset}) {s.precision}" + (f" b{s.batch_size}" if s.batch_size else "")
    if s.strategy:
        reduce = s.distribution.grad_reduce_dtype
        what += f" {s.strategy} x{s.world_size}" + (f" reduce {reduce}" if reduce else "")
    if not s.execution.is_default:
        what += f" {s.execution.label}"
    if s.closing:
        what += " [closing baseline]"
    elif config.axes.repeats > 1 and "throughput" in config.measure.measures:
        what += f" [repeat {s.repeat + 1}/{config.axes.repeats}]"
    return what


def _advice(rows):  # type: ignore[no-untyped-def]
    """One coloured line per workload: the advisor's pick and its evidence."""
    from ampbench.report.advisor import advise, workload_groups

    for group in workload_groups(rows):
        wl, preset = group[0]["workload"], group[0].get("preset") or ""
        a = advise(group)
        pick = f"[bold green]{escape(a.recommended)}[/]" if a.recommended else "[bold red]no recommendation[/]"
        yield f"{escape(wl)} ({escape(preset)}): {pick} [dim]({escape(a.label)})[/] {escape(a.evidence)}"
        if a.combination is not None:
            yield (f"{escape(wl)} ({escape(preset)}) fastest combination: [bold green]{escape(a.combination)}[/] "
                   f"{escape(a.combination_evidence or '')}")
        if a.distributed is not None:
            yield f"{escape(wl)} ({escape(preset)}) distributed: {escape(a.distributed)}"


def _results_tables(rows):  # type: ignore[no-untyped-def]
    from ampbench.report.console import results_tables

    return results_tables(rows)


def _run_with_progress(run_bench, config, store, resume, label):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ampbench.report.console import STATUS_STYLE

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("starting", total=len(config.cells()))

        def on_event(ev) -> None:  # type: ignore[no-untyped-def]
            what = escape(_cell_text(ev.spec, config))  # names, reasons and "[repeat ...]" are text, not rich markup
            if ev.phase == "start":
                bar.update(task, description=f"running {what}")
            elif ev.phase == "skip":
                bar.advance(task)
                bar.console.print(f"  [dim]done before: {what}[/]")
            else:
                bar.advance(task)
                r = ev.row
                st = r["status"]
                detail = escape(f"{r['samples_per_s']:,.0f} samples/s" if st == "ok" and r.get("samples_per_s") else
                                r.get("reason") or "")
                bar.console.print(f"  [{STATUS_STYLE.get(st, '')}]{st:<11}[/] {what}  [dim]{detail}[/]",
                                  highlight=False)

        return run_bench(config, store, resume=resume, label=label, on_event=on_event)


@app.command("results")
def results_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    run: Annotated[Opt[str], typer.Option("--run", help="Run id (or a unique prefix); default: the latest run.")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Rows of every run.")] = False,
    workloads: Annotated[Opt[str], typer.Option(help="Only these workloads (comma-separated).")] = None,
    precisions: Annotated[Opt[str], typer.Option(help="Only these modes (comma-separated).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table | json | csv.")] = "table",
) -> None:
    """List stored results (with speedup / memory saving vs fp32)."""
    import json

    from ampbench.bench.config import parse_list
    from ampbench.precision import resolve
    from ampbench.store import derive, to_csv

    if fmt not in ("table", "json", "csv"):
        raise AmpbenchError(f"--format {fmt!r}: choose table, json or csv")
    if run is not None and all_runs:
        raise AmpbenchError("give --run ID or --all, not both")
    store = _open_store(db, create=False)
    run_id = None
    if not all_runs:
        info = store.run(run) if run is not None else store.latest_run()
        if info is None:
            raise AmpbenchError(f"no results in {store.path} yet: run `ampbench run` first (or ampbench import FILE)")
        run_id = info.run_id
    precs = [resolve(p) for p in parse_list(precisions, "precisions")] or None
    rows = derive(store.rows(run_id, parse_list(workloads, "workloads") or None), store.hw())  # ratios need fp32
    if precs:
        rows = [r for r in rows if r["precision"] in precs]
    if store.skipped_rows:
        err_console.print(f"[yellow]warning:[/] {plural(store.skipped_rows, 'stored row')} with malformed values "
                          "skipped (from an import before rows were validated)", highlight=False)
    if fmt == "json":
        from ampbench.store.exchange import clean_json

        sys.stdout.write(json.dumps(clean_json(rows), indent=1) + "\n")
    elif fmt == "csv":
        sys.stdout.write(to_csv(rows))
    else:
        if not rows:
            console.print("no rows match")
        for table in _results_tables(rows):
            console.print(table)


@app.command("export")
def export_cmd(
    out: Annotated[Path, typer.Option("--out", help="JSON file to write.")],
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    run: Annotated[Opt[list[str]], typer.Option("--run", help="Run id(s) to export (default: all).")] = None,
) -> None:
    """Write runs and rows as JSON, to move them to another machine (ampbench import)."""
    from ampbench.store import export_data, write_json

    check_output_file(out, "--out", "results.json")
    store = _open_store(db, create=False)
    ids = [store.run(r).run_id for r in run] if run else None
    data = export_data(store, ids)
    write_json(data, out)
    console.print(f"wrote {plural(len(data['runs']), 'run')}, {plural(len(data['rows']), 'row')} to "
                  f"{escape(str(out))}")


@app.command("import")
def import_cmd(
    files: Annotated[list[Path], typer.Argument(help="Files written by ampbench export or run --json.")],
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
) -> None:
    """Add exported results (e.g. from other GPUs) to the store; rows already there are kept as they are."""
    from ampbench.store import import_file

    store = _open_store(db)
    for f in files:
        done = import_file(store, f)
        kept = (f"; {plural(done.differing, 'stored row')} differ{'s' if done.differing == 1 else ''} from the file's "
                "and {} kept as stored (import never overwrites: import into another --db to keep both)".format(
                    "was" if done.differing == 1 else "were")) if done.differing else ""
        console.print(escape(f"{f}: {plural(done.runs, 'new run')}, {plural(done.rows, 'new row')}{kept}"))


@app.command("diagnose", epilog=MODEL_EXAMPLES)
def diagnose_cmd(
    target: Annotated[Opt[str], typer.Argument(help="Workload name (ampbench list workloads); or use --model.")] = None,
    precision: Annotated[str, typer.Option("--precision", "-p", help="Mode to diagnose (name or alias).")] = "amp-fp16",
    steps: Annotated[int, typer.Option(help="Training steps per check (NaN search, policy trials, profile).")] = 20,
    checks: Annotated[Opt[str], typer.Option(help="nonfinite,gradients,activations,policy,tensorcore,profile,fp8 "
                                             "(fp8: the fp8 modes only).")] = None,
    preset: Annotated[Opt[str], typer.Option(help="tiny | small | paper (default: small).")] = None,
    batch_size: Annotated[Opt[int], typer.Option(help="Batch size (default: the workload's).")] = None,
    device: Annotated[Opt[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for init and data.")] = 0,
    model: ModelOpt = None,
    input_shape: InputShapeOpt = None,
    vocab_size: VocabSizeOpt = None,
    num_classes: NumClassesOpt = None,
    num_outputs: NumOutputsOpt = None,
    task: TaskOpt = None,
    batches: BatchesOpt = None,
    loss: LossOpt = None,
    data_dir: Annotated[Opt[Path], typer.Option(help="Real data (format per workload).")] = None,
    val_fraction: Annotated[Opt[float], typer.Option(help="Share of --data-dir data held out for testing.")] = None,
    option: OptionOpt = None,
    fp8_skip: Fp8SkipOpt = None,
    fp8_filter: Fp8FilterOpt = None,
    json_out: Annotated[Opt[Path], typer.Option("--json", help="Write the diagnosis as JSON.")] = None,
    trace: Annotated[Opt[Path], typer.Option(help="Chrome trace of the profiled steps (default: <db dir>/traces/).")] = None,
    db: Annotated[Opt[Path], typer.Option(help="Store the diagnosis here (the HTML report shows it).")] = None,
) -> None:
    """Why NaN, why the loss scale collapses, why no speedup or memory saving: a short report, most important first."""
    import json

    from ampbench.diagnose import applicable_checks, diagnose, parse_checks
    from ampbench.precision import resolve
    from ampbench.store.sqlite import utcnow

    wanted = parse_checks(checks) if checks is not None else applicable_checks(precision)
    fp8 = fp8_options([precision], fp8_skip, fp8_filter)
    user = user_data([target] if target else [], model, input_shape, vocab_size, num_classes, num_outputs, task,
                     batches, loss)
    label = target or f"user:{model}"
    check_output_file(json_out, "--json", "diagnosis.json")
    check_output_file(trace, "--trace", "trace.json")

    def build():  # type: ignore[no-untyped-def]  (diagnose() calls it once, and validates everything first)
        return load_workload(target, model, preset, data_dir, seed, user, option, val_fraction)

    store = _open_store(db)
    if trace is None and "profile" in wanted:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:60]
        trace = store.path.parent / "traces" / f"{utcnow().replace(':', '')}-{safe}-{resolve(precision)}.json"
    with console.status(f"diagnosing {escape(label)} in {resolve(precision)}: {', '.join(wanted)}"):
        d = diagnose(build, precision, steps=steps, preset=preset or "small", batch_size=batch_size, device=device, seed=seed,
                     checks=wanted, trace=trace, name=label, mp_options=fp8 or None)
    console.print(f"[bold]{escape(label)}[/] in [bold cyan]{d.precision}[/] on {escape(d.device_name)} ({d.device}), "
                  f"batch {d.batch_size}: {', '.join(wanted)}")
    style = {"error": "bold red", "warning": "yellow", "info": "dim"}
    for i, f in enumerate(d.findings, 1):
        console.print(f"[{style.get(f.severity, '')}]{i:>2}. {f.severity.upper():<7}[/] {escape(f.title)}", highlight=False)
        if f.detail:
            console.print(f"             {escape(f.detail)}", style="dim", highlight=False)
        if f.fix:
            console.print(f"             [green]fix:[/] {escape(f.fix)}", highlight=False)
    data = d.to_dict()
    data["created_at"] = utcnow()
    store.add_diagnosis(data)
    console.print(f"{plural(len(d.findings), 'finding')} in {d.seconds:.1f} s on {escape(d.device_name)} "
                  f"({d.device}); stored in {escape(str(store.path))}")
    if json_out is not None:
        from ampbench.store.exchange import clean_json

        write_text_atomic(json_out, json.dumps(clean_json(data), indent=1, default=str))
        console.print(f"wrote {escape(str(json_out))}")


@app.command("report")
def report_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    run: Annotated[Opt[str], typer.Option("--run", help="Run id (or a unique prefix).")] = None,
    latest: Annotated[bool, typer.Option("--latest", help="The latest run (the default).")] = False,
    out: Annotated[Opt[Path], typer.Option("--out", help="File to write (default: <db dir>/reports/RUN.EXT).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="html | md | csv.")] = "html",
) -> None:
    """Write the report of a run: one self-contained HTML page (or Markdown / CSV), with advice per workload.
    ``--out -`` writes it to standard output."""
    from ampbench.report import FORMATS, build_report, write_report

    if run is not None and latest:
        raise AmpbenchError("give --run ID or --latest, not both")
    if fmt not in FORMATS:
        raise AmpbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    check_output_file(out, "--out", f"report.{fmt}")
    store = _open_store(db, create=False)
    if out is not None and str(out) == STDOUT:
        sys.stdout.write(build_report(store, run, fmt)[1])
        return
    path = write_report(store, out, run, fmt)
    console.print(f"report: [bold]{escape(str(path))}[/]")


@app.command("compare")
def compare_cmd(
    db: Annotated[Opt[Path], typer.Option(help="Results store.")] = None,
    workloads: Annotated[Opt[str], typer.Option(help="Only these workloads (comma-separated).")] = None,
    precision: Annotated[Opt[str], typer.Option("--precision", help="Only these modes (comma-separated).")] = None,
    reference: Annotated[Opt[str], typer.Option(help="Device name to normalise to (default: the slowest in fp32).")] = None,
) -> None:
    """Throughput across GPUs: rows = devices, columns = precisions, relative to a reference device."""
    from ampbench.bench.config import parse_list
    from ampbench.precision import resolve
    from ampbench.report.compare import compare_table
    from ampbench.store.derive import merge_repeats

    store = _open_store(db, create=False)
    precs = [resolve(p) for p in parse_list(precision, "precision")] or None
    tables = compare_table(merge_repeats(store.rows()), reference, parse_list(workloads, "workloads") or None, precs)
    if not tables:
        raise AmpbenchError(f"no ok results to compare in {store.path} (import other machines' exports first)")
    for t in tables:
        table = Table(title=f"{escape(t.title)}: samples/s relative to {escape(t.reference)}", title_justify="left")
        table.add_column("device", style="bold")
        for p in t.precisions:
            table.add_column(p, justify="right")
        for d in t.devices:
            cells = []
            for p in t.precisions:
                c = t.cells.get((d, p))
                if c is None:
                    cells.append("-")
                else:
                    rel = "" if c.relative is None else f"{c.relative:.2f}x "
                    style = "green" if (c.relative or 1) > 1.05 else "red" if (c.relative or 1) < 0.95 else ""
                    cells.append(f"[{style}]{rel}[/][dim]({c.samples_per_s:,.0f}/s)[/]" if style else
                                 f"{rel}[dim]({c.samples_per_s:,.0f}/s)[/]")
            table.add_row(escape(d), *cells)
        console.print(table)
        if len(t.devices) == 1:
            console.print("[dim]only one device has results here: ampbench import other machines' exports to compare[/]")


@app.command("hw")
def hw_cmd(
    device: Annotated[Opt[str], typer.Option(help="cpu, cuda or cuda:N (default: cuda if present).")] = None,
    sizes: Annotated[Opt[str], typer.Option(help="GEMM sizes n (n x n x n), comma-separated.")] = None,
    gemm: Annotated[bool, typer.Option(help="Run the GEMM micro-benchmark.")] = True,
    db: Annotated[Opt[Path], typer.Option(help="Store the probe here (MFU vs measured peak uses it).")] = None,
    json_out: Annotated[Opt[Path], typer.Option("--json", help="Write the probe as JSON.")] = None,
) -> None:
    """The device, what it supports and why not, TF32 flags, versions, peak TFLOP/s, and a GEMM benchmark."""
    import json

    from ampbench.bench.config import parse_list
    from ampbench.measure.env import resolve_device
    from ampbench.measure.hw import probe

    dev = resolve_device(device)
    ns = None
    if sizes is not None:
        try:
            ns = tuple(int(s) for s in parse_list(sizes, "sizes"))
        except ValueError:
            raise AmpbenchError(f"--sizes {sizes!r}: expected integers, e.g. 1024,4096") from None
        if any(n < 1 or n > 65536 for n in ns):
            raise AmpbenchError(f"--sizes must be between 1 and 65536, got {sizes}")
    check_output_file(json_out, "--json", "hw.json")
    store = _open_store(db)  # a bad --db fails now, not after the GEMM benchmark
    p = probe(dev, ns, run_gemm=gemm)
    env = p["env"]
    table = Table(title=f"{escape(p['device_name'])} ({dev})", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    if dev.type == "cuda":
        table.add_row("compute capability", p["capability"])
        table.add_row("Tensor Cores", p["tensor_cores"])
        table.add_row("versions", f"driver {env.get('driver', '?')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
                                  f"torch {env['torch']}")
        table.add_row("clocks / power", f"SM {env.get('sm_clock_mhz', '?')}/{env.get('sm_clock_max_mhz', '?')} MHz, "
                                        f"power limit {env.get('power_limit_w', '?')} W")
        peaks = p.get("peaks")
        said = ", ".join(f"{k} {v:g}" for k, v in peaks.items()) + f"  [dim]({p['peaks_source']})[/]" if peaks else ""
        table.add_row("dense peaks (TFLOP/s)", said or "not in ampbench's table: MFU will use the measured GEMM peak")
    else:
        hw = p["cpu_half_hardware"]
        table.add_row("CPU", escape(env["cpu"]))
        capped = f" (oneDNN capped at {env['cpu_isa_limit']} by ONEDNN_MAX_CPU_ISA)" if env.get("cpu_isa_limit") else ""
        table.add_row("half-precision hardware", ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in hw.items()) + capped)
        table.add_row("versions", f"torch {env['torch']}, python {env['python']}, {env['torch_threads']} threads")
        peaks = p.get("peaks")
        table.add_row("theoretical peaks (TFLOP/s)",
                      ", ".join(f"{k} {v:.3g}" for k, v in peaks.items()) + f"  [dim]({escape(p['peaks_source'])})[/]"
                      if peaks else "not estimated (no AVX2/AVX-512 FMA, or the clock is unknown)")
    table.add_row("TF32 in force", f"matmul {env['tf32_matmul']}, cuDNN {env['tf32_cudnn']}"
                                   + (f", override env {env['tf32_override_env']}" if env["tf32_override_env"] else ""))
    modes = p["precisions"]
    lines = []
    for name, m in modes.items():
        why = m["reason"] or m["note"]
        lines.append(f"{'[green]ok[/]' if m['ok'] else '[red]no[/]'} {name}" + (f": {why}" if why else ""))
    table.add_row("precision modes", "\n".join(lines))
    table.add_row("verdict", p["verdict"])
    console.print(table)
    if p["gemm"]:
        g = Table(title="GEMM micro-benchmark (random normal n x n @ n x n)", title_justify="left")
        for col in ("n", "math", "TFLOP/s", "% of peak"):
            g.add_column(col, justify="right")
        for row in p["gemm"]:
            frac = row["fraction_of_peak"]
            g.add_row(f"{row['size']:,}", row["math_mode"], f"{row['tflops']:.3f}", "-" if frac is None else f"{frac:.0%}")
        console.print(g)
    store.add_hw(p)
    console.print(f"stored in {escape(str(store.path))}")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(p, indent=1))
        console.print(f"wrote {escape(str(json_out))}")


_invocation: list[str] = []
"""The arguments of the command being run (``train --strategy`` runs the same command again in each rank)."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: AmpbenchError -> one line on stderr, exit code 2."""
    global _invocation
    _invocation = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=_invocation, standalone_mode=False, prog_name="ampbench")
        if isinstance(code, int) and code:  # typer.Exit(N) inside a command comes back as N without standalone mode
            sys.exit(code)
    except AmpbenchError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except sqlite3.DatabaseError as e:  # a store damaged while in use (opening one checks it first)
        err_console.print(f"[red]error:[/] the results store failed while in use: {escape(str(e))}; check it with "
                          "`sqlite3 FILE 'PRAGMA integrity_check'`", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as e:  # click usage errors (bad option, missing argument)
        import click

        if type(e).__name__ == "NoArgsIsHelpError":  # help was printed
            sys.exit(0)
        if isinstance(e, click.exceptions.UsageError):
            msg = e.format_message()
            cmd = e.ctx.command_path if e.ctx else "ampbench"
            hint = f" (see: {cmd} --help)"
            err_console.print(f"[red]error:[/] {escape(msg + hint)}", highlight=False, soft_wrap=True)
            sys.exit(2)
        if isinstance(e, click.exceptions.ClickException):
            err_console.print(f"[red]error:[/] {escape(e.format_message())}", highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)
        raise
