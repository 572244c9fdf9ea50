"""``ampbench run --grad-accum N``: each timed step accumulates N micro-batches before the optimizer steps, as
``train --grad-accum N`` does -- the gradients those of the whole N x B batch (held against one plain step of it),
samples/s over N x B, the FLOPs N micro-batches', the saved activations one micro-batch's, the rows' identity and
titles, the plain cells' keys unchanged, and what it cannot take refused in one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampbench.bench.config import RunConfig
from ampbench.cells import CellId
from ampbench.data.tensors import TensorData
from ampbench.measure.flops import count_step
from ampbench.measure.step import build_step
from ampbench.workloads.base import Workload
from ampbench.workloads.factory import create_workload
from tests.conftest import cli


def _mlp() -> Workload:
    """No BatchNorm, no dropout: a step's gradients are its samples' mean, however they are split."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    data = TensorData((torch.randn(64, 16, generator=g),), torch.randint(0, 4, (64,), generator=g))
    return Workload("mlp", model, data, loss_fn=F.cross_entropy,
                    make_optimizer=lambda p: torch.optim.AdamW(p, lr=1e-3), batch_size=32)


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16", "master-bf16"])
def test_an_accumulated_step_trains_as_one_step_of_the_whole_batch(precision: str) -> None:
    """Oracle: 4 micro-batches of 8, each loss weighted 1/4, leave the gradients -- and after the optimizer, the
    weights -- of one plain step over the 32 samples they are (the same batches staged: device_batches' order)."""
    weights = {}
    grads = {}
    for micro, batch in ((4, 8), (1, 32)):
        wl = _mlp()
        step = build_step(wl, precision, batch, torch.device("cpu"), micro_batches=micro)
        held: list[torch.Tensor] = []

        def read(s=step, h=held) -> None:  # (the gradients the optimizer steps from: master-*'s moved to the masters)
            s.mp.move_grads(s.optimizer)
            h.extend(p.grad.detach().float().clone() for g in s.optimizer.param_groups for p in g["params"])

        step(after_backward=read)
        assert step.calls == micro
        grads[micro] = held
        weights[micro] = [p.detach().float().clone() for p in wl.model.parameters()]
    tol = 1e-6 if precision == "fp32" else 2e-2
    for a, b in zip(grads[4], grads[1]):
        torch.testing.assert_close(a, b, atol=tol * 1e-2, rtol=tol)
    for a, b in zip(weights[4], weights[1]):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_an_accumulated_steps_flops_are_its_micro_batches(tmp_path: Path) -> None:
    wl = create_workload("tabular-mlp", "tiny", seed=0)
    step = build_step(wl, "fp32", 16, torch.device("cpu"), micro_batches=3)
    plain = count_step(lambda: step(micro_batches=1)).total
    assert count_step(step).total == 3 * plain > 0


def test_run_grad_accum_measures_the_accumulated_step(tmp_path: Path) -> None:
    args = ["--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16", "--batch-size", "16",
            "--steps", "4", "--warmup", "1", "--no-isolate", "--no-report"]
    rows = {}
    for n in (1, 3):
        out = tmp_path / f"r{n}.json"
        code, text, err = cli("run", *args, "--grad-accum", str(n), "--db", str(tmp_path / "r.db"), "--json", str(out))
        assert code in (0, 1), err
        rows[n] = {r["precision"]: r for r in json.loads(out.read_text())["rows"] if not r.get("closing_baseline")}
        if n == 3:
            said = " ".join(text.split())
            assert "tabular-mlp (tiny), batch 16 x 3 micro-batches a step (48 samples)" in said
            assert "fp32 b16 x3 micro-batches" in said
    for precision in ("fp32", "amp-bf16"):
        acc, plain = rows[3][precision], rows[1][precision]
        assert acc["status"] == plain["status"] == "ok"
        assert acc["grad_accum"] == 3 and not plain.get("grad_accum")  # (null: no accumulation)
        assert CellId.of(acc) != CellId.of(plain) and CellId.of(acc).grad_accum == 3
        assert acc["cell_key"] != plain["cell_key"]
        # (samples/s over every micro-batch's samples: 3 x 16 a step; the timer's total against the steps' mean)
        assert acc["samples_per_s"] == pytest.approx(48 / (acc["step_ms_mean"] / 1e3), rel=0.05)
        assert plain["samples_per_s"] == pytest.approx(16 / (plain["step_ms_mean"] / 1e3), rel=0.05)
        assert acc["flops_per_step"] == 3 * plain["flops_per_step"]
        assert acc["activation_bytes"] == plain["activation_bytes"]  # (one micro-batch's)
        assert (acc["weights_bytes"], acc["grads_bytes"], acc["optimizer_bytes"]) == \
            (plain["weights_bytes"], plain["grads_bytes"], plain["optimizer_bytes"])


def test_plain_cells_keep_their_keys_and_bad_grad_accum_is_one_line(tmp_path: Path) -> None:
    base = dict(device="cpu", workloads="tabular-mlp", preset="tiny", precisions="fp32")
    plain = RunConfig.from_strings(**base).cells()[0]
    ones = RunConfig.from_strings(**base, grad_accum=1).cells()[0]
    assert plain.key() == ones.key() and "grad_accum" not in plain.to_dict()
    assert RunConfig.from_strings(**base, grad_accum=2).cells()[0].key() != plain.key()
    for extra, said in ((["--grad-accum", "0"], "--grad-accum 0: give the micro-batches per optimizer step"),
                        (["--grad-accum", "2", "--measure", "throughput,converge"],
                         "--measure converge trains at the batch size alone")):
        code, out, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", *extra,
                             "--db", str(tmp_path / "bad.db"))
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not (tmp_path / "bad.db").exists()


def test_several_grad_accums_run_side_by_side_each_with_its_baseline(tmp_path: Path) -> None:
    """``--grad-accum 1,3``: every precision at each (a batch dimension: each its own fp32 baseline and closing
    baseline, its own advice), one table with the batch column saying "16 x 3"."""
    config = RunConfig.from_strings(device="cpu", workloads="tabular-mlp", preset="tiny", precisions="fp32,amp-bf16",
                                    grad_accum="1,3")
    cells = [(c.precision, c.grad_accum, c.closing) for c in config.cells()]
    assert cells == [("fp32", 1, False), ("amp-bf16", 1, False), ("fp32", 1, True),
                     ("fp32", 3, False), ("amp-bf16", 3, False), ("fp32", 3, True)]
    out = tmp_path / "r.json"
    code, text, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16",
                          "--batch-size", "16", "--grad-accum", "1,3", "--steps", "3", "--warmup", "1", "--no-isolate",
                          "--no-report", "--db", str(tmp_path / "r.db"), "--json", str(out))
    assert code in (0, 1), err
    said = " ".join(text.split())
    assert "16 x 3 │" in text, text  # (the batch column)
    assert "tabular-mlp (tiny) at batch 16, 16 x 3:" in said or "; batch 16 x 3:" in said, said  # (the advice)
    assert "tabular-mlp (tiny) batch 16 x 3 micro-batches a step: fp32 " in said  # (what accumulating cost)
    code, md, err = cli("report", "--db", str(tmp_path / "r.db"), "--out", "-", "--format", "md")
    assert code == 0 and "### Gradient accumulation" in md and "x 3 micro-batches a step: fp32 " in md, err
    from ampbench.store import derive

    rows = [r for r in derive(json.loads(out.read_text())["rows"]) if not r.get("closing_baseline")]
    for r in rows:  # (each ratio over the fp32 of its own accumulation)
        base = next(b for b in rows if b["precision"] == "fp32" and b.get("grad_accum") == r.get("grad_accum"))
        assert r["speedup_vs_fp32"] == pytest.approx(r["samples_per_s"] / base["samples_per_s"])
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--grad-accum", "1,x",
                       "--db", str(tmp_path / "bad.db"))
    assert code == 2 and "--grad-accum '1,x': expected integers >= 1" in err and len(err.strip().splitlines()) == 1
