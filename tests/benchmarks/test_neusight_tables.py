"""benchmarks/neusight_tables.py's tables: NeuSight's kernels of one GPU read as that GPU's kernel table price each
measured kernel at its measured time (the table's own contract), and every kind the conversion writes is one the table
reads (none silently dropped). Device: none."""

from __future__ import annotations

import csv
import gzip
import math

import pytest
from predict_checks import neusight

from ampbench.measure.gpus import lookup
from ampbench.predict import kernels
from ampbench.predict.kernels import calibration
from ampbench.predict.measured_kernels import KernelTable, _logs

pytestmark = pytest.mark.skipif(not neusight.ROOT.is_dir(), reason="references/neusight is not beside this checkout")


@pytest.fixture(scope="module")
def l4() -> tuple[dict, KernelTable]:
    table = neusight.kernel_table("l4")
    gpu = lookup("l4")
    assert gpu is not None
    return table, KernelTable.of(table, gpu)


def _first(name: str, device: str) -> dict[str, str]:
    with gzip.open(neusight.ROOT / "kernels" / f"{name}.csv.gz", "rt") as f:
        return next(r for r in csv.DictReader(f) if r["Device"] == device)


def test_a_measured_linear_and_layer_norm_are_priced_at_their_measured_time(l4) -> None:
    """Oracle: the source's CSV row read directly (not through the conversion), priced by the kernel model times the
    table's ratio at that very shape."""
    _, table = l4
    gpu, cal = table.gpu, calibration()
    r = _first("linear", "NVIDIA L4")
    b, m, n, k = (int(r[x]) for x in "BMNK")
    modelled = kernels.gemm_s(gpu, cal, 1, b * m, n, k, "fp32", 4)
    ratio = table.ratio(("gemm", "fp32"), _logs(b * m, n, k, 1))
    assert ratio is not None and modelled * ratio == pytest.approx(float(r["Latency"]) * 1e-3, rel=1e-9)
    r = _first("ln", "NVIDIA L4")
    elements = int(r["B"]) * int(r["H"])
    ratio = table.ratio(("norm", "layer_norm", "fwd", "fp32", ""), _logs(elements))
    assert ratio is not None
    assert kernels.reduction_s(gpu, cal, 8 * elements, "norm") * ratio == pytest.approx(float(r["Latency"]) * 1e-3,
                                                                                           rel=1e-9)


def test_every_converted_kernel_becomes_a_point_of_the_table(l4) -> None:
    """The L4 has no convolutions in the source; each of its other rows is one point of a key the pricing looks up."""
    rows, table = l4
    assert {r["kind"] for r in rows["kernels"]} == {"gemm", "bmm", "elementwise", "norm", "softmax"}
    assert sum(len(p) for p in table.points.values()) == len(rows["kernels"])
    assert set(table.points) == {("gemm", "fp32"), ("elementwise",), ("norm", "layer_norm", "fwd", "fp32", ""),
                                 ("norm", "softmax", "fwd", "fp32", "")}
    assert all(math.isfinite(p.ratio) and p.ratio > 0 for pts in table.points.values() for p in pts)


def test_a_gpu_with_convolutions_has_them_as_nchw_forwards() -> None:
    rows = [r for r in neusight.kernel_table("v100-32gb-pcie")["kernels"] if r["kind"] == "conv"]
    assert len(rows) > 4000 and {(r["op"], r["layout"], r["shape"]["kernel"]) for r in rows} == {("conv_fwd", "nchw", 3)}


def _benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "neusight_tables.py"
    spec = importlib.util.spec_from_file_location("neusight_tables", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_shipped_tables_are_neusights_kernels_now() -> None:
    """Each shipped table is, byte for byte, the conversion of NeuSight's kernels of its card (``--write`` again
    changes nothing), scoped to that card; the H100's is not shipped (the H200's table prices Hopper)."""
    from ampbench.measure.calibrate import to_csv
    from ampbench.predict.measured_kernels import CARD_ONLY, _header, shipped

    bench = _benchmark()
    tables = shipped()
    assert "h100-sxm" not in tables and set(bench.SHIPPED) <= set(tables)
    for gpu in bench.SHIPPED:
        path = tables[gpu]
        assert gzip.decompress(path.read_bytes()).decode() == to_csv(neusight.kernel_table(gpu)), gpu
        assert _header(str(path))["scope"] == CARD_ONLY


def test_a_step_priced_with_and_without_its_cards_table() -> None:
    """The comparison's "today" is the model alone for a shipped card (its table set aside) and the same as with no
    table shipped; with the card's table it is what ``predict`` now gives."""
    from ampbench.predict import measured_kernels

    bench = _benchmark()
    with bench._unshipped():
        assert measured_kernels.table_for(lookup("l4")) is None
        assert measured_kernels.table_for(lookup("h100-sxm")) is not None  # (the H200's: kept)
    assert measured_kernels.table_for(lookup("l4")) is not None
