"""Re-derive the FLOP figures of committed exports after the FLOP counter was corrected (timings stay as measured).

    python benchmarks/rederive_flops.py benchmarks/results/cpu/default_suite.json [...]

``flops_per_step`` is a count, not a timing: the same cell on the same torch dispatches the same ops. The counter
(torch.utils.flop_counter) missed attention on a CPU and LSTM/GRU kernels and overcounted grouped convolutions'
backward; ``ampbench.measure.flop_formulas`` corrects it. Each ok one-process cell is rebuilt from its run's options
(matched by cell key) and one eager training step is counted twice, with torch's plain counter (the old one) and
with ours. A row is rewritten only when the old count reproduces its stored ``flops_per_step`` exactly; then
``flops_per_step`` and ``conv_flops_share`` are the new count's and ``achieved_tflops`` / ``mfu`` scale by new/old
over the same measured seconds. Rows that do not reproduce are left and listed; the file records what was
re-derived, when and why (``"rederived_flops"``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from ampbench.cells import CellSpec
from ampbench.frameworks.torch.cell import build_workload
from ampbench.measure.flops import count_flops_split
from ampbench.measure.step import build_step
from ampbench.store import DERIVED_KEYS, derive
from ampbench.store.exchange import clean_json
from ampbench.store.sqlite import utcnow

sys.path.insert(0, str(Path(__file__).parent))
from rederive_memory import config_from_identity

WHY = ("torch.utils.flop_counter counted attention on CPU (_scaled_dot_product_flash_attention_for_cpu) and oneDNN's "
       "LSTM as 0 FLOPs and a grouped convolution's weight gradient groups times over; re-counted with "
       "ampbench.measure.flop_formulas, achieved_tflops and mfu scaled over the measured seconds.")


def recount(spec: CellSpec, batch_size: int) -> tuple[int, int, float | None]:
    """(torch's plain count, ours, our conv share) of one eager training step of the cell."""
    wl = build_workload(spec)
    step = build_step(wl, spec.precision, batch_size, torch.device(spec.device), spec.recipe.loss_scale,
                      mp_options=spec.mp_options(), execution=spec.execution)
    step()
    plain = FlopCounterMode(display=False)
    with plain:
        step(eager=True)
    ours, share = count_flops_split(lambda: step(eager=True))
    return int(plain.get_total_flops()), ours, share


def rederive(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    runs = {r["run_id"]: r for r in data.get("runs", [])}
    notes: list[str] = []
    rows = [{k: v for k, v in r.items() if k not in DERIVED_KEYS} for r in data["rows"]]
    cells: dict[str, dict[str, CellSpec]] = {}
    counted: dict[tuple[str, str], tuple[int, int, float | None]] = {}
    for r in rows:
        name = f"{r['workload']} {r['precision']} ({r.get('compile')}, {r.get('memory_format')})"
        if r.get("status") != "ok" or not r.get("flops_per_step"):
            continue
        if r.get("strategy") or r.get("keras_backend"):
            notes.append(f"{name}: {'distributed' if r.get('strategy') else 'Keras'} cell, not re-derived")
            continue
        run = runs.get(r["run_id"])
        if run is None:
            notes.append(f"{name}: its run is not in the file, not re-derived")
            continue
        if r["run_id"] not in cells:
            config = config_from_identity(run["config"]["identity"])
            cells[r["run_id"]] = {c.key(): c for c in replace(config, targets=replace(config.targets, native_only=())).cells()}
        spec = cells[r["run_id"]].get(r.get("repeat_of") or r["cell_key"])
        if spec is None:
            notes.append(f"{name}: no cell of its run has key {r['cell_key']}, not re-derived")
            continue
        key = (r["run_id"], r.get("repeat_of") or r["cell_key"])
        if key not in counted:
            counted[key] = recount(replace(spec, repeat=0, closing=False), int(r["batch_size"]))
        old, new, share = counted[key]
        if old != r["flops_per_step"]:
            notes.append(f"{name}: torch's counter gives {old:,} here, {r['flops_per_step']:,} stored: not re-derived")
            continue
        ratio = new / old
        r["flops_per_step"], r["conv_flops_share"] = new, share
        for k in ("achieved_tflops", "mfu"):
            if isinstance(r.get(k), (int, float)):
                r[k] = r[k] * ratio
        if new != old:
            notes.append(f"{name}: {old:,} -> {new:,} FLOPs a step ({ratio:.3f}x)")
    data["rows"] = clean_json(derive(rows, data.get("hw")))
    data["rederived_flops"] = {"keys": ["flops_per_step", "conv_flops_share", "achieved_tflops", "mfu"],
                               "by": "benchmarks/rederive_flops.py", "at": utcnow(), "torch": torch.__version__,
                               "why": WHY, "notes": notes}
    path.write_text(json.dumps(data, indent=1, allow_nan=False))
    return notes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for f in args.files:
        notes = rederive(f)
        print(f"{f}: re-derived" + ("".join(f"\n  {n}" for n in notes) if notes else " (nothing changed)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
