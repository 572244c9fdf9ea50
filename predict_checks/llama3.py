"""Llama3-8B as the published training benchmarks run it (torchtitan, torchao): its architecture from Transformers'
``LlamaConfig`` -- 32 layers, hidden 4,096, SwiGLU 14,336, 32 query and 8 key/value heads (grouped-query attention),
vocabulary 128,256, an untied output head, RoPE theta 500,000 -- on meta (no weights: nothing is computed), one GPU's
batch of token ids, the loss over fp32 logits, AdamW.

A 32-layer trace takes seconds; the layers being identical, a step is priced from traces of one and two layers,
``step(32) = step(1) + 31 x (step(2) - step(1))`` (:func:`whole`; ``tests/predict/test_fp8_step_references.py``
checks the linearity at three layers).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ampbench.data import TensorData
from ampbench.workloads.adapters import HFLogits
from ampbench.workloads.base import Workload, lm_loss

LAYERS = 32


def workload(layers: int, seq: int, batch: int = 1) -> Callable[[], Workload]:
    """Llama3-8B's architecture with ``layers`` decoder layers, ``batch`` sequences of ``seq`` tokens, on meta."""
    def build() -> Workload:
        import transformers as tf  # lazy: transformers (only these checks build its models)

        config = tf.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                                num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                                max_position_embeddings=seq, rope_theta=500000.0, tie_word_embeddings=False)
        config._attn_implementation = "sdpa"  # (torchtitan's attention: SDPA, flash on the GPU)
        with torch.device("meta"):
            model = HFLogits(tf.LlamaForCausalLM(config), None)  # (as --model hf: builds a causal LM: no mask)
        ids = torch.zeros(batch, seq, dtype=torch.long)
        return Workload(f"llama3-8b-{layers}-layers", model, TensorData((ids,), ids), loss_fn=lm_loss, metric=None,
                        make_optimizer=lambda p: torch.optim.AdamW(p, lr=8e-4, weight_decay=0.1), batch_size=batch)
    return build


def whole(step_of: Callable[[int], float]) -> float:
    """The 32-layer model's step from ``step_of(layers)`` at one and two layers."""
    one = step_of(1)
    return one + (LAYERS - 1) * (step_of(2) - one)
