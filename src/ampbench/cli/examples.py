"""Examples of ``--model`` that the commands taking one show in their help (``run``, ``train``, ``diagnose``; ``predict``
shows the PyTorch ones)."""

from __future__ import annotations

MODEL_EXAMPLES = """

Your model, any shape (synthetic learnable data unless --data-dir or --batches):

  --model m.py:mlp --input-shape 20 --num-classes 2            (feature vectors)

  --model m.py:cnn --input-shape 3,224,224 --num-classes 1000  (images)

  --model m.py:encoder --input-shape 128 --vocab-size 30522 --num-classes 2   (token ids)

  --model m.py:regressor --input-shape 16,80 --num-outputs 3   (regression, MSE)

  --model m.py:gpt --input-shape 256 --vocab-size 50257 --task lm   (next-token LM)

  --model m.py:two_tower --batches m.py:make_batch [--loss m.py:loss]   (any inputs)

  --model k.py:build --input-shape 32,32,3 --num-classes 10 --keras-backend tensorflow   (a Keras 3 model)

  hf:gpt2 --task lm -o n_layer=2   (as the workload: HF transformers from a config, no download)
"""
KERAS_EXAMPLE = "  --model k.py:build --input-shape 32,32,3 --num-classes 10 --keras-backend tensorflow   (a Keras 3 model)\n\n"
PYTORCH_MODEL_EXAMPLES = MODEL_EXAMPLES.replace(KERAS_EXAMPLE, "")
"""``predict``'s: it traces PyTorch steps (a Keras target is refused there)."""
