"""Where NaN/Inf first appears: forward hooks and gradient hooks name the module, the phase and the step.

Forward: a hook on every module checks its outputs; hooks fire as modules finish, children before
parents, so the first module with a non-finite output whose inputs were finite is where it starts
(a parent is named when the bad value comes from its own forward code). Backward: tensor hooks on
each module's inputs and outputs see the gradients flowing through it; the first module whose
output gradient is finite but whose input gradient is not is where it starts (tensor hooks, not
``register_full_backward_hook``, so models with in-place ReLUs work); parameter gradients are
checked as they accumulate. With fp16 loss scaling an inf gradient at a large scale is the scaler
doing its job (the step is skipped and the scale lowered): reported apart, as information.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ampbench import cpuinfo
from ampbench.diagnose import kernel_check
from ampbench.diagnose.findings import Finding
from ampbench.diagnose.first_op import describe, first_nonfinite_op, has_nonfinite, tensors_in, value_range
from ampbench.errors import TrainingDivergedError
from ampbench.measure.step import build_step
from ampbench.precision import get
from ampbench.workloads.base import Workload


class NonFiniteLocator:
    """Install on a model; ``events`` gets the first non-finite forward value and backward gradients."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.step = 0
        self.scale = 1.0
        self.forward_event: dict[str, Any] | None = None
        self.backward_events: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._gout: dict[int, tuple[bool, dict[str, Any] | None]] = {}
        self._handles: list[Any] = []
        for name, m in model.named_modules():
            label = name or "(model)"
            self._handles.append(m.register_forward_pre_hook(self._pre(label)))
            self._handles.append(m.register_forward_hook(self._post(label)))
        for name, p in model.named_parameters():
            if p.requires_grad and hasattr(p, "register_post_accumulate_grad_hook"):
                self._handles.append(p.register_post_accumulate_grad_hook(self._param_hook(name)))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()

    def new_step(self, step: int, scale: float) -> None:
        self.step, self.scale = step, scale
        self._pending = []
        self._gout = {}

    def finish_step(self) -> None:
        """Keep this step's first backward event. Hooks on one tensor fire parent-first, so among the
        modules that saw that same gradient the innermost (deepest name) is where it started."""
        if not self._pending:
            return
        first = self._pending[0]
        same = [e for e in self._pending if e["_gid"] == first["_gid"]]
        best = max(same, key=lambda e: (e["module"].count(".") + (e["module"] != "(model)"), -same.index(e)))
        self.backward_events.append({k: v for k, v in best.items() if k != "_gid"})
        self._pending = []

    def _record_backward(self, event: dict[str, Any], gid: int) -> None:
        event["_gid"] = gid
        self._pending.append(event)

    def _pre(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            ins = tensors_in(args)
            module._ampbench_diag_in = (has_nonfinite(ins), value_range(ins))  # type: ignore[assignment]
            for t in ins:
                if t.requires_grad and t.is_floating_point():
                    t.register_hook(self._grad_in_hook(name, module))

        return hook

    def _post(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            outs = tensors_in(output)
            bad_in, in_range = getattr(module, "_ampbench_diag_in", (False, None))
            if self.forward_event is None and has_nonfinite(outs) and not bad_in:
                self.forward_event = {"phase": "forward", "module": name, "type": type(module).__name__,
                                      "step": self.step, "input": in_range, "output": value_range(outs)}
            for t in outs:
                if t.requires_grad and t.is_floating_point():
                    t.register_hook(self._grad_out_hook(module))

        return hook

    def _grad_out_hook(self, module: nn.Module) -> Callable[[torch.Tensor], None]:
        def hook(g: torch.Tensor) -> None:
            self._gout[id(module)] = (has_nonfinite([g]), value_range([g]))

        return hook

    def _grad_in_hook(self, name: str, module: nn.Module) -> Callable[[torch.Tensor], None]:
        def hook(g: torch.Tensor) -> None:
            if not has_nonfinite([g]):
                return
            bad_out, out_range = self._gout.get(id(module), (False, None))
            if bad_out:
                return  # it came in already non-finite: not this module
            self._record_backward({"phase": "backward", "module": name, "type": type(module).__name__, "step": self.step,
                                   "loss_scale": self.scale, "grad_output": out_range, "grad_input": value_range([g])}, id(g))

        return hook

    def _param_hook(self, name: str) -> Callable[[torch.Tensor], None]:
        def hook(p: torch.Tensor) -> None:
            if p.grad is not None and has_nonfinite([p.grad]):
                self._record_backward({"phase": "backward (parameter gradient)", "module": name.rsplit(".", 1)[0],
                                       "parameter": name, "step": self.step, "loss_scale": self.scale,
                                       "grad": value_range([p.grad])}, id(p))

        return hook


def locate_nonfinite(wl: Workload, precision: str, device: torch.device, batch_size: int, steps: int,
                     loss_scale: str | None = None, mp_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train up to ``steps`` steps in ``precision`` with the locator installed; stop at the first real problem."""

    step = build_step(wl, precision, batch_size, device, loss_scale, mp_options=mp_options)
    loc = NonFiniteLocator(step.model)
    diverged = ""
    handled = 0
    rng: RngState  # (set as each step begins: every event below comes from a step)
    try:
        for i in range(1, steps + 1):
            loc.new_step(i, step.mp.scale)
            rng = _rng_state(device)  # (the step's own: its forward again draws the same dropout masks)
            before = len(loc.backward_events)
            step()
            loc.finish_step()
            if loc.forward_event is not None:
                break
            if len(loc.backward_events) > before:
                ev = loc.backward_events[-1]
                skipped = step.mp.last_step is not None and step.mp.last_step.skipped
                ev["handled_by_scaler"] = bool(skipped and ev["loss_scale"] > 1)
                if ev["handled_by_scaler"]:
                    handled += 1
                else:
                    break
    except TrainingDivergedError as e:
        diverged = str(e)
    finally:
        loc.remove()
    if loc.forward_event is not None:  # which call made it, and where in the user's code (the same batch again)
        loc.forward_event["op"] = first_nonfinite_op(_last_loss(step, wl, rng))
    real = [e for e in loc.backward_events if not e.get("handled_by_scaler")]
    if real and real[0].get("parameter") and loc.forward_event is None:
        real[0]["kernel"] = _kernel(step, wl, real[0], rng)
    return {"forward": loc.forward_event, "backward": real[0] if real else None,
            "handled_overflows": handled, "first_handled": next((e for e in loc.backward_events
                                                                  if e.get("handled_by_scaler")), None),
            "diverged": diverged, "steps_run": loc.step}


RngState = tuple[torch.Tensor, torch.Tensor | None]
"""torch's CPU generator's state, and the CUDA device's where the step runs on one."""


def _rng_state(device: torch.device) -> RngState:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def _set_rng_state(device: torch.device, state: RngState) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def _last_loss(step: Any, wl: Workload, rng: RngState) -> Callable[[], Any]:
    """The last step's forward and loss on its batch, again (under the mode's autocast), from the RNG state that step
    began with: a dropout draws the masks it drew, so the value that went non-finite is made again. (Each call
    resets the state: diagnose runs its checks inside a forked RNG, so no caller's stream is touched.)"""
    inputs, targets = step.batches[(step.calls - 1) % len(step.batches)]

    def forward() -> Any:
        _set_rng_state(step.device, rng)
        with step.mp.autocast():
            return wl.loss_fn(wl.call_model(step.model, inputs), targets)

    return forward


def _kernel(step: Any, wl: Workload, event: dict[str, Any], rng: RngState) -> dict[str, Any] | None:
    """The parameter's gradient computed again from the step's batch, in the step's precision and in fp32
    (:mod:`ampbench.diagnose.kernel_check`); None where it cannot be (the module's output is not one tensor, or the
    recomputation itself failed: the finding then says nothing of the kernel)."""
    try:
        kept = kernel_check.capture(step.model, event["module"], _last_loss(step, wl, rng), float(step.mp.scale))
        if kept is None:
            return None
        k = kernel_check.recompute(step.model, event["module"], event["parameter"], *kept, step.mp.autocast)
        return {**k, "device": kept[1].device.type}
    except Exception:  # (a diagnosis must not fail on its second opinion)
        return None


def _fmt_range(r: dict[str, Any] | None) -> str:
    if not r:
        return "?"
    span = "no finite values" if r["finite_min"] is None else f"finite range [{r['finite_min']:.3g}, {r['finite_max']:.3g}]"
    return f"{r['dtype']} {span}, {r['nan']} NaN, {r['inf']} Inf"


def nonfinite_findings(r: dict[str, Any], precision: str, verify: Callable[..., str] | None = None) -> list[Finding]:
    """``verify(module)``: the fix diagnose tried and saw work (:class:`ampbench.diagnose.fixes.FixChecker`); without
    it the findings point at the module and offer no fix they have not tried."""

    half = get(precision).is_half
    out = []
    f, b = r["forward"], r["backward"]
    if f is not None:
        if not half:
            fix = f"NaN/Inf in {precision} itself: the bug is in {f['module']} (its inputs, weights or operations)"
        else:
            fix = verify(f["module"]) if verify is not None else "not verified: run ampbench diagnose to try fixes"
        op = f.get("op")
        made = f" -- made by {describe(op)}" if op else ""
        out.append(Finding(
            "error", "nonfinite", f"NaN/Inf first appears in the forward of {f['module']} ({f['type']}) at step {f['step']}",
            f"inputs: {_fmt_range(f['input'])}; outputs: {_fmt_range(f['output'])}{made}", fix, f))
    if b is not None and f is not None and b["step"] >= f["step"]:
        b = None  # (the backward of a step whose forward already made NaN/Inf: its consequence, not a second cause)
    if b is not None:
        where = f"{b['module']}" + (f" (parameter {b['parameter']})" if b.get("parameter") else f" ({b.get('type')})")
        detail = (f"gradient coming in: {_fmt_range(b.get('grad_output'))}; going out: {_fmt_range(b.get('grad_input'))}"
                  if "grad_input" in b else f"gradient: {_fmt_range(b.get('grad'))}")
        fix = "look at that module's backward (custom autograd functions, sqrt/log/div of values near 0)"
        if half and verify is not None:
            fix += "; " + verify(b["module"], False)
        k = b.get("kernel")
        if k is not None and not k["fault"] and k["fp32_finite"] and k["in_range"]:
            detail += (f"; computed again {k['calls']} times from the same input and output gradient, it was finite "
                       "and matched fp32's each time: this step's values, not the kernel")
        out.append(Finding("error", "nonfinite",
                           f"NaN/Inf first appears in the backward of {where} at step {b['step']} "
                           f"(loss scale {b['loss_scale']:g})", detail, fix, b))
        if k is not None and k["fault"]:
            out.append(_kernel_finding(b, k))
    if r["diverged"]:
        out.append(Finding("error", "nonfinite", "the dynamic loss scale collapsed", r["diverged"],
                           "gradients overflow at every scale: find the module above, or use bf16"))
    if r["handled_overflows"]:
        h = r["first_handled"] or {}
        out.append(Finding("info", "nonfinite", f"{r['handled_overflows']} gradient overflow(s) handled by loss scaling "
                           f"(first in {h.get('module')} at step {h.get('step')}, scale {h.get('loss_scale', 0):g})",
                           "the scaler skipped those steps and lowered the scale: expected while it calibrates"))
    if f is None and b is None and not r["diverged"]:
        out.append(Finding("info", "nonfinite", f"no NaN/Inf in {r['steps_run']} steps of {precision}"))
    return out


def _kernel_finding(b: dict[str, Any], k: dict[str, Any]) -> Finding:
    """A kernel that computed the parameter's gradient wrong (:func:`ampbench.diagnose.kernel_check.verdict`)."""
    wrong = [f"{k['nonfinite']} NaN/Inf"] if k["nonfinite"] else []
    if k["off"]:
        wrong.append(f"{k['off']} {'more ' if wrong else ''}off from fp32's by up to {k['max_error']:.3g}")
    module, dtype = b["module"], k["dtype"]
    cpu_amx = k.get("device") == "cpu" and dtype == "bfloat16" and cpuinfo.usable("amx_bf16")
    return Finding(
        "error", "nonfinite",
        f"the {dtype} kernel computing {b['parameter']}'s gradient is at fault, not {dtype}'s range",
        f"computed again {k['calls']} times from the same input and output gradient: {', '.join(wrong)}; in fp32 it is "
        f"finite (largest |g| {k['fp32_max']:.3g}, within {dtype}'s range) -- the steps this kernel breaks are skipped "
        "or train on wrong gradients",
        f"keep {module} in fp32 (MixedPrecision keep_fp32=['{module}'])" + (
            "; on this CPU, ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 (oneDNN without its AMX kernels) shows whether the "
            "AMX kernel is the one at fault" if cpu_amx else ""), {"kernel": k, "module": module})
