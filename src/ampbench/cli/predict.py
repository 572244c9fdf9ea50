"""``ampbench predict``: speed, memory and max batch per precision on a named GPU, without one (a traced step priced
on the GPU's datasheet: :mod:`ampbench.predict`)."""

from __future__ import annotations

import json

from rich.markup import escape

from ampbench.cli import declared
from ampbench.cli.core import app, console, open_store, warned_once, working
from ampbench.cli.examples import PYTORCH_MODEL_EXAMPLES
from ampbench.command_options import PredictData, PredictDistribution, PredictGpus, PredictOutput, PredictTargets
from ampbench.paths import check_output_file, write_text_atomic
from ampbench.predict.measured_kernels import stored_tables
from ampbench.report.console import predicted_tables
from ampbench.report.gpu_comparison import advice, comparison_tables, ddp_lines, mark_ranks, wide_csv
from ampbench.report.predictions import fp8_lines, no_speedup_lines, unsupported_lines


@app.command("predict", epilog=PYTORCH_MODEL_EXAMPLES)
@declared.command
def predict_cmd(gpus: PredictGpus, targets: PredictTargets, spread: PredictDistribution, data: PredictData,
                output: PredictOutput) -> None:
    """Predict each precision's step time, memory and max batch on GPUs you do not have (nothing runs on a GPU)."""
    with warned_once():  # (a user's model is imported and built more than once: its warnings said once)
        _predict(gpus, targets, spread, data, output)


def _predict(gpus: PredictGpus, targets: PredictTargets, spread: PredictDistribution, data: PredictData,
             output: PredictOutput) -> None:
    from ampbench.predict.config import PredictConfig  # lazy: torch, torch.utils.flop_counter
    json_out, csv_out = output.json_out, output.csv_out
    check_output_file(json_out, "--json", "predict.json")
    check_output_file(csv_out, "--csv", "predict.csv")
    config = PredictConfig.from_options(gpus, targets, spread, data.parsed())  # (bad options: refused before the
    # store is opened, so a typo leaves no empty store behind)
    store = open_store(output.db)  # (a directory or a damaged file: one line, before anything is traced)
    from ampbench.predict.run_time import run_cells, run_text, runs_text  # lazy: torch

    with stored_tables(store.calibrations()):  # (this store's own kernel tables price their GPUs first)
        rows = config.predict(lambda t: working(f"tracing {escape(t.label)} (meta tensors: nothing computed)"))
    several = len(config.gpus) > 1
    mark_ranks(rows)
    for part in comparison_tables(rows, console.width) if several else predicted_tables(rows, config.gpu, console.width):
        console.print(part)
    for line in [*config.notes, *(unsupported_lines(rows) if several else ()), *fp8_lines(rows), *ddp_lines(rows),
                 *no_speedup_lines(rows), *(advice(rows) if several else ())]:
        console.print(f"  {escape(line)}")
    runs = {gpu.key: run_cells([r for r in rows if r.get("gpu") == gpu.key])
            for gpu in (config.gpus if not config.inference and config.strategy is None else ())}
    runs = {gpu: cells for gpu, cells in runs.items() if cells}
    if len(runs) == 1:
        (gpu_key, cells), = runs.items()
        console.print(f"  {escape(run_text(cells, gpu_key))}")
    elif runs:
        console.print(f"  {escape(runs_text(runs))}")
    store.add_predictions(rows)
    console.print(f"stored {len(rows)} predicted row{'' if len(rows) == 1 else 's'} in {escape(str(store.path))} "
                  "(ampbench report --predictions "
                  "shows every stored prediction; a run's report, those of its workloads beside its measurements)")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(rows, indent=1))
        console.print(f"wrote {escape(str(json_out))}")
    if csv_out is not None:
        write_text_atomic(csv_out, wide_csv(rows))
        console.print(f"wrote {escape(str(csv_out))}")
