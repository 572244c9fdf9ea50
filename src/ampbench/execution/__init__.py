"""How a model is executed, orthogonal to its precision: torch.compile, memory format, CUDA graphs.

``options`` says what each axis value means (and which torch.compile call each pair of compile and
CUDA-graph values is); ``apply`` applies a point on the axes to a model and reads dynamo's counters.
"""

from ampbench.execution.apply import (
    CompileCounts,
    check_memory_format,
    compile_counts,
    cuda_graphs_problem,
    finish_model,
    graph_break_reasons,
    graph_ran_compiled,
    mark_step,
    prepare_model,
    takes_4d_input,
)
from ampbench.execution.options import AXES, Execution, executions, parse_axis

__all__ = [
    "AXES",
    "CompileCounts",
    "Execution",
    "check_memory_format",
    "compile_counts",
    "cuda_graphs_problem",
    "executions",
    "finish_model",
    "graph_break_reasons",
    "graph_ran_compiled",
    "mark_step",
    "parse_axis",
    "prepare_model",
    "takes_4d_input",
]
