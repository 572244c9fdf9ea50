"""ampbench's precision names as Keras dtype policies (Keras's own recipes), and what has no Keras recipe.

=========  ==================  ===============================================================================
ampbench   Keras policy         what Keras does
=========  ==================  ===============================================================================
fp32       float32              everything float32; TF32 switched off explicitly (TensorFlow/JAX default it on)
tf32       float32 + TF32       float32 variables and math, matmuls/convolutions on TF32 Tensor Cores (CC >= 8.0)
amp-fp16   mixed_float16        float16 compute, float32 variables; compile() wraps the optimizer in a dynamic
                                LossScaleOptimizer (starts at 2^15, halves on inf/NaN and skips the step)
amp-bf16   mixed_bfloat16       bfloat16 compute, float32 variables, no loss scaling
pure-fp16  float16              float16 compute and variables, no loss scaling
pure-bf16  bfloat16             bfloat16 compute and variables
=========  ==================  ===============================================================================

master-* (a half model with float32 master copies) and the fp8 modes (torchao's float8 training) have no Keras
policy: a Keras model asked for them is refused before anything runs. Keras's names (``mixed_float16``, ...) are
accepted as aliases of ampbench's (the precision registry resolves them).
"""

from __future__ import annotations

from ampbench.errors import AmpbenchError
from ampbench.seam import FLAGS, Options

POLICIES = {"fp32": "float32", "tf32": "float32", "amp-fp16": "mixed_float16", "amp-bf16": "mixed_bfloat16",
            "pure-fp16": "float16", "pure-bf16": "bfloat16"}
"""ampbench precision -> the Keras dtype policy its cell sets before the model is built."""

LOSS_SCALED = ("amp-fp16",)
"""The modes whose optimizer Keras wraps in a LossScaleOptimizer (``mixed_float16``)."""


def refusal(precision: str) -> str | None:
    """Why ``precision`` (canonical) has no Keras recipe, or None when it has one."""
    if precision in POLICIES:
        return None
    if precision.startswith("master-"):
        return (f"{precision} is not a Keras recipe: Keras has no half model with float32 master copies; its "
                f"mixed_* policies keep float32 variables and compute in half: use "
                f"{precision.replace('master', 'amp')} ({POLICIES[precision.replace('master', 'amp')]})")
    if precision.startswith("fp8"):
        return (f"{precision} is not a Keras recipe: fp8 training runs through torchao's float8 layers, which a "
                "Keras model does not have; measure fp8 on a PyTorch model")
    return f"{precision} has no Keras policy (Keras runs {', '.join(POLICIES)})"


def policy_of(precision: str) -> str:
    """The Keras policy of ``precision`` (canonical); an AmpbenchError saying why for modes without one."""
    why = refusal(precision)
    if why:
        raise AmpbenchError(why)
    return POLICIES[precision]


def compute_dtype(precision: str) -> str:
    """The dtype a Keras policy computes in, as ampbench names it (fp16, bf16, fp32): read off the policy's name."""
    policy = policy_of(precision)
    return "bf16" if "bfloat16" in policy else "fp16" if "float16" in policy else "fp32"


def check_precisions(precisions: tuple[str, ...] | list[str], what: str) -> None:
    """Every mode has a Keras recipe (one line naming the first that has none, for ``what``: the Keras target)."""
    for p in precisions:
        why = refusal(p)
        if why:
            raise AmpbenchError(f"{what}: {why}")


_COMPILES = "Keras compiles its own train step (jit_compile as the backend defaults)"
TORCH_ONLY = {
    "execution": _COMPILES,
    "compile": _COMPILES,
    "strategy": "torch.distributed strategies wrap PyTorch modules",
    "loss_scale": "Keras's LossScaleOptimizer is dynamic only (mixed_float16 adds it)",
    "data_dir": "its images are random by design (a Keras --model takes --data-dir)",
    "option": "workload options are PyTorch workloads' (a Keras --model takes a CSV's: label, text, tokenizer)",
    "checkpoint": "ampbench's checkpoints hold PyTorch state dicts (use keras.callbacks.ModelCheckpoint)",
    "fp8": "fp8 runs through torchao's float8 layers",
    "tensorboard": "ampbench's TensorBoard files follow the PyTorch engine's steps and hooks (use "
                   "keras.callbacks.TensorBoard)",
    "trace": "the profile check reads torch.profiler's kernels",
    "optimizer_state": "Keras's optimizers keep their variables in float32 under the mixed policies (and take "
                       "loss_scale_factor); it has no 8-bit, 4-bit or fp8 optimizer states (its float8 is for layers) "
                       "and torchao's optimizers step PyTorch parameters",
    "grad_accum": "Keras 3 accumulates in its optimizer: build your model's optimizer with "
                  "gradient_accumulation_steps=N",
    "max_grad_norm": "Keras clips in its optimizer: build your model's optimizer with global_clipnorm",
    "checkpointing": "it recomputes PyTorch modules' activations (torch.utils.checkpoint); Keras has its own "
                     "(keras.RematScope)",
}
"""Why each option of run, train and diagnose that some framework cannot take (a :class:`ampbench.seam.Options`
field) means nothing to a Keras model (a test holds that every field has its reason)."""


def refuse_torch_only(what: str, options: Options) -> None:
    """One line for the first PyTorch-only option given with the Keras target ``what`` (a ``--model`` takes
    ``--data-dir`` and a CSV's ``--option``s: :func:`~ampbench.frameworks.keras.workloads.user_workload`)."""
    given = [g for g in options.given() if not (g in ("data_dir", "option") and what.startswith("--model"))]
    if given:
        name = given[0]
        if name == "data_dir":  # (not PyTorch's alone: a Keras --model takes it)
            raise AmpbenchError(f"--data-dir: {what} trains on its own random images by design; a Keras --model takes "
                                "--data-dir")
        raise AmpbenchError(f"{FLAGS[name]} is a PyTorch option: {TORCH_ONLY[name]}; drop it for {what} (a Keras model)")
