"""Published whole-step float8 training gains to check the fp8 predictions against: torchao's float8 README
("Performance"), Llama3-8B trained by torchtitan on one node of 8 H100s -- batch 1 of 8,192 tokens per GPU, 100
steps, torch.compile, FSDP2, per-op selective activation checkpointing; torch 2.7.0a0, torchao 0.10, torchtitan
0.0.2 -- median tokens per second per GPU: bf16 6,150; float8 tensorwise (weights all-gathered in float8) 7,689.5;
float8 rowwise (weights all-gathered in bf16) 6,768.

The setup, as rebuilt here: Llama3-8B from its architecture (:mod:`predict_checks.llama3`), one GPU's batch
(1 x 8,192 tokens), the loss over fp32 logits, AdamW; the step compiled (Inductor's fusions, no CUDA graphs) on an
H100 SXM; bf16 as ``amp-bf16``, float8 as ``fp8-tensorwise`` / ``fp8-rowwise``
converting every linear layer but the output head (torchtitan's ``filter_fqns=["output"]``; all of Llama's layer
dims are multiples of 16: ``--fp8-filter dims``); the optimizer over each GPU's eighth of the parameters (FSDP2
shards it).

Left out (so the tokens per second are reported, not checked; the gain -- fp8 over bf16 -- is):

- FSDP2's all-gathers and reduce-scatters: torchtitan wraps each block and prefetches the next block's weights
  during this one's compute, which at 8,192 tokens far outlasts a block's collectives over NVLink: taken as hidden
  (so float8's smaller all-gather buys nothing here);
- the selective activation checkpointing: the published steps recompute part of each forward in the backward, which
  ops depends on torchtitan's policy of that version (not rebuildable from the published setup);
- FSDP2 casts each GPU's weight shard (1/8) to bf16 or float8 before gathering it: here each GPU casts the whole
  model, in both modes.

Each step is priced from traces of 1 and 2 layers (:func:`predict_checks.llama3.whole`). Nothing is fitted on
these figures.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ampbench.measure.gpus import lookup
from ampbench.predict.cost import Compiled, price
from ampbench.predict.parallel import COMPUTE
from ampbench.predict.trace import Trace, trace_step
from ampbench.workloads.factory import build_meta
from predict_checks import llama3

SOURCE = ("torchao's float8 README, 'Performance': torchtitan Llama3-8B, 8 x H100, batch 1, seq 8192, torch.compile, "
          "FSDP2, per-op SAC; median tokens/s per GPU")
GPU = "h100-sxm"
GPUS = 8
SEQ = 8192
PUBLISHED = {"amp-bf16": 6150.0, "fp8-tensorwise": 7689.5, "fp8-rowwise": 6768.0}
"""Median tokens per second per GPU, as published (bf16, float8 tensorwise, float8 rowwise)."""
GAIN_GOAL = 0.15
"""A predicted fp8 gain (tokens/s over bf16's) within 15% of the published one (issue 47)."""
FP8_OPTIONS = {"fp8_skip": ("lm_head",), "fp8_filter": "dims"}
"""torchtitan's conversion: every linear layer but the output head (Transformers names it ``lm_head``)."""


@functools.cache
def _trace(precision: str, layers: int) -> Trace:
    return trace_step(build_meta(llama3.workload(layers, SEQ)), precision, 1,
                      mp_options=FP8_OPTIONS if precision.startswith("fp8") else None)


def gpu_step_s(precision: str, layers: int) -> float:
    """One GPU's compiled step with ``layers`` layers: its compute, and the optimizer over 1/``GPUS`` of the
    parameters (FSDP2's shard)."""
    trace, gpu, compiled = _trace(precision, layers), lookup(GPU), Compiled(fuse=True, graphs=False)
    assert gpu is not None
    compute = price(trace, gpu, tf32=False, phases=COMPUTE, compiled=compiled).step_s
    optimizer = price(trace, gpu, tf32=False, phases=("optimizer",), compiled=compiled).step_s
    return compute + optimizer / GPUS


def step_s(precision: str) -> float:
    """The whole model's step: its first layer's trace plus 31 times what a second layer adds."""
    return llama3.whole(lambda layers: gpu_step_s(precision, layers))


@dataclass(frozen=True)
class Fp8StepRow:
    precision: str
    tokens_s: float
    """Published, per GPU."""
    predicted_tokens_s: float
    bf16_tokens_s: float
    predicted_bf16_tokens_s: float

    @property
    def gain(self) -> float:
        return self.tokens_s / self.bf16_tokens_s

    @property
    def predicted_gain(self) -> float:
        return self.predicted_tokens_s / self.predicted_bf16_tokens_s

    @property
    def gain_error(self) -> float:
        """predicted gain / published gain - 1."""
        return self.predicted_gain / self.gain - 1

    @property
    def tokens_error(self) -> float:
        """predicted tokens/s / published - 1 (not checked: see the module's "left out")."""
        return self.predicted_tokens_s / self.tokens_s - 1


def rows() -> list[Fp8StepRow]:
    """The published fp8 rows beside their predictions (bf16's own row included, its gain 1 by definition)."""
    predicted = {p: SEQ / step_s(p) for p in PUBLISHED}
    return [Fp8StepRow(p, PUBLISHED[p], predicted[p], PUBLISHED["amp-bf16"], predicted["amp-bf16"])
            for p in PUBLISHED]
