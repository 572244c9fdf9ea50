"""The modes' table apart from their recipes: the registry's own modes, in its order, each recipe's dtypes and math as
its row says; what reads a store (results, compare, report, export) needs no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ampbench import modes
from ampbench.modes import MODES
from ampbench.precision import get, list_precisions
from ampbench.precision.base import Precision
from ampbench.precision.registry import register


def test_the_names_are_the_registrys_in_its_order() -> None:
    assert tuple(list_precisions()) == MODES


def test_each_row_says_what_its_recipe_does() -> None:
    """The table's fp8 and half-weight facts, recomputed from each recipe's own math and dtypes."""
    for name in MODES:
        recipe = get(name)
        assert modes.is_fp8(name) == recipe.is_fp8, name
        half_weights = recipe.casts_model and not recipe.master_weights and recipe.param_dtype.itemsize == 2
        assert modes.half_gradients(name) == half_weights, name
        assert modes.advised_only_with_verdict(name) == (half_weights or recipe.is_fp8), name  # (today's rule)
    for alias, name in (("O1", "amp-fp16"), ("BF16", "amp-bf16"), (" fp8 ", "fp8-tensorwise"), ("O3", "pure-fp16")):
        assert modes.resolve(alias) == name
        assert modes.preference(alias) == modes.preference(name)
    assert not modes.is_fp8("fp17") and not modes.half_gradients("fp17") and not modes.advised_only_with_verdict("x")


def test_a_mode_not_listed_is_refused_when_it_registers() -> None:
    class Unlisted(Precision):
        name = "fp7-test"

    with pytest.raises(ValueError, match="modes.py"):
        register(Unlisted)
    assert "fp7-test" not in list_precisions()


def test_a_recipe_its_row_contradicts_is_refused_when_it_registers() -> None:
    class NotFp8(Precision):  # the table says fp8-rowwise computes in fp8; this recipe does not
        name = "fp8-rowwise"

    with pytest.raises(ValueError, match="fp8=True"):
        register(NotFp8)
    assert get("fp8-rowwise").is_fp8


def test_an_alias_is_not_a_canonical_name_to_register() -> None:
    class ByAlias(Precision):
        name = "O2"

    with pytest.raises(ValueError, match="not in ampbench/modes.py"):
        register(ByAlias)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ampbench.store import Store
    from tests.store.test_store import _row

    path = tmp_path_factory.mktemp("modes") / "r.db"
    store = Store(path)
    run_id = store.create_run({"identity": {"x": 1}}, device="cpu", device_name="dev", hostname="h").run_id
    assert store.add(_row(run_id, "fp32", 20.0)) and store.add(_row(run_id, "amp-bf16", 10.0))
    other = store.create_run({"identity": {"x": 1}}, device="cpu", device_name="dev2", hostname="h2").run_id
    assert store.add(_row(other, "fp32", 40.0, device_name="dev2")) and store.add(
        _row(other, "amp-bf16", 30.0, device_name="dev2"))  # (compare: two devices)
    store.close()
    return path


@pytest.mark.parametrize("args", [["export", "--out", "{tmp}/x.json"], ["results"], ["results", "--precision", "bf16"],
                                  ["compare"], ["report", "--format", "md", "--out", "{tmp}/r.md"]],
                         ids=["export", "results", "results-filtered", "compare", "report-md"])
def test_reading_a_store_imports_no_torch(store: Path, tmp_path: Path, args: list[str]) -> None:
    """Each of these checks or orders rows by their precision and the advisor ranks them, from the table alone: no
    torch imported (on a 2-core AMD EPYC: export 1.7 s -> 0.2 s, results 2.1 -> 0.3 s, compare 1.8 -> 0.2 s)."""
    code = ("import sys; from ampbench.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    argv = [a.format(tmp=tmp_path) for a in args] + ["--db", str(store)]
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    if args[0] == "export":
        assert '"amp-bf16"' in (tmp_path / "x.json").read_text()
    elif args[0] == "report":
        assert "amp-bf16" in (tmp_path / "r.md").read_text()
    else:
        assert "amp-bf16" in r.stdout
