"""How ``train --strategy`` passes its ranks' standard error on (:func:`ampbench.launch.torchrun.forward_stderr`),
on torchrun's own output as torch 2.13 writes it (recorded from a 2-rank ddp run whose ranks both refused)."""

from __future__ import annotations

import io

from ampbench.launch.torchrun import forward_stderr

REFUSAL = "error: --grad-accum 100: the training split holds 3 batches of 8 per rank\n"
REPORT = """\
E1129 18:23:26.684000 4993 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2) local_rank: 0
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
ampbench FAILED
------------------------------------------------------------
Failures:
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : {one} (pid: 4996)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : {zero} (pid: 4995)
============================================================
"""


def _forward(lines: list[str], code: int) -> tuple[int, str]:
    out = io.StringIO()
    return forward_stderr(iter(lines), lambda: code, out), out.getvalue()


def test_a_refusal_of_every_rank_is_said_once_with_exit_2_and_no_torchrun_report() -> None:
    warning = "W1129 18:23:20.1 4993 torch/distributed/run.py:803] Setting OMP_NUM_THREADS\n"
    code, said = _forward([warning, REFUSAL, REFUSAL, *REPORT.format(one=2, zero=2).splitlines(True)], 1)
    assert code == 2 and said == warning + REFUSAL  # (torchrun's own start-up warning is not its failure report)


def test_any_other_failure_keeps_torchruns_report_and_exit_code() -> None:
    crash = ["Traceback (most recent call last):\n", "RuntimeError: boom\n"]  # (a rank's own crash: passed on as is)
    report = REPORT.format(one=1, zero=2).splitlines(True)
    code, said = _forward([*crash, REFUSAL, *report], 1)
    assert code == 1 and said == "".join([*crash, REFUSAL, *report])
    code, said = _forward(["Killed\n", *REPORT.format(one=-9, zero=-9).splitlines(True)], 1)  # (no refusal said)
    assert code == 1 and "ChildFailedError" in said


def test_a_run_that_ends_well_passes_everything_on() -> None:
    lines = ["warning: something\n", "E1129 1:2:3.4 99 torch/distributed/elastic/agent/x.py:1] note\n", "after\n"]
    assert _forward(lines, 0) == (0, "".join(lines))
