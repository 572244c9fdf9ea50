"""``ampbench list``: precision modes (aliases, what each does, runs here?) and workloads."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from ampbench import seam
from ampbench.cli.core import app, console
from ampbench.errors import AmpbenchError
from ampbench.measure.gpus import predictable
from ampbench.report.console import Col, stack_tables


@app.command("list")
def list_cmd(
    what: Annotated[str, typer.Argument(help="What to list: precisions, workloads, gpus or all.")] = "all",
) -> None:
    """List precision modes (aliases, what each does), workloads (presets, data, paper config) and the GPUs predict
    knows."""
    choices = ("all", "precisions", "workloads", "gpus")
    if what not in choices:
        raise AmpbenchError(f"cannot list {what!r}: choose one of {', '.join(choices)}")
    if what in ("all", "precisions"):
        _list_precisions()
    if what in ("all", "workloads"):
        _list_workloads()
    if what in ("all", "gpus"):
        _list_gpus()


def _list_gpus() -> None:
    gpus = predictable()
    peaks = {m: [f"{g.tflops[m]:g}" if m in g.tflops else ("fp32 math" if m == "fp16" and not g.tensor_cores else "-")
                 for g in gpus] for m in ("fp32", "tf32", "fp16", "bf16", "fp8")}
    cols = [Col("cc", [f"{g.capability[0]}.{g.capability[1]}" for g in gpus]),
            Col("memory", [f"{g.memory_gib:g} GB {g.memory or ''}".strip() for g in gpus]),
            Col("GB/s", [f"{g.bandwidth_gbs:,.0f}" for g in gpus]),
            *(Col(m, cells) for m, cells in peaks.items()),
            Col("TDP W", [f"{g.tdp_w:g}" if g.tdp_w else "-" for g in gpus]),
            Col("NVLink GB/s", [f"{g.nvlink_gbs:g}" if g.nvlink_gbs else "-" for g in gpus])]
    _print_stacked("GPUs (dense peak TFLOP/s; half: Tensor Cores with fp32 accumulate; sources: "
                   "ampbench/measure/gpus.csv)", Col("--gpu", [g.key for g in gpus], justify="left"), cols)


def _list_workloads() -> None:
    from ampbench.workloads import PRESETS  # lazy: torch

    rows = [(w.name, w.description, w.paper, w.data, w.options)
            for fw in seam.all_frameworks() for w in fw.workloads()]  # (each framework lists its own workloads)
    rows.append(("timm:<model>", "any timm image model, random init (optional extra: ampbench[timm])", "-",
                 "as --model: images", "timm.create_model arguments"))
    rows.append(("hf:<type>", "HF transformers from a config (hf:bert, hf:gpt2 --task lm), no download "
                 "(extra: ampbench[hf])", "-", "as --model: text CSV, corpus", "config fields, tokenizer, text, label"))
    rows.append(("--model F:fn", "your own model, any shape: --input-shape, --vocab-size, --num-classes | "
                 "--num-outputs | --task lm, or --batches F:make_batch (ampbench run --help); a keras.Model runs "
                 "under Keras's policies (--keras-backend)", "-",
                 "MNIST IDX / CIFAR-10, class folders of images, a CSV of features and a label, text,label CSV (token "
                 "models), train.txt (--task lm)",
                 "tokenizer, text, label"))
    names, *texts = zip(*rows)
    cols = [Col(header, [Text(c) for c in cells], justify="left", wraps=True)  # (Text: "ampbench[hf]" is no markup)
            for header, cells in zip(("what it is", "paper preset", "--data-dir", "options"), texts)]
    _print_stacked(f"Workloads (presets: {', '.join(PRESETS)})",
                   Col("name", [Text(n, style="bold cyan") for n in names], justify="left"), cols)


def _print_stacked(title: str, key: Col, cols: list[Col]) -> None:
    """The columns as one table, or stacked into narrower tables each led by the ``key`` column when they do not fit
    the terminal (:func:`ampbench.report.console.stack_tables`): no number or header cut; at 80 columns every text
    wraps at its spaces in a column of at least 24, none is squeezed to a sliver."""
    for table in stack_tables(title, key, cols, console.width):
        console.print(table)


def _list_precisions() -> None:
    import torch  # lazy: torch

    from ampbench.precision import aliases_of, get, list_precisions, supported  # lazy: torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    names, aliases, scales, does, here = [], [], [], [], []
    support = {name: supported(name, device) for name in list_precisions()}
    # (a reason several modes share is a numbered note below the table: the CPU's fp16 note was said under each of
    # three modes, the fp8 one under three, and took the table to two stacked parts at 100 columns)
    said = Counter(sup.note if sup.ok else sup.reason for sup in support.values())
    notes = list(dict.fromkeys(t for t in said if t and said[t] > 1))
    for name, sup in support.items():
        recipe = get(name)
        why = sup.note if sup.ok else sup.reason
        mark = escape(f"[{notes.index(why) + 1}]") if why in notes else ""
        text = f"[green]ok[/] ({device})" if sup.ok else "[red]no[/]" + (f" {mark}" if mark else f": {escape(why)}")
        if sup.ok and why:
            text += f" [yellow]{mark or escape(why)}[/]"  # (escaped: "pip install 'ampbench[fp8]'" is no markup)
        names.append(Text(name, style="bold cyan"))
        aliases.append(Text(", ".join(aliases_of(name))))
        scales.append(Text(recipe.default_loss_scale))
        does.append(Text(recipe.summary))
        here.append(Text.from_markup(text))
    cols = [Col("aliases", aliases, justify="left", wraps=True), Col("loss scale", scales, justify="left"),
            Col("what it does", does, justify="left", wraps=True),
            Col("on this machine", here, justify="left", wraps=True)]
    _print_stacked("Precision modes", Col("name", names, justify="left"), cols)
    for i, note in enumerate(notes, 1):  # (a Text: laid out to the width, as the table above it)
        console.print(Text(f"[{i}] {note}"))
