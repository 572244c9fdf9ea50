"""Re-derive the exact memory figures of committed exports after a counter was fixed (timings stay as measured).

    python benchmarks/rederive_memory.py benchmarks/results/cpu/default_suite.json [...]

The exact memory split (weights, gradients, optimizer state, saved activations) and the model file sizes are
counts of bytes, not timings: the same cell on the same torch stores the same tensors. So when a counter is
wrong -- activations counted every Linear layer's fp32 weight (F.linear saves ``weight.t()``, a plain view of
the parameter), the model file counted tied weights twice -- the committed figures can be re-derived without
re-timing anything: each ok cell of the export is rebuilt from its run's options (matched by cell key) and its
memory measured again, in this process, with the current counters.

Rigour: the old activation counter is replayed on the same step. A row is rewritten only when the replay
reproduces its stored ``activation_bytes`` and the state bytes (weights, gradients, optimizer) match exactly:
then this machine saves exactly the tensors the machine that measured it did, and the new figure is the fixed
counter on that very measurement. A row that does not reproduce is left as it is and listed. The derived keys
(``memory_saving_vs_fp32``, ...) are computed again from the re-derived rows, and the file records what was
re-derived, when, and why (``"rederived"``). One-process cells only: distributed cells are left and listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ampbench.bench.config import RunConfig
from ampbench.cells import CellSpec
from ampbench.execution import Execution
from ampbench.frameworks.torch.cell import build_workload
from ampbench.measure import memory as mem
from ampbench.measure.step import build_step
from ampbench.store import DERIVED_KEYS, derive
from ampbench.store.exchange import clean_json
from ampbench.store.sqlite import utcnow

KEYS = ("weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes", "model_bytes_fp32", "model_bytes_half")
WHY = ("activation_bytes counted the fp32 weight of every Linear layer whose input needs a gradient (F.linear saves "
       "weight.t(), a plain view of the parameter; the counter excluded nn.Parameter objects only); model_bytes_* "
       "counted tied weights once per state_dict entry. Re-derived with the storage-identity counters; timings are "
       "the original measurement's.")


def config_from_identity(identity: dict[str, Any]) -> RunConfig:
    """The RunConfig a stored run identity was made from (its executions back to Execution)."""
    kw = dict(identity)
    if "executions" in kw:
        kw["executions"] = tuple(Execution(**e) for e in kw["executions"])
    return RunConfig.of(device=kw.pop("device"), **kw)


@contextmanager
def old_saved_activations() -> Iterator[list[int]]:
    """The activation counter as it was before the fix (nn.Parameter objects excluded by type, nothing else)."""
    seen: dict[int, int] = {}
    result = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, nn.Parameter) and t.device.type != "meta":
            for x in mem.storage_tensors(t):
                st = x.untyped_storage()
                seen.setdefault(st.data_ptr(), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield result
    result[0] = sum(seen.values())


def remeasure(spec: CellSpec, batch_size: int) -> dict[str, Any]:
    """The cell's exact memory figures with the current counters, and its activations with the old one."""
    wl = build_workload(spec)
    sizes = mem.model_sizes(wl.model)
    step = build_step(wl, spec.precision, batch_size, torch.device(spec.device), spec.recipe.loss_scale,
                      mp_options=spec.mp_options(), execution=spec.execution)
    step()  # the cell's first step (compiles a compiled cell)
    with mem.saved_activations(step.eager_model or step.model) as new:
        step()
    with old_saved_activations() as old:
        step()
    for _ in range(3):  # until a step has updated the weights (fp16 scalers skip the first ones)
        held = step.state_bytes()
        if held is not None:
            break
        step()
    out = {"activation_bytes": new[0], "old_activation_bytes": old[0], **sizes}
    if held is not None:
        out.update(held.as_row())
    return out


def rederive(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    runs = {r["run_id"]: r for r in data.get("runs", [])}
    notes: list[str] = []
    rows = [{k: v for k, v in r.items() if k not in DERIVED_KEYS} for r in data["rows"]]
    cells: dict[str, dict[str, CellSpec]] = {}
    for r in rows:
        name = f"{r['workload']} {r['precision']} ({r.get('compile')}, {r.get('memory_format')})"
        if r.get("status") != "ok" or r.get("activation_bytes") is None:
            continue
        if r.get("strategy"):
            notes.append(f"{name}: distributed cell, not re-derived")
            continue
        run = runs.get(r["run_id"])
        if run is None:
            notes.append(f"{name}: its run is not in the file, not re-derived")
            continue
        if r["run_id"] not in cells:
            config = config_from_identity(run["config"]["identity"])
            # native-only entries plan by this machine's hardware; a cell's key does not depend on it: plan them all
            cells[r["run_id"]] = {c.key(): c for c in replace(config, targets=replace(config.targets, native_only=())).cells()}
        spec = cells[r["run_id"]].get(r.get("repeat_of") or r["cell_key"])
        if spec is None:
            notes.append(f"{name}: no cell of its run has key {r['cell_key']}, not re-derived")
            continue
        now = remeasure(replace(spec, repeat=0, closing=False), int(r["batch_size"]))
        same = now["old_activation_bytes"] == r["activation_bytes"] and all(
            now.get(k) == r.get(k) for k in ("weights_bytes", "grads_bytes", "optimizer_bytes"))
        if not same:
            notes.append(f"{name}: this machine does not reproduce the stored figures (old counter "
                         f"{now['old_activation_bytes']} vs stored {r['activation_bytes']}), not re-derived")
            continue
        for k in KEYS:
            r[k] = now[k]
    data["rows"] = clean_json(derive(rows, data.get("hw")))
    data["rederived"] = {"keys": list(KEYS), "by": "benchmarks/rederive_memory.py", "at": utcnow(),
                         "torch": torch.__version__, "why": WHY, "left": notes}
    path.write_text(json.dumps(data, indent=1, allow_nan=False))
    return notes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for f in args.files:
        notes = rederive(f)
        print(f"{f}: re-derived" + ("".join(f"\n  {n}" for n in notes) if notes else " (every ok cell)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
