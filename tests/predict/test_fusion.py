"""A compiled step (``predict --compile``): Inductor's fusions re-derived from the traced data flow
(:mod:`ampbench.predict.fusion`), the host's graph and launch costs (:class:`~ampbench.predict.cost.Compiled`).

Oracles: hand-made traces whose fused bytes are counted by hand; a real model traced on meta, its fused groups'
bytes computed from the model's shapes; the step's phases as the engine issues them (the loss and the optimizer are
not the model's)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import torch
from torch import nn

from ampbench.data import TensorData
from ampbench.measure import calibrate as cal
from ampbench.measure.gpus import lookup
from ampbench.predict import fusion
from ampbench.predict.cost import MEASURED_HOST, Compiled, price
from ampbench.predict.measured_kernels import TABLES_DIR
from ampbench.predict.trace import Op, Trace, trace_inference, trace_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import build_meta
from tests.conftest import cli

MB = 2**20


def _op(name: str, reads: list[tuple[int, int]], writes: list[tuple[int, int]], phase: str = "forward",
        in_model: bool = True, **kw) -> Op:
    return Op(name, phase, 0, sum(b for _, b in reads), sum(b for _, b in writes), "fp32", reads=tuple(reads),
              writes=tuple(writes), in_model=in_model, **kw)


def _trace(ops: list[Op]) -> Trace:
    return Trace(ops, 1, 0, 0, 0, 0, 0, 0, "SGD", False)


def test_a_bias_and_activation_between_two_matmuls_are_one_kernel_reading_and_writing_once() -> None:
    """x -> mm -> (+ bias -> gelu) -> mm: the two elementwise ops become one kernel that reads the matmul's output and
    the bias and writes the activation the second matmul reads; the sum in between never reaches memory."""
    ops = [_op("aten.mm", [(1, MB), (2, MB)], [(3, 4 * MB)]),
           _op("aten.add", [(3, 4 * MB), (4, 1024)], [(5, 4 * MB)]),
           _op("aten.gelu", [(5, 4 * MB)], [(6, 4 * MB)]),
           _op("aten.mm", [(6, 4 * MB), (7, MB)], [(8, MB)])]
    out = fusion.compiled(ops)
    assert [o.name for o in out] == ["aten.mm", fusion.FUSED, "aten.mm"]
    fused = out[1]
    assert fused.bytes_read == 4 * MB + 1024 and fused.bytes_written == 4 * MB and fused.tensors == 1
    eager = 2 * (4 * MB) + 1024 + 2 * (4 * MB)  # (each op reads and writes on its own)
    assert fused.bytes_read + fused.bytes_written < eager


def test_no_fusion_across_a_library_kernel_that_sits_between_them() -> None:
    """a -> mm -> b, where b also reads a's output: b cannot join a (a kernel cannot wait on a GEMM that waits on it):
    a's output is written, and read again by b."""
    ops = [_op("aten.relu", [(1, MB)], [(2, MB)]),
           _op("aten.mm", [(2, MB), (3, MB)], [(4, MB)]),
           _op("aten.add", [(4, MB), (2, MB)], [(5, MB)]),
           _op("aten.mm", [(5, MB), (3, MB)], [(6, MB)])]
    out = fusion.compiled(ops)
    assert [o.name for o in out] == [fusion.FUSED, "aten.mm", fusion.FUSED, "aten.mm"]
    assert out[0].bytes_written == MB and out[2].bytes_read == 2 * MB


def test_what_the_backward_or_a_buffer_keeps_is_written_and_the_forward_and_backward_are_apart() -> None:
    """A forward value the backward reads is written; a buffer updated in place (running statistics) is written; an
    op of the backward never joins one of the forward; a normalisation's backward is two kernels, the second reading
    its inputs again; the loss and the optimizer (not the model's) stay as traced."""
    ops = [_op("aten.relu", [(1, MB)], [(2, MB)]),
           _op("aten.mul", [(2, MB)], [(3, MB)]),
           _op("aten.add_", [(9, 64), (3, 64)], [(9, 64)]),  # (a buffer, first seen here: written in place)
           _op("aten.sum", [(3, MB)], [(10, 4)], phase="loss", in_model=False),
           _op("aten.native_layer_norm_backward", [(11, MB), (2, MB)], [(12, MB)], phase="backward"),
           _op("aten.mul", [(12, MB)], [(13, MB)], phase="backward"),
           _op("aten._foreach_add_", [(13, MB)], [(14, MB)], phase="optimizer", in_model=False)]
    out = fusion.compiled(ops)
    assert [o.name for o in out] == [fusion.FUSED, "aten.sum", fusion.FUSED, "aten._foreach_add_"]
    forward, backward = out[0], out[2]
    assert dict(forward.writes) == {2: MB, 3: MB, 9: 64}  # (read by the backward; by the loss; the buffer)
    assert backward.tensors == 2 and backward.bytes_read == 2 * MB + 2 * MB  # (its second kernel reads them again)
    assert dict(backward.writes) == {13: MB}


def test_a_compiled_graph_costs_the_host_a_call_and_a_launch_per_kernel_and_nothing_per_kernel_under_graphs() -> None:
    """Oracle: the host's time of a launch-bound trace, counted by hand (the step is the host's there). Each op issued
    eagerly (all of them eager; the loss's sum under compile) costs the per-op figure plus what the architecture's
    kernel table says an elementwise op's issue costs beyond the per-op figure's mix: the mean of a GEMM's and an
    elementwise op's issue, each kind's median over the H200 table's one-call cases."""
    ops = [_op("aten.relu", [(i, 64)], [(i + 1, 64)]) for i in range(0, 200, 2)]  # (100 unconnected tiny kernels)
    ops.append(_op("aten.sum", [(999, 64)], [(1000, 4)], phase="loss", in_model=False))
    gpu = lookup("h100-sxm")
    eager = price(_trace(ops), gpu, False)
    table = cal.from_csv((TABLES_DIR / "h200.csv").read_text())["kernels"]
    issue = {kind: statistics.median(float(k["host_us"]) for k in table if k["kind"] == kind and k.get("host_us")
                                     and not k["op"].endswith("_fwd_bwd"))  # (one call each: no autograd around)
             for kind in ("gemm", "elementwise")}
    beyond = issue["elementwise"] - (issue["gemm"] + issue["elementwise"]) / 2
    assert eager.host_s == pytest.approx(101 * (MEASURED_HOST.forward_us + beyond) * 1e-6)
    c = Compiled(fuse=False, graphs=False)
    assert price(_trace(ops), gpu, False, compiled=c).host_s == pytest.approx(
        (c.graph_us + 100 * c.kernel_us + MEASURED_HOST.forward_us + beyond) * 1e-6)
    g = Compiled(fuse=False, graphs=True)
    graphs = price(_trace(ops), gpu, False, compiled=g)
    assert graphs.host_s == pytest.approx((g.graph_us + g.replay_us + MEASURED_HOST.forward_us + beyond) * 1e-6)
    assert graphs.gpu_s == pytest.approx(eager.gpu_s)  # (the same kernels: CUDA graphs change the host's time only)


class _Block(nn.Module):
    """x -> Linear -> GELU -> Linear -> + x -> LayerNorm: the fused groups are {GELU} and {+ x, LayerNorm}."""

    def __init__(self, d: int = 64, h: int = 256) -> None:
        super().__init__()
        self.up, self.down, self.norm = nn.Linear(d, h), nn.Linear(h, d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.down(torch.nn.functional.gelu(self.up(x))) + x)


def _block_workload() -> Workload:
    return Workload("block", _Block(), TensorData((torch.empty(1, 64),), torch.zeros(1, dtype=torch.long)))


def test_a_traced_blocks_fused_groups_read_and_write_what_its_shapes_say() -> None:
    """Inference of the block at batch B: eager runs addmm, gelu, addmm, add, layer norm (5 kernels); compiled, two
    fused kernels between the library GEMMs -- GELU reading and writing B x 256 floats; the residual add and the layer
    norm reading the GEMM's B x 64, x's B x 64 and the norm's two weights, writing B x 64 (the sum stays inside; the
    norm's statistics, which nothing reads in inference, are not written)."""
    b = 512
    trace = trace_inference(build_meta(_block_workload), "fp32", b)
    assert [o.name for o in trace.ops] == ["aten.addmm", "aten.gelu", "aten.addmm", "aten.add",
                                           "aten.native_layer_norm"]
    out = fusion.compiled(trace.ops, trace.outputs)
    assert [o.name for o in out] == ["aten.addmm", fusion.FUSED, "aten.addmm", fusion.FUSED]
    gelu, norm = out[1], out[3]
    assert (gelu.bytes_read, gelu.bytes_written) == (4 * b * 256, 4 * b * 256)
    assert norm.bytes_read == 4 * (b * 64 + b * 64 + 64 + 64) and norm.bytes_written == 4 * b * 64
    assert norm.tensors == 1  # (the add is the norm's prologue: one persistent reduction)
    assert fusion.compiled(trace.ops)[3].bytes_written == 0  # (an output no one reads would be dead: outputs say)
    eager, compiled = price(trace, lookup("a100-40gb"), False), price(trace, lookup("a100-40gb"), False,
                                                                      compiled=Compiled(True, False))
    assert compiled.launches == 4 < eager.launches == 5 and compiled.gpu_s < eager.gpu_s


def test_a_training_step_marks_the_models_own_ops_not_the_loss_or_the_optimizer() -> None:
    """What torch.compile(model) compiles: the forward's ops, and the backward's from the model's output on; the
    loss (cross-entropy), its backward (log-softmax's and nll's), the engine's step and the optimizer are eager."""
    trace = trace_step(build_meta(_block_workload), "fp32", 8)
    model = [o for o in trace.ops if o.in_model]
    assert {o.phase for o in model} == {"forward", "backward"}
    assert all(o.in_model for o in trace.ops if o.phase == "forward")
    assert not any(o.in_model for o in trace.ops if o.phase in ("loss", "step", "optimizer"))
    backward = [o for o in trace.ops if o.phase == "backward"]
    eager_part = [o.name for o in backward if not o.in_model]
    assert eager_part and all(not o.in_model for o in backward[:len(eager_part)])  # (the loss's, first)
    assert {"aten.nll_loss_backward", "aten._log_softmax_backward_data"} <= set(eager_part)
    assert "aten.native_layer_norm_backward" in {o.name for o in backward if o.in_model}


def test_predict_compile_and_cuda_graphs_rows_pair_with_runs_cells(tmp_path: Path) -> None:
    """--compile off,on --cuda-graphs off,on: a row per execution and precision, each carrying the cell's execution
    (as run's cells do), its gain over the same precision's eager step and the note that it is compiled; the
    compiled step of a launch-bound model is faster than its eager one, and faster again under CUDA graphs."""
    out = tmp_path / "p.json"
    code, text, err = cli("predict", "--gpu", "h100-sxm", "--workloads", "tabular-mlp", "--preset", "small",
                          "--precisions", "fp32,amp-bf16", "--compile", "off,on", "--cuda-graphs", "off,on",
                          "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert code == 0, err
    rows = json.loads(out.read_text())
    by = {(r["precision"], r["compile"], r["cuda_graphs"]): r for r in rows}
    assert len(rows) == len(by) == 8
    for precision in ("fp32", "amp-bf16"):
        eager = by[(precision, "off", "off")]
        assert "predicted_speedup_vs_eager" not in eager
        for execution in (("on", "off"), ("off", "on"), ("on", "on")):
            r = by[(precision, *execution)]
            assert r["predicted_speedup_vs_eager"] == pytest.approx(eager["predicted_step_ms"] /
                                                                    r["predicted_step_ms"])
            assert any("compiled as ampbench run compiles it" in n for n in r["notes"])
            assert r["predicted_error_pct"] > eager["predicted_error_pct"] and "compiled: +" in r["predicted_error_basis"]
        assert by[(precision, "on", "on")]["predicted_step_ms"] < by[(precision, "on", "off")]["predicted_step_ms"] \
            < eager["predicted_step_ms"]
    assert "compile+cuda-graphs" in text


@pytest.mark.parametrize("args, said", [
    (["--compile", "fast"], "--compile 'fast': choose from off, on, max-autotune"),
    (["--cuda-graphs", "yes"], "--cuda-graphs 'yes': choose from off, on"),
])
def test_bad_execution_values_are_one_line_and_exit_2(args: list[str], said: str, tmp_path: Path) -> None:
    code, _, err = cli("predict", "--gpu", "t4", *args, "--db", str(tmp_path / "r.db"))
    assert code == 2 and said in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_reduction_to_one_value_is_a_kernel_before_the_pass_that_uses_it() -> None:
    """fp8's tensorwise cast: the tensor's amax (one value) must be complete before the cast scales the tensor with
    it: two kernels, the tensor read twice; a row-wise amax (one value per row) and its cast are one kernel."""
    whole = [_op("aten.abs", [(1, MB)], [(2, MB)]),
             _op("aten.max", [(2, MB)], [(3, 4)], reduces=True),
             _op("aten.reciprocal", [(3, 4)], [(4, 4)]),
             _op("aten.mul", [(1, MB), (4, 4)], [(5, MB // 2)]),
             _op("aten.mm", [(5, MB // 2), (6, MB)], [(7, MB)])]
    fused = fusion.compiled(whole)[0]
    assert fused.tensors == 2 and fused.bytes_read == 2 * MB and dict(fused.writes) == {5: MB // 2}
    rows = [_op("aten.abs", [(1, MB)], [(2, MB)]),
            _op("aten.amax", [(2, MB)], [(3, 4096)], reduces=True),
            _op("aten.mul", [(1, MB), (3, 4096)], [(5, MB // 2)]),
            _op("aten.mm", [(5, MB // 2), (6, MB)], [(7, MB)])]
    fused = fusion.compiled(rows)[0]
    assert fused.tensors == 1 and fused.bytes_read == MB


class _Boxed(nn.Module):
    """Returns its logits inside an object no pytree knows: no hook reaches the backward of the model's output."""

    class Out:
        def __init__(self, logits: torch.Tensor) -> None:
            self.logits = logits

    def __init__(self) -> None:
        super().__init__()
        self.inner = _Block()

    def forward(self, x: torch.Tensor) -> Out:
        return self.Out(self.inner(x))


def test_a_backward_no_hook_reaches_is_taken_as_the_models() -> None:
    """(Rather than a compiled step whose whole backward is priced eager.)"""
    wl = lambda: Workload("boxed", _Boxed(), TensorData((torch.empty(1, 64),), torch.zeros(1, dtype=torch.long)),  # noqa: E731
                          loss_fn=lambda out, t: torch.nn.functional.cross_entropy(out.logits, t))
    trace = trace_step(build_meta(wl), "fp32", 8)
    assert all(o.in_model for o in trace.ops if o.phase == "backward")
