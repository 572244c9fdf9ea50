"""Do a GPU's isolated kernels carry into its whole steps? NeuSight's measured fp32 kernels of each GPU it also timed
whole training steps on, read as that GPU's kernel table (as ``ampbench hw --calibrate``'s table of your GPU would
be), price those steps; beside them, the steps priced as ``predict`` prices them today (the fitted model; the H100
from the lent H200's table). Per kind too: the table's GEMMs alone, its batched GEMMs alone, and so on.

No GPU is used: predictions beside published measurements. Nothing here is fitted; the answer decides whether such
tables ship (docs/predict.md, "What was tried").

    python benchmarks/neusight_tables.py [--json benchmarks/results/neusight_tables.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (predict_checks: the checkout's root)

from predict_checks import neusight

from ampbench.predict import measured_kernels

GPUS = ("v100-32gb-pcie", "a100-80gb-pcie", "h100-sxm", "l4")
"""The GPUs NeuSight timed whole training steps on (each has its own kernels there)."""
KINDS = (("gemm",), ("bmm",), ("conv",), ("elementwise",), ("norm", "softmax"))


def _errors(gpu: str, table: dict | None) -> dict[str, float]:
    """Each step of ``gpu``: predicted / measured - 1, priced with ``table`` as the GPU's own (None: as today)."""
    tables = [] if table is None else [table]
    with measured_kernels.stored_tables(tables):
        return {e.step.name: e.error for e in neusight.step_errors(gpus={gpu})}


def _summary(errors: dict[str, float]) -> dict[str, float]:
    values = [abs(v) for v in errors.values()]
    return {"median": statistics.median(values), "worst": max(values)}


def compare(gpus: tuple[str, ...] = GPUS) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for gpu in gpus:
        today = _errors(gpu, None)
        whole = _errors(gpu, neusight.kernel_table(gpu))
        per_kind = {"+".join(k): _errors(gpu, neusight.kernel_table(gpu, kinds=k)) for k in KINDS}
        out[gpu] = {"steps": {s: {"today": today[s], "own_kernels": whole[s],
                                  **{f"only_{k}": e[s] for k, e in per_kind.items()}} for s in today},
                    "today": _summary(today), "own_kernels": _summary(whole),
                    "kernels": len(neusight.kernel_table(gpu)["kernels"])}
    return out


def markdown(result: dict[str, dict]) -> list[str]:
    lines = ["| GPU | its kernels | steps | today: median / worst | its own kernels as its table | of which GEMMs alone |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for gpu, r in result.items():
        gemm = _summary({s: v["only_gemm"] for s, v in r["steps"].items()})
        lines.append(f"| {gpu} | {r['kernels']:,} | {len(r['steps'])} | {r['today']['median']:.0%} / "
                     f"{r['today']['worst']:.0%} | {r['own_kernels']['median']:.0%} / {r['own_kernels']['worst']:.0%}"
                     f" | {gemm['median']:.0%} / {gemm['worst']:.0%} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the per-step errors here")
    args = ap.parse_args()
    result = compare()
    print("\n".join(markdown(result)))
    for gpu, r in result.items():
        for step, e in r["steps"].items():
            kinds = " ".join(f"{k.removeprefix('only_')} {v:+.0%}" for k, v in e.items() if k.startswith("only_"))
            print(f"{gpu:16s} {step:28s} today {e['today']:+.0%}, own kernels {e['own_kernels']:+.0%} ({kinds})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
