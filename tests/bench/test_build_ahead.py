"""Building ahead (``--build-ahead``, on by default for isolated GPU cells): each cell's process starts while the
previous cell measures, builds its workload on the host, and touches the device only after that cell's process has
exited. Forced on here, on the CPU: the rows are those of a run without it (the oracle), and the overlap is in them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ampbench.bench import RunConfig
from ampbench.bench.runner import run
from ampbench.launch.process import _ZYGOTES
from ampbench.report.run_text import phases_line
from ampbench.store.sqlite import Store

SAME = ("status", "batch_size", "weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes", "flops_per_step",
        "final_loss", "math_mode")


def config(ahead: bool) -> RunConfig:
    return RunConfig.of(device="cpu", workloads=("mnist-cnn",), presets=("tiny",),
                        precisions=("fp32", "amp-bf16"), measures=("throughput", "memory"), steps=2, warmup=1,
                        extra={"isolate": True, "build_ahead": ahead})


def test_cells_built_ahead_give_the_rows_of_cells_built_at_their_turn(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, ahead = run(config(True), Store(tmp_path / "a.db"))
    _, plain = run(config(False), Store(tmp_path / "b.db"))
    assert [(r["workload"], r["precision"]) for r in ahead] == [(r["workload"], r["precision"]) for r in plain]
    for a, p in zip(ahead, plain, strict=True):
        for key in SAME:
            assert a[key] == p[key], (a["workload"], a["precision"], key)
    first, *rest = ahead
    assert first.get("ahead_s") is None and "waiting" not in first["phases_s"]  # (the run's first cell: at its turn)
    for r in rest:  # (every later cell lived while the one before it measured, and its phases still add up)
        assert r["ahead_s"] > 0 and r["phases_s"]["waiting"] > 0 and r["phases_s"]["build"] > 0
        assert r["ahead_s"] <= r["wall_s"] and sum(r["phases_s"].values()) == pytest.approx(r["wall_s"])
    assert all(r.get("ahead_s") is None and "waiting" not in r["phases_s"] for r in plain)
    line = phases_line(rest[0])  # (--verbose)
    assert line.startswith(f"wall {rest[0]['wall_s']:.1f} s, {rest[0]['ahead_s']:.1f} of it ahead = ")
    assert ("waiting" in line) == (rest[0]["phases_s"]["waiting"] >= 0.05)  # (a short wait is one of the shorter phases)
    assert ", " not in phases_line(plain[0]).split(" = ")[0]


class Stop(Exception):
    pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_run_that_stops_leaves_no_process_waiting_for_its_turn(tmp_path) -> None:  # type: ignore[no-untyped-def]
    def on_event(event) -> None:  # type: ignore[no-untyped-def]
        if event.phase == "done":
            raise Stop  # (as a Ctrl-C after the first cell)

    with pytest.raises(Stop):
        run(config(True), Store(tmp_path / "c.db"), on_event=on_event)
    for z in _ZYGOTES.values():  # (the next cell's process was started ahead: ended with the run)
        assert Path(f"/proc/{z.proc.pid}/task/{z.proc.pid}/children").read_text().split() == []
    store = Store(tmp_path / "c.db")
    assert len(store.rows(store.runs()[-1].run_id)) == 1  # (what was measured is kept)


def test_building_ahead_also_imports_what_the_optimizers_set_up_would() -> None:
    """torch.optim's Optimizer.__init__ imports torch._dynamo on its first call (3.5 s of each cell's engine set-up on
    the lent H200): a cell built ahead has imported it while the previous cell ran. A fresh interpreter: this one has
    imported it already."""
    import subprocess

    code = ("import sys\n"
            "from ampbench.bench import CellSpec\n"
            "from ampbench.frameworks.torch.cell import TorchCell\n"
            "spec = CellSpec.of(workload='mnist-cnn', model=None, preset='tiny', precision='fp32', batch_size=None,"
            " device='cpu', measures=('throughput',), steps=2, warmup=1)\n"
            "before = 'torch._dynamo' in sys.modules\n"
            "TorchCell(spec).build_ahead(spec)\n"
            "print(before, 'torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
