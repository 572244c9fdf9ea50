"""benchmarks/since_last_lease.py: the lease's suite run beside the newest committed one, on the H200's two leases."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from ampbench.store import Store
from ampbench.store.exchange import import_file

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "benchmarks" / "results" / "h200"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("since_last_lease", ROOT / "benchmarks" / "since_last_lease.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_third_lease_against_the_second(tmp_path: Path) -> None:
    """The third lease's suite run as if just measured (its store), every committed H200 file as the results: the
    newest earlier suite run is the second lease's, imported into a copy (the lease's store keeps its one run)."""
    script = _script()
    db = tmp_path / "lease.db"
    with Store(db) as s:
        import_file(s, H200 / "lease3" / "runs.json")
    text = script.since_last_lease(db, H200)
    assert text.startswith(f"## This lease's suite run against {H200 / 'truth' / 'runs.json'}")
    assert "- before: run 20261127-054753-59091a" in text and "- after:  run 20261127-145038-2a3018" in text
    assert "steps 30 -> 20" in text and "| tf32 | 3,146 | 3,112 | -1.1% ±0.5% | slower |" in text
    assert len(Store(db, create=False).runs()) == 2  # (lease3's two runs: nothing imported into the lease's store)
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(H200 / "lease3" / "runs.json", only / "runs.json")
    assert script.since_last_lease(db, only).startswith("no earlier suite run committed under")
