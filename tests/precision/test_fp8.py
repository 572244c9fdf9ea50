"""fp8 modes over torchao's float8 training: which layers convert and why not, training tracks amp-bf16,
checkpoint/resume, support and missing-torchao errors, the harness's fp8_layers and the advisor's fp8 rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from ampbench.errors import AmpbenchError
from ampbench.precision import MixedPrecision, supported
from ampbench.precision.fp8 import plan_layers
from tests.conftest import in_process

FP8_PROBLEM = supported("fp8-tensorwise", "cpu").reason or None
"""Why fp8 cannot run on this CPU (no torchao, or no fp8 matmul kernel: AVX2 and AVX-512 CPUs without FP16/AMX)."""


pytestmark = pytest.mark.skipif(FP8_PROBLEM is not None, reason=str(FP8_PROBLEM))
FP8_MODES = ("fp8-tensorwise", "fp8-rowwise", "fp8-rowwise-gw-hp")
M = str(Path(__file__).parents[1] / "workloads" / "user_models.py")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(64, 128)
        self.norm = nn.LayerNorm(128)
        self.down = nn.Linear(128, 64)
        self.head = nn.Linear(64, 10)  # 10 outputs: not a multiple of 16
        self.big = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.down(torch.relu(self.norm(self.up(x))))
        return self.head(h + self.big(h))


def _data(n: int = 8):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(64, 10, generator=g)
    xs = [torch.randn(32, 64, generator=g) for _ in range(n)]
    return [(x, (x @ w).argmax(1)) for x in xs]


def _train(precision: str, steps: int = 40, **kw) -> tuple[list[float], MixedPrecision, nn.Module]:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    mp = MixedPrecision(precision, **kw)
    model, opt = mp.setup(model, opt)
    losses = []
    data = _data()
    for i in range(steps):
        x, y = data[i % len(data)]
        opt.zero_grad()
        with mp.autocast():
            loss = nn.functional.cross_entropy(model(x).float(), y)
        mp.backward(loss)
        mp.step(opt)
        losses.append(float(loss.detach()))
    return losses, mp, model


def test_which_layers_convert_and_why_not() -> None:
    plan = plan_layers(Net(), "tensorwise", filter="dims")
    assert plan.converted == ["up", "down", "big"] and plan.skipped == {"head": "dims 10x64 not multiples of 16"}
    assert plan.summary() == "3/4 converted; skipped: head (dims 10x64 not multiples of 16)"
    auto = plan_layers(Net(), "tensorwise")  # torchao's H100 size thresholds: these layers are too small to gain
    assert auto.converted == [] and "too small to gain" in auto.skipped["up"]
    # one reason, several layers: said once, each layer with its dims (it was the reason once per layer: bert tiny's
    # "no Linear layer was converted" warning was 8 copies of "(...x64 too small to gain (torchao's ...))")
    assert auto.summary() == ("0/4 converted; skipped: 3 layers too small to gain (torchao's tensorwise threshold; "
                              "--fp8-filter dims converts them): up 128x64, down 64x128, big 64x64; head (dims 10x64 "
                              "not multiples of 16)")
    deep = nn.Sequential(*[nn.Linear(64, 64) for _ in range(6)], nn.Linear(64, 10))
    assert plan_layers(deep, "tensorwise").summary().startswith(
        "0/7 converted; skipped: 6 layers too small to gain (torchao's tensorwise threshold; --fp8-filter dims "
        "converts them): 0 64x64, 1 64x64, 2 64x64, 3 64x64, +2 more; 6 (dims 10x64 not multiples of 16)")
    assert plan_layers(Net(), "rowwise", skip=["do"], filter="dims").skipped["down"] == "--fp8-skip"
    assert plan_layers(nn.Linear(32, 32), "tensorwise", filter="dims").converted == []  # a root cannot be swapped
    with pytest.raises(AmpbenchError, match=r"fp8_skip=\['nothing'\]: matches no layer"):
        plan_layers(Net(), "tensorwise", skip=["nothing"])


@pytest.mark.parametrize("precision", FP8_MODES)
def test_each_fp8_mode_trains_and_tracks_amp_bf16(precision: str) -> None:
    ref, _, _ = _train("amp-bf16")
    losses, mp, model = _train(precision, fp8_filter="dims")
    assert type(model.up).__name__ == "Float8Linear" and type(model.head) is nn.Linear
    assert mp.fp8_layers is not None and mp.fp8_layers.converted == ["up", "down", "big"]
    assert model.up.weight.dtype == torch.float32  # fp32 weights, as amp-bf16
    assert losses[-1] < 0.5 * losses[0]  # it learns
    tail = sum(losses[-10:]) / 10
    ref_tail = sum(ref[-10:]) / 10
    assert abs(tail - ref_tail) <= 0.15 * ref_tail + 0.02, (tail, ref_tail)  # stated tolerance: 15% of the loss


def test_fp8_options_are_refused_for_other_modes() -> None:
    with pytest.raises(AmpbenchError, match="apply to the fp8 modes"):
        MixedPrecision("amp-bf16", fp8_skip=["head"])
    with pytest.raises(AmpbenchError, match="fp8_filter='all'"):
        MixedPrecision("fp8", fp8_filter="all")


def test_support_and_missing_torchao(monkeypatch: pytest.MonkeyPatch) -> None:
    assert supported("fp8", "cpu").ok and "says nothing about" in supported("fp8", "cpu").note
    if not torch.cuda.is_available():
        assert "CUDA is not available" in supported("fp8-rowwise", "cuda").reason
    monkeypatch.setitem(sys.modules, "torchao", None)  # import torchao -> ImportError
    s = supported("fp8", "cpu")
    assert not s.ok and "pip install 'ampbench[fp8]'" in s.reason
    with pytest.raises(AmpbenchError, match=r"pip install 'ampbench\[fp8\]'"):
        net = Net()
        MixedPrecision("fp8").setup(net, torch.optim.SGD(net.parameters(), lr=0.1))


@pytest.mark.parametrize("precision", ["fp8-tensorwise", "fp8-rowwise-gw-hp"])
def test_checkpoint_resume_in_fp8(precision: str, tmp_path: Path) -> None:
    from ampbench.frameworks.torch.train import TrainConfig, train
    from ampbench.workloads import create_user_workload

    def wl():
        return create_user_workload(f"{M}:token_transformer", input_shape="24", vocab_size=300, num_classes=2,
                                    preset="tiny")

    from ampbench.precision import Fp8Options

    kw = dict(precision=precision, fp8=Fp8Options(filter="dims"), max_steps_per_epoch=3)
    full = train(wl(), TrainConfig(epochs=2, **kw))
    train(wl(), TrainConfig(epochs=1, checkpoint_dir=tmp_path, **kw))
    resumed = train(wl(), TrainConfig(epochs=2, checkpoint_dir=tmp_path, resume=True, **kw))
    assert resumed.resumed_from_epoch == 1 and resumed.final_loss == pytest.approx(full.final_loss, rel=1e-5)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process (its runs --no-isolate: nothing needs a process of its own)."""
    return in_process(*args)


def test_run_records_fp8_layers_and_refuses_misuse(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    r = _cli("run", "--model", f"{M}:token_transformer", "--input-shape", "24", "--vocab-size", "300", "--num-classes",
             "2", "--preset", "tiny", "--precisions", "amp-bf16,fp8", "--fp8-filter", "dims", "--fp8-skip", "linear2",
             "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report", "--db", str(tmp_path / "r.db"),
             "--json", str(out))
    assert r.returncode == 0, r.stderr
    rows = {x["precision"]: x for x in json.loads(out.read_text())["rows"]}
    assert rows["amp-bf16"]["fp8_layers"] is None and rows["fp8-tensorwise"]["math_mode"] == "fp8"
    # 4 Linears: attention's out_proj (a Linear subclass F.multi_head_attention_forward uses directly) is counted too
    assert rows["fp8-tensorwise"]["fp8_layers"].startswith("1/4 converted; skipped: enc.layers.0.self_attn.out_proj "
                                                           "(MultiheadAttention's output projection")
    assert "enc.layers.0.linear2 (--fp8-skip)" in rows["fp8-tensorwise"]["fp8_layers"]
    conv = _cli("run", "--model", f"{M}:token_transformer", "--input-shape", "24", "--vocab-size", "300", "--num-classes",
                "2", "--preset", "tiny", "--precisions", "fp8", "--fp8-filter", "dims", "--measure", "converge", "--seeds",
                "1", "--converge-steps", "3", "--no-isolate", "--no-report", "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert conv.returncode == 0, conv.stderr
    row = json.loads(out.read_text())["rows"][0]  # converge alone: the row still says which layers trained in fp8
    assert row["fp8_layers"].startswith("2/4 converted") and "fp8_layers" not in row["converge"], row["fp8_layers"]
    bad = _cli("run", "--workloads", "mnist-cnn", "--preset", "tiny", "--precisions", "amp-bf16", "--fp8-skip", "fc",
               "--db", str(tmp_path / "r.db"))
    assert bad.returncode == 2 and "apply to the fp8 modes" in bad.stderr


def test_default_cpu_precisions_leave_fp8_out() -> None:
    from ampbench.bench.config import canonical_precisions, default_precisions

    assert not any(p.startswith("fp8") for p in default_precisions("cpu"))
    assert canonical_precisions(["fp8", "amp", "fp32", "amp-fp16"]) == ("fp32", "fp8-tensorwise", "amp-fp16")


def test_diagnose_finds_the_planted_outlier_layer() -> None:
    from ampbench.diagnose import diagnose
    from ampbench.workloads import create_user_workload

    d = diagnose(lambda: create_user_workload(f"{M}:spiky", input_shape="32", num_classes=3, preset="tiny"), "fp8",
                 steps=3, preset="tiny", checks=("fp8",), mp_options={"fp8_filter": "dims"})
    warned = [f for f in d.findings if f.check == "fp8" and f.severity == "warning"]
    assert [f.data["layer"] for f in warned] == ["spiky"], [f.title for f in d.findings]
    assert "of its input values underflow to 0" in warned[0].title and "--fp8-skip spiky" in warned[0].fix
    layers = {s["layer"]: s for s in d.details["fp8"]["layers"]}
    assert layers["spiky"]["input"]["underflow"] > 0.5 and layers["calm"]["input"]["underflow"] == 0.0
    assert all(s[k]["saturated"] == 0.0 for s in layers.values() for k in ("input", "weight", "grad_output"))
    assert layers["spiky"]["formats"] == {"input": "e4m3fn", "weight": "e4m3fn", "grad_output": "e5m2"}


def test_fp8_check_is_for_fp8_modes() -> None:
    from ampbench.diagnose import diagnose

    with pytest.raises(AmpbenchError, match="--checks fp8 diagnoses the fp8 modes"):
        diagnose("tabular-mlp", "amp-bf16", steps=1, preset="tiny", checks=("fp8",))
    r = _cli("diagnose", "tabular-mlp", "-p", "amp-bf16", "--preset", "tiny", "--checks", "fp8")
    assert r.returncode == 2 and "--checks fp8 diagnoses the fp8 modes" in r.stderr


@pytest.mark.parametrize("precision", FP8_MODES)
@pytest.mark.parametrize("batch", [33, 40, 7])
def test_every_fp8_gemm_meets_cudas_multiple_of_16_rule_at_any_batch(precision: str, batch: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA's _scaled_mm needs mat1's columns and both of mat2's dims divisible by 16. The grad-weight GEMM's inner
    dim is the token count: a max-batch trial at 33 or a batch of 7 used to crash on CUDA (the CPU kernel does not
    check, so this counts the shapes of every call, with the config ampbench builds: pad_inner_dim)."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mp = MixedPrecision(precision, fp8_filter="dims")
    model, opt = mp.setup(model, opt)
    assert all(m.config.pad_inner_dim for m in model.modules() if type(m).__name__ == "Float8Linear")
    calls: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    real = torch._scaled_mm

    def scaled_mm(a, b, *args, **kwargs):  # type: ignore[no-untyped-def]  # (torchao calls torch._scaled_mm by name)
        calls.append((tuple(a.shape), tuple(b.shape)))
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm)
    x, y = torch.randn(batch, 64), torch.randint(0, 10, (batch,))
    with mp.autocast():
        loss = nn.functional.cross_entropy(model(x).float(), y)
    mp.backward(loss)
    mp.step(opt)
    # forward, grad-input and grad-weight GEMMs of the 3 converted layers (gw-hp keeps grad-weight in bf16)
    assert len(calls) == 3 * (2 if precision == "fp8-rowwise-gw-hp" else 3)
    bad = [(a, b) for a, b in calls if a[1] % 16 or b[0] % 16 or b[1] % 16]
    assert not bad, bad
