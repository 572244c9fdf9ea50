"""benchmarks/op_times.py: each traced op's profiled time beside its price. The attribution is checked on a hand-made
profile (each kernel counted once, in the outermost call the trace names), the op counts on real CPU steps against the
trace taken with the CPU's rules (the profiler's calls a step are the trace's ops), and the JSON the lease keeps."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("op_times", ROOT / "benchmarks" / "op_times.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["op_times"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@dataclass(eq=False)
class Ev:
    """A profiled call as torch.profiler's FunctionEvent shows it: its kernels' time (``own``) and its children's."""

    name: str
    own: float = 0.0
    cpu_parent: Ev | None = None
    self_cpu_time_total: float = 1.0  # (every call: 1 us of the host's own)
    children: list[Ev] = field(default_factory=list)
    device_type: str = "DeviceType.CPU"

    def under(self, parent: Ev) -> Ev:
        self.cpu_parent = parent
        parent.children.append(self)
        return self

    @property
    def self_device_time_total(self) -> float:
        return self.own

    @property
    def device_time_total(self) -> float:
        return self.own + sum(c.device_time_total for c in self.children)

    @property
    def cpu_time_total(self) -> float:
        return self.self_cpu_time_total + sum(c.cpu_time_total for c in self.children)

    @property
    def time_range(self) -> SimpleNamespace:
        return SimpleNamespace(elapsed_us=lambda: self.own)


def test_each_kernel_is_counted_once_in_the_outermost_traced_call() -> None:
    s = _script()
    events: list[Ev] = []

    def ev(name: str, own: float = 0.0, parent: Ev | None = None, device: str = "DeviceType.CPU") -> Ev:
        e = Ev(name, own, device_type=device)
        events.append(e if parent is None else e.under(parent))
        return e

    conv = ev("aten::convolution", parent=ev("aten::conv2d"))
    inner = ev("aten::_convolution", parent=conv)
    ev("aten::cudnn_convolution", 100.0, inner)
    ev("aten::add_", 3.0, inner)  # (a traced name nested in a traced op: its parent's)
    linear = ev("aten::linear")
    ev("aten::t", parent=linear)
    ev("aten::addmm", 50.0, linear)
    ev("aten::convolution_backward", 80.0, ev("autograd::engine::evaluate_function: ConvolutionBackward0"))
    ev("aten::_scaled_dot_product_flash_attention", 20.0)
    ev("aten::_fused_adamw_", 9.0)
    ev("aten::fill_", 2.0, ev("aten::zero_"))
    ev("sm90_xmma_gemm", 50.0, device="DeviceType.CUDA")  # (a kernel's own event: its launching call's time)
    traced = {"aten.convolution": "matmul/conv", "aten.addmm": "matmul/conv", "aten.add_": "elementwise",
              "aten.convolution_backward": "matmul/conv", "ampbench_predict.fused_attention": "attention",
              "ampbench.direct_fused_step": "optimizer"}
    out = s.by_traced_op(events, traced, steps=2, gpu=True)
    got = {k: (round(v.ms, 6), v.calls) for k, v in out.ops.items() if v.ms > 0}
    assert got == {"aten.convolution": (0.0515, 0.5), "aten.addmm": (0.025, 0.5),
                   "aten.convolution_backward": (0.04, 0.5), "ampbench_predict.fused_attention": (0.01, 0.5),
                   "ampbench.direct_fused_step": (0.0045, 0.5), "not traced: aten::fill_": (0.001, 0.5)}
    assert out.device_ms == pytest.approx((100 + 3 + 50 + 80 + 20 + 9 + 2) / 1e3 / 2)  # (every kernel, once)
    assert s.kernel_times(events, steps=2) == [{"kernel": "sm90_xmma_gemm", "ms": 0.025, "calls": 0.5}]
    host = {k: round(v.host_ms * 2e3, 6) for k, v in out.ops.items()}  # (us a step, over 2 steps)
    assert host["aten.convolution"] == 4 and host["aten.addmm"] == 1  # (a traced op: its calls' host time, nested too)
    assert host["not traced: aten::conv2d"] == host["not traced: aten::t"] == 1  # (the rest: each call's own)
    assert sum(host.values()) == len(events) - 1  # (every call's host time once; the kernel's event is no call)


@pytest.mark.parametrize("workload, precision", [("mnist-cnn", "fp32"), ("tabular-mlp", "amp-bf16"),
                                                 ("unet", "fp32")])
def test_a_cpu_step_calls_each_traced_op_as_often_as_the_trace_has_it(workload: str, precision: str,
                                                                       tmp_path: Path) -> None:
    s = _script()
    out = tmp_path / "ops.json"
    assert s.main(["--workload", workload, "--preset", "tiny", "--precision", precision, "--steps", "2", "--device",
                   "cpu", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    traced = [r for r in result["ops"] if not r["op"].startswith("not traced")]
    assert traced and all(r["predicted_calls"] > 0 for r in traced)
    assert {r["op"]: r["measured_calls"] for r in traced} == {r["op"]: r["predicted_calls"] for r in traced}
    assert result["cell"] == {"workload": workload, "preset": "tiny", "precision": precision,
                              "batch_size": result["cell"]["batch_size"], "memory_format": "contiguous",
                              "checkpointing": "off", "options": {},
                              "steps": 2, "rules": "cpu"}
    rounding = 5e-5 * len(result["ops"])  # (each row's figures rounded to 0.1 us)
    assert result["measured_device_ms"] == pytest.approx(sum(r["measured_ms"] for r in result["ops"]), abs=rounding)
    assert sum(v["predicted_ms"] for v in result["classes"].values()) == pytest.approx(result["predicted_gpu_ms"],
                                                                                       abs=rounding)
    assert result["measured_step_ms"] > 0 and result["predicted_for"] == "h200"


def test_a_checkpointed_step_recomputes_its_blocks_forward_ops_in_the_trace_and_the_profile(tmp_path: Path) -> None:
    """Each block's forward again in the backward, on both sides: the traced op counts stay the profiler's."""
    s = _script()
    out = {}
    for policy in ("off", "blocks"):
        out[policy] = tmp_path / f"{policy}.json"
        assert s.main(["--workload", "resnext", "--preset", "tiny", "--steps", "2", "--device", "cpu",
                       "--checkpointing", policy, "--out", str(out[policy])]) == 0
    plain, ckpt = (json.loads(out[p].read_text()) for p in ("off", "blocks"))
    def merged(key: str) -> dict[str, float]:  # (autograd sums a gradient with add, or in place with add_ where it
        out: dict[str, float] = {}             # may: the same kernel; the trace says add, the CPU add_ 4 times here)
        for r in ckpt["ops"]:
            if not r["op"].startswith("not traced"):
                op = r["op"].removesuffix("_") if r["op"] == "aten.add_" else r["op"]
                out[op] = out.get(op, 0.0) + r[key]
        return out

    calls = merged("predicted_calls")
    assert calls == merged("measured_calls")
    assert ckpt["cell"]["checkpointing"] == "blocks"
    assert sum(calls.values()) > sum(r["predicted_calls"] for r in plain["ops"])  # (the recompute)
