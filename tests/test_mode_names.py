"""The modes' names apart from their recipes: the registry's own, in its order; what reads a store needs no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ampbench.mode_names import MODES
from ampbench.precision import list_precisions
from ampbench.precision.base import Precision
from ampbench.precision.registry import register


def test_the_names_are_the_registrys_in_its_order() -> None:
    assert tuple(list_precisions()) == MODES


def test_a_mode_not_listed_is_refused_when_it_registers() -> None:
    class Unlisted(Precision):
        name = "fp7-test"

    with pytest.raises(ValueError, match="mode_names.py"):
        register(Unlisted)
    assert "fp7-test" not in list_precisions()


def test_exporting_a_store_imports_no_torch(tmp_path: Path) -> None:
    """``ampbench export`` checks every row's precision (``row_problem``) from the names: no torch imported (1.7 s ->
    0.2 s on a 2-core AMD EPYC)."""
    from ampbench.store import Store
    from tests.store.test_store import _row

    store = Store(tmp_path / "r.db")
    run_id = store.create_run({"identity": {"x": 1}}, device="cpu", device_name="dev", hostname="h").run_id
    assert store.add(_row(run_id, "amp-bf16", 10.0))
    store.close()
    code = ("import sys; from ampbench.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    r = subprocess.run([sys.executable, "-c", code, "export", "--db", str(tmp_path / "r.db"), "--out",
                        str(tmp_path / "x.json")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"amp-bf16"' in (tmp_path / "x.json").read_text()
