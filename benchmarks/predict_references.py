"""The error table of docs/predict.md: ``ampbench predict``'s method on the published single-GPU results it is checked
against (NVIDIA DeepLearningExamples; predict/references.py), printed as Markdown. No GPU is used: the figures are
predictions beside published measurements, the same on every machine.

    python benchmarks/predict_references.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ampbench.predict.references import REFERENCES, predicted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = []
    print("| model | GPU | precision (batch) | published /s | predicted /s | error | published speedup | predicted | error |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for ref in REFERENCES:
        p = predicted(ref)
        half = next(k for k in ref.samples_per_s if k != ref.baseline)
        speed_pub, speed_pred = ref.speedup(half), p[half] / p[ref.baseline]
        for precision, published in ref.samples_per_s.items():
            err = p[precision] / published - 1
            speed = (f"{speed_pub:.2f}x | {speed_pred:.2f}x | {speed_pred / speed_pub - 1:+.0%}" if precision == half
                     else " | | ")
            print(f"| {ref.name} | {ref.gpu} | {precision} ({ref.batch_size[precision]}) | {published:,.0f} | "
                  f"{p[precision]:,.0f} | {err:+.0%} | {speed} |")
            rows.append({"reference": ref.name, "gpu": ref.gpu, "precision": precision,
                         "batch_size": ref.batch_size[precision], "published_samples_per_s": published,
                         "predicted_samples_per_s": p[precision], "error": err, "source": ref.source})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
