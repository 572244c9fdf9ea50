"""Diagnostics: where NaN/Inf starts, gradient underflow and the right loss scale, overflow-prone
layers, the per-layer fp32 policy, Tensor Core friendliness, and why there is no speedup.

    from ampbench.diagnose import diagnose
    d = diagnose("bert", "amp-fp16", preset="tiny")          # or a callable returning a Workload
    for f in d.findings: print(f.severity, f.title, f.fix)
"""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ampbench.diagnose import fp8, nonfinite, policy, profile, ranges, tensorcore
from ampbench.diagnose.findings import Finding, check_done, check_started, ordered
from ampbench.diagnose.fixes import FixChecker
from ampbench.errors import AmpbenchError, TrainingDivergedError, suggest
from ampbench.measure.env import device_name, resolve_device
from ampbench.measure.trainable import check_trainable
from ampbench.precision import get, is_fp8, resolve, supported
from ampbench.precision.setup_checks import HalfEpsWarning
from ampbench.workloads import create_workload
from ampbench.workloads.base import Workload, seeded

CHECKS = ("nonfinite", "gradients", "activations", "policy", "tensorcore", "profile", "fp8")
"""fp8 applies to the fp8 modes only (``checks=None``: every check that applies to the mode)."""


@dataclass
class Diagnosis:
    target: str
    precision: str
    device: str
    device_name: str
    batch_size: int
    findings: list[Finding]
    details: dict[str, Any] = field(default_factory=dict)
    """Raw results per check (histograms, per-layer ranges, profile shares, policy trials)."""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "precision": self.precision, "device": self.device,
                "device_name": self.device_name, "batch_size": self.batch_size, "seconds": self.seconds,
                "findings": [f.to_dict() for f in self.findings], "details": self.details}


def applicable_checks(precision: str) -> tuple[str, ...]:
    """Every check that applies to ``precision`` (the default): fp8 only for the fp8 modes."""

    return tuple(c for c in CHECKS if c != "fp8" or is_fp8(precision))


def parse_checks(value: str | None) -> tuple[str, ...]:
    if value is None:
        return CHECKS
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [c for c in items if c not in CHECKS]
    if bad or not items:
        hint = suggest(bad[0], CHECKS) if bad else ""
        raise AmpbenchError(f"--checks {value!r}: unknown check {', '.join(bad) or '(empty)'}.{hint} "
                            f"Choose from {','.join(CHECKS)}")
    return tuple(c for c in CHECKS if c in items)


def _first_build(target: str | Callable[[], Workload], preset: str, seed: int,
                 options: dict[str, Any]) -> Workload:

    if isinstance(target, str):
        return create_workload(target, preset, None, seed, **options)
    with seeded(seed):
        wl = target()
    if not isinstance(wl, Workload):
        raise AmpbenchError(f"diagnose target returned {type(wl).__name__}, expected an ampbench Workload")
    return wl


@dataclasses.dataclass(frozen=True)
class CheckContext:
    """What every check is given: a builder of fresh copies of the workload, the mode and its recipe, the device,
    batch size and steps, the half dtype's name, the fix checker and the fp8 options, the profile's trace path."""

    build: Callable[[], Workload]
    precision: str
    recipe: Any
    dev: torch.device
    bs: int
    steps: int
    half16: str
    fixes: Any
    mp_options: dict[str, Any] | None
    trace: Path | None


def _nonfinite(c: CheckContext) -> tuple[Any, list[Finding]]:
    r = nonfinite.locate_nonfinite(c.build(), c.precision, c.dev, c.bs, c.steps, mp_options=c.mp_options)
    return r, nonfinite.nonfinite_findings(r, c.precision, c.fixes.fix_text)


def _gradients(c: CheckContext) -> tuple[Any, list[Finding]]:
    settled = ranges.dynamic_settle(c.build(), c.dev, c.bs, c.steps)
    scaling = c.recipe.default_loss_scale  # what the diagnosed mode trains with
    in_use = (settled["scale"] if scaling == "dynamic" else
              float(scaling.split(":", 1)[1]) if scaling.startswith("static:") else None)
    r = ranges.gradient_ranges(c.build(), c.dev, c.bs, in_use if c.half16 == "fp16" and c.recipe.is_half else None)
    r["dynamic"] = settled
    return r, ranges.gradient_findings(r, settled, c.half16 if c.recipe.is_half else None, scaling)


def _activations(c: CheckContext) -> tuple[Any, list[Finding]]:
    acts = ranges.activation_ranges(c.build(), c.dev, c.bs)
    return acts, ranges.activation_findings(acts, c.fixes.fix_text)


def _policy(c: CheckContext) -> tuple[Any, list[Finding]]:
    master = f"master-{c.half16}"
    pr = policy.find_policy(c.build, c.dev, c.bs, c.steps, precision=master)
    bf16 = c.half16 == "fp16" and supported("amp-bf16", c.dev).ok
    found = policy.policy_findings(pr, (lambda: c.fixes.mode_text("amp-bf16")) if bf16 else None)
    if c.recipe.is_half and c.precision != master and not c.mp_options:  # (the mode asked about, trained beside
        # fp32 itself: the search above is master-*'s, and an amp mode can differ from fp32 with nothing non-finite)
        other = c.precision != "amp-bf16" and supported("amp-bf16", c.dev).ok  # (pure-bf16 too: amp-bf16 is the try)
        found.insert(0, policy.mode_finding(c.precision, c.fixes.mode_trial(c.precision), c.fixes.fp32_loss, c.steps,
                                            (lambda: c.fixes.mode_text("amp-bf16")) if other else None))
    return pr.to_dict(), found


def _tensorcore(c: CheckContext) -> tuple[Any, list[Finding]]:
    wl = c.build()
    facts = tensorcore.forward_facts(wl, c.dev, c.bs)
    issues = tensorcore.lint_dims(wl.model, c.bs, facts=facts)
    return issues, tensorcore.tensorcore_findings(issues, c.dev.type == "cuda", len(tensorcore.slivers(wl.model, facts)))


def _fp8(c: CheckContext) -> tuple[Any, list[Finding]]:
    r = fp8.fp8_layer_stats(c.build(), c.precision, c.dev, c.bs, c.steps, c.mp_options)
    return r, fp8.fp8_findings(r, c.precision)


def _profile(c: CheckContext) -> tuple[Any, list[Finding]]:
    p = profile.profile_steps(c.build(), c.precision, c.dev, c.bs, min(c.steps, 10), c.trace,
                              baseline=c.build() if c.precision != "fp32" else None, mp_options=c.mp_options)
    return p, profile.profile_findings(p, c.recipe.is_half)


RUNNERS: dict[str, Callable[[CheckContext], tuple[Any, list[Finding]]]] = {
    "nonfinite": _nonfinite, "gradients": _gradients, "activations": _activations, "policy": _policy,
    "tensorcore": _tensorcore, "fp8": _fp8, "profile": _profile}
"""The checks, by name: each takes the context and returns (its details, its findings). A check is one entry."""


def diagnose(target: str | Callable[[], Workload], precision: str = "amp-fp16", *, steps: int = 20,
             preset: str = "small", batch_size: int | None = None, device: str | None = None, seed: int = 0,
             checks: tuple[str, ...] | None = None, trace: Path | None = None, name: str | None = None,
             options: dict[str, Any] | None = None, mp_options: dict[str, Any] | None = None,
             on_progress: Callable[[str], None] | None = None) -> Diagnosis:
    """Run the checks on a workload (name) or a builder returning a fresh :class:`Workload` each call.

    The workload is built once; every check trains its own copy of the untouched model (same init, same
    data), so the checks do not disturb each other. ``mp_options``: the fp8 modes' fp8_skip/fp8_filter.
    A check that fails becomes an error finding; the others still run. ``on_progress`` gets a line as each check
    starts and ends (its seconds, its findings), and first, where the mode runs here but not fast (its math emulated:
    fp16 on most CPUs), that it does: each check trains its own steps, and there they can take minutes.
    """
    say = on_progress or (lambda _line: None)

    precision = resolve(precision)
    dev = resolve_device(device)
    sup = supported(precision, dev)
    if not sup.ok:
        raise AmpbenchError(f"--precision {precision} cannot run on {dev}: {sup.reason}")
    if steps < 1:
        raise AmpbenchError(f"--steps must be >= 1, got {steps}")
    if batch_size is not None and batch_size < 1:
        raise AmpbenchError(f"--batch-size must be >= 1, got {batch_size}")
    # Built (data read, model initialised) once; every check gets a deep copy of the untouched model.
    first = _first_build(target, preset, seed, options or {})
    check_trainable(first.model, first.make_optimizer, name or (target if isinstance(target, str) else first.name))
    pristine = first.model

    def build() -> Workload:
        # Every check and trial trains from the same RNG state, so a model's dropout draws the same masks in each:
        # "from the same init on the same batches" holds for its random ops too. (Unseeded, a transformer whose
        # pure-fp16 loss overflowed at step 9 in one check trained 20 clean steps in the next: the mode's trial said
        # "it went non-finite" while the non-finite check said "no NaN/Inf in 20 steps".)
        torch.manual_seed(seed)
        return dataclasses.replace(first, model=copy.deepcopy(pristine))

    bs = batch_size or first.batch_size
    label = name or (target if isinstance(target, str) else first.name)
    recipe = get(precision)
    if checks is None:
        checks = applicable_checks(precision)
    elif "fp8" in checks and not recipe.is_fp8:
        raise AmpbenchError(f"--checks fp8 diagnoses the fp8 modes (fp8-tensorwise, fp8-rowwise, fp8-rowwise-gw-hp), "
                            f"not {precision}")
    half16 = "bf16" if recipe.compute_dtype == torch.bfloat16 else "fp16"
    fixes = FixChecker(build, dev, bs, steps, precision)  # every module-level fix offered is one it tried
    findings: list[Finding] = []
    details: dict[str, Any] = {}
    t0 = time.perf_counter()
    for note in recipe.kernel_fallbacks([copy.deepcopy(pristine)], dev):  # what setup() will change, on a copy
        findings.append(Finding("warning", "fallback", f"kernel fallback in {precision} on {dev}: {note}",
                                "the precision is honoured (the same math in the same dtype) on another kernel, which "
                                "can be slower: speed here says nothing about a GPU", "", {"fallback": note}))
    ctx = CheckContext(build, precision, recipe, dev, bs, steps, half16, fixes, mp_options, trace)
    if sup.note:  # (a mode that runs here but not fast: emulated fp16 on most CPUs, fp8 through torchao on a CPU)
        say(f"{precision} on {dev}: {sup.note}; each check trains its own steps (--steps {steps}): expect them to "
            "take long")
    caught: list[warnings.WarningMessage] = []
    # (the checks reseed torch's RNG, build() above: the caller's state is left as it was)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        for i, check in enumerate(checks, 1):
            say(check_started(i, len(checks), check))
            started, before = time.perf_counter(), len(findings)
            try:
                with warnings.catch_warnings(record=True) as heard:
                    warnings.simplefilter("always")
                    try:
                        details[check], found = RUNNERS[check](ctx)
                    finally:
                        caught += heard
                findings += found
            except AmpbenchError:
                raise
            except TrainingDivergedError as e:  # (a check that must train cannot measure a mode that diverges: not broken)
                findings.append(Finding("info", check, f"the {check} check could not run: {precision} diverged here "
                                        f"({str(e).splitlines()[0]})", "", "the NaN/Inf findings say where it starts"))
            except Exception as e:  # one broken check must not hide the others' findings
                findings.append(Finding("error", check, f"the {check} check failed: {type(e).__name__}: {e}".splitlines()[0]))
            say(check_done(i, len(checks), check, time.perf_counter() - started, len(findings) - before))
        findings += setup_findings(caught, fixes, precision)  # (inside: a fix it verifies trains from build())
    if fixes.record()["tried"]:
        details["fixes"] = fixes.record()
    return Diagnosis(label, precision, str(dev), device_name(dev), bs, ordered(findings), details,
                     time.perf_counter() - t0)


_PACKAGE = str(Path(__file__).resolve().parent.parent)


def setup_findings(caught: list[warnings.WarningMessage], fixes: FixChecker | None = None,
                   precision: str | None = None) -> list[Finding]:
    """The engine's own warnings while the checks set the mode up (Adam's eps that is 0 in fp16, say) as findings,
    once each: they are diagnoses (a half Adam's eps=1e-8 is why its updates turn inf), and as Python warnings they
    were a raw "UserWarning" and a source line between the progress lines. Other libraries' warnings are shown as
    they were raised, once each. A half eps's master-* fix is tried (``fixes``: the master mode of ``precision``'s
    half type, trained as the other fixes are) and said verified or not, as every fix diagnose offers; the larger eps
    is said untried (a user's optimizer is rebuilt by their own code)."""
    out: list[Finding] = []
    seen: set[tuple[Any, str]] = set()
    for w in caught:
        key = (w.category, str(w.message))
        if key in seen:
            continue
        seen.add(key)
        if str(Path(w.filename).resolve()).startswith(_PACKAGE):
            head, _, fix = str(w.message).partition(". ")
            fix = fix[:1].lower() + fix[1:]
            if issubclass(w.category, HalfEpsWarning) and fixes is not None and precision is not None:
                master = "master-bf16" if "bf16" in precision else "master-fp16"
                fix = f"a master-* mode: {fixes.mode_text(master)}; or a larger eps (e.g. 1e-4), not tried here"
            out.append(Finding("warning", "setup", head, "said by the precision engine as it set the mode up", fix))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out


__all__ = ["CHECKS", "Diagnosis", "Finding", "applicable_checks", "diagnose", "parse_checks"]
