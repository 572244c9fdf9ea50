"""What one result row holds: every key, documented (docs/benchmark.md's "Result rows" table is checked against this).

A row is one benchmark cell = workload x precision x execution (compile, memory format, CUDA graphs) x
batch size, with the measurements asked for.
Rows are plain JSON-able dicts so they travel between machines (export/import) unchanged. Keys that
compare a row with the fp32 row of the same run, workload, preset, batch size and device
(``*_vs_fp32``, ``converge_verdict``) are derived when rows are read, never stored.
"""

from __future__ import annotations

import math
from typing import Any

from ampbench import seam
from ampbench.execution import AXES
from ampbench.modes import MODES

STATUSES = ("ok", "oom", "error", "diverged", "unsupported")
"""ok; oom (out of memory, or over --memory-budget on CPU); error (crash, timeout, bad model);
diverged (non-finite loss or the loss scale collapsed); unsupported (the device cannot run the mode)."""

ROW_KEYS: dict[str, str] = {
    # identity
    "run_id": "Run the row belongs to (one `ampbench run` invocation; `--resume` continues it).",
    "cell_key": "Hash of everything that defines the cell (resume skips keys already stored).",
    "workload": "Workload name (`ampbench list workloads`) or `user:<file.py:factory>`.",
    "preset": "Size preset: tiny, small, paper.",
    "precision": "Canonical precision mode name (aliases are resolved before running).",
    "batch_size": "Training batch size of the cell.",
    "grad_accum": "Micro-batches of `batch_size` each timed step accumulates before the optimizer steps (`run "
                  "--grad-accum N`, as `train --grad-accum N` runs them): samples/s over N x `batch_size`, "
                  "`flops_per_step` the whole step's, `activation_bytes` one micro-batch's, the peak with the earlier "
                  "micro-batches' gradients held, `max_batch` the largest micro-batch. Part of the cell's identity; "
                  "null (or absent) for a plain step.",
    "compile": "Execution axis: off (eager), on (torch.compile) or max-autotune. Rows from before the axis: off.",
    "memory_format": "Execution axis: contiguous or channels_last (the model's weights and its 4-D inputs).",
    "cuda_graphs": "Execution axis: off or on (CUDA: the compiled forward/backward replayed as CUDA graphs).",
    "checkpointing": "Execution axis: off, blocks (activation checkpointing: each of the model's repeated blocks "
                     "recomputed in the backward) or selective (only what costs no FLOPs recomputed: the matmul, "
                     "convolution and attention outputs kept). Rows from before the axis: off.",
    "compiled_by_default": "True when the cell runs compiled without --compile: fp8 on CUDA compiles by default "
                           "(torchao's float8 is built for torch.compile), beside compiled fp32 and amp-bf16 "
                           "references; --compile off times fp8 eager. Null otherwise.",
    "framework": "torch (a PyTorch model under ampbench's recipes) or keras (a Keras 3 model under Keras's own dtype "
                 "policy; see docs/keras.md). Rows from before the column: torch.",
    **seam.row_keys(),  # (the keys only one framework's rows fill, documented by that framework)
    "memory_source": "Where the memory a row is compared by was read: `exact split` (CPU PyTorch cells: weights, "
                     "grads, optimizer state and saved activations counted tensor by tensor), `cpu rss growth` (CPU "
                     "cells without tensor counters, e.g. Keras: approximate), or the GPU tracker (`torch.cuda "
                     "max_memory_allocated`, TensorFlow's or JAX's peak). Rows from before the key: exact split on "
                     "CPU, the allocator on GPU. Tables label every memory figure by it (see `memory_basis`).",
    "warnings": "What an ok cell measured that a reader should know, one line each: timed steps skipped for inf/NaN "
                "gradients (every framework: they did not train, yet samples/s counts them); a kernel fallback the "
                "precision engine installed (\"kernel fallback: ...\": what was timed is the same math another way -- "
                "an LSTM on torch's native fp16 kernel, a strided convolution over a 1x1 input as its center tap where "
                "this CPU's kernel computed its gradient wrong; docs/precision.md); Keras cells: warnings "
                "raised building or training the model (e.g. a float16 output layer under mixed_float16).",
    "strategy": "null (one process), ddp or fsdp: the torch.distributed strategy the cell trained under "
                "(ampbench.distributed.strategy says what each (strategy, precision) pair does).",
    "world_size": "Processes (ranks) the cell trained on (1 for single-process cells).",
    "grad_reduce_dtype": "Distributed cells: the dtype gradients were reduced in (--grad-reduce-dtype; null: their own).",
    "measures": "Measurements asked for (throughput, memory, maxbatch, converge, inference).",
    "device": "Device the cell ran on (`cpu`, `cuda:0`).",
    "device_name": "GPU name from the driver, or the CPU model name.",
    "repeat": "Which repeat of the cell this stored row is (0 .. `--repeats` - 1). Rows read back (results, export, "
              "report) are merged into one per cell (see `samples_per_s_repeats`).",
    "repeat_of": "Repeats after the first: the `cell_key` of the cell's first measurement (null on it).",
    "closing_baseline": "True on the stored row of fp32's closing measurement: fp32 timed again after the "
                        "workload's other modes (one measurement per cell only); merged into `baseline_drift`.",
    "status": "ok, oom, error, diverged or unsupported.",
    "reason": "One line saying why, when status is not ok (empty otherwise).",
    "created_at": "UTC time the cell finished (ISO 8601).",
    "wall_s": "Seconds the whole cell took, as its launcher saw it: from starting its process to seeing it exit "
              "(in-process cells: from the cell's start to its row). The sum of `phases_s`.",
    "ahead_s": "Seconds of `wall_s` the cell's process lived before its turn, while the previous cell measured "
               "(--build-ahead: its start, its workload's build, then waiting in phase `waiting`); what the cell "
               "added to the run's time is `wall_s - ahead_s`. Null for a cell started at its turn.",
    "phases_s": "Where `wall_s` went, in order: phase -> seconds, adding up to `wall_s`. A cell's own phases (open: "
                "the device's facts, cuda_init: the CUDA context, build, waiting: a cell built ahead waiting for its turn, "
                "maxbatch, setup: the model moved to the device, engine: the optimizer and the precision engine set up, "
                "batches: staged on the device, environment: NVML's and the libraries' facts read, "
                "first_step, memory_step: the step counting saved activations (and reading the state's sizes; an eager "
                "step of one micro-batch counting its FLOPs too), flop_count: a compiled or accumulating cell's, "
                "warmup, timed_steps, energy_steps: untimed steps filling the energy window to 2 s, "
                "after_steps: reading peaks (and the state's sizes in a step of their own where the first step was "
                "skipped), "
                "converge, inference, finish, close) and its launcher's around them "
                "(process_start, import: the framework and the job, teardown: the row written and the process gone; "
                "distributed cells: launch, torchrun's ranks started and ended and anything measured from outside "
                "them). `ampbench run --verbose` prints them. Rows from before the key: null.",
    # throughput
    "steps": "Timed optimizer steps (after warm-up).",
    "warmup": "Untimed warm-up steps (the first one is timed apart as `first_step_ms`).",
    "first_step_ms": "Time of the very first training step (lazy init, cuDNN autotune), not in the percentiles.",
    "samples_per_s": "Training samples per second over the timed steps (full steps: forward, loss, scaled backward, "
                     "unscale/inf-check, optimizer step, scale update).",
    "samples_per_s_noise": "Relative standard deviation of the throughput of 5 consecutive blocks of the timed steps "
                           "(drift within the cell; null under 6 steps: 3 blocks of 2). The advisor treats differences "
                           "inside this noise as no difference.",
    "samples_per_s_repeats": "samples_per_s of each repeat, in order (null for a repeat that failed); with "
                             "`--repeats` > 1 the row's timing keys (samples_per_s, step_ms_*, achieved_tflops, mfu, "
                             "samples_per_s_noise) are those of the median repeat. Null with one repeat.",
    "baseline_drift": "fp32 rows: |closing - first| / first samples/s of fp32's two measurements around the other "
                      "modes; part of every speedup's noise (`speedup_vs_fp32_noise`) beside the cells' own (alone, "
                      "it stands for none). Null without a closing measurement.",
    "step_ms_p10": "10th percentile of the timed step times (ms).",
    "step_ms_p50": "Median step time (ms).",
    "step_ms_p90": "90th percentile step time (ms).",
    "step_ms_mean": "Mean step time (ms).",
    "data_ms_per_batch": "Median ms to gather one shuffled batch from the in-memory training split on the host and "
                         "copy it to the device (synchronised): the floor of data loading, left out of the step "
                         "times. Near or above step_ms_p50, loading must overlap compute to keep the speedup.",
    "timer": "How steps were timed: `cuda_events` (GPU, synchronised at the ends) or `perf_counter` (CPU).",
    "skipped_steps": "Optimizer steps skipped for inf/NaN gradients (fp16 dynamic loss scaling), warm-up included.",
    "loss_scale": "Loss scale at the end of the cell (1.0 without scaling).",
    "optimizer_state": "The optimizer's state precision when it is not the mode's own (`--optimizer-state`: 8bit, "
                       "4bit, fp8, bf16-sr; torchao's Adam/AdamW with the workload's hyper-parameters); null: the "
                       "optimizer as the workload builds it, its states in the dtype of the weights it steps (fp32; "
                       "the half dtype under pure-*). Part of the cell's identity; ratios compare with fp32 and the "
                       "optimizer as built.",
    "optimizer_states": "What the optimizer's moment tensors were stored as after the timed steps, e.g. `8bit x24, "
                        "fp32 x38` (torchao quantizes tensors of >= 4096 elements that divide into its blocks; the "
                        "others stay plain).",
    "optimizer_impl": "Optimizer and implementation the steps ran, e.g. `AdamW (fused)`: the harness builds torch's "
                      "Adam, AdamW, SGD and Adagrad fused where torch supports the device (their kernel skips an "
                      "inf/NaN step itself: no host sync per step); `(foreach)` / `(for-loop)` otherwise; `, stepped "
                      "directly` when the engine ran the fused kernel itself every timed step (Adam, AdamW, SGD: "
                      "precision/fused_step.py; rows from before 2026-11-26 stepped through optimizer.step()). Rows "
                      "from before the column: null (for-loop on CPU).",
    "host_reads_per_step": "Host reads of device values ampbench's engine made per timed step: 0 with a fused optimizer "
                           "in every mode, 1 with any other (whether to call its step()); what the model or optimizer "
                           "read itself is not counted.",
    "final_loss": "Training loss of the last step (mean over seeds of the last 10% of steps when converge ran).",
    "metric_name": "Name of the workload metric (accuracy, perplexity, ...).",
    "metric": "Test metric after convergence training (null unless `converge` was measured).",
    # distributed cells (world_size > 1): samples_per_s is global (world size x the slowest rank), step times
    # and mfu the slowest rank's, memory keys the max over ranks
    "comm_bytes_per_step": "Bytes one rank sends per step for gradients (and FSDP's parameter all-gathers), counted from "
                           "the dtypes and sizes for ring collectives (ampbench/distributed/comm.py): a floor.",
    "ranks": "Each rank's own samples_per_s, step_ms_p50, peak_allocated_bytes and final_loss.",
    # torch.compile (compiled cells; null when eager)
    "torch_compile": "The torch.compile call the cell's compile and cuda_graphs values mean, e.g. "
                     "`torch.compile(mode=\"reduce-overhead\")` (table in ampbench/execution/axes.py).",
    "compile_s": "Seconds of the first step, in which dynamo traces and Inductor compiles forward and backward: the "
                 "compile cost, measured apart and never in the timed steps (see compile_cache).",
    "compile_cache": "hit, miss or partial: whether Inductor's on-disk FX-graph cache (from an earlier process) served "
                     "the first step's compile. A hit makes compile_s far shorter than a cold compile.",
    "graphs_compiled": "Graphs dynamo compiled in the cell (forward graphs; each graph break or recompile adds one).",
    "graph_breaks": "Graph breaks dynamo met in the cell: each splits the model into graphs with eager Python between.",
    "graph_break_reasons": "The most frequent graph-break reasons (first line each, with counts).",
    "recompiles": "Graphs compiled after the first step (warm-up and timed steps): a guard failed, e.g. a new shape.",
    "recompiles_timed": "Graphs compiled during the timed steps: their compile time is inside samples_per_s (a "
                        "recompile per step means the model is recompiled at every call: a finding).",
    # memory
    "peak_allocated_bytes": "GPU: torch.cuda.max_memory_allocated over the warm-up and timed steps (a training "
                            "step in steady state: peaks restarted after the first, compiling, step and the "
                            "counting steps, weights and optimizer state held). CPU: peak resident memory growth of "
                            "the cell's process (see `cpu_rss_peak_bytes`).",
    "peak_reserved_bytes": "GPU: torch.cuda.max_memory_reserved (what the caching allocator held). CPU: same as allocated.",
    "nvml_used_bytes": "GPU: the process's memory as NVML reports it after the timed steps (CUDA context included; "
                       "what really limits the batch). Null without NVML, on CPU, or where NVML cannot see this "
                       "process (containers with their own PID namespace: then see gpu_used_bytes).",
    "gpu_used_bytes": "GPU: memory in use on the whole device after the timed steps (cudaMemGetInfo: total - free; "
                      "CUDA context and other processes included; on a dedicated GPU, what limits the batch). "
                      "Null on CPU.",
    "cpu_rss_peak_bytes": "CPU: peak RSS over the warm-up and timed steps, of the cell's process over its RSS with "
                          "data loaded and the runtime warmed "
                          "up, the model's fp32 weights counted in. Null on GPU.",
    "weights_bytes": "Bytes of the model's parameters and buffers as trained (half in master-*/pure-* modes).",
    "grads_bytes": "Bytes of the parameter gradients.",
    "optimizer_bytes": "Bytes of optimizer state (e.g. Adam's two moments) plus fp32 master weights and grads.",
    "activation_bytes": "Bytes saved for backward in one training step's forward (autograd saved tensors, unique "
                        "storages; the model's own parameters and buffers, and views of them, excluded by storage "
                        "identity; half copies of weights autocast saves included).",
    "model_bytes_fp32": "Tensor bytes torch.save writes for the state_dict with floating tensors in fp32 (the model "
                        "file, headers aside): each storage once, so tied weights count once.",
    "model_bytes_half": "The same with floating tensors in 16 bits.",
    "repeated_blocks": "The model's repeated blocks (FSDP2's units, what `--checkpointing` checkpoints; null: none), "
                       "counted when the cell builds it: an out-of-memory row's advice names checkpointing by it.",
    # FLOPs / MFU
    "flops_per_step": "Model FLOPs of one training step (forward + backward): torch.utils.flop_counter with "
                      "ampbench's formulas where torch's are wrong or missing (grouped/depthwise convolutions' "
                      "backward, attention on CPU, LSTM/GRU kernels; attention backward without the flash kernels' "
                      "recomputation); checked against a textbook count per layer kind. With --checkpointing blocks "
                      "the backward's recompute is left out (MFU is on the model's FLOPs).",
    "recomputed_flops_per_step": "--checkpointing blocks: the FLOPs the backward recomputes a step (the checkpointed "
                                 "blocks' forward); flops_per_step leaves them out; selective: 0 (what costs FLOPs "
                                 "is kept). Null otherwise.",
    "conv_flops_share": "Share of flops_per_step in convolutions (the rest: matmuls and attention). A GEMM "
                        "micro-benchmark predicts matmuls, not convolutions (see expected_speedup_vs_fp32).",
    "achieved_tflops": "flops_per_step x steps / timed seconds, in TFLOP/s.",
    "math_mode": "Math the GEMMs ran in: fp32, tf32, fp16, bf16 or fp8 (TF32 counted from the flags actually in force; "
                 "fp8 modes: their converted Linear layers, the rest bf16; bf16 when no layer converted).",
    "fp8_layers": "fp8 modes: Linear layers converted to torchao Float8Linear out of all Linear layers, and why the "
                  "others stayed bf16 (`3/5 converted; skipped: head (dims 10x64 not multiples of 16)`); null otherwise.",
    "fp8_flops_share": "fp8 modes: the share of flops_per_step in the converted Linear layers (their forward and "
                       "backward GEMMs), what ran in fp8; 0 when none converted (a warning says so). Null otherwise.",
    "peak_tflops": "Dense peak TFLOP/s for math_mode: a GPU's from ampbench's GPU catalogue (sources in measure/gpus.csv); a "
                   "CPU's theoretical peak, cores x clock x FLOPs/cycle (env.cpu_peak says what it assumes; "
                   "measure/cpu.py). fp8 modes: the fp8 and bf16 peaks mixed by fp8_flops_share (1 / (s / fp8 + "
                   "(1 - s) / bf16): the converted layers' FLOPs at fp8's rate, the rest at bf16's).",
    "mfu": "achieved_tflops / peak_tflops (null when the GPU is not in the table). Read through the store, null with "
           "mfu_note where an `ampbench hw` probe of the device measured a GEMM above its peak (the peak then a lower "
           "bound: a CPU's clock read as nominal in a VM).",
    "mfu_note": "Why mfu reads null though the cell stored one (derived): the device's peaks are lower bounds.",
    "energy_j": "GPU: joules the board drew over the timed steps, from NVML (its total-energy counter read after the "
                "synchronisations that open and close them; on a GPU without one, its power sampled every 10 ms and "
                "integrated), over at least 2 s: timed steps shorter than that are followed inside the window by "
                "more of the same steps, untimed (energy_steps). Null on a CPU, without nvidia-ml-py, or where NVML "
                "cannot read it -- never zero. Distributed cells: rank 0's GPU.",
    "joules_per_sample": "energy_j / the samples of the energy_steps: what a sample costs in energy (the advisor's "
                         "most energy-efficient mode; `predict` prices the same at the board's rated power).",
    "mean_power_w": "energy_j / energy_window_s: the board's mean power over the window, watts.",
    "energy_window_s": "The seconds between the two energy readings (the timed steps and any added to reach 2 s).",
    "energy_steps": "Training steps inside the energy window: the timed ones, and more where they took under 2 s.",
    "energy_source": "How energy_j was read: `nvml energy counter` or `nvml power samples`; null when not measured.",
    "mfu_vs_measured": "achieved_tflops / the best GEMM TFLOP/s `ampbench hw` measured on this device for the same math "
                       "(derived; null until `ampbench hw` has stored a measurement for the device).",
    # largest batch
    "max_batch": "Largest batch that ran `maxbatch_trial_steps` full optimizer steps within the memory limit "
                 "(GPU memory, or --memory-budget on CPU) with the safety margin.",
    "max_batch_limit_hit": "True when the search stopped at its upper limit: the real maximum is larger.",
    "max_batch_trials": "The trials of the search: [batch, ok, peak bytes].",
    "max_batch_samples_per_s": "Throughput measured at max_batch (null when that timed cell failed: the row's "
                               "warnings say why).",
    # convergence
    "converge": "Convergence data: steps, seeds, loss curves per seed, final losses, metrics, skipped steps, "
                "loss-scale trajectories, diverged seeds.",
    # inference
    "inference": "Inference latency in this mode at batch 1 and the large batch: {batch: {p50_ms, p90_ms, p99_ms}}.",
    # environment
    "env": "Environment of the cell: device, compute capability, driver/CUDA/cuDNN/torch versions, clocks and power "
           "limit (NVML), TF32 flags in force (matmul, cuDNN), TF32 override variables, hostname, CPU.",
    # derived when read
    "speedup_vs_fp32": "samples_per_s / the fp32 cell's samples_per_s (derived; null without an ok fp32 cell).",
    "speedup_vs_tf32": "samples_per_s / the tf32 cell's beside it (same everything else), for the modes other than "
                       "fp32 and tf32: the gain over what a GPU user's fp32 runs once TF32 is on (derived; null "
                       "without an ok tf32 cell).",
    "speedup_vs_fp32_eager": "samples_per_s / the fp32 eager cell's (compile off, contiguous, no CUDA graphs): the "
                             "gain of the row's precision and execution changes together, against one baseline "
                             "(derived; null without that cell). speedup_vs_fp32 compares with fp32 at the row's "
                             "own execution: the precision's gain alone.",
    "scaling_efficiency": "Distributed rows on CUDA: samples_per_s / (world_size x the single-process cell's "
                          "samples_per_s), same precision and execution (derived; 1.0 = perfect scaling; null without "
                          "that cell, and on CPU, where ranks share the cores the one-process cell already used).",
    "speedup_vs_fp32_range": "[lowest, highest] of the per-repeat speedups (repeat r of this mode over repeat r of "
                             "fp32, measured next to each other) (derived; null with fewer than 2 repeats).",
    "speedup_vs_fp32_noise": "Relative noise of speedup_vs_fp32: the two cells' samples_per_s_noise and fp32's "
                             "baseline_drift combined (root of the sum of squares) (derived; null where neither cell "
                             "measured its own noise: the drift alone is no estimate).",
    "speedup_vs_fp32_doubt": "Why a gain over fp32 is not claimed whatever its noise says (derived; null when none): "
                             "the mode's math is emulated on this device by its probe (a CPU without that dtype's "
                             "instructions) yet it measured over 1.25x fp32, or fp32's own measurements of the cell "
                             "(closing baseline, repeats) disagree by over 25%. Re-run with --repeats 3 on an idle "
                             "machine.",
    "memory_saving_vs_fp32": "1 - peak_allocated_bytes / fp32's on GPU; on CPU 1 - the exact split (weights + grads "
                             "+ optimizer + activations) / fp32's, the RSS peak being too approximate to compare; "
                             "cells with only RSS growth (Keras on CPU): 1 - the median reading / fp32's, only when "
                             "the difference clears both cells' reading ranges, else null with "
                             "memory_saving_vs_fp32_note (derived).",
    "memory_saving_vs_fp32_note": "Why memory_saving_vs_fp32 is null for an RSS-based row (derived): one reading per "
                                  "cell (its noise unmeasured; --repeats measures it), or a difference within the "
                                  "range of the readings.",
    "memory_basis": "What the compared memory is, from memory_source (derived): exact, rss (approximate) or peak "
                    "(a GPU allocator's or tracker's).",
    "cpu_rss_peak_bytes_repeats": "RSS-based rows with --repeats: cpu_rss_peak_bytes of each measurement of the cell, "
                                  "in order (each repeat is a process of its own); their median is compared and "
                                  "their range is the noise a saving must clear (derived when repeats are merged).",
    "max_batch_ratio_vs_fp32": "max_batch / fp32's max_batch (derived; null where both searches stopped at their "
                               "limit: two lower bounds).",
    "max_batch_ratio_bound": "How max_batch_ratio_vs_fp32 bounds the real ratio (derived): '>=' where this row's search "
                             "stopped at its limit, '<=' where fp32's did, null where both maxima were found.",
    "expected_speedup_vs_fp32": "What faster matmuls alone would give this mode (Amdahl): 1 / ((1 - g) + g / r), g = "
                                "fp32's mfu_vs_measured (the share of its step the matmuls would take at the GEMM "
                                "speed `ampbench hw` measured), r = that GEMM's measured speedup in this row's math "
                                "(derived; null without an `ampbench hw` probe of the device, when that GEMM is not "
                                "faster than fp32's (emulated math is not predicted by square GEMMs), or when over "
                                "10% of the FLOPs are convolutions (conv_flops_share: their half-precision speed is "
                                "not a GEMM's). Explains a speedup far below the GEMM ratio: the rest of the step "
                                "does not get faster under autocast; pure-*/master-* also halve the bytes of "
                                "elementwise ops and can beat it.",
    "converge_verdict": "baseline (the fp32 row), parity, worse, diverged, no-baseline or inconclusive (derived: "
                        "final loss within a tolerance from fp32's seed-to-seed spread, and no divergence; "
                        "inconclusive, every row of the run, when fp32's own loss fell by no more than that "
                        "tolerance: a mode that learned nothing would pass).",
    "converge_tolerance": "The loss tolerance the verdict used (derived).",
    "fp32_loss_target": "The loss the time to fp32's loss is measured to: fp32's mean final loss + converge_tolerance "
                        "(what the verdict calls parity) (derived; null without convergence curves of the row and "
                        "fp32).",
    "steps_to_fp32_loss": "Median over seeds of the first step at which a seed's loss, averaged over the trailing "
                          "tenth of its steps, is at or below fp32_loss_target (derived; null unless every seed "
                          "reached it).",
    "seeds_reaching_fp32_loss": "Seeds whose smoothed loss reached fp32_loss_target within the convergence steps "
                                "(derived).",
    "time_to_fp32_loss_s": "steps_to_fp32_loss x the mean timed step (step_ms_mean): seconds of training to fp32's "
                           "loss at the measured speed, compile time apart (derived).",
    "time_to_fp32_loss_vs_fp32": "fp32's time_to_fp32_loss_s / this row's: the speedup at equal loss, speed and "
                                 "convergence together (derived; null unless both reached the target).",
    "energy_to_fp32_loss_j": "time_to_fp32_loss_s x mean_power_w: joules the board draws training to fp32's loss "
                             "(derived; GPU rows with an NVML energy reading).",
}

DERIVED_KEYS = ("speedup_vs_fp32", "speedup_vs_tf32", "speedup_vs_fp32_eager", "scaling_efficiency", "speedup_vs_fp32_range",
                "speedup_vs_fp32_noise", "speedup_vs_fp32_doubt",
                "memory_saving_vs_fp32", "memory_saving_vs_fp32_note", "memory_basis", "max_batch_ratio_vs_fp32",
                "max_batch_ratio_bound",
                "expected_speedup_vs_fp32", "mfu_vs_measured", "mfu_note",
                "converge_verdict", "converge_tolerance", "fp32_loss_target", "steps_to_fp32_loss",
                "seeds_reaching_fp32_loss", "time_to_fp32_loss_s", "time_to_fp32_loss_vs_fp32", "energy_to_fp32_loss_j")


def framework_of(row: dict[str, Any]) -> str:
    """How tables name a row's framework: its framework's name for its backend (torch, keras/tensorflow; rows from
    before the column: the default framework)."""

    name, backend = seam.from_entries(row)
    return seam.get(name).describe(backend)


def names_frameworks(rows: list[dict[str, Any]]) -> bool:
    """Whether a table of ``rows`` needs a framework column: some row is not the default framework's ("torch" on
    every row of a PyTorch table is a column that says nothing)."""
    return any(seam.from_entries(r) != (seam.DEFAULT, None) for r in rows)


def empty_row() -> dict[str, object]:
    """A row with every stored key present and null (measurements fill in what they measured)."""
    return {k: None for k in ROW_KEYS if k not in DERIVED_KEYS}


# -- validation: what each stored key may hold ---------------------------------------------------------
_STR = ("run_id", "cell_key", "workload", "precision", "status")
"""Required, non-empty strings."""
_OPT_STR = ("preset", "device", "device_name", "repeat_of", "reason", "created_at", "timer", "metric_name", "math_mode",
            "fp8_layers", "compile", "memory_format", "cuda_graphs", "checkpointing", "torch_compile", "compile_cache",
            "strategy", "grad_reduce_dtype", "speedup_vs_fp32_doubt", "framework", "memory_source", "energy_source",
            "memory_saving_vs_fp32_note", "memory_basis", "optimizer_impl", "optimizer_state", "optimizer_states",
            *(k for k, t in seam.row_types().items() if t is str))
_OPT_INT = ("batch_size", "repeat", "steps", "energy_steps", "warmup", "skipped_steps", "max_batch", "flops_per_step",
            "recomputed_flops_per_step", "grad_accum", "repeated_blocks",
            "peak_allocated_bytes", "peak_reserved_bytes", "nvml_used_bytes", "gpu_used_bytes", "cpu_rss_peak_bytes",
            "weights_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes", "model_bytes_fp32", "model_bytes_half",
            "graphs_compiled", "graph_breaks", "recompiles", "recompiles_timed", "world_size", "comm_bytes_per_step",
            *(k for k, t in seam.row_types().items() if t is int))
_OPT_BOOL = ("closing_baseline", "max_batch_limit_hit", "compiled_by_default",
             *(k for k, t in seam.row_types().items() if t is bool))
_OPT_DICT = ("env", "converge", "inference", "phases_s")
_OPT_LIST = ("max_batch_trials", "graph_break_reasons", "ranks", "warnings")


_SIGNED = ("final_loss", "metric", "memory_saving_vs_fp32")
"""Numbers that may be negative (a user's loss or metric; a mode that uses more memory than fp32). Every other
number a row holds is a count, a size, a time, a rate or a ratio of them: >= 0."""
_POSITIVE = ("batch_size", "world_size", "steps", "loss_scale")
_NONFINITE_OK = ("final_loss", "metric")
"""A diverged cell's loss (and a metric computed from it) is inf/NaN: that is its measurement."""


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _range_problem(k: str, v: object, strict: bool) -> str | None:
    """Physically impossible values: negative, or zero where there must be something; with ``strict`` (files to
    import, which exports write as strict JSON) also not finite."""
    if not _is_num(v):
        return None
    x = float(v)  # type: ignore[arg-type]
    if not math.isfinite(x):
        return None if k in _NONFINITE_OK or not strict else f"{k} must be a finite number, got {v!r}"
    if k in _POSITIVE and x <= 0:
        return f"{k} must be > 0, got {v!r}"
    if k not in _SIGNED and x < 0:
        return f"{k} must be >= 0, got {v!r}"
    return None


def row_problem(row: object, strict: bool = False) -> str | None:
    """What is wrong with a stored (or imported) row, in one phrase; None when every key holds what it should.

    Readers rely on this: ``import`` refuses a file with such a row (``strict``: a number must also be finite, except
    a diverged loss), and reading the store skips one (a stored NaN is what a cell measured: exports write it as null).
    """
    if not isinstance(row, dict):
        return f"is a {type(row).__name__}, not an object"
    for k in _STR:
        if not isinstance(row.get(k), str) or not row[k]:
            return f"{k} must be a non-empty string, got {row.get(k)!r}"
    if row["status"] not in STATUSES:
        return f"status {row['status']!r} is not one of {', '.join(STATUSES)}"
    if row["precision"] not in MODES:
        return f"precision {row['precision']!r} is not a mode name ({', '.join(MODES)})"

    for axis, values in AXES.items():
        if row.get(axis) is not None and row[axis] not in values:
            return f"{axis} {row[axis]!r} is not one of {', '.join(values)}"
    for k, v in row.items():
        if v is None or k in _STR:
            continue
        if k in _OPT_STR and not isinstance(v, str):
            return f"{k} must be a string, got {v!r}"
        if k in _OPT_INT and not (_is_num(v) and float(v).is_integer()):
            return f"{k} must be an integer, got {v!r}"
        if k in _OPT_BOOL and not isinstance(v, bool):
            return f"{k} must be true or false, got {v!r}"
        if k in _OPT_DICT and not isinstance(v, dict):
            return f"{k} must be an object, got {type(v).__name__}"
        if k in _OPT_LIST and not isinstance(v, list):
            return f"{k} must be a list, got {type(v).__name__}"
        if k == "measures" and not (isinstance(v, list) and all(isinstance(m, str) for m in v)):
            return f"measures must be a list of names, got {v!r}"
        if k in ("samples_per_s_repeats", "speedup_vs_fp32_range", "cpu_rss_peak_bytes_repeats"):
            if not (isinstance(v, list) and all(x is None or _is_num(x) for x in v)):
                return f"{k} must be a list of numbers, got {v!r}"
            bad = next((p for p in (_range_problem(k, x, strict) for x in v) if p), None)
            if bad:
                return bad
        numeric = k not in (_OPT_STR + _OPT_INT + _OPT_BOOL + _OPT_DICT + _OPT_LIST +
                            ("measures", "samples_per_s_repeats", "speedup_vs_fp32_range", "cpu_rss_peak_bytes_repeats",
                             "converge_verdict"))
        if numeric and k in ROW_KEYS and not _is_num(v):
            return f"{k} must be a number, got {v!r}"
        problem = _range_problem(k, v, strict) if k in ROW_KEYS else None
        if problem:
            return problem
    if row["status"] == "ok" and "throughput" in (row.get("measures") or []) and row.get("samples_per_s") is None:
        return "an ok throughput row has no samples_per_s"
    return None
