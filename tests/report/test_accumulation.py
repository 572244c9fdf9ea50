"""The advice for a batch that ran out of memory: the split into micro-batches that trains it a step (train
--grad-accum), from the largest batch that fit."""

from __future__ import annotations

import pytest

from ampbench.execution.micro_batches import micro_batches
from ampbench.report.accumulation import accumulation_note
from ampbench.report.advisor import advise
from ampbench.store import derive
from tests.report.test_advisor import _row


@pytest.mark.parametrize("batch", [1, 7, 12, 64, 97, 256, 1000, 4096])
@pytest.mark.parametrize("largest", [1, 3, 5, 50, 128, 1728, 5000])
def test_the_split_is_the_fewest_equal_micro_batches_within_the_largest(batch: int, largest: int) -> None:
    """Oracle: every N from 1 up, the first that divides the batch into micro-batches no larger than the largest."""
    first = next(n for n in range(1, batch + 1) if batch % n == 0 and batch // n <= largest)
    assert micro_batches(batch, largest) == (first, batch // first)
    n, micro = micro_batches(batch, largest)
    assert n * micro == batch and micro <= largest


def test_out_of_memory_rows_get_their_split_and_the_gradients_they_hold() -> None:
    rows = [_row("fp32", None, status="oom", batch_size=4096, max_batch=1728, model_bytes_fp32=597528,
                 model_bytes_half=298776),
            _row("pure-bf16", None, status="oom", batch_size=4096, max_batch=3072, model_bytes_fp32=597528,
                 model_bytes_half=298776)]
    assert accumulation_note(rows) == (
        "batch 4,096 a step by gradient accumulation (ampbench train --batch-size M --grad-accum N, M within the "
        "largest batch that fit): fp32 4 x 1,024, pure-bf16 2 x 2,048; the summed gradients (up to 583.5 KiB) stay "
        "allocated across the micro-batches (run --grad-accum N --measure maxbatch measures the largest micro-batch "
        "with them held)")
    assert "291.8 KiB" in (accumulation_note(rows[1:]) or "")  # (pure-bf16 sums in bf16: half of fp32's bytes)


def test_without_a_largest_batch_it_says_which_measurement_finds_it() -> None:
    rows = [_row("fp32", None, status="oom", batch_size=512), _row("amp-bf16", 900.0, batch_size=512)]
    assert accumulation_note(rows) == ("fp32 out of memory at batch 512: --measure maxbatch finds the largest batch "
                                       "that fits, and ampbench train --grad-accum N trains the whole batch a step "
                                       "from it")
    assert accumulation_note([_row("fp32", 100.0), _row("amp-bf16", 300.0)]) is None


def test_the_advice_names_fp32_out_of_memory_and_the_split() -> None:
    a = advise(derive([_row("fp32", None, status="oom", batch_size=2048, max_batch=1920, model_bytes_fp32=2 << 20),
                       _row("amp-bf16", 1500.0, batch_size=2048, max_batch=2752)]))
    assert a.recommended == "amp-bf16"
    assert "(fp32 ran out of memory)" in a.evidence and "no fp32 baseline" not in a.evidence
    assert a.evidence.endswith("fp32 2 x 1,024; the summed gradients (up to 2.0 MiB) stay allocated across the "
                               "micro-batches (run --grad-accum N --measure maxbatch measures the largest micro-batch "
                               "with them held)"), a.evidence
    every = advise(derive([_row("fp32", None, status="oom", batch_size=4096, max_batch=1728),
                           _row("amp-bf16", None, status="oom", batch_size=4096, max_batch=2688)]))
    assert every.recommended is None and every.evidence.endswith("fp32 4 x 1,024, amp-bf16 2 x 2,048"), every.evidence


def test_only_the_pure_modes_sum_in_half() -> None:
    from ampbench.precision import half_gradients

    assert [m for m in ("fp32", "tf32", "amp-fp16", "amp-bf16", "master-fp16", "master-bf16", "pure-fp16", "pure-bf16",
                        "fp8-tensorwise", "no-such-mode") if half_gradients(m)] == ["pure-fp16", "pure-bf16"]


MIB = 2**20


def _trials(fixed: float, per_sample: float, fits: list[int], misses: list[int]) -> list[list]:
    return [[b, True, fixed + per_sample * b] for b in fits] + [[b, False, None] for b in misses]


def test_the_split_leaves_room_for_the_summed_gradients_by_the_trials_measured_peaks() -> None:
    """fp32 ran out of memory at 3,456; 1,728 fit, its step holding 100 MiB + 1 MiB a sample. 2 x 1,728 would hold
    the 50 MiB of summed gradients beyond what 1,728 held; the oracle, every N from 1 up by hand: the first whose
    micro-batch, plus the gradients, stays within 1,728's measured peak -- 3 x 1,152."""
    grads = 50 * MIB
    row = _row("fp32", None, status="oom", batch_size=3456, max_batch=1728, model_bytes_fp32=grads,
               max_batch_trials=_trials(100 * MIB, MIB, [1, 2, 4, 1024, 1536, 1728], [2048, 1792]))
    room = 100 * MIB + 1728 * MIB
    first = next(n for n in range(1, 3457) if 3456 % n == 0 and 100 * MIB + MIB * (3456 // n) + grads <= room)
    assert (first, 3456 // first) == (3, 1152)
    note = accumulation_note([row])
    assert note is not None and "fp32 3 x 1,152" in note, note
    assert "leaves room for the summed gradients (50.0 MiB) within the largest batch's measured peak" in note
    assert "stay allocated" not in note  # (said only of a split the trials did not check)
    # without the trials' peaks: the split within the largest batch, the gradients said
    bare = accumulation_note([{**row, "max_batch_trials": [[1728, True, None], [2048, False, None]]}])
    assert bare is not None and "fp32 2 x 1,728" in bare and "stay allocated" in bare
    # gradients larger than the room any micro-batch leaves: said, no split
    huge = accumulation_note([{**row, "model_bytes_fp32": 2000 * MIB}])
    assert huge == ("fp32: no micro-batch leaves room for the summed gradients within the largest batch's measured "
                    "peak")


def test_the_faster_way_to_a_batch_that_does_not_fit_is_named() -> None:
    from ampbench.report.accumulation import checkpointed_text

    row = {"predicted_blocks": 12, "predicted_accumulated_samples_per_s": 90.0,
           "predicted_checkpointed": {"blocks": {"peak_bytes": 9 * 2**30, "step_ms": 700.0, "samples_per_s": 120.0},
                                      "selective": {"peak_bytes": 30 * 2**30}}}
    assert checkpointed_text(row) == (
        "checkpointing its 12 repeated blocks (--checkpointing): blocks 700.0 ms a step, 120 samples/s (9.0 GiB); "
        "selective does not fit (30.0 GiB); the faster way to this batch: --checkpointing blocks (120 against 90 "
        "samples/s accumulated)")
    slower = {**row, "predicted_accumulated_samples_per_s": 150.0}
    assert (checkpointed_text(slower) or "").endswith("the faster way to this batch: gradient accumulation (150 "
                                                      "against 120 samples/s)")
    none_fits = {**row, "predicted_checkpointed": {"blocks": {"peak_bytes": 20 * 2**30}}}
    assert checkpointed_text(none_fits) == ("checkpointing its 12 repeated blocks (--checkpointing): blocks does not "
                                            "fit (20.0 GiB)")
    assert checkpointed_text({"predicted_checkpointed": {}}) is None  # (no blocks: nothing to say)


def test_what_accumulating_costs_is_each_precisions_samples_over_its_plain_twin() -> None:
    from ampbench.report.accumulation import accumulation_cost

    def row(precision: str, n: int, rate: float, **extra) -> dict:
        return {"run_id": "r1", "workload": "bert", "preset": "small", "precision": precision, "batch_size": 16,
                "status": "ok", "samples_per_s": rate, **({"grad_accum": n} if n != 1 else {}), **extra}

    rows = [row("fp32", 1, 117.0), row("amp-bf16", 1, 238.0), row("fp32", 4, 114.0), row("amp-bf16", 4, 219.0),
            row("fp32", 1, 120.0, closing_baseline=True), row("amp-bf16", 4, 1.0, run_id="r2")]  # (no twin in r2)
    assert accumulation_cost(rows) == [
        f"bert (small) batch 16 x 4 micro-batches a step: fp32 {114 / 117:.2f}x, amp-bf16 {219 / 238:.2f}x the plain "
        "step's samples/s (each later micro-batch adds its gradients into the held ones; one optimizer step for all)"]
    assert accumulation_cost(rows[2:4]) == []  # (no plain step measured beside them)
    # A state precision is named beside its mode (two fp32 rows never read alike); two executions, a line each,
    # each saying which.
    states = [row("fp32", 1, 100.0), row("fp32", 1, 20.0, optimizer_state="8bit"), row("fp32", 4, 120.0),
              row("fp32", 4, 60.0, optimizer_state="8bit"), row("fp32", 1, 50.0, compile="on"),
              row("fp32", 4, 55.0, compile="on")]
    lines = accumulation_cost(states)
    assert [line.split(" the plain")[0] for line in lines] == [
        "bert (small) batch 16 x 4 micro-batches a step, eager: fp32 1.20x, fp32 (8bit states) 3.00x",
        "bert (small) batch 16 x 4 micro-batches a step, compile: fp32 1.10x"]


def test_an_oom_row_of_a_model_with_repeated_blocks_names_checkpointing_too() -> None:
    rows = [_row("fp32", None, status="oom", batch_size=4096, max_batch=1728, model_bytes_fp32=597528,
                 repeated_blocks=12)]
    note = accumulation_note(rows) or ""
    assert note.endswith("; or checkpoint the model's 12 repeated blocks to hold less of each batch's activations "
                         "(run --checkpointing off,blocks,selective measures what it holds and costs)"), note
    checkpointed = [{**rows[0], "checkpointing": "blocks"}]  # (already checkpointed: nothing more to say of it)
    assert "checkpoint the model's" not in (accumulation_note(checkpointed) or "")
    assert "checkpoint the model's" not in (accumulation_note([{**rows[0], "repeated_blocks": None}]) or "")
