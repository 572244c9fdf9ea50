"""How a model is executed, orthogonal to its precision: torch.compile, memory format, CUDA graphs, activation
checkpointing (``checkpointing``: the repeated blocks recomputed in the backward).

``axes`` says what each axis value means (and which torch.compile call each pair of compile and
CUDA-graph values is); ``apply`` applies a point on the axes to a model and reads dynamo's counters (torch).
Names are imported on first use (:mod:`ampbench.lazy`): the cell identity reads ``axes`` without torch.
"""

from ampbench.lazy import exports

_NAMES = {name: "apply" for name in (
    "CompileCounts", "check_memory_format", "compile_counts", "cuda_graphs_problem", "finish_model",
    "graph_break_reasons", "graph_ran_compiled", "mark_step", "prepare_model", "takes_4d_input")}
_NAMES.update({name: "axes" for name in ("AXES", "Execution", "executions", "parse_axis")})
__all__ = sorted(_NAMES)
__getattr__, __dir__ = exports(__name__, _NAMES)
