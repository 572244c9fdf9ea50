"""The precision modes' canonical names, in the registry's order, for the code that reads stored rows without
running a mode: ``ampbench results``, ``compare`` and ``report`` check a row's precision and order a table by it.

Why apart from :mod:`ampbench.precision`'s registry: the recipes import torch (~1.1 s of ``ampbench results``' 1.5 s
on a 2-core AMD EPYC) and reading a store needs only their names. The registry refuses to register a mode not listed here
(:func:`ampbench.precision.registry.register`), and a test holds the two in the same order.
"""

MODES: tuple[str, ...] = ("fp32", "tf32", "amp-fp16", "amp-bf16", "master-fp16", "master-bf16", "pure-fp16",
                          "pure-bf16", "fp8-tensorwise", "fp8-rowwise", "fp8-rowwise-gw-hp")
