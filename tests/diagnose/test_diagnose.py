"""Each planted problem is found and named correctly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ampbench.diagnose import diagnose
from ampbench.diagnose.policy import trial_loss
from ampbench.diagnose.ranges import FP16_MIN_SUBNORMAL
from ampbench.measure.step import build_step
from ampbench.workloads.base import seeded

from . import planted


def _titles(d, check: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.title for f in d.findings if f.check == check]


def test_activation_over_fp16_max_is_named() -> None:
    d = diagnose(planted.hot, "master-fp16", checks=("activations",))
    (f,) = [f for f in d.findings if f.severity == "error"]
    assert f.title.startswith("fc2 (Linear) outputs |x| up to") and "inf in fp16" in f.title
    assert d.findings[0] is f  # the most important finding comes first
    # keeping fc2 in fp32 cannot help (its output is cast back to fp16 and overflows again): tried, said, not offered
    assert f.fix.startswith("verified: MixedPrecision('amp-bf16') (bf16 has fp32's range) trains like fp32 (loss")
    assert "MixedPrecision('master-fp16', keep_fp32=['fc2']) did not (loss nan)" in f.fix
    tried = d.details["fixes"]["tried"]["fc2"]
    assert [t["matches"] for t in tried] == [False, True] and math.isnan(tried[0]["loss"])


def test_a_fix_diagnose_offers_is_one_it_saw_work() -> None:
    """Where keeping the module in fp32 does fix it (a naive softmax: exp overflows fp16 inside, its output is small),
    that is the verified fix, and training with it, run apart, matches fp32 while plain master-fp16 does not."""
    d = diagnose(planted.overflowing, "master-fp16", checks=("nonfinite",), steps=12)
    f = next(f for f in d.findings if f.title.startswith("NaN/Inf first appears in the forward of soft"))
    assert f.fix.startswith("verified: MixedPrecision('master-fp16', keep_fp32=['soft']) trains like fp32"), f.fix
    assert "did not" not in f.fix
    assert "made by torch.exp at planted.py:" in f.detail and "in NaiveSoftmax.forward (e = torch.exp(x))" in f.detail

    def build():  # type: ignore[no-untyped-def]
        with seeded(0):
            return planted.overflowing()

    cpu = torch.device("cpu")
    fp32 = trial_loss(build, "fp32", cpu, 32, 12)
    assert math.isnan(trial_loss(build, "master-fp16", cpu, 32, 12))
    assert abs(trial_loss(build, "master-fp16", cpu, 32, 12, keep=["soft"]) - fp32) <= 0.05 * fp32


def test_a_tied_layers_fix_keeps_what_it_is_tied_to() -> None:
    """A head tied to the embedding cannot be kept in fp32 alone (one tensor, cast to half for the embedding): the
    fixes tried and the policy search keep both, and say so (the diagnosis failed on the first such trial)."""
    d = diagnose(planted.tied_hot, "master-fp16", checks=("nonfinite", "policy"), steps=6)
    f = next(f for f in d.findings if f.title.startswith("NaN/Inf first appears in the forward of head"))
    assert "MixedPrecision('master-fp16', keep_fp32=['head', 'embed'])" in f.fix, f.fix
    assert d.details["fixes"]["tried"]["head"][0]["keep"] == ("head", "embed")
    (policy,) = [f for f in d.findings if f.check == "policy"]
    keep = policy.data["keep_fp32"]
    assert keep is None or ("head" in keep) == ("embed" in keep), keep  # (never one without the other)


def test_forward_nonfinite_is_located_in_the_overflowing_layer() -> None:
    d = diagnose(planted.hot, "pure-fp16", checks=("nonfinite",), steps=3)
    f = d.findings[0]
    assert f.severity == "error" and f.title == "NaN/Inf first appears in the forward of fc2 (Linear) at step 1"
    assert f.data["input"]["inf"] == 0 and f.data["output"]["inf"] > 0


def test_a_nan_made_in_the_models_own_forward_names_the_call_and_its_line() -> None:
    """The hooks see modules only: h * h in the model's own forward read "the forward of (model)" and no more. The
    failing step's forward runs again under a TorchFunctionMode: the first call to turn finite inputs into inf is named
    with the user's line (and the backward NaN of the same step, its consequence, is not a second finding)."""
    import inspect

    d = diagnose(planted.squared, "pure-fp16", checks=("nonfinite",), steps=3)
    (f,) = [f for f in d.findings if f.severity == "error"]
    assert f.title == "NaN/Inf first appears in the forward of (model) (Squared) at step 1"
    op = f.data["op"]
    lines, first = inspect.getsourcelines(planted.Squared.forward)
    line = first + next(i for i, text in enumerate(lines) if "h * h" in text)
    assert op["op"] == "torch.Tensor.mul" and op["where"]["function"] == "Squared.forward"
    assert op["where"]["file"].endswith("planted.py") and op["where"]["line"] == line
    # why mul is the culprit: its inputs fit fp16, their square does not
    assert op["inputs"]["dtype"] == "float16" and op["inputs"]["max_abs"] < 65504 < op["inputs"]["max_abs"] ** 2
    assert op["output"]["inf"] > 0 and op["output"]["nan"] == 0
    assert (f"made by torch.Tensor.mul at planted.py:{line} in Squared.forward (return self.head(torch.softmax(h * h, "
            "dim=-1))): float16 inputs up to |x| ") in f.detail and "(float16's largest is 65504)" in f.detail
    assert "(model)'" not in f.fix  # (keeping the whole model in fp32 is no fix: it was tried, and keep_fp32 refused it)


def test_a_clean_forward_names_no_call() -> None:
    from ampbench.diagnose.first_op import first_nonfinite_op

    model = planted.Squared()
    x = torch.randn(4, 16)
    assert first_nonfinite_op(lambda: model(x)) is None  # (fp32: h * h fits)
    with torch.autocast("cpu", dtype=torch.float16):
        found = first_nonfinite_op(lambda: model(x))
    assert found is not None and found["op"] == "torch.Tensor.mul"

    def masked() -> torch.Tensor:  # (an attention mask's -inf is made on purpose, from a -inf argument: not named)
        mask = torch.zeros(4, 32).masked_fill(torch.ones(4, 32, dtype=torch.bool).triu(1), float("-inf"))
        return model(x) + mask[:, :4]

    with torch.autocast("cpu", dtype=torch.float16):
        found = first_nonfinite_op(masked)
    assert found is not None and found["op"] == "torch.Tensor.mul"

    def strict() -> None:  # (a model that raises on its NaN: the call found before it raised is kept)
        out = model(x)
        assert torch.isfinite(out).all(), "NaN in the output"

    with torch.autocast("cpu", dtype=torch.float16):
        found = first_nonfinite_op(strict)
    assert found is not None and found["op"] == "torch.Tensor.mul"


def test_a_check_that_cannot_train_a_diverging_mode_says_so_as_information() -> None:
    """The profile check times the mode's steps; where the mode diverges it cannot, and it read as an ERROR "the
    profile check failed: TrainingDivergedError" beside the real cause."""
    d = diagnose(planted.squared, "amp-fp16", checks=("profile",), steps=3)
    said = [f for f in d.findings if f.check == "profile"]
    assert said and all(f.severity != "error" for f in said), [(f.severity, f.title) for f in said]


def test_nan_injected_in_backward_is_located() -> None:
    d = diagnose(planted.poisoned, "fp32", checks=("nonfinite",), steps=3)
    f = d.findings[0]
    assert f.severity == "error"
    assert f.title == "NaN/Inf first appears in the backward of block.1 (Poison) at step 1 (loss scale 1)"
    assert f.data["grad_output"]["nan"] == 0 and f.data["grad_input"]["nan"] > 0


def test_gradients_below_fp16_range_get_a_scale_that_learns() -> None:
    d = diagnose(planted.tiny_grad, "master-fp16", checks=("gradients",), steps=5)
    f = next(f for f in d.findings if f.check == "gradients")
    g = d.details["gradients"]
    # judged at the dynamic scale master-fp16 uses (65536): still too small there
    assert f.severity in ("warning", "error") and "at the loss scale in use (dynamic: 65536)" in f.title
    assert "still underflow" in f.title and g["at_scale_in_use"]["fp16_underflow"] > 0.01
    assert g["overall"]["fp16_underflow"] + g["overall"]["zeros"] > 0.99 and g["overall"]["fp16_underflow"] > 0.5
    scale = g["recommended_scale"]
    assert scale >= 2**20 and g["max_abs"] * scale * 2 <= 65504
    assert g["fp16_underflow_at_recommended_scale"] < 0.05  # the scale brings them into range
    assert f"loss_scale='static:{scale:g}'" in f.fix

    def train(loss_scale: str) -> tuple[float, float]:
        torch.manual_seed(0)
        step = build_step(planted.tiny_grad(), "master-fp16", 32, torch.device("cpu"), loss_scale)
        w0 = step.mp.master_params()[0].detach().clone()
        for _ in range(30):
            step()
        return float((step.mp.master_params()[0].detach() - w0).abs().max()), float(step.last_loss) / 1e-9

    moved_none, loss_none = train("none")
    moved_scaled, loss_scaled = train(f"static:{scale:g}")
    assert moved_none == 0.0  # every gradient flushed to zero: no learning at all
    assert moved_scaled > 0 and loss_scaled < 1.2  # learns (initial loss ~1.4)


def test_dims_100_and_30522_are_flagged_with_the_fix() -> None:
    """A 30522-token output layer is flagged once, as the Linear's out_features (not again as the embedding tied to
    it); a 30522-row embedding that is only looked up is a gather, not a GEMM dimension, and is not flagged."""
    d = diagnose(planted.odd, "fp32", checks=("tensorcore",))
    by = {(f.data["layer"], f.data["dim"]): f for f in d.findings if f.data}
    assert by[("head", "out_features")].fix.startswith("pad the vocabulary 30522 → 30528 (a multiple of 64)")
    assert by[("fc", "out_features")].fix.startswith("make out_features 104 (a multiple of 8)")
    assert by[("out", "in_features")].data["padded"] == 104
    assert by[("(batch)", "batch_size")].fix.startswith("use batch size 32")
    assert ("emb", "embedding_dim") not in by
    assert ("emb", "num_embeddings") not in by and ("tied", "num_embeddings") not in by


def test_a_layer_doing_a_sliver_of_the_flops_is_not_linted() -> None:
    """A 2-class head on a wide model (its GEMM under 1% of the forward's FLOPs) was a warning on every GPU: padding it
    gains nothing measurable. Layers that do their share are still linted; the batch still is."""
    from torch import nn

    from ampbench.diagnose.tensorcore import SLIVER, forward_facts, lint_dims
    from tests.diagnose.planted import _data, _wl

    model = nn.Sequential(nn.Linear(20, 1000), nn.ReLU(), nn.Linear(1000, 1000), nn.ReLU(), nn.Linear(1000, 2))
    wl = _wl("wide", model, batch=30, data=_data(d=20))
    facts = forward_facts(wl, torch.device("cpu"), 30)
    head = facts.module_flops["4"] / facts.total_flops
    assert head < SLIVER and facts.module_flops["2"] / facts.total_flops > SLIVER  # (2 x 30 x 1000 x 2 of ~64M)
    assert facts.total_flops == 2 * 30 * (20 * 1000 + 1000 * 1000 + 1000 * 2)  # (an oracle: the three GEMMs by hand)
    found = {(i["layer"], i["dim"]) for i in lint_dims(model, 30, facts=facts)}
    assert ("4", "out_features") not in found and ("0", "in_features") in found and ("(batch)", "batch_size") in found
    assert ("4", "out_features") in {(i["layer"], i["dim"]) for i in lint_dims(model, 30)}  # (without the facts)
    from ampbench.diagnose.tensorcore import slivers, tensorcore_findings

    assert slivers(model, facts) == ["4"]
    (said,) = tensorcore_findings([], False, 1)
    assert said.title == "all GEMM dimensions are multiples of 8 (besides 1 layer doing under 1% of the forward's " \
                         "FLOPs, not checked)"


def test_a_small_vocabulary_is_a_multiple_of_8_not_64() -> None:
    """The embedding's weight is the output GEMM's operand (``h @ emb.weight.T``, no Linear): its rows are flagged."""
    d = diagnose(planted.small_vocab, "fp32", checks=("tensorcore",))
    (f,) = [f for f in d.findings if f.data and f.data["dim"] == "num_embeddings"]
    assert f.fix.startswith("make num_embeddings 104 (a multiple of 8)") and "vocabulary" not in f.fix
    # (on a CPU the rule is a GPU's, and said so: a CPU run was told "Tensor Core GEMMs need multiples of 8")
    assert f.severity == "info" and f.detail.startswith("on a GPU (this run's device has no Tensor Cores): Tensor Core")
    from ampbench.diagnose.tensorcore import tensorcore_findings

    (gpu,) = tensorcore_findings([f.data], on_gpu=True)
    assert gpu.severity == "warning" and gpu.detail.startswith("Tensor Core GEMMs need multiples of 8")


def test_dynamic_scale_is_reported_after_the_steps_asked_for() -> None:
    d = diagnose(planted.tiny_grad, "master-fp16", checks=("gradients",), steps=7)
    assert d.details["gradients"]["dynamic"]["steps"] == 7
    f = next(f for f in d.findings if f.check == "gradients")
    assert "after 7 steps" in f.detail and "settled" not in f.detail


def test_profile_compares_the_mode_with_fp32() -> None:
    """Whatever this CPU's fp16 kernels do, the profile says how the mode's step compares with fp32's and
    which ops moved (a CPU without fp16 hardware is the 'why is amp-fp16 slower' case)."""
    d = diagnose(planted.conv, "amp-fp16", checks=("profile",), steps=3)
    v = d.details["profile"]["vs_fp32"]
    assert v["fp32_step_ms"] > 0 and v["ratio"] == pytest.approx(v["step_ms"] / v["fp32_step_ms"])
    assert v["ops"] and all({"op", "ms", "fp32_ms"} <= set(o) for o in v["ops"])
    (f,) = [f for f in d.findings if "than fp32 here" in f.title or "at fp32's speed" in f.title]
    assert f.check == "profile" and f.data["ratio"] == v["ratio"]
    assert "vs_fp32" not in diagnose(planted.conv, "fp32", checks=("profile",), steps=2).details["profile"]


def _profile(ratio: float, hw: dict[str, bool], slow_op: str = "aten::_slow_conv2d_forward") -> dict[str, object]:
    from ampbench.diagnose.profile import moved_ops

    fpc = {"fp32": 32.0, "bf16": 64.0 if hw.get("avx512_bf16") else 32.0, "fp16": 32.0}
    ops = moved_ops({slow_op: 9.0 * ratio, "aten::relu": 1.0}, {"aten::mkldnn_convolution": 9.0, "aten::relu": 1.0})
    return {"precision": "amp-fp16", "device": "cpu", "cpu_half_hardware": hw, "cpu_flops_per_cycle": fpc,
            "fallbacks": [], "vs_fp32": {"step_ms": 10.0 * ratio, "fp32_step_ms": 10.0, "ratio": ratio, "ops": ops}}


def test_ops_are_compared_by_what_they_compute_not_by_name() -> None:
    """fp32's CPU convolutions are aten::mkldnn_convolution, fp16's without fp16 hardware aten::_slow_conv2d_forward:
    by name the finding read "aten::_slow_conv2d_backward 0.32 ms vs 0.00 ms" (fp32's backward took 0.76 ms)."""
    from ampbench.diagnose.profile import moved_ops

    here = {"aten::_slow_conv2d_forward": 0.33, "aten::_slow_conv2d_backward": 0.35, "aten::mm": 0.046,
            "aten::convolution": 0.01, "aten::add_": 0.016}
    fp32 = {"aten::mkldnn_convolution": 0.167, "aten::convolution_backward": 0.76, "aten::mm": 0.018,
            "aten::addmm": 0.02, "aten::add_": 0.017}
    ops = {o["op"]: o for o in moved_ops(here, fp32)}
    assert ops["convolution backward"]["ms"] == pytest.approx(0.35)
    assert ops["convolution backward"]["fp32_ms"] == pytest.approx(0.76)
    assert ops["convolution forward"]["ms"] == pytest.approx(0.34)  # (the wrapper's self time is the kind's too)
    assert ops["convolution forward"]["kernel"] == "aten::_slow_conv2d_forward"
    assert ops["convolution forward"]["fp32_kernel"] == "aten::mkldnn_convolution"
    assert ops["matmul"]["ms"] == pytest.approx(0.046) and ops["matmul"]["fp32_ms"] == pytest.approx(0.038)
    assert [o["op"] for o in moved_ops(here, fp32)][:2] == ["convolution backward", "convolution forward"]


def test_why_a_half_mode_is_slower_than_fp32_is_explained_from_the_cpu_probe() -> None:
    from ampbench.diagnose.profile import versus_fp32_findings

    no_fp16 = {"avx512_bf16": True, "amx_bf16": False, "avx512_fp16": False, "amx_fp16": False}
    (f,) = versus_fp32_findings(_profile(6.5, no_fp16))
    assert f.severity == "warning" and f.title.startswith("amp-fp16 is 6.50x slower than fp32 here")
    assert ("convolution forward 58.50 ms vs 9.00 ms (aten::_slow_conv2d_forward here, aten::mkldnn_convolution in "
            "fp32)") in f.detail
    assert "fp16 math is emulated" in f.detail and "no fast kernel" in f.detail
    assert f.fix.startswith("on this CPU use fp32 or the bf16 modes (bf16 matmuls run on AVX512-BF16")
    (f,) = versus_fp32_findings(_profile(6.5, dict.fromkeys(no_fp16, False)))
    assert f.fix.startswith("on this CPU use fp32;")
    (f,) = versus_fp32_findings(_profile(0.5, no_fp16))
    assert f.severity == "info" and "2.00x faster than fp32" in f.title and "convolution forward 4.50 ms vs 9.00" in f.detail
    (f,) = versus_fp32_findings(_profile(1.02, no_fp16))
    assert f.severity == "info" and "at fp32's speed" in f.title


def test_the_batch_scaling_times_a_few_steps_a_round_not_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """5 rounds at both batch sizes of at most SCALING_STEPS steps each (each round took --steps at both sizes: 300
    step-equivalents at the default 20, most of a slow mode's profile check); the ratio is the median of the rounds'."""
    from ampbench.diagnose import profile

    timed: list[tuple[int, int]] = []

    class Timing:
        def __init__(self, ms: float) -> None:
            self.ms = ms

        def summary(self) -> dict[str, float]:
            return {"step_ms_p50": self.ms}

    def time_steps(step, steps, device):  # type: ignore[no-untyped-def]
        size = len(step.batches[0][1])
        timed.append((size, steps))
        return Timing(1.0 if size == 8 else 1.5 + 0.1 * len(timed))  # (rounds' ratios 1.7, 1.9, 2.1, 2.3, 2.5)

    class Step:
        device = torch.device("cpu")
        batches = [((torch.zeros(8, 16),), torch.zeros(8, dtype=torch.long))]

    monkeypatch.setattr(profile, "time_steps", time_steps)
    ratio = profile._batch_scaling(Step(), planted.hot(), 8, 20)
    assert [steps for _, steps in timed] == [profile.SCALING_STEPS] * 10 and {s for s, _ in timed} == {8, 16}
    assert ratio == pytest.approx(2.1)


def test_launch_bound_tiny_model_is_explained() -> None:
    """The verdict follows the measured batch scaling (a timing: on a loaded machine a 0.9 ms step can scale by
    1.3x or more, so the test asserts the rule and the finding's text, not this machine's number)."""
    from ampbench.diagnose.profile import LAUNCH_BOUND_SCALING, profile_findings

    d = diagnose(planted.launch_bound, "fp32", checks=("profile",), steps=10)
    p = d.details["profile"]
    assert p["kernels_per_step"] > 50 and isinstance(p["batch_scaling"], float) and p["batch_scaling"] > 0
    assert p["launch_bound"] == (p["batch_scaling"] < LAUNCH_BOUND_SCALING)
    overhead = {"gemm": 0.5, "cast": 0.0, "optimizer": 0.1, "other": 0.4}  # (per-op overhead's: little weight work --
    # the measured shares are this CPU's: under AVX2 a tiny model's Adam passed the weight-work rule's quarter)
    f = profile_findings({**p, "launch_bound": True, "batch_scaling": 1.05, "share": overhead}, half=False)[0]
    assert f.title.startswith("launch-bound: doubling the batch costs 1.05x the time, not ~2x;")
    assert "faster" in f.detail and "(half-precision) math cannot" in f.detail
    if p["launch_bound"]:
        assert d.findings[0].title.startswith(("launch-bound:", "the step barely grows with the batch"))


def test_a_step_set_by_its_work_on_the_weights_is_not_called_launch_bound() -> None:
    """An MoE's amp-bf16 step on a CPU: doubling the batch cost 1.20x, its ops' dispatch ~5% of the step, casts 29%
    and Adam 6% of op time -- "launch-bound: per-op overhead sets the step time" named one cause, not the largest.
    The optimizer's update is its own op class, measured (a fused Adam's kernel or the foreach ops)."""
    from ampbench.diagnose.profile import WEIGHT_WORK_SHARE, profile_findings

    d = diagnose(planted.launch_bound, "fp32", checks=("profile",), steps=5)
    p = d.details["profile"]
    assert p["share"].get("optimizer", 0) > 0  # (Adam's update, measured)
    assert sum(p["share"].values()) == pytest.approx(1.0)
    weights = {**p, "launch_bound": True, "batch_scaling": 1.2, "launch_share": 0.05,
               "share": {"gemm": 0.31, "cast": 0.29, "optimizer": 0.14, "other": 0.26}}
    f = profile_findings(weights, half=True)[0]
    assert f.title.startswith("the step barely grows with the batch: doubling it costs 1.20x the time, not ~2x "
                              "(~80% of the"), f.title  # (t(2b) / t(b) = 1.2: the part that grows is 0.2 of t(b))
    assert "dtype casts 29% and the optimizer's update 14% of op time" in f.detail and "≈ 5% of the step" in f.detail
    assert f.data["weight_work_share"] == pytest.approx(0.43) and WEIGHT_WORK_SHARE < 0.43
    said = [g.title for g in profile_findings(weights, half=True)]
    assert any(t.startswith("time by op class: matmul/conv 31%, casts 29%, optimizer 14%, elementwise/other 26%")
               for t in said), said
    overhead = {**weights, "share": {"gemm": 0.5, "cast": 0.0, "optimizer": 0.1, "other": 0.4}}
    assert profile_findings(overhead, half=True)[0].title.startswith("launch-bound: doubling the batch costs 1.20x")


def test_a_big_model_is_called_launch_bound_only_by_the_rule() -> None:
    """A bigger model: the verdict is the rule applied to its measured batch scaling (a timing: on a loaded
    2-core machine even a 1 ms step can scale by 1.3x), and the finding appears exactly when the verdict says so."""
    from ampbench.diagnose.profile import LAUNCH_BOUND_SCALING

    d = diagnose("tabular-mlp", "fp32", preset="small", checks=("profile",), steps=5)
    p = d.details["profile"]
    assert isinstance(p["batch_scaling"], float) and p["batch_scaling"] > 0
    assert p["launch_bound"] == (p["batch_scaling"] < LAUNCH_BOUND_SCALING)
    said = any(f.title.startswith(("launch-bound", "the step barely grows with the batch")) for f in d.findings)
    assert said == p["launch_bound"]


def test_per_layer_policy_found_and_training_with_it_matches_fp32() -> None:
    d = diagnose(planted.hostile, "master-fp16", checks=("policy",), steps=12)
    (f,) = [f for f in d.findings if f.check == "policy"]
    assert f.data["keep_fp32"] == ["rms"], f
    assert "keep_fp32=['rms']" in f.fix
    assert f.data["trials"] <= 2 * math.ceil(math.log2(f.data["candidates"])) + 4
    def build():  # type: ignore[no-untyped-def]
        with seeded(0):  # the same init for every trial, as diagnose() does
            return planted.hostile()

    cpu = torch.device("cpu")
    fp32 = trial_loss(build, "fp32", cpu, 32, 12)
    plain = trial_loss(build, "master-fp16", cpu, 32, 12)
    fixed = trial_loss(build, "master-fp16", cpu, 32, 12, keep=["rms"])
    assert not math.isfinite(plain) or abs(plain - fp32) > 0.05 * fp32
    assert abs(fixed - fp32) <= 0.05 * fp32


def test_the_mode_asked_about_is_trained_beside_fp32_not_only_master_half() -> None:
    """The policy check searched master-fp16's keep set alone: asked about amp-fp16 on a model whose own forward
    overflows fp16 into a tanh, the diagnosis said "no NaN/Inf" and spoke of master-fp16, never that amp-fp16 trains
    to another loss. Now the first finding says so, with the losses (oracle: the trials run here) and amp-bf16 verified."""
    d = diagnose(planted.saturating, "amp-fp16", checks=("nonfinite", "policy"), steps=12)
    first = next(f for f in d.findings if f.check == "policy")
    assert first.severity == "error" and first.title.startswith("amp-fp16 does not train like fp32 over 12 steps"), first

    def build():  # type: ignore[no-untyped-def]
        with seeded(0):
            return planted.saturating()

    cpu = torch.device("cpu")
    fp32, amp = (trial_loss(build, p, cpu, 32, 12) for p in ("fp32", "amp-fp16"))
    assert math.isfinite(amp) and abs(amp - fp32) > 0.05 * fp32
    assert first.data["loss"] == pytest.approx(amp) and first.data["fp32_loss"] == pytest.approx(fp32)
    assert "its loss stayed finite" in first.detail and first.fix.startswith("verified: amp-bf16 trains like fp32")
    assert any(f.title == "no NaN/Inf in 12 steps of amp-fp16" for f in d.findings)
    # a mode that trains like fp32 says that (an info), and master-* is its own search's, not repeated
    bf16 = diagnose(planted.saturating, "amp-bf16", checks=("policy",), steps=12).findings
    assert bf16[0].severity == "info" and bf16[0].title.startswith("amp-bf16 trains like fp32 over 12"), bf16[0]
    # a bf16 mode's keep-set search is master-bf16's, and its finding says so (it said "master-fp16")
    assert bf16[1].title.startswith("master-bf16 ") and "master-fp16" not in bf16[1].title, bf16[1]
    master = diagnose(planted.hostile, "master-fp16", checks=("policy",), steps=12)
    assert not any("trains like fp32 over" in f.title or "does not train like" in f.title for f in master.findings)


def test_healthy_model_has_no_errors_and_a_failing_check_does_not_hide_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from ampbench.diagnose import tensorcore

    monkeypatch.setattr(tensorcore, "lint_dims", lambda *a, **k: 1 / 0)
    lines: list[str] = []
    d = diagnose("mnist-cnn", "amp-bf16", preset="tiny", steps=4, on_progress=lines.append)
    errors = [f for f in d.findings if f.severity == "error"]
    assert [f.title for f in errors] == ["the tensorcore check failed: ZeroDivisionError: division by zero"]
    checks = ("nonfinite", "gradients", "activations", "policy", "tensorcore", "profile")
    assert {f.check for f in d.findings} == set(checks)
    assert d.details["profile"]["vs_fp32"]["fp32_step_ms"] > 0
    assert FP16_MIN_SUBNORMAL == 2.0**-24
    # a line as each check starts and ends, the failed one too; its findings counted (oracle: the findings' checks)
    # (first, on a CPU without bf16 instructions, the line that says bf16 runs there but not fast)
    lines = lines[1:] if lines and lines[0].startswith("amp-bf16 on cpu: ") else lines
    assert len(lines) == 2 * len(checks), lines
    for i, check in enumerate(checks):
        start, done = lines[2 * i], lines[2 * i + 1]
        assert start == f"check {i + 1}/6: {check} ..."
        n = sum(1 for f in d.findings if f.check == check)
        assert done.startswith(f"check {i + 1}/6: {check} done in ") and done.endswith(
            f" s ({n} finding{'' if n == 1 else 's'})"), done


def test_diagnose_says_first_where_the_modes_math_is_emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """fp16 on a CPU without AVX512-FP16/AMX-FP16 runs ~30x slower than bf16: every check trains its own steps, so
    the command says so before minutes pass (a GPT-2 diagnosis ran 10 minutes with no line)."""
    import ampbench.diagnose as d_mod
    from ampbench.precision.support import Support

    note = "CPU (x86_64) has no AVX512-FP16/AMX-FP16: fp16 math is emulated and slower than fp32 here"
    monkeypatch.setattr(d_mod, "supported", lambda *a: Support(True, note=note))
    lines: list[str] = []
    diagnose("mnist-cnn", "amp-fp16", preset="tiny", steps=2, checks=("tensorcore",), device="cpu",
             on_progress=lines.append)
    assert lines[0] == f"amp-fp16 on cpu: {note}; each check trains its own steps (--steps 2): expect them to take " \
                       "long", lines
    monkeypatch.setattr(d_mod, "supported", lambda *a: Support(True))
    lines.clear()
    diagnose("mnist-cnn", "amp-fp16", preset="tiny", steps=2, checks=("tensorcore",), device="cpu",
             on_progress=lines.append)
    assert lines[0] == "check 1/1: tensorcore ..."


@pytest.mark.isa
def test_lstm_kernel_fallback_under_cpu_autocast_is_said() -> None:
    """diagnose says when a fallback runs, exactly where this CPU needs one (fp16: every CPU; bf16: CPUs whose
    oneDNN has no bf16 LSTM, e.g. AVX2-only)."""
    from torch import nn

    from ampbench.precision.fallbacks import autocast_kernel_works

    for precision, half, name in (("amp-fp16", torch.float16, "fp16"), ("amp-bf16", torch.bfloat16, "bf16")):
        d = diagnose("lstm-lm", precision, preset="tiny", checks=("tensorcore",))
        said = [f for f in d.findings if f.check == "fallback"]
        assert bool(said) == (not autocast_kernel_works(nn.LSTM, half))
        for f in said:
            assert f.severity == "warning" and f"lstm: nn.LSTM runs torch's native {name} kernel" in f.title


@pytest.mark.parametrize("precision", ["amp-fp16", "master-fp16"])
def test_gradients_that_fit_at_the_scale_in_use_are_information(precision: str) -> None:
    """65% of the true gradients are fp16 subnormals, but the dynamic scale in use (65536, nothing skipped) brings
    them into range: the finding says so, at info, and offers no fix (the fix would be the configuration in use)."""
    d = diagnose(planted.small_grad, precision, checks=("gradients",), steps=3)
    g = d.details["gradients"]
    assert g["overall"]["fp16_subnormal"] > 0.3 and g["dynamic"]["skipped_steps"] == 0
    used = g["at_scale_in_use"]
    assert used["scale"] == g["dynamic"]["scale"] == 65536.0 and used["fp16_underflow"] == 0.0
    (f,) = [f for f in d.findings if f.check == "gradients"]
    assert f.severity == "info" and not f.fix
    assert f.title.startswith("gradients fit fp16 at the loss scale in use (dynamic: 65536)")


def test_too_many_subnormals_at_the_scale_in_use_say_so_not_0_percent_underflow() -> None:
    """Subnormals over 5% with underflow under 1% at the scale in use: the title named "0% ... still underflow"
    (rounded) as what was wrong; it names the subnormals, and the underflow to a tenth of a percent."""
    from ampbench.diagnose.ranges import gradient_findings

    o = {"fp16_underflow": 0.3, "fp16_subnormal": 0.4, "fp16_overflow": 0.0}
    r = {"overall": o, "recommended_scale": 262144.0, "max_abs": 0.0968, "fp16_underflow_at_recommended_scale": 0.0,
         "params": [], "at_scale_in_use": {"scale": 65536.0, "fp16_underflow": 0.004, "fp16_subnormal": 0.16}}
    (f,) = gradient_findings(r, {"scale": 65536.0, "steps": 20, "skipped_steps": 0}, "fp16", "dynamic")
    assert f.severity == "warning" and "still underflow" not in f.title
    assert f.title == ("at the loss scale in use (dynamic: 65536) 16% of gradient values are fp16 subnormals "
                       "(below 2^-14: fewer bits); 0.4% underflow")
    assert f.fix.startswith("a larger scale: loss_scale='static:262144'")
    r["at_scale_in_use"]["fp16_underflow"] = 0.25
    (f,) = gradient_findings(r, None, "fp16", "dynamic")
    assert f.severity == "error" and "25.0% of gradient values still underflow in fp16 and 16% are subnormals" in f.title


def test_a_bias_a_batchnorm_cancels_is_information_not_an_underflow_warning() -> None:
    """A convolution's bias just before a BatchNorm has a gradient of rounding noise (the norm subtracts each
    channel's mean): "0.bias: 100% of its gradient underflows in fp16, fix: loss scale >= 262144" was a warning. The
    oracle is the model's structure: 0 feeds 1 (BatchNorm2d) directly; 3 feeds a ReLU, then the norm."""
    d = diagnose(planted.conv_bn, "pure-fp16", checks=("gradients",), steps=2)
    params = {p["name"]: p for p in d.details["gradients"]["params"]}
    assert params["0.bias"]["cancelled_by"] == "1 (BatchNorm2d)" and params["3.bias"]["cancelled_by"] is None
    assert params["0.bias"]["max_abs"] < 1e-4 * params["0.weight"]["max_abs"]  # (rounding noise, next to its weight's)
    said = [f for f in d.findings if "0.bias" in f.title]
    assert said and all(f.severity == "info" and "zero up to rounding" in f.title and "straight into 1 (BatchNorm2d)," in f.title
               and f.fix == "bias=False on 0 (the norm's own shift does its job)" for f in said), said
    assert not any(f.severity != "info" and "0.bias" in f.title for f in d.findings)


def test_the_largest_activation_names_its_layers_class() -> None:
    from ampbench.diagnose.ranges import activation_findings

    (f,) = activation_findings([{"name": "1", "type": "BatchNorm2d", "max_abs": 3.3}])
    assert f.title == "activations fit fp16: largest |x| 3.3 in 1 (BatchNorm2d)"


def test_a_parameters_underflow_is_judged_at_the_loss_scale_in_use() -> None:
    """Beside "gradients fit fp16 at the loss scale in use (dynamic: 65536)" a parameter was "100% underflows", judged
    unscaled. At the scale in use it is what is lost there; without one, what is lost unscaled."""
    from ampbench.diagnose.ranges import _parameter_findings

    p = {"name": "fc.bias", "max_abs": 5e-8, "fp16_underflow": 1.0, "fp16_underflow_at_scale_in_use": 0.0}
    assert _parameter_findings([p], 262144.0, 65536.0, "fp16") == []
    (f,) = _parameter_findings([p], 262144.0, None, "fp16")
    assert f.severity == "warning" and f.title == "fc.bias: 100% of its gradient underflows in fp16"
    (f,) = _parameter_findings([{**p, "fp16_underflow_at_scale_in_use": 0.8}], 65536.0, 65536.0, "fp16")
    assert f.title.endswith("80% of its gradient underflows in fp16 at the loss scale in use (65536)")
    assert f.fix.startswith("bf16")  # (no larger scale fits the largest gradient)
    assert _parameter_findings([p], 262144.0, None, "bf16") == []  # (bf16 has fp32's range: nothing is lost)


def test_fp16_limits_are_what_ifs_in_bf16_and_a_warning_without_scaling() -> None:
    bf16 = next(f for f in diagnose(planted.small_grad, "amp-bf16", checks=("gradients",), steps=2).findings
                if f.check == "gradients")
    assert bf16.severity == "info" and "need no loss scaling" in bf16.title
    pure = next(f for f in diagnose(planted.small_grad, "pure-fp16", checks=("gradients",), steps=2).findings
                if f.check == "gradients")
    assert pure.severity == "warning" and "without loss scaling" in pure.title and "loss_scale=" in pure.fix


def test_profile_memory_is_the_modes_steps_not_the_fp32_baseline_built_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory figures are read after this mode's timed steps: the fp32 baseline model built afterwards (planted
    here as a 256 MiB allocation held by versus_fp32) is not in them (was: peaks never reset, read at the end)."""
    from ampbench.diagnose import profile

    held = []
    real = profile.versus_fp32

    def fp32_with_a_big_model(*args, **kwargs):  # type: ignore[no-untyped-def]
        held.append(torch.ones(64 * 2**20))
        return real(*args, **kwargs)

    monkeypatch.setattr(profile, "versus_fp32", fp32_with_a_big_model)
    d = diagnose(planted.conv, "amp-bf16", checks=("profile",), steps=2)
    m = d.details["profile"]["memory"]
    assert held and m["peak_is"] == "RSS growth" and m["peak_bytes"] < 128 * 2**20, m


def test_the_engines_setup_warning_is_a_finding_once_not_a_raw_python_warning(recwarn: pytest.WarningsRecorder) -> None:
    """pure-fp16 steps Adam's state in fp16, where its default eps (1e-8) is 0: the engine's warning was printed as a
    raw UserWarning with a source line between diagnose's progress lines, once per check; it is a finding."""
    before = torch.get_rng_state()
    d = diagnose(planted.half_adam, "pure-fp16", checks=("nonfinite", "gradients"), steps=2)
    assert torch.equal(torch.get_rng_state(), before)  # (the fix's trial too trains inside diagnose's forked RNG)
    setup = [f for f in d.findings if f.check == "setup"]
    assert len(setup) == 1 and setup[0].severity == "warning"
    assert setup[0].title == ("Adam eps=1e-08 is 0 in float16: the optimizer state is half here (no master weights), "
                              "so updates can become inf")
    # (the master-* fix it names is tried, as every fix diagnose offers: a master mode keeps Adam's state in fp32)
    assert setup[0].fix.startswith("a master-* mode: verified: master-fp16 trains like fp32 (loss "), setup[0].fix
    assert setup[0].fix.endswith("; or a larger eps (e.g. 1e-4), not tried here")
    assert d.details["fixes"]["tried"]["mode:master-fp16"][0]["matches"] is True
    assert not [w for w in recwarn if "eps=" in str(w.message)]
    assert not [f for f in diagnose(planted.half_adam, "amp-fp16", checks=("nonfinite",), steps=2).findings
                if f.check == "setup"]  # (fp32 weights and state: nothing to say)


def test_the_batch_is_linted_only_where_it_is_a_gemms_rows() -> None:
    """A token model's Linear layers run (batch x tokens) rows: at batch 4 x 16 tokens, 64 -- a multiple of 8, so a
    batch of 4 is no Tensor Core finding (it was one for BERT); its head on the mean token (4 rows) is a sliver and
    does not count. A feature MLP's rows are the batch: 30 is flagged. Oracle: the rows recorded are the shapes by hand."""
    from torch import nn

    from ampbench.data.tensors import TensorData
    from ampbench.diagnose.tensorcore import forward_facts, lint_dims
    from tests.diagnose.planted import _wl

    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down, self.head = nn.Linear(64, 256), nn.Linear(256, 64), nn.Linear(64, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.down(torch.relu(self.up(x))).mean(1))

    g = torch.Generator().manual_seed(0)
    data = TensorData((torch.randn(16, 16, 64, generator=g),), torch.randint(0, 2, (16,), generator=g))
    model = Tokens()
    facts = forward_facts(_wl("tokens", model, batch=4, data=data), torch.device("cpu"), 4)
    assert sorted(facts.gemm_rows) == [(4, 2 * 4 * 64 * 2), (64, 2 * 64 * 64 * 256), (64, 2 * 64 * 256 * 64)]
    assert facts.rows_that_matter() == {64}
    assert not any(i["dim"] == "batch_size" for i in lint_dims(model, 4, facts=facts))
    assert any(i["dim"] == "batch_size" for i in lint_dims(model, 4))  # (without the facts: as before)
    mlp = nn.Sequential(nn.Linear(20, 1000), nn.ReLU(), nn.Linear(1000, 16))
    from tests.diagnose.planted import _data

    wide = forward_facts(_wl("wide", mlp, batch=30, data=_data(d=20)), torch.device("cpu"), 30)
    assert wide.rows_that_matter() == {30}
    assert any(i["dim"] == "batch_size" for i in lint_dims(mlp, 30, facts=wide))


def test_the_output_layers_width_is_the_tasks_and_its_fix_says_pad_and_slice() -> None:
    """A 4-class head doing a fifth of the FLOPs: "make out_features 8 ... or change the width" asked to change the
    number of classes. The forward's hooks find the Linear that wrote the model's output; its fix pads and slices. A
    hidden layer's odd width keeps "make out_features"."""
    from torch import nn

    from ampbench.diagnose.tensorcore import forward_facts, lint_dims, tensorcore_findings
    from tests.diagnose.planted import _data, _wl

    model = nn.Sequential(nn.Linear(16, 60), nn.ReLU(), nn.Linear(60, 4))
    facts = forward_facts(_wl("head", model, batch=32, data=_data(d=16)), torch.device("cpu"), 32)
    assert facts.output_layers == {"2"}
    by = {(f.data["layer"], f.data["dim"]): f for f in tensorcore_findings(lint_dims(model, 32, facts=facts), False)
          if f.data}
    assert by["2", "out_features"].fix.startswith("the model's output layer: 4 is its number of classes or outputs "
                                                  "-- pad it to 8 and slice the extra outputs off before the loss")
    assert by["0", "out_features"].fix.startswith("make out_features 64 (a multiple of 8)")


def test_the_input_layers_width_is_the_datas_and_its_fix_says_pad_the_rows() -> None:
    """A table of 6 features a row: "make in_features 8 ... or change the width" asked to change the data. The
    forward's pre-hooks find the Linear that takes the batch's own tensor; a hidden layer's odd width keeps "make"."""
    from torch import nn

    from ampbench.diagnose.tensorcore import forward_facts, lint_dims, tensorcore_findings
    from tests.diagnose.planted import _data, _wl

    model = nn.Sequential(nn.Linear(6, 60), nn.ReLU(), nn.Linear(60, 36), nn.ReLU(), nn.Linear(36, 8))
    facts = forward_facts(_wl("table", model, batch=32, data=_data(d=6)), torch.device("cpu"), 32)
    assert facts.input_layers == {"0"} and facts.output_layers == {"4"}
    by = {(f.data["layer"], f.data["dim"]): f for f in tensorcore_findings(lint_dims(model, 32, facts=facts), False)
          if f.data}
    assert by["0", "in_features"].fix == ("the model's input layer: 6 is the data's features a row -- pad each row "
                                          "with 2 zero features (F.pad(x, (0, 2))) and the layer to in_features=8, "
                                          "or leave it: it is one layer of the step")
    assert by["2", "in_features"].fix.startswith("make in_features 64 (a multiple of 8)")


def test_activation_dominated_memory_names_checkpointing() -> None:
    """bert small in amp-bf16: its saved activations outweigh its weights, gradients and Adam state (the share an
    oracle: the split's own bytes), so the finding names the 4 repeated blocks --checkpointing would recompute."""
    from ampbench.diagnose.profile import profile_findings, profile_steps
    from ampbench.workloads import create_workload

    p = profile_steps(create_workload("bert", "small"), "amp-bf16", torch.device("cpu"), 32, 1, None)
    m = p["memory"]
    static = m["weights_bytes"] + m["grads_bytes"] + m["optimizer_bytes"]
    assert m["static_share"] == pytest.approx(static / (static + m["activation_bytes"])) and m["static_share"] < 0.4
    (f,) = [f for f in profile_findings(p, half=True) if f.title.startswith("memory is dominated by saved activations")]
    assert f"({1 - m['static_share']:.0%}; {m['activation_bytes'] / 2**20:,.1f} MiB)" in f.title
    assert "(done in this mode)" in f.fix and "recomputes each of its 4 repeated blocks" in f.fix
    fp32 = profile_findings({**p, "memory": {**m, "blocks": 0}}, half=False)
    (f,) = [f for f in fp32 if f.title.startswith("memory is dominated by saved activations")]
    assert "amp-*/master-*/pure-* halve them" in f.fix and "torch.utils.checkpoint around" in f.fix


def test_a_chrome_trace_is_said_written_only_where_it_is(tmp_path: Path) -> None:
    """The profiler logs a file it cannot open and returns as if it wrote it: the trace goes through a .tmp renamed
    over it, and the finding says "not written" where no file came (/proc takes no new file, even from root)."""
    def said(trace: Path) -> dict[str, str]:
        d = diagnose(planted.launch_bound, "fp32", checks=("profile",), steps=2, trace=trace)
        return {f.title: f.severity for f in d.findings}

    good = tmp_path / "t.json"
    assert said(good)[f"Chrome trace: {good}"] == "info"
    assert json.loads(good.read_text())["traceEvents"] and not list(tmp_path.glob("*.tmp"))
    if Path("/proc/self").is_dir():
        bad = Path("/proc/ampbench-trace.json")
        assert said(bad)[f"Chrome trace not written: the profiler could not write {bad}"] == "warning"
        assert not bad.exists()


def test_every_check_trains_from_the_same_dropout_masks_and_the_failing_forward_is_made_again_with_its_own() -> None:
    """A transformer's pure-fp16 loss overflowed at step 9 of one check and not in 20 steps of the next (their dropout
    drew other masks): the mode's trial said "it went non-finite", the non-finite check "no NaN/Inf in 20 steps".
    Every copy a check trains now starts from the same RNG state, and the failing step's forward, run again to name
    the call that made the inf, draws the masks that step drew. The caller's RNG is left as it was."""
    planted.DROPPED.clear()
    before = torch.get_rng_state()
    d = diagnose(planted.dropped, "pure-fp16", checks=("nonfinite",), steps=3)
    assert torch.equal(torch.get_rng_state(), before)
    f = d.findings[0]
    assert f.title == "NaN/Inf first appears in the forward of fc2 (Linear) at step 1", f.title
    copies: dict[int, list[torch.Tensor]] = {}
    for model, mask in planted.DROPPED:
        copies.setdefault(id(model), []).append(mask)
    assert len(copies) >= 3  # (the located step's copy, then each fix it tried: keep fc2 in fp32, amp-bf16)
    located, *tried = copies.values()
    assert len(located) >= 2 and all(torch.equal(m, located[0]) for m in located[1:])  # step 1, and its forward again
    assert all(torch.equal(masks[0], located[0]) for masks in tried)  # every trial's first step: step 1's masks
    assert not torch.equal(located[0], tried[0][1])  # (the masks are drawn: the next step's differ)
