"""``ampbench run --optimizer-state``: the axis planned beside the optimizer as built (old keys unchanged), every
state on a model whose weights torchao quantizes, each row's optimizer memory against a hand count, its ratios and
convergence verdict against fp32 with the optimizer as built, the compiled torchao update in a timed cell, and bad
input as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ampbench.bench.config import RunConfig
from ampbench.precision.optimizer_state import missing
from ampbench.store import Store, derive
from ampbench.store.derive import SPLIT_KEYS
from tests.conftest import cli

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))
MODEL = str(Path(__file__).with_name("state_model.py")) + ":build"
SHAPE = ["--input-shape", "64", "--num-classes", "64"]
N = 4096  # elements of each of the model's two weights


def _moment(state: str | None, weight_bytes: int) -> int:
    """One Adam moment of a 4096-element weight, counted by hand from torchao's layout: codes, an fp32 scale per
    block and (8-bit, 4-bit) the fp32 lookup table; plain at the weight's size otherwise."""
    return {None: N * weight_bytes, "8bit": N + 4 * (N // 256) + 4 * 256, "4bit": N // 2 + 4 * (N // 128) + 4 * 16,
            "fp8": N + 4 * (N // 256), "bf16-sr": N * 2}[state]


def test_every_state_beside_the_optimizer_as_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")  # (torchao's update eagerly: tests/precision/test_optimizer_state.py)
    args = ["--model", MODEL, *SHAPE, "--precisions", "fp32,amp-bf16,pure-bf16", "--steps", "2", "--warmup", "1"]
    code, out, err = cli("run", *args, "--optimizer-state", "8bit,4bit,fp8,bf16-sr", "--measure",
                         "throughput,memory,converge", "--seeds", "1", "--converge-steps", "4", "--no-isolate",
                         "--no-report", "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "r.json"))
    assert code in (0, 1), err  # (1: a noisy verdict is still a finished run)
    assert "--optimizer-state bf16-sr left out for fp32, amp-bf16: bf16-sr rounds bf16 weights" in " ".join(out.split())
    rows = derive(json.loads((tmp_path / "r.json").read_text())["rows"])
    cells = [(r["precision"], r["optimizer_state"]) for r in rows if not r.get("closing_baseline")]
    assert sorted(cells, key=str) == sorted([(p, s) for p in ("fp32", "amp-bf16", "pure-bf16")
                                             for s in (None, "8bit", "4bit", "fp8")] + [("pure-bf16", "bf16-sr")], key=str)
    by = {(r["precision"], r["optimizer_state"]): r for r in rows if not r.get("closing_baseline")}
    assert all(r["status"] == "ok" for r in by.values()), [(k, r.get("reason")) for k, r in by.items()]
    for (precision, state), r in by.items():
        weight = 2 if precision == "pure-bf16" else 4
        assert r["optimizer_bytes"] == 2 * (4 + 2 * _moment(state, weight)), (precision, state)  # 2 weights, step counters
        kind = {None: "fp32" if weight == 4 else "bf16", "bf16-sr": "bf16"}.get(state, state)
        assert r["optimizer_states"] == f"{kind} x4"
        # ratios against fp32 with the optimizer as built (recomputed from the two rows' exact splits)
        base = by[("fp32", None)]
        saving = 1 - sum(r[k] for k in SPLIT_KEYS) / sum(base[k] for k in SPLIT_KEYS)
        assert r["memory_saving_vs_fp32"] == pytest.approx(saving) or (r["memory_saving_vs_fp32"] is None and saving == 0)
        assert r["converge_verdict"] is not None
    assert by[("amp-bf16", "8bit")]["optimizer_impl"] == "Adam8bit (torchao)"  # (a --model trains with Adam)
    assert "bf16 stochastic rounding" in by[("pure-bf16", "bf16-sr")]["optimizer_impl"]
    assert by[("fp32", None)]["optimizer_impl"] == "Adam (fused), stepped directly"  # (the engine ran its kernel)
    # the default cells are the cells of a run without the axis: same keys (old stores resume)
    plain = RunConfig.from_strings(device="cpu", model=MODEL, input_shape="64", num_classes=64,
                                   precisions="fp32,amp-bf16,pure-bf16", steps=2, warmup=1,
                                   measure="throughput,memory,converge", seeds=1, converge_steps=4)
    keys = {c.key() for c in plain.cells() if not c.closing}
    assert keys == {r["cell_key"] for r in rows if r["optimizer_state"] is None and not r.get("closing_baseline")}
    stored = Store(tmp_path / "r.db").rows()
    assert {(r["precision"], r["optimizer_state"]) for r in stored} >= set(cells)


def test_a_timed_cell_runs_torchao_s_compiled_update(tmp_path: Path) -> None:
    """The path a user gets: torchao compiles its update (the FLOP-counting step runs it eagerly: no compile under a
    dispatch mode), and the timed steps run the compiled code (dynamo compiled graphs: no eager fallback)."""
    from torch._dynamo.utils import counters

    counters.clear()
    code, out, err = cli("run", "--model", MODEL, *SHAPE, "--precisions", "fp32", "--optimizer-state", "8bit",
                         "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report", "--db", str(tmp_path / "r.db"),
                         "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    rows = {r["optimizer_state"]: r for r in json.loads((tmp_path / "r.json").read_text())["rows"]
            if not r.get("closing_baseline")}
    assert rows["8bit"]["status"] == "ok" and rows["8bit"]["optimizer_states"] == "8bit x4"
    assert rows["8bit"]["optimizer_bytes"] == 2 * (4 + 2 * _moment("8bit", 4))
    assert rows["8bit"]["host_reads_per_step"] == 1.0 and rows[None]["host_reads_per_step"] == 0.0
    assert counters["stats"]["unique_graphs"] >= 1  # (the model runs eager: these are torchao's update graphs)


@pytest.mark.parametrize("args, said", [
    (["--workloads", "resnext", "--preset", "tiny", "--optimizer-state", "8bit"],
     "applies to torch.optim.Adam and AdamW (torchao's low-precision Adam); this workload's optimizer is torch.optim.SGD"),
    (["--model", MODEL, *SHAPE, "--precisions", "fp32,amp-bf16", "--optimizer-state", "bf16-sr"],
     "--optimizer-state bf16-sr applies to none of --precisions fp32,amp-bf16: bf16-sr rounds bf16 weights"),
    (["--model", MODEL, *SHAPE, "--precisions", "pure-bf16", "--optimizer-state", "fp32"],
     "--optimizer-state fp32 applies to none of --precisions pure-bf16: pure-bf16 steps bf16 weights"),
    (["--model", MODEL, *SHAPE, "--optimizer-state", "9bit"], "--optimizer-state '9bit': choose from fp32, bf16"),
    (["--workloads", "keras-conv-dummy", "--preset", "tiny", "--optimizer-state", "8bit"],
     "--optimizer-state is a PyTorch option: Keras's optimizers keep their variables in float32"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], said: str, tmp_path: Path) -> None:
    code, _, err = cli("run", *args, "--dry-run", "--no-isolate", "--db", str(tmp_path / "r.db"))
    assert code == 2 and said in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_the_plan_names_only_the_states_some_cell_runs(tmp_path: Path) -> None:
    """bf16 states come with bf16 weights (pure-bf16's as built): no cell runs them, so the plan's axis leaves them out
    and the note says why."""
    code, out, err = cli("run", "--model", MODEL, *SHAPE, "--precisions", "fp32,amp-bf16,pure-bf16", "--optimizer-state",
                         "bf16,8bit", "--dry-run", "--no-isolate", "--db", str(tmp_path / "r.db"))
    text = " ".join(out.split())
    assert code == 0, err
    assert "(fp32, amp-bf16, pure-bf16 x optimizer states as built, 8bit + 1 closing fp32)" in text
    assert "--optimizer-state bf16 left out for fp32, amp-bf16" in text
