"""Every error table of docs/predict.md: ``ampbench predict``'s models beside published GPU measurements, printed as
Markdown. No GPU is used: predictions beside published measurements, the same on every machine.

1. Kernels: NeuSight's fp32 kernels on 8 GPUs (benchmarks/kernel_references.py prints the same table; ``--fit`` there
   refits the constants on every measured kernel).
2. Training steps: NeuSight's fp32 forward + backward of Hugging Face models on V100, A100, H100 and L4, beside the
   error NeuSight itself published for each row.
3. NVIDIA DeepLearningExamples' single-GPU TF32/FP32 and AMP results.
4. Our own workloads measured on a lent GPU (benchmarks/results/<gpu>/runs.json; ``predict_checks.measured``).
5. Published torch.compile gains (Hugging Face's inference guide; ``predict_checks.compile_references``).
6. Published whole-step float8 training gains (torchao's README: torchtitan's Llama3-8B on 8 H100s;
   ``predict_checks.fp8_step_references``).
7. Published FSDP2 throughput over several machines (torchtitan's Llama 3 8B on 64 A100s;
   ``predict_checks.fsdp_references``).
8. One model on twelve GPUs: Lambda's published ResNet-50 training throughput, FP32 and AMP
   (``predict_checks.lambda_references``).

    python benchmarks/predict_references.py [--json FILE] [--write-bands]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (predict_checks: the checkout's root)

from predict_checks import (
    compile_references,
    error_bands,
    fit,
    fp8_step_references,
    fsdp_references,
    kernel_tables,
    lambda_references,
    measured,
    neusight,
    xla,
)
from predict_checks.references import REFERENCES, Reference, predicted, resnet50_amp_a100_over_v100

from ampbench.measure.gpus import predictable
from ampbench.predict import bands
from ampbench.predict.kernels import calibration
from kernel_references import table as kernel_table  # (benchmarks/ is the script's directory)


def step_table(errors: list[neusight.StepError]) -> list[str]:
    lines = ["| GPU | model | seq | batch | measured ms | predicted ms | error | forward error | NeuSight's | roofline's |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e in errors:
        st = e.step
        ns, roof = e.theirs.get("NeuSight"), e.theirs.get("Roofline")
        lines.append(f"| {st.gpu} | {st.model} | {st.seq} | {st.batch} | {st.total_ms:,.1f} | {e.predicted_ms:,.1f} | "
                     f"{e.error:+.0%} | {e.predicted_forward_ms / st.forward_ms - 1:+.0%} | "
                     f"{'-' if ns is None else f'{ns:.1f}%'} | {'-' if roof is None else f'{roof:.1f}%'} |")
    lines += ["", "| GPU | steps | median abs error | worst | goal (median <= 10%, worst <= 25%) | rows NeuSight beats | "
              "rows the roofline beats |", "| --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for gpu in dict.fromkeys(e.step.gpu for e in errors):
        es = [abs(x.error) for x in errors if x.step.gpu == gpu]
        beaten = {m: sum(1 for x in errors if x.step.gpu == gpu and m in x.theirs and x.theirs[m] < 100 * abs(x.error))
                  for m in ("NeuSight", "Roofline")}
        median = sorted(es)[len(es) // 2] if len(es) % 2 else sum(sorted(es)[len(es) // 2 - 1:len(es) // 2 + 1]) / 2
        met = "yes" if median <= 0.10 and max(es) <= 0.25 else "**no**"
        lines.append(f"| {gpu} | {len(es)} | {median:.0%} | {max(es):.0%} | {met} | {beaten['NeuSight']} of {len(es)} | "
                     f"{beaten['Roofline']} of {len(es)} |")
    return lines


def amp_table(predict: Callable[[Reference], dict[str, float]] = predicted) -> tuple[
        list[str], list[float], list[dict[str, object]]]:
    lines = ["| model | GPU | precision (batch) | published /s | predicted /s | error | published speedup | predicted "
             "| error |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    errors, rows = [], []
    for ref in REFERENCES:
        p = predict(ref)
        half = next(k for k in ref.samples_per_s if k != ref.baseline)
        speed_pub, speed_pred = ref.speedup(half), p[half] / p[ref.baseline]
        for precision, published in ref.samples_per_s.items():
            err = p[precision] / published - 1
            if not ref.grouped:  # (the grouped networks' errors are their own band's: error_bands.compute)
                errors.append(abs(err))
            speed = (f"{speed_pub:.2f}x | {speed_pred:.2f}x | {speed_pred / speed_pub - 1:+.0%}" if precision == half
                     else " | | ")
            layout = ", channels-last" if ref.channels_last[precision] else ""
            lines.append(f"| {ref.name} | {ref.gpu} | {precision} ({ref.batch_size[precision]}{layout}) | "
                         f"{published:,.0f} | {p[precision]:,.0f} | {err:+.0%} | {speed} |")
            rows.append({"reference": ref.name, "gpu": ref.gpu, "precision": precision, "grouped": ref.grouped,
                         "batch_size": ref.batch_size[precision], "published_samples_per_s": published,
                         "predicted_samples_per_s": p[precision], "error": err, "source": ref.source})
    return lines, errors, rows


DOCS = Path(__file__).resolve().parents[1] / "docs" / "predict.md"


def measured_table(steps: tuple[measured.MeasuredStep, ...]) -> list[str]:
    """Our workloads measured on a lent GPU beside their predictions: step and peak memory."""
    lines = ["| GPU | target | batch | precision | measured ms | predicted ms | error | set by (predicted) | "
             "measured peak MiB | predicted MiB | error |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for s in steps:
        target = s.workload.rsplit(":", 1)[-1] + (" channels-last" if s.memory_format == "channels_last" else "")
        how = [*(["compiled"] if s.compile != "off" else []), *(["CUDA graphs"] if s.cuda_graphs == "on" else []),
               *([f"{s.checkpointing} checkpointed"] if s.checkpointing != "off" else [])]
        target += f" ({s.preset}{''.join(', ' + h for h in how)})"
        batch = f"{s.batch_size} x {s.grad_accum}" if s.grad_accum != 1 else f"{s.batch_size}"
        lines.append(f"| {s.gpu} | {target} | {batch} | {s.precision} | {s.measured_ms:.2f} | "
                     f"{s.predicted_ms:.2f} | {s.error:+.0%} | {s.bound} | {s.measured_peak_bytes / 2**20:,.0f} | "
                     f"{s.predicted_peak_bytes / 2**20:,.0f} | {s.memory_error:+.0%} |")
    by: dict[str, list[float]] = {}
    for s in steps:
        by.setdefault("launch-bound" if s.bound == "launch" else "set by the GPU", []).append(abs(s.error))
    lines += ["", "| steps | n | median abs error | worst |", "| --- | ---: | ---: | ---: |"]
    for kind, errors in sorted(by.items()):
        errors.sort()
        lines.append(f"| {kind} | {len(errors)} | {errors[len(errors) // 2]:.0%} | {errors[-1]:.0%} |")
    return lines


def compile_table(rows: list[compile_references.CompileRow]) -> list[str]:
    """Published torch.compile gains beside the predicted ones (the checked rows: the GPU sets them)."""
    lines = ["| GPU | model | batch | published eager / compiled ms | gain | predicted eager / compiled ms | gain | "
             "gain error | |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in sorted(rows, key=lambda r: (r.gpu, r.model, r.batch)):
        verdict = "met" if abs(r.gain_error) <= compile_references.GAIN_GOAL else "missed"
        lines.append(f"| {r.gpu} | {r.model} | {r.batch} | {r.eager_ms:.1f} / {r.compiled_ms:.1f} | {r.gain:.2f}x | "
                     f"{r.predicted_eager_ms:.1f} / {r.predicted_compiled_ms:.1f} | {r.predicted_gain:.2f}x | "
                     f"{r.gain_error:+.1%} | {verdict} |")
    return lines


def fp8_step_table(rows: list[fp8_step_references.Fp8StepRow]) -> list[str]:
    """Published whole-step float8 gains (torchtitan's Llama3-8B on 8 H100s) beside the predicted ones."""
    lines = ["| mode | published tokens/s per GPU | gain | predicted tokens/s per GPU | gain | gain error | |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        verdict = "baseline" if r.precision == "amp-bf16" else (
            "met" if abs(r.gain_error) <= fp8_step_references.GAIN_GOAL else "missed")
        lines.append(f"| {r.precision} | {r.tokens_s:,.0f} | {r.gain:.2f}x | {r.predicted_tokens_s:,.0f} "
                     f"({r.tokens_error:+.0%}) | {r.predicted_gain:.2f}x | {r.gain_error:+.1%} | {verdict} |")
    return lines


def fsdp_table(rows: list[fsdp_references.FsdpRow]) -> list[str]:
    """Published FSDP2 throughput over several machines (torchtitan's Llama 3 8B on 64 A100s) beside the predicted."""
    lines = ["| activation checkpointing | published tokens/s per GPU | predicted (64 GPUs) | error | predicted on one "
             "machine (8 GPUs) | |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        verdict = "met" if abs(r.error) <= fsdp_references.GOAL else "missed"
        lines.append(f"| {r.checkpointing} | {r.tokens_s:,.0f} | {r.predicted_tokens_s:,.0f} | {r.error:+.1%} | "
                     f"{r.one_node_tokens_s:,.0f} | {verdict} |")
    return lines


def pairs_table(step_errors: list[neusight.StepError],
                predict: Callable[[Reference], dict[str, float]] = predicted) -> list[str]:
    """One model in one setup on two GPUs: the ratio of their speeds, published beside predicted."""
    lines = ["| published | GPUs (same setup) | precision | published ratio | predicted | error |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    ratio, published = resnet50_amp_a100_over_v100(predict)
    verdict = "met" if abs(ratio / published - 1) <= 0.15 else "missed"
    lines.append(f"| DeepLearningExamples ResNet-50 v1.5 (batch 256, channels-last) | A100 80GB / V100 16GB | amp-fp16 | "
                 f"{published:.2f}x | {ratio:.2f}x | {ratio / published - 1:+.0%} ({verdict}) |")
    for x, y in neusight.STEP_PAIRS:
        errors = sorted(abs(e) for e in neusight.pair_errors(step_errors, x, y))
        median = statistics.median(errors)
        verdict = "met" if median <= 0.15 else "missed"
        lines.append(f"| NeuSight fp32 training steps ({len(errors)} rows) | {y} / {x} | fp32 | per row | per row | "
                     f"median {median:.0%} ({verdict}) |")
    return lines


def lambda_table() -> list[str]:
    """Lambda's ResNet-50 on twelve GPUs: each GPU's images/s, its speed over the V100's and its AMP speedup, published
    beside predicted (``published -> predicted (error)``), then the summary the tests hold."""
    lam = lambda_references

    def cell(published: float, predicted: float, fmt: str) -> str:
        return f"{published:{fmt}} → {predicted:{fmt}} ({predicted / published - 1:+.0%})"

    base = lam.row(lam.BASELINE)
    lines = ["| GPU | batch FP32 / AMP | FP32 images/s | AMP images/s | AMP speedup | FP32 x V100 | AMP x V100 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    b32, b16 = lam.predicted(lam.BASELINE, "fp32"), lam.predicted(lam.BASELINE, "amp-fp16")
    for r in lam.ROWS:
        p32, p16 = lam.predicted(r.gpu, "fp32"), lam.predicted(r.gpu, "amp-fp16")
        ratios = ("|  |  |" if r.gpu == lam.BASELINE else
                  f"| {cell(r.fp32 / base.fp32, p32 / b32, '.2f')} | {cell(r.amp / base.amp, p16 / b16, '.2f')} |")
        lines.append(f"| {r.gpu} | {r.batch('fp32')} / {r.batch('amp-fp16')} | {cell(r.fp32, p32, ',.0f')} | "
                     f"{cell(r.amp, p16, ',.0f')} | {cell(r.amp / r.fp32, p16 / p32, '.2f')} {ratios}")
    others = [r.gpu for r in lam.ROWS if r.gpu != lam.BASELINE]
    lines += ["", "| check (held out) | n | median abs error | within the goal |", "| --- | ---: | ---: | ---: |"]
    for label, errors, goal in (
            ("FP32 speed over the V100's", [lam.ratio_error(g, "fp32") for g in others], 0.20),
            ("AMP speed over the V100's", [lam.ratio_error(g, "amp-fp16") for g in others], 0.20),
            ("AMP speedup over FP32", [lam.speedup_error(r.gpu) for r in lam.ROWS], 0.15)):
        a = [abs(e) for e in errors]
        lines.append(f"| {label} | {len(a)} | {statistics.median(a):.0%} | {sum(e <= goal for e in a)} of {len(a)} "
                     f"(within {goal:.0%}) |")
    for precision, label in (("fp32", "FP32"), ("amp-fp16", "AMP")):
        wrong, pairs = lam.ordering(precision)
        said = ", ".join(f"{a} / {b}" for a, b in wrong) or "none"
        lines.append(f"| which is faster, {label}: GPU pairs published >= {lam.APART - 1:.0%} apart | {pairs} | | "
                     f"{pairs - len(wrong)} of {pairs} ordered as published (not: {said}) |")
    return lines


def all_tables(kernel_errors: list[fit.Errors], step_errors: list[neusight.StepError],
               amp_lines: list[str], lent: tuple[measured.MeasuredStep, ...] = (),
               compiled: list[compile_references.CompileRow] | None = None,
               predict: Callable[[Reference], dict[str, float]] = predicted) -> dict[str, str]:
    """docs/predict.md's tables by name (``<!-- table: NAME -->`` ... ``<!-- end: NAME -->`` there)."""
    steps = step_table(step_errors)
    split = steps.index("")
    return {"kernels": "\n".join(kernel_table(kernel_errors)), "steps": "\n".join(steps[:split]),
            "step-summary": "\n".join(steps[split + 1:]), "amp": "\n".join(amp_lines),
            "measured": "\n".join(measured_table(lent)),
            "compiled": "\n".join(compile_table(compile_references.rows() if compiled is None else compiled)),
            "fp8-step": "\n".join(fp8_step_table(fp8_step_references.rows())),
            "fsdp": "\n".join(fsdp_table(fsdp_references.rows())),
            "lambda": "\n".join(lambda_table()), "pairs": "\n".join(pairs_table(step_errors, predict))}


def with_tables(text: str, tables: dict[str, str]) -> str:
    """``text`` with each marked table replaced by ``tables``' (the markers kept)."""
    for name, table in tables.items():
        start, end = f"<!-- table: {name} -->\n", f"\n<!-- end: {name} -->"
        i, j = text.index(start) + len(start), text.index(end)
        text = text[:i] + table + text[j:]
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--write-bands", action="store_true", help="write predict/error_bands.json from these errors")
    ap.add_argument("--docs", action="store_true", help="write the tables into docs/predict.md")
    args = ap.parse_args()
    kernel_errors = fit.errors(neusight.kernel_cases() + xla.kernel_cases() + kernel_tables.gemm_cases(), calibration())
    step_errors = neusight.step_errors()
    lines, amp_errors, rows = amp_table()
    lent = measured.lent()
    tables = all_tables(kernel_errors, step_errors, lines, lent)
    print("## Kernels\n")
    print(tables["kernels"])
    print("\n## Training steps (fp32, forward + backward)\n")
    print(tables["steps"] + "\n\n" + tables["step-summary"])
    print("\n## Published AMP results (NVIDIA DeepLearningExamples)\n")
    print(tables["amp"])
    print("\n## Our workloads on a lent GPU\n")
    print(tables["measured"])
    print("\n## Published torch.compile gains (Hugging Face)\n")
    print(tables["compiled"])
    print("\n## Published float8 training gains (torchao, torchtitan Llama3-8B)\n")
    print(tables["fp8-step"])
    print("\n## Across GPUs: one setup on two GPUs\n")
    print(tables["pairs"])
    print("\n## One model on twelve GPUs (Lambda's ResNet-50, FP32 and AMP)\n")
    print(tables["lambda"])
    print("\n## Published FSDP2 throughput over several machines (torchtitan, Llama 3 8B on 64 A100s)\n")
    print(tables["fsdp"])
    if args.docs:
        DOCS.write_text(with_tables(DOCS.read_text(), tables))
        print(f"\nwrote the tables into {DOCS}")
    if args.write_bands:
        dle = [(r["gpu"], r["precision"], r["error"]) for r in rows if not r["grouped"]]
        grouped = [(r["gpu"], r["precision"], r["error"]) for r in rows if r["grouped"]]
        specs = {g.key: g for g in predictable()}
        error_bands.save(error_bands.compute(kernel_errors, step_errors, amp_errors, specs,
                                             (*neusight.FIT_GPUS, *kernel_tables.GPUS), list(lent),
                                             compile_references.rows(),
                                             error_bands.published_steps(dle, list(lent)), grouped))
        print(f"\nwrote {bands.BANDS_FILE}")
    if args.json:
        args.json.write_text(json.dumps({"kernels": [e.__dict__ for e in kernel_errors], "amp": rows,
                                         "steps": [{"gpu": e.step.gpu, "model": e.step.model, "seq": e.step.seq,
                                                    "batch": e.step.batch, "measured_ms": e.step.total_ms,
                                                    "predicted_ms": e.predicted_ms, "theirs": e.theirs}
                                                   for e in step_errors]}, indent=1))


if __name__ == "__main__":
    main()
