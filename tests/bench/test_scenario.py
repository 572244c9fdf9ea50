"""The measurement scenario written once (bench/scenario.py): the order a framework's verbs are called in, what the
scenario computes from them (the convergence averages, a cell whose every seed diverged) and how each way a cell
ends becomes its status -- checked with verbs that do nothing but record, so no framework is involved."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ampbench.bench.scenario import CellVerbs, OverBudget, measure_cell
from ampbench.cells import CellSpec
from ampbench.errors import AmpbenchError, TrainingDivergedError, UnsupportedPrecisionError


class Recorded(CellVerbs):
    def __init__(self, raise_in: str = "", error: BaseException | None = None, oom: bool = False,
                 conv: dict[str, Any] | None = None) -> None:
        self.calls: list[str] = []
        self.raise_in, self.error, self.oom = raise_in, error, oom
        self.conv = conv or {"final_losses": [1.0, 3.0], "metrics": [0.5, None], "diverged": [False, False],
                             "reasons": ["", ""]}

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.raise_in:
            assert self.error is not None
            raise self.error

    def open(self, spec, row):  # type: ignore[no-untyped-def]
        self._call("open")
        return super().open(spec, row)

    def build(self, spec, row):  # type: ignore[no-untyped-def]
        self._call("build")
        return "wl"

    def batch_size(self, workload):  # type: ignore[no-untyped-def]
        return 8

    def metric_name(self, workload):  # type: ignore[no-untyped-def]
        return "accuracy"

    def throughput_memory(self, workload, spec, batch_size, row):  # type: ignore[no-untyped-def]
        self._call("throughput_memory")
        row["samples_per_s"] = 100.0
        return "trained"

    def converge(self, workload, spec, batch_size, row):  # type: ignore[no-untyped-def]
        self._call("converge")
        return dict(self.conv)

    def inference(self, trained, workload, sizes, iters):  # type: ignore[no-untyped-def]
        self._call("inference")
        return {str(s): {"iters": iters} for s in sizes}

    def finish(self, trained, row):  # type: ignore[no-untyped-def]
        self._call("finish")

    def close(self) -> None:
        self.calls.append("close")

    def is_oom(self, e: BaseException) -> bool:
        return self.oom


def _spec(**kw: Any) -> CellSpec:
    kw.setdefault("measures", ("throughput", "memory", "converge", "inference"))
    return CellSpec.of(workload="tabular-mlp", preset="tiny", precision="fp32", batch_size=None, device="cpu", steps=4,
                       **kw)


def test_the_verbs_in_the_scenario_s_order_and_what_it_computes() -> None:
    verbs = Recorded()
    row = measure_cell(_spec(inference_batch=32), verbs)
    assert verbs.calls == ["open", "build", "throughput_memory", "converge", "inference", "finish", "close"]
    assert row["status"] == "ok" and row["batch_size"] == 8 and row["metric_name"] == "accuracy"
    assert row["final_loss"] == 2.0 and row["metric"] == 0.5  # (the seeds' mean; a seed without a metric left out)
    assert row["inference"] == {"1": {"iters": 10}, "32": {"iters": 10}}  # (sizes 1 and the inference batch)
    assert row["wall_s"] >= 0 and row["created_at"]


def test_a_cell_whose_every_seed_diverged_is_diverged_and_times_no_inference() -> None:
    conv = {"final_losses": [math.nan, math.inf], "metrics": [None, None], "diverged": [True, True],
            "reasons": ["", "loss is nan at step 3"]}
    verbs = Recorded(conv=conv)
    row = measure_cell(_spec(), verbs)
    assert row["status"] == "diverged" and row["reason"] == "every converge seed diverged: loss is nan at step 3"
    assert math.isnan(row["final_loss"]) and "inference" not in verbs.calls and verbs.calls[-1] == "close"


@pytest.mark.parametrize("error, oom, status", [
    (UnsupportedPrecisionError("no bf16 here"), False, "unsupported"),
    (TrainingDivergedError("scale fell below its floor"), False, "diverged"),
    (OverBudget("peak 3 GiB > --memory-budget 2 GiB"), False, "oom"),
    (AmpbenchError("a one-line reason"), False, "error"),
    (RuntimeError("CUDA out of memory"), True, "oom"),
    (RuntimeError("boom"), False, "error"),
])
@pytest.mark.parametrize("where", ["open", "build", "throughput_memory", "converge"])
def test_each_way_a_cell_ends_is_its_status_and_close_always_runs(error: BaseException, oom: bool, status: str,
                                                                  where: str) -> None:
    verbs = Recorded(raise_in=where, error=error, oom=oom)
    row = measure_cell(_spec(), verbs)
    assert row["status"] == status and str(error).split(" ")[0] in row["reason"]
    assert verbs.calls[-1] == "close" and verbs.calls.count("close") == 1
    if status == "error" and type(error) is RuntimeError:
        assert row["reason"].startswith("RuntimeError: boom (at test_scenario.py:")  # (where it was raised)


def test_maxbatch_runs_first_and_needs_a_trial_runner() -> None:
    verbs = Recorded()
    row = measure_cell(_spec(measures=("maxbatch", "throughput")), verbs)
    assert row["status"] == "error" and "maxbatch needs a trial runner" in row["reason"]
    assert verbs.calls == ["open", "build", "close"]  # (nothing measured before the search)
