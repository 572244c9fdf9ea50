"""Do a GPU's isolated kernels carry into its whole steps? NeuSight's measured fp32 kernels of each GPU it also timed
whole steps on, read as that GPU's kernel table (as ``ampbench hw --calibrate``'s table of your GPU would be), price
those steps; beside them, the steps priced by the fitted model (``model``; the H100 from the lent H200's table). Per
kind too: the table's GEMMs alone, its batched GEMMs alone, and so on.

No GPU is used: predictions beside published measurements. Nothing here is fitted. ``--write`` ships the tables
(``src/ampbench/predict/calibration/<gpu>.csv.gz``) of the GPUs whose architecture has no table of its own measuring
(:data:`SHIPPED`), each pricing its own card alone; the comparison runs against the fitted model whether or not they
are shipped (they are set aside for it).

    python benchmarks/neusight_tables.py [--json benchmarks/results/neusight_tables.json] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (predict_checks: the checkout's root)

from predict_checks import neusight, references

from ampbench.measure.calibrate import to_csv
from ampbench.predict import measured_kernels

SHIPPED = ("p4", "p100-16gb", "t4", "v100-32gb-pcie", "a100-40gb-pcie", "a100-80gb-pcie", "l4")
"""NeuSight's GPUs whose tables ship: all but the H100 SXM, which the lent H200's table prices (every dtype, direction
and layout: a table of fp32 forwards would replace it)."""
GPUS = ("v100-32gb-pcie", "a100-80gb-pcie", "h100-sxm", "l4")
"""The GPUs NeuSight timed whole training steps on (each has its own kernels there)."""
INFERENCE_GPUS = ("v100-32gb-pcie", "a100-40gb-pcie", "h100-sxm", "l4", "t4", "p100-16gb", "p4")
"""The GPUs NeuSight timed inference forwards on: forwards alone, as its kernels are."""
DLE_TABLES = {"t4": "t4"}
"""NVIDIA's published ResNet-50 inference latencies (``predict_checks.references``) -> the GPU whose NeuSight kernels
price them: the T4's own (the V100's are an SXM2 16 GB card's, which the PCIe card's table does not price)."""
KINDS = (("gemm",), ("bmm",), ("conv",), ("elementwise",), ("norm", "softmax"))


@contextlib.contextmanager
def _unshipped():
    """Inside, the shipped NeuSight tables are set aside: the fitted model prices their cards (the H100: the H200's
    table, kept)."""
    keep = {k: p for k, p in measured_kernels.shipped().items() if k not in SHIPPED}
    measured_kernels.shipped.cache_clear()
    real = measured_kernels.shipped
    measured_kernels.shipped = lambda: keep  # type: ignore[assignment]
    try:
        yield
    finally:
        measured_kernels.shipped = real  # type: ignore[assignment]


def _as_its_own(table: dict | None) -> contextlib.AbstractContextManager[None]:
    """Inside, ``table`` prices its card as the card's own table would (None: the fitted model)."""
    return measured_kernels.stored_tables([] if table is None else [table])


def _errors(gpu: str, table: dict | None) -> dict[str, float]:
    """Each step of ``gpu``: predicted / measured - 1, priced with ``table`` as the GPU's own (None: the model)."""
    with _as_its_own(table):
        return {e.step.name: e.error for e in neusight.step_errors(gpus={gpu})}


def _only(table: dict, kinds: tuple[str, ...]) -> dict:
    """``table`` with only its rows of ``kinds``."""
    return {**table, "kernels": [r for r in table["kernels"] if r["kind"] in kinds]}


def _summary(errors: dict[str, float]) -> dict[str, float]:
    values = [abs(v) for v in errors.values()]
    return {"median": statistics.median(values), "worst": max(values)}


def compare(gpus: tuple[str, ...] = GPUS) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for gpu in gpus:
        table = neusight.kernel_table(gpu)  # (read once: each kind's rows are taken from it)
        model, whole = _errors(gpu, None), _errors(gpu, table)
        per_kind = {"+".join(k): _errors(gpu, _only(table, k)) for k in KINDS}
        out[gpu] = {"steps": {s: {"model": model[s], "own_kernels": whole[s],
                                  **{f"only_{k}": e[s] for k, e in per_kind.items()}} for s in model},
                    "model": _summary(model), "own_kernels": _summary(whole), "kernels": len(table["kernels"])}
    return out


def _forward_errors(gpu: str, table: dict | None) -> dict[str, float]:
    with _as_its_own(table):
        return {st.name: e for st, e in neusight.inference_errors(gpus={gpu})}


def _dle_errors(gpu: str, precision: str, table: dict | None) -> dict[str, float]:
    published = references.INFERENCE_LATENCY_MS[(gpu, precision)]
    with _as_its_own(table):
        return {f"ResNet-50 {precision} batch {b}": references.predicted_inference_ms(gpu, precision, b) / published[b] - 1
                for b in (64, 128, 256)}


def compare_forwards() -> dict[str, dict]:
    """The forwards alone -- what NeuSight's kernels time: its inference steps per GPU, and DeepLearningExamples'
    ResNet-50 inference latencies (batches 64-256, where the GPU sets them), from the fitted model and from the GPU's
    own kernels."""
    out: dict[str, dict] = {}
    for gpu in INFERENCE_GPUS:
        model, own = _forward_errors(gpu, None), _forward_errors(gpu, neusight.kernel_table(gpu))
        out[f"{gpu} (NeuSight inference)"] = {"model": _summary(model), "own_kernels": _summary(own),
                                              "steps": {s: {"model": model[s], "own_kernels": own[s]} for s in model}}
    for (gpu, precision) in references.INFERENCE_LATENCY_MS:
        if gpu in DLE_TABLES:
            model = _dle_errors(gpu, precision, None)
            own = _dle_errors(gpu, precision, neusight.kernel_table(DLE_TABLES[gpu]))
            out[f"{gpu} ResNet-50 {precision} (DLE inference)"] = {
                "model": _summary(model), "own_kernels": _summary(own),
                "steps": {s: {"model": model[s], "own_kernels": own[s]} for s in model}}
    return out


def markdown(result: dict[str, dict]) -> list[str]:
    lines = ["| GPU | its kernels | steps | fitted model: median / worst | its own kernels as its table | "
             "of which GEMMs alone |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for gpu, r in result.items():
        gemm = _summary({s: v["only_gemm"] for s, v in r["steps"].items()})
        lines.append(f"| {gpu} | {r['kernels']:,} | {len(r['steps'])} | {r['model']['median']:.0%} / "
                     f"{r['model']['worst']:.0%} | {r['own_kernels']['median']:.0%} / {r['own_kernels']['worst']:.0%}"
                     f" | {gemm['median']:.0%} / {gemm['worst']:.0%} |")
    return lines


def forwards_markdown(result: dict[str, dict]) -> list[str]:
    lines = ["| forwards | steps | fitted model: median / worst | its own kernels as its table |",
             "| --- | ---: | ---: | ---: |"]
    for name, r in result.items():
        lines.append(f"| {name} | {len(r['steps'])} | {r['model']['median']:.0%} / {r['model']['worst']:.0%} | "
                     f"{r['own_kernels']['median']:.0%} / {r['own_kernels']['worst']:.0%} |")
    return lines


def write() -> list[Path]:
    """The shipped tables, gzipped CSV (deterministic: no timestamp in the gzip header)."""
    out = []
    for gpu in SHIPPED:
        path = measured_kernels.TABLES_DIR / f"{gpu}.csv.gz"
        path.write_bytes(gzip.compress(to_csv(neusight.kernel_table(gpu)).encode(), mtime=0))
        out.append(path)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the per-step errors here")
    ap.add_argument("--write", action="store_true", help=f"write the shipped tables ({', '.join(SHIPPED)})")
    args = ap.parse_args()
    if args.write:
        for path in write():
            print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    with _unshipped():
        result = compare()
        forwards = compare_forwards()
    print("\n".join(markdown(result)))
    print()
    print("\n".join(forwards_markdown(forwards)))
    for gpu, r in result.items():
        for step, e in r["steps"].items():
            kinds = " ".join(f"{k.removeprefix('only_')} {v:+.0%}" for k, v in e.items() if k.startswith("only_"))
            print(f"{gpu:16s} {step:28s} fitted model {e['model']:+.0%}, own kernels {e['own_kernels']:+.0%} ({kinds})")
    if args.json:
        args.json.write_text(json.dumps({"training": result, "forwards": forwards}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
