"""``ampbench train`` and ``ampbench diagnose`` of a Keras model: the keras framework's verbs
(:class:`ampbench.seam.Framework`). The work runs in a child process (a Keras backend is chosen before keras is
imported): :mod:`ampbench.frameworks.keras.train` and :mod:`ampbench.frameworks.keras.diagnose` there.
"""

from __future__ import annotations

from typing import Any

from ampbench.cells import CellSpec
from ampbench.command_requests import DiagnoseRequest, TrainRequest
from ampbench.diagnose import Diagnosis
from ampbench.diagnose.findings import Finding
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras.diagnose import check_checks
from ampbench.frameworks.keras.workloads import command_spec
from ampbench.launch import ChildProcess, Job
from ampbench.seam import TrainOutcome, TrainView

TRAIN_JOB = "ampbench.frameworks.keras.train:train_job"
DIAGNOSE_JOB = "ampbench.frameworks.keras.diagnose:diagnose_job"


def _spec(request: TrainRequest | DiagnoseRequest) -> CellSpec:
    """The cell the child process runs, checked (no PyTorch-only option, a mode Keras has, the backend installed)."""
    t = request.target
    return command_spec(t.backend or "", t.workload, t.model, request.precision, t.preset, request.batch_size,  # type: ignore[no-any-return]
                        request.device, t.seed, t.data, request.given())


def train_plan(request: TrainRequest) -> CellSpec:
    for flag, v in (("--epochs", request.epochs), ("--batch-size", request.batch_size), ("--max-steps", request.max_steps)):
        if v is not None and v < 1:
            raise AmpbenchError(f"{flag} must be >= 1, got {v}")
    return _spec(request)


def train(request: TrainRequest, spec: CellSpec, view: TrainView) -> TrainOutcome:
    """The epochs in a child process (its backend); its progress lines shown as they come."""
    fw, t = request.target.framework, request.target
    shown: list[str] = []

    def on_progress(e: Any) -> None:
        line = f"{e.what} {e.detail}".strip()
        if line not in shown:
            shown.append(line)
            view.event(line)

    view.begin(t.what, f"{fw.describe(t.backend)}, preset {spec.preset}", spec.precision)
    r = ChildProcess(on_progress=on_progress).run(Job(TRAIN_JOB, {"spec": spec.to_dict(), "epochs": request.epochs,
                                                                  "max_steps": request.max_steps}))
    view.done()
    if "_failed" in r:
        return TrainOutcome("", {}, error=f"training {t.what} failed: {r['_failed']}")
    if r.get("error"):
        raise AmpbenchError(r["error"])
    warnings = tuple(r.get("warnings") or ())
    return TrainOutcome(r.pop("summary"), r, warnings)


def diagnose_plan(request: DiagnoseRequest) -> CellSpec:
    spec = _spec(request)
    check_checks(request.wanted, request.target.what)
    return spec


def diagnose(request: DiagnoseRequest, spec: CellSpec, trace: Any, progress: Any = None) -> Any:
    """The diagnosis in a child process, as a Diagnosis (``trace``: no profile check for a Keras model; ``progress``:
    told each check's start and end lines as the child reports them)."""
    fw = request.target.framework

    def on_progress(e: Any) -> None:
        if progress is not None and e.what.startswith("check "):  # (not the steps of a check's training: a line each)
            progress(e.what)

    r = ChildProcess(on_progress=on_progress).run(Job(DIAGNOSE_JOB, {"spec": spec.to_dict(),
                                                                     "checks": list(request.wanted),
                                                                     "steps": request.steps}))
    if "_failed" in r:
        raise AmpbenchError(f"diagnosing {spec.label} ({fw.describe(spec.backend)}) failed: {r['_failed']}")
    if r.get("error"):
        raise AmpbenchError(r["error"])
    findings = [Finding(**f) for f in r.pop("findings")]
    return Diagnosis(findings=findings, **r)
