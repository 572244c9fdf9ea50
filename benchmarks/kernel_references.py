"""The kernel models on every measured kernel of the references -- NeuSight's published fp32 kernels on 8 GPUs
(``references/neusight/kernels``) and OpenXLA's measured bf16/TF32 GEMMs on an H100 SXM (``references/xla_matmul``) --:
median and 90th-percentile |error| per op class and GPU. The constants are fitted on all of them (``--fit``); whole
training steps check them (benchmarks/predict_references.py). No GPU is used: predictions beside published
measurements, the same on every machine.

    python benchmarks/kernel_references.py            # the error table (Markdown), from the committed constants
    python benchmarks/kernel_references.py --fit      # fit the constants first: writes calibration.json and the
                                                      # GPUs' matmul ceilings (matmul_ceilings.json, from MAMF)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (predict_checks: the checkout's root)

from predict_checks import fit, kernel_tables, mamf, neusight, xla

from ampbench.predict.kernels import CALIBRATION_FILE, Calibration, calibration, save_calibration
from ampbench.predict.measured_kernels import TABLES_DIR

GOAL_MEDIAN, GOAL_P90 = 0.15, 0.35
"""The predict issue's goal on the GPUs that only check the constants: median |error| <= 15% per op class, p90 <=
35%."""


def table(errors: list[fit.Errors]) -> list[str]:
    lines = ["| GPU | role | op class | kernels | median abs error | p90 abs error | median signed | goal met |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    order = {g: i for i, g in enumerate((*neusight.FIT_GPUS, *neusight.CHECK_GPUS))}
    for e in sorted(errors, key=lambda e: (order.get(e.gpu, 99), e.op_class)):
        fitted = (e.gpu in neusight.FIT_GPUS or e.gpu in kernel_tables.GPUS) and e.op_class not in fit.NOT_FITTED
        role = "fitted on" if fitted else "not fitted on"
        met = "" if fitted else ("yes" if e.median <= GOAL_MEDIAN and e.p90 <= GOAL_P90 else "**no**")
        lines.append(f"| {e.gpu} | {role} | {e.op_class} | {e.n:,} | {e.median:.0%} | {e.p90:.0%} | "
                     f"{e.signed_median:+.0%} | {met} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the constants on every measured kernel and write them")
    ap.add_argument("--json", type=Path, help="also write the error rows here")
    args = ap.parse_args()
    cases = neusight.kernel_cases() + xla.kernel_cases() + kernel_tables.gemm_cases()
    if args.fit:
        t0 = time.perf_counter()
        mamf.save()  # (first: the Tensor Core cases of other GPUs are priced through it)
        fitted = [c for c in cases if c.gpu in neusight.FIT_GPUS or c.gpu in kernel_tables.GPUS]
        cal = fit.fit_all(fitted, Calibration())
        convs = TABLES_DIR / "h200.csv"  # (the Tensor Core convolutions: a GPU's own measured kernels)
        cal = dataclasses.replace(cal, tensor_conv_efficiency=fit.tensor_conv_share(convs, cal))
        save_calibration(cal, {
            "fitted_on": list(neusight.FIT_GPUS), "fitted": sorted([*fit.FITTED, "tensor_conv_efficiency"]),
            "not_fitted": {name: "prior (see predict/kernels.py)" for name in Calibration.names()
                           if name not in fit.FITTED and name != "tensor_conv_efficiency"},
            "data": "references/neusight/kernels (NeuSight, MIT): linear, bmm, conv, elem, ln, softmax; fp32, TF32 off; "
                    "references/xla_matmul (OpenXLA, Apache-2.0): H100 SXM batched GEMMs in bf16 (its TF32 ones reported, "
                    "not fitted on: slower than cuBLAS's); the lent H200's plain cuBLAS GEMMs in fp16, bf16, TF32, four "
                    "sweeps of three leases (predict/calibration/h200.csv, benchmarks/results/h200/lease3/calibration.csv, "
                    "benchmarks/results/h200/truth/calibration*.csv: "
                    "the tensor_* and tf32_* constants; other GPUs' Tensor Core share scaled by "
                    "references/mamf, matmul_ceilings.json)",
            "tensor_conv_efficiency": f"fitted on {convs.relative_to(convs.parents[4])} (dense windowed fp16/bf16 "
                                      "channels-last convolutions)",
            "kernels_fitted_on": len(fitted), "protocol": "benchmarks/kernel_references.py --fit; docs/predict.md",
        })
        print(f"fitted {len(fit.FITTED)} constants on {len(fitted):,} kernels in {time.perf_counter() - t0:.0f} s: "
              f"{CALIBRATION_FILE}")
    errors = fit.errors(cases, calibration())
    print("\n".join(table(errors)))
    if args.json:
        args.json.write_text(json.dumps([e.__dict__ for e in errors], indent=1))


if __name__ == "__main__":
    main()
