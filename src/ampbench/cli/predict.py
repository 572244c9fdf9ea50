"""``ampbench predict``: speed, memory and max batch per precision on a named GPU, without one (a traced step priced
on the GPU's datasheet: :mod:`ampbench.predict`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from ampbench.cli import options as o
from ampbench.cli.core import app, console, open_store
from ampbench.measure.gpus import predictable
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.report.predictions import no_speedup_lines

GpuOpt = Annotated[Optional[str], typer.Option("--gpu", help="The GPU(s), comma-separated, or all: "  # noqa: UP045
                   + ", ".join(g.key for g in predictable()) + " (case-insensitive; ampbench list gpus).")]
GpuSpecOpt = Annotated[Optional[Path], typer.Option("--gpu-spec", help="Another GPU, as JSON: name, tflops {fp32, "  # noqa: UP045
                       "tf32, fp16, bf16, fp8}, memory_gib, bandwidth_gbs, sms, capability.")]
PricesOpt = Annotated[Optional[Path], typer.Option("--prices", help="Your USD per hour per GPU, as JSON "  # noqa: UP045
                      "{\"a100-80gb\": 1.89, ...} or CSV lines gpu,usd_per_hour: adds the cost per million samples.")]
InferenceOpt = Annotated[bool, typer.Option("--inference", help="Predict the forward alone (eval mode, no autograd, "
                         "the half modes' models in half): latency per batch, samples/s, memory, largest batch.")]
ChannelsLastOpt = Annotated[bool, typer.Option("--channels-last", help="Trace with channels-last inputs and "
                            "weights (4-D inputs), as --memory-format channels_last runs.")]


@app.command("predict", epilog=o.MODEL_EXAMPLES)
def predict_cmd(gpu: GpuOpt = None, gpu_spec: GpuSpecOpt = None, workloads: o.WorkloadsOpt = None,
                precisions: o.PrecisionsOpt = None, preset: o.RunPresetOpt = None, batch_size: o.BatchSizesOpt = None,
                model: o.ModelOpt = None, input_shape: o.InputShapeOpt = None, vocab_size: o.VocabSizeOpt = None,
                num_classes: o.NumClassesOpt = None, num_outputs: o.NumOutputsOpt = None, task: o.TaskOpt = None,
                batches: o.BatchesOpt = None, loss: o.LossOpt = None, option: o.OptionOpt = None, seed: o.RunSeedOpt = 0,
                channels_last: ChannelsLastOpt = False, json_out: o.json_option("the predicted rows") = None,
                db: o.DbOpt = None, optimizer_state: o.OptimizerStatesOpt = None, prices: PricesOpt = None,
                inference: InferenceOpt = False) -> None:
    """Predict each precision's step time, memory and max batch on GPUs you do not have (nothing runs on a GPU)."""
    from ampbench.command_requests import data_options  # lazy: torch
    from ampbench.predict.config import PredictConfig  # lazy: torch, torch.utils.flop_counter
    from ampbench.report.console import predicted_tables  # lazy: torch
    from ampbench.report.gpu_comparison import advice, comparison_tables  # lazy: torch

    check_output_file(json_out, "--json", "predict.json")
    store = open_store(db)  # (a directory or a damaged file: one line, before anything is traced)
    data = data_options(input_shape, vocab_size, num_classes, num_outputs, task, batches, loss, None, None, option)
    config = PredictConfig.from_strings(gpu=gpu, gpu_spec=gpu_spec, workloads=workloads, model=model, preset=preset,
                                        precisions=precisions, batch_size=batch_size, optimizer_state=optimizer_state,
                                        channels_last=channels_last, data=data, seed=seed, prices=prices,
                                        inference=inference)
    rows = config.predict(lambda t: console.status(f"tracing {t.label} (meta tensors: nothing computed)"))
    several = len(config.gpus) > 1
    for part in comparison_tables(rows, console.width) if several else predicted_tables(rows, config.gpu, console.width):
        console.print(part)
    for line in [*no_speedup_lines(rows), *(advice(rows) if several else ())]:
        console.print(f"  {escape(line)}")
    store.add_predictions(rows)
    console.print(f"stored {len(rows)} predicted rows in {escape(str(store.path))} (ampbench report shows them beside "
                  "any measurement of the same cell on that GPU)")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(rows, indent=1))
        console.print(f"wrote {escape(str(json_out))}")
