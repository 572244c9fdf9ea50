"""The kernel models on every measured kernel of the references (NeuSight's published fp32 kernels on 8 GPUs,
``references/neusight/kernels``): median and 90th-percentile |error| per op class and GPU, the GPUs the constants were
fitted on (P4, P100, T4, V100) apart from those that only check them (A100, H100, L4). No GPU is used: predictions
beside published measurements, the same on every machine.

    python benchmarks/kernel_references.py            # the error table (Markdown), from the committed constants
    python benchmarks/kernel_references.py --fit      # fit the constants on P4/P100/T4/V100 first, write calibration.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (predict_checks: the checkout's root)

from predict_checks import fit, neusight

from ampbench.predict.kernels import CALIBRATION_FILE, Calibration, calibration, save_calibration

GOAL_MEDIAN, GOAL_P90 = 0.15, 0.35
"""The predict issue's goal on the GPUs that only check the constants: median |error| <= 15% per op class, p90 <=
35%."""


def table(errors: list[fit.Errors]) -> list[str]:
    lines = ["| GPU | role | op class | kernels | median abs error | p90 abs error | median signed | goal met |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    order = {g: i for i, g in enumerate((*neusight.FIT_GPUS, *neusight.CHECK_GPUS))}
    for e in sorted(errors, key=lambda e: (order.get(e.gpu, 99), e.op_class)):
        role = "fitted on" if e.gpu in neusight.FIT_GPUS else "checked"
        met = "" if role == "fitted on" else ("yes" if e.median <= GOAL_MEDIAN and e.p90 <= GOAL_P90 else "**no**")
        lines.append(f"| {e.gpu} | {role} | {e.op_class} | {e.n:,} | {e.median:.0%} | {e.p90:.0%} | "
                     f"{e.signed_median:+.0%} | {met} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the constants on P4/P100/T4/V100 and write them")
    ap.add_argument("--json", type=Path, help="also write the error rows here")
    args = ap.parse_args()
    cases = neusight.kernel_cases()
    if args.fit:
        t0 = time.perf_counter()
        fitted = [c for c in cases if c.gpu in neusight.FIT_GPUS]
        cal = fit.fit(fitted, Calibration())
        save_calibration(cal, {
            "fitted_on": list(neusight.FIT_GPUS), "fitted": sorted(fit.FITTED),
            "not_fitted": {name: "prior (see predict/kernels.py)" for name in Calibration.names() if name not in fit.FITTED},
            "data": "references/neusight/kernels (NeuSight, MIT): linear, bmm, conv, elem, ln, softmax; fp32, TF32 off",
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
