"""The execution axes' values, what each (compile, CUDA graphs) pair calls, and how bad values are refused."""

from __future__ import annotations

import pytest

from ampbench.errors import AmpbenchError
from ampbench.execution import Execution, executions, parse_axis
from ampbench.execution.axes import display_name


@pytest.mark.parametrize("compile, graphs, kwargs", [
    ("off", "off", None),
    ("on", "off", {"mode": "default"}),
    ("max-autotune", "off", {"mode": "max-autotune-no-cudagraphs"}),
    ("off", "on", {"backend": "cudagraphs"}),
    ("on", "on", {"mode": "reduce-overhead"}),
    ("max-autotune", "on", {"mode": "max-autotune"}),
])
def test_each_compile_and_cuda_graphs_pair_is_one_torch_compile_call(compile: str, graphs: str, kwargs: object) -> None:
    """One change at a time: max-autotune without CUDA graphs must not bring them in (its default mode does)."""
    ex = Execution(compile=compile, cuda_graphs=graphs)
    assert ex.torch_compile_kwargs() == kwargs
    assert ex.compiled is (kwargs is not None)


def test_axes_parse_in_order_without_duplicates_and_default_alone() -> None:
    assert parse_axis(None, "compile") == ("off",)
    assert parse_axis("on, off,on", "compile") == ("on", "off")
    assert parse_axis("contiguous,channels-last", "memory_format") == ("contiguous", "channels_last")
    points = executions(("off", "on"), ("contiguous", "channels_last"), ("off",))
    assert [p.label for p in points] == ["eager", "channels_last", "compile", "compile+channels_last"]
    assert points[0].is_default and not points[3].is_default


@pytest.mark.parametrize("value, axis, says", [
    ("yes", "compile", "--compile 'yes': choose from off, on, max-autotune"),
    ("max_autotune", "compile", "Did you mean 'max-autotune'?"),
    ("nhwc", "memory_format", "--memory-format 'nhwc': choose from contiguous, channels_last"),
    (",", "cuda_graphs", "--cuda-graphs is empty"),
])
def test_bad_axis_values_name_the_valid_ones(value: str, axis: str, says: str) -> None:
    with pytest.raises(AmpbenchError, match=says.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        parse_axis(value, axis)


def test_cuda_graphs_refused_off_cuda_with_the_reason() -> None:
    Execution(cuda_graphs="on").check_device("cuda:0")
    Execution().check_device("cpu")
    with pytest.raises(AmpbenchError, match="needs a CUDA device.*nothing|needs a CUDA device.*there are none"):
        Execution(cuda_graphs="on").check_device("cpu")


def test_rows_from_before_the_axes_are_eager_and_reports_name_cells() -> None:
    assert Execution.of({}) == Execution()
    assert display_name({"precision": "amp-bf16"}) == "amp-bf16"
    assert display_name({"precision": "amp-bf16", "compile": "on", "memory_format": "channels_last"}) == \
        "amp-bf16 · compile+channels_last"
    assert Execution("max-autotune", cuda_graphs="on").changes() == ["compile max-autotune", "cuda-graphs"]


def test_a_stored_or_imported_row_with_an_unknown_axis_value_is_refused() -> None:
    from ampbench.store.row_keys import empty_row, row_problem

    row = {**empty_row(), "run_id": "r", "cell_key": "k", "workload": "w", "precision": "fp32", "status": "ok",
           "compile": "on", "memory_format": "channels_last", "cuda_graphs": "off"}
    assert row_problem(row) is None
    assert row_problem({**row, "compile": "turbo"}) == "compile 'turbo' is not one of off, on, max-autotune"
    assert row_problem({**row, "graph_breaks": 1.5}) == "graph_breaks must be an integer, got 1.5"
