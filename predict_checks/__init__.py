"""What ``ampbench predict`` is checked against and fitted on -- not the product: published references (NeuSight's
kernels and steps, DeepLearningExamples, Hugging Face's compile gains, torchao's and torchtitan's fp8 and FSDP2
figures), our own GPU runs (``benchmarks/results/``), the fitting of the kernel constants and of the error bands.

The product (``src/ampbench/predict``) holds only what these produce and it reads: the fitted constants
(``kernels.json``), the error bands (``error_bands.json``), the measured kernel tables (``calibration/``). These
modules read files that exist only in a checkout (``references/``, ``benchmarks/results/``), so they live beside the
tests and benchmarks that use them (pytest puts the checkout's root on the path; the benchmark scripts add it).
"""
