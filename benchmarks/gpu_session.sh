#!/usr/bin/env bash
# The GPU measurements of the benchmark-harness issue, in stages that each fit one 10-minute
# command of a lent GPU machine (no network there; torch 2.11 and python 3.12 in its image).
#
#   bash benchmarks/gpu_session.sh STAGE      # run on the GPU machine, from the repo root
#   bash benchmarks/gpu_session.sh --dry-run [STAGE|all]   # anywhere: print each stage's commands, run nothing
#                                                          # (tests/test_gpu_session.py checks their arguments)
#
#   truth   GPU truth at real scale (issues 57, 58), one ~9-minute command a call, resumable: this GPU's kernel table
#           (hw --calibrate, ~1.5 min: ~35 s of kernels, ~1 min of power readings), the default GPU suite at real scale
#           in every mode (its wall time is the issue's goal: <= 10 min on an H100), the kept-BatchNorm and energy
#           GPU tests, the issue's GPT-2 cells (hf:gpt2 1024 tokens: where a cell's seconds went), Lambda's published
#           ResNet-50 configuration (on an H100 SXM: one of its twelve GPUs, measured here), runs.json.
#           The first lease (H200, 2026-11-27) ran five modes of it; the third ran it whole in two calls
#   rest    (an H200) what the third lease left: ResNet-50's fp16 cells with the fused-SGD fix, the GPU tests, the GPT-2
#           cells' phases, the wide-mlp A/B of building ahead, the kernel table again, then Lambda's published ResNet-50
#           configuration (NCHW, batch 640 TF32 / 1280 AMP: the cross-GPU check's A100/H100 AMP miss) (~9 min)
#   after   (an H200, once rest is committed: benchmarks/results/h200/rest) what the fourth lease (2026-11-30) left:
#           the GPU tests (the energy oracle fixed), GPT-2's and own workloads' cells after the build fixes (the Markov
#           text walked over chains, torch._dynamo imported while building ahead: their phases), BERT-base b32 plain
#           and 4 micro-batches in 3 interleaved repeats (the launch-bound noise against the +32% accumulation miss),
#           ResNet-50 NCHW beside channels-last at batch 256 (the NCHW miss at Lambda's batches: layout or batch?),
#           each traced op's kernel time beside its price (benchmarks/op_times.py: ViT and BERT AMP, ResNet-50 NCHW and
#           channels-last, mnist-cnn), the profiler's trace of two launch-bound small-suite steps (~1 ms longer than priced)
#   lease   everything one 15-minute lease holds, in one ~9-minute command, most telling first: the predict
#           stage's predictions and measurements plus two it lacks (a user's nn.MultiheadAttention model; bert at the
#           paper preset), the host's time per op, the engine's host time per step, the GEMM probe, the GPU tests,
#           runs.json; each step packs
#           what it made, so a step cut off at the command's limit loses only itself
#   lease2  the second lease's command: what the first (H200) left -- fp8 eager beside its predictions, compiled and
#           CUDA-graph steps of cells measured eager, the engine's host time in every mode, the host's time per op
#   checks  ampbench hw (GEMM up to 8192) and the GPU tests
#   predict ampbench predict on this GPU's spec (made first), then `ampbench run` on the same cells: the small
#           suite and the plain-PyTorch ResNet-50 of the reference test (batch 128, channels-last); compare
#           prints each prediction's error beside its measurement (docs/predict.md's GPU table comes from it)
#   paper   mnist-cnn paper: max batch fp32 vs amp-fp16 (8 GiB budget); conv-dummy paper: time +
#           memory, 3 interleaved repeats
#   suite   the default GPU suite (`make run`'s job); stops itself before the command limit and
#           continues with --resume when run again (finished cells are never lost)
#   bench   benchmarks/engine_overhead.py (the MLP, and --tiny: host time per step) and harness_overhead.py on cuda
#   export  every run as JSON, the hw probe, Markdown/HTML reports -> benchmarks/results/<gpu>/
#   fp8     (torchao wheel carried) BERT-large on the fp8 modes next to amp-bf16: throughput, memory,
#           convergence; eager and torch.compile'd (torchao's fp8 is meant to be compiled)
#   optim   (torchao wheel carried) optimizer-state precision, torchao's memory table on a model of ours:
#           BERT-large in amp-bf16 and master-bf16 with Adam states as built, 8bit, 4bit, fp8 (memory, time,
#           max batch in a 16 GiB budget); bert small pure-bf16 with and without stochastic rounding, converged beside fp32
#   dist    DDP/FSDP2 sanity on one GPU (--nproc-per-node 1: the wrappers' and the engine's overhead,
#           nccl), fsdp x1 fp8-tensorwise when torchao is carried, and, on a machine with 2+ GPUs,
#           benchmarks/grad_reduce.py
#   axes    one change at a time: resnext small and bert small in fp32/amp-bf16 x --compile off,on x
#           --cuda-graphs off,on (resnext also x --memory-format contiguous,channels_last)
#   keras   (keras wheels carried) keras-conv-dummy paper beside torch conv-dummy paper, fp32 vs
#           mixed_float16 / amp-fp16, 3 interleaved repeats, on Keras's JAX backend (the image has JAX
#           with CUDA and PyTorch, no TensorFlow), then on its torch backend
#   compat  (if device time is left) the whole CPU test suite on that machine's torch and python
#
# Exit 3: a run stopped at BUDGET_S with cells left; call the same stage again to resume it.
# State lives in out/gpu/ (results.db, logs); every stage ends by packing out/gpu and
# benchmarks/results/<gpu>/ into $OUT/gpu-session.tgz (when $OUT is set), so the caller unpacks
# it into the checkout and carries `out` into the next call.
#
# typer >= 0.26 cannot parse options without pydantic, which that image lacks, and its typer
# version is unknown: before the first call, here, `pip download --no-deps --only-binary=:all:
# typer==0.25.1 -d .whl` and carry `.whl` (and `out`) in every call; the wheel is used only
# where pydantic is missing. The fp8 stage needs torchao (absent there): `pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 torchao==0.18.0 -d .whl`
# (3.4 MB, cp310-abi3, no declared torch dependency; 0.18 needs torch >= 2.11, which that image has).
# The keras stage needs keras and the small packages it needs that the image lacks: `pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 keras==3.15.1 namex optree h5py
# absl-py -d .whl` (pure-python keras 1.5 MB; optree/h5py manylinux wheels); installed only where keras is missing.
set -uo pipefail
STAGES="truth rest after lease lease2 checks predict paper suite bench fp8 optim axes dist keras export compat"
usage() {
  cat <<'USAGE'
usage: bash benchmarks/gpu_session.sh [--dry-run] STAGE     (on the lent GPU machine, from the repo root)
       bash benchmarks/gpu_session.sh --dry-run [STAGE|all] (anywhere: print the stage's commands, run nothing)

Each stage fits one 10-minute command (its long runs stop at BUDGET_S, 540 s; exit 3 then: call it again to
resume). Times are what each was sized to, not yet measured on a GPU.

  truth    the kernel table (hw --calibrate), the real-scale GPU suite in every mode, the BatchNorm and energy GPU
           tests, hf:gpt2 at 1024 tokens with its phases, runs.json (resume: call it again)        ~9 min a call
  after    (an H200, rest committed) the GPU tests; GPT-2 and bert/resnet50 cells' phases after the build fixes;
           each traced op's kernel time beside its price (ViT, BERT, ResNet-50 NCHW/channels-last, mnist-cnn);
           BERT-base b32 x1/x4 amp-bf16 in 3 repeats; ResNet-50 NCHW beside channels-last at batch 256; the
           profiler's trace of mnist-cnn and tabular-mlp small steps (launch-bound)                ~8 min
  rest     (an H200: its suite is committed) what the third lease left: ResNet-50 in amp-fp16 and master-fp16 with the
           fused-SGD fix beside amp-bf16, the kept-BatchNorm and energy GPU tests, hf:gpt2 at 1024 tokens with its
           phases, the wide-mlp A/B of building ahead, runs.json, then the kernel table again (the host's issue
           time per kind, power on each kind's highest-rate case); another GPU: truth                     ~8 min
  lease    a 15-minute lease in one command: predict's cells + an nn.MultiheadAttention model + bert paper,
           predicted then measured; host and engine time; hw; GPU tests; runs.json (H200: 8 min for all but
           runs.json at BUDGET_S=490, the predictions failing fast then; they take ~1 min more now)   ~9 min
  lease2   what the first lease left: fp8 eager beside its predictions (torchao carried), compiled and CUDA-graph
           steps of bert/resnext small, the engine's host time in every mode, the host's time per op  ~9 min
  checks   ampbench hw (GEMMs up to 8192) and the GPU tests                                   ~3 min
  predict  ampbench predict on this GPU's spec first, then ampbench run of the same cells (the small suite, the
           reference ResNet-50 at batch 128 channels-last); compare prints each prediction's error         ~8 min
  paper    mnist-cnn max batch fp32 vs amp-fp16 (8 GiB budget); conv-dummy time + memory, 3 repeats ~8 min
  suite    the default GPU suite (make run's job); resumable over several calls                 ~9 min a call
  bench    benchmarks/engine_overhead.py (and --tiny: host us per step) and harness_overhead.py  ~9 min
  fp8      BERT-large in the fp8 modes beside amp-bf16, eager and compiled (torchao wheel carried)  ~9 min
  optim    optimizer-state precision: BERT-large states as built/8bit/4bit/fp8, pure-bf16 vs bf16-sr ~9 min
  axes     one change at a time: --compile, --cuda-graphs, --memory-format on resnext and bert  ~9 min
  dist     DDP/FSDP2 on one GPU (nccl), fsdp fp8; benchmarks/grad_reduce.py with 2+ GPUs        ~6 min
  keras    keras-conv-dummy beside conv-dummy, fp32 vs mixed precision, JAX then torch backend  ~6 min
  export   every run as JSON, the hw probe, Markdown/HTML reports -> benchmarks/results/<gpu>/ ~1 min
  compat   (time left) the whole CPU test suite on that machine's torch and python           ~9 min

--dry-run placeholders: RUN stands for each run id the store holds (export's reports); benchmarks/results/dry-run
for benchmarks/results/<the GPU's name>; h100-sxm (predict's --gpu) for the spec key of the GPU it runs on; cuda
for $DEVICE. State: out/gpu/ (results.db, logs), packed into $OUT/gpu-session.tgz when $OUT is set.
USAGE
}
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then usage; exit 0; fi
DRY=""
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
STAGE=${1:-}
if [ -z "$STAGE" ] && [ -n "$DRY" ]; then STAGE=all; fi
[ -n "$STAGE" ] || { usage >&2; exit 2; }
case " $STAGES " in *" $STAGE "*) ;; *) [ -n "$DRY" ] && [ "$STAGE" = all ] || { echo "unknown stage $STAGE: ${STAGES// /|} (--help says what each does)" >&2; exit 2; } ;; esac
DEVICE=${DEVICE:-cuda}
BUDGET_S=${BUDGET_S:-540}          # stop a stage's long command before the 600 s command limit
STATE=out/gpu
DB=$STATE/results.db
export PYTHONUNBUFFERED=1

# x CMD...: run it, or with --dry-run print it (shell-quoted, one line) and succeed
x() {
  if [ -n "$DRY" ]; then printf '%q ' "$@" | sed 's/ $//'; echo; return 0; fi
  "$@"
}
# log FILE: tee into FILE (dry run: print only)
log() { if [ -n "$DRY" ]; then cat; else tee "$1"; fi; }

if [ -n "$DRY" ]; then
  AB=ampbench; PY=python; GPU=dry-run; RESULTS=benchmarks/results/$GPU
  SECONDS=0
fi

# -- setup: ampbench importable, with a typer that works without pydantic ----------------------
if [ -z "$DRY" ]; then
mkdir -p "$STATE"
WHEELS=()
if ls .whl/typer-*.whl >/dev/null 2>&1 && ! python3 -c "import pydantic" 2>/dev/null; then WHEELS+=(.whl/typer-*.whl); fi
if ls .whl/torchao-*.whl >/dev/null 2>&1 && ! python3 -c "import torchao" 2>/dev/null; then WHEELS+=(.whl/torchao-*.whl); fi
if ls .whl/keras-*.whl >/dev/null 2>&1 && ! python3 -c "import keras" 2>/dev/null; then
  for w in .whl/keras-*.whl .whl/namex-*.whl .whl/optree-*.whl .whl/h5py-*.whl .whl/absl_py-*.whl; do
    [ -e "$w" ] && WHEELS+=("$w")
  done
fi
if [ ${#WHEELS[@]} -gt 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${WHEELS[@]}" && export PYTHONPATH=/tmp/site
fi
bash scripts/bootstrap.sh >"$STATE/setup.log" 2>&1 || { cat "$STATE/setup.log"; exit 1; }
AB=.venv/bin/ampbench
PY=.venv/bin/python
GPU=$($PY - <<EOF
import re, torch
name = torch.cuda.get_device_name(0) if "$DEVICE".startswith("cuda") else "cpu"
print(re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-"))
EOF
)
RESULTS=benchmarks/results/$GPU
mkdir -p "$RESULTS"
echo "gpu_session $STAGE on $GPU: $($PY -c 'import torch, typer; print("torch", torch.__version__, "typer", typer.__version__)')"

pack() {
  [ -n "${OUT:-}" ] && tar czf "$OUT/gpu-session.tgz" "$STATE" "$RESULTS" && echo "packed $OUT/gpu-session.tgz"
  return 0
}
trap pack EXIT
fi

# `ampbench run` that continues the last run with the same options (if one exists) and stops
# itself when the stage has used BUDGET_S (counted from the script's start, so several runs in
# one stage share it); calling the stage again resumes, so a stage may take several calls.
run_resumable() {  # $1 = log name, rest = ampbench run options
  local name=$1 rc left; local log=$STATE/$name.log; shift
  if [ -n "$DRY" ]; then x $AB run --device "$DEVICE" --db "$DB" --no-report --resume "$@"; return 0; fi
  left=$((BUDGET_S - SECONDS))
  if [ $left -lt 30 ]; then echo "$name: not started, the stage's budget is spent (exit 3); run this stage again"; return 3; fi
  timeout "$left" $AB run --device "$DEVICE" --db "$DB" --no-report --resume "$@" >>"$log" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && tail -n 1 "$log" | grep -q -- "--resume: no earlier run"; then
    timeout "$((BUDGET_S - SECONDS))" $AB run --device "$DEVICE" --db "$DB" --no-report "$@" >>"$log" 2>&1
    rc=$?
  fi
  tail -n 60 "$log"
  if [ $rc -eq 124 ]; then  # not 124 to the caller: the device tool reads 124 as its own time limit
    echo "$name: stopped at the ${BUDGET_S}s budget (exit 3); run this stage again to resume"
    return 3
  fi
  if [ $rc -eq 1 ]; then  # ampbench run's exit 1: it finished, some cells errored (their rows say why)
    echo "$name: finished; some cells errored (see their reasons above)"
    return 0
  fi
  return $rc
}

# the catalogue key of the GPU it runs on (predict --gpu), or nothing where the catalogue lacks it
gpu_key() {
  if [ -n "$DRY" ]; then echo h100-sxm; return; fi
  $PY -c "import torch; from ampbench.measure.gpus import for_device as f; p = torch.cuda.get_device_properties(0); g = f(p.name, p.total_memory / 2**30); print(g.key if g and g.predictable else '')"
}
# bounded CMD...: run it under what is left of BUDGET_S (at most $CAP s when set), then pack; a step cut off loses
# only itself
bounded() {
  local left=$((BUDGET_S - SECONDS)); [ -n "${CAP:-}" ] && [ "$CAP" -lt "$left" ] && left=$CAP
  if [ -n "$DRY" ]; then x "$@"; return 0; fi
  if [ $left -lt 10 ]; then echo "not started (the stage's budget is spent): $*"; return 3; fi
  timeout "$left" "$@"; local rc=$?; pack; return $rc
}

# the steps truth and rest share: the GPU tests of the kept BatchNorm's CUDA path and the energy columns; the issue's
# GPT-2 cells (Hugging Face's, 1024 tokens: where a cell's wall time goes, phase by phase); the building-ahead A/B on
# wide-mlp amp-bf16 (started at its turn, --no-build-ahead, against the suite's built-ahead cell)
gpu_tests() {
  CAP=60 bounded $PY -m pytest -q -p no:cacheprovider tests/precision/test_master.py -k cuda tests/bench/test_gpu.py \
    2>&1 | log "$STATE/gpu-tests.log"
}
gpt2_phases() {  # $1 = log name
  run_resumable "$1" --workloads hf:gpt2 --task lm --input-shape 1024 --batch-size 16 --steps 15 --warmup 3 \
    --precisions fp32,tf32 --cell-timeout 100 --label "hf:gpt2 1024 tokens batch 16: the cells' phases"
}
ahead_ab_mlp() {  # $1 = log name
  run_resumable "$1" --workloads wide-mlp --preset paper --batch-size 4096 --precisions amp-bf16 --no-build-ahead \
    --cell-timeout 120 --label "A/B: wide-mlp amp-bf16 started at its turn, against the suite's built-ahead cell"
}
lambda_cells() {  # $1 = log name: Lambda's published ResNet-50 configuration (predict_checks/lambda_references.py:
  # DeepLearningExamples' ConvNets, NCHW, an 80 GB card's batches), our measurement beside the twelve GPUs' published
  # ones -- on an H100 SXM the same card as a row of theirs; on an H200 the A100s'/H100s' NCHW AMP miss, measured here
  # ("FP32" there is PyTorch's default: cuDNN's convolutions in TF32, ampbench's tf32 mode but for the one fc layer)
  run_resumable "$1-tf32" --workloads resnet50 --preset paper --memory-format contiguous --batch-size 640 \
    --precisions tf32 --cell-timeout 120 --label "Lambda's ResNet-50 configuration, FP32 (TF32 convolutions), NCHW" \
    || return $?
  run_resumable "$1-amp" --workloads resnet50 --preset paper --memory-format contiguous --batch-size 1280 \
    --precisions amp-fp16 --cell-timeout 120 --label "Lambda's ResNet-50 configuration, AMP fp16, NCHW"
}
op_times() {  # where a whole step's miss lives: each traced op's kernel time beside its price (benchmarks/op_times.py,
  # ~20 s each), most telling first -- ViT and BERT in AMP (predicted 8-15 % too fast on the lent H200), ResNet-50
  # amp-fp16 on NCHW tensors beside channels-last (-24 % at Lambda's batch 1,280 against -3 %), mnist-cnn small fp32
  # (launch-bound: its kernels' total against its 1.58 ms step)
  # and BERT amp-bf16 with its blocks checkpointed (-23 %: the recompute's kernels, or the host?)
  local spec w preset mode batch layout ckpt name
  for spec in "vit paper amp-bf16 128 contiguous off" "bert paper amp-bf16 128 contiguous off" \
              "resnet50 paper amp-fp16 256 contiguous off" "resnet50 paper amp-fp16 256 channels_last off" \
              "mnist-cnn small fp32 64 contiguous off" "bert paper amp-bf16 128 contiguous blocks"; do
    read -r w preset mode batch layout ckpt <<<"$spec"
    name="${w}_${mode}_${layout}$([ "$ckpt" = off ] || echo "_$ckpt")"
    # (a second call of the stage on a warm machine: what its first measured stays, in out/gpu)
    [ -z "$DRY" ] && grep -q "^step " "$STATE/op-times-$name.log" 2>/dev/null && continue
    CAP=60 bounded $PY benchmarks/op_times.py --workload "$w" --preset "$preset" --precision "$mode" \
      --batch-size "$batch" $([ "$layout" = channels_last ] && echo --channels-last) --checkpointing "$ckpt" \
      --device "$DEVICE" --out "$RESULTS/op_times_$name.json" 2>&1 | log "$STATE/op-times-$name.log"
  done
}

stage() {
case $1 in
  truth)
    export AMPBENCH_NO_ESTIMATE=1  # (the run's time estimate costs a child process per target: minutes a lease lacks)
    # 1. this GPU's own kernel table (issue 58): first, as everything after it is priced from it (once per machine:
    # the store under out/ stays on a warm machine, a results file does not -- the tree is sent again each call)
    if [ -n "$DRY" ] || ! $PY -c "from ampbench.store import Store; import sys; sys.exit(0 if Store('$DB').calibrations() else 1)"; then
      CAP=200 bounded $AB hw --calibrate --budget 150 --device "$DEVICE" --db "$DB" --csv "$RESULTS/calibration.csv" \
        2>&1 | log "$STATE/calibrate.log"
    fi
    # 2. the default GPU suite, as `ampbench run` runs it here: every mode, phases in each row, timed whole (issue 57:
    # <= 10 min predicted on an H100 -- ampbench predict --gpu h100-sxm says 9.9, each build overlapping the cell before);
    # --verbose: each cell's phases, and how much of each cell ran ahead
    run_resumable truth-suite --cell-timeout 150 --verbose \
      --label "the default GPU suite at real scale, every mode (fork server; 20 timed steps)" || return $?
    [ -n "$DRY" ] || pack
    # 3. building ahead, A/B (right after the suite: a lease split over two calls reaches it first): two of the
    # suite's cells again (the suite entries' preset, batch and layout on a GPU of >= 75 GiB), each started at its
    # turn (--no-build-ahead): their step times beside the suite's built-ahead ones say whether the overlap moves a
    # measurement (it must not)
    run_resumable truth-ahead-ab-rn50 --workloads resnet50 --preset paper --batch-size 256 --memory-format channels_last \
      --precisions amp-bf16 --no-build-ahead --cell-timeout 120 \
      --label "A/B: resnet50 amp-bf16 started at its turn, against the suite's built-ahead cell" || return $?
    ahead_ab_mlp truth-ahead-ab-mlp || return $?
    [ -n "$DRY" ] || pack
    gpu_tests  # 4.
    gpt2_phases truth-gpt2 || return $?  # 5.
    lambda_cells truth-lambda || return $?  # 6.
    CAP=30 bounded $AB export --db "$DB" --out "$RESULTS/runs.json"
    # 7. what changed since the last lease of this GPU: the suite run beside the newest committed one (compare --runs)
    CAP=30 bounded $PY benchmarks/since_last_lease.py --db "$DB" --results "$RESULTS" --out "$RESULTS/since_last_lease.md"
    op_times  # 8. each traced op's kernel time beside its price, on this GPU
    ;;
  rest)
    # what the third lease (H200, 2026-11-27) left, most telling first; its kernel table and suite are committed
    # (benchmarks/results/h200/lease3): on another GPU run truth instead
    export AMPBENCH_NO_ESTIMATE=1
    # 1. ResNet-50's fp16 cells, which "diverged" on both H200 leases (torch's fused SGD kept the momentum buffers of an
    # overflowing first step: the engine drops them since), beside amp-bf16 (the advisor's half-type line for it)
    run_resumable rest-rn50-fp16 --workloads resnet50 --preset paper --batch-size 256 --memory-format channels_last \
      --precisions fp32,amp-fp16,amp-bf16,master-fp16 --cell-timeout 120 \
      --label "resnet50 fp16 cells with the fused-SGD fix, beside amp-bf16" || return $?
    [ -n "$DRY" ] || pack
    gpu_tests  # 2.
    gpt2_phases rest-gpt2 || return $?  # 3.
    ahead_ab_mlp rest-ahead-ab-mlp || return $?  # 4. (against the third lease's built-ahead cell)
    CAP=30 bounded $AB export --db "$DB" --out "$RESULTS/runs_rest.json"
    # 5. the kernel table again (~2.5 min), last: the host's issue time per call of each kind (the host_us column,
    # which the shipped table lacks: predict prices each kind's issue beyond the per-op mix from it) and each kind's
    # power read on its highest-rate case (calibrate.power_case, chosen after the third lease's energy check)
    CAP=200 bounded $AB hw --calibrate --budget 150 --device "$DEVICE" --db "$DB" --csv "$RESULTS/calibration.csv" \
      2>&1 | log "$STATE/calibrate.log"
    lambda_cells rest-lambda || return $?  # 6. (resumable: a second call finishes it)
    # 7. a step the host sets (issue 58): BERT-base at batch 32, where predict says amp-bf16 runs 0.79x TF32's speed
    # on an H200 (0.87x on an H100) -- priced on the lent H200 VM's 24 us an op; two cells say whether a launch-bound
    # AMP step really loses to TF32 on this host
    run_resumable rest-bert32 --workloads bert --preset paper --batch-size 32 --precisions tf32,amp-bf16 \
      --cell-timeout 90 --label "BERT-base at batch 32: launch-bound, TF32 against amp-bf16" || return $?
    # 8. activation checkpointing's trade, never measured on a GPU: predict says BERT-base batch 128 amp-bf16 runs
    # ~1.32x slower checkpointed on an A100 with ~3x less memory, selective ~1.30x with ~1.4x less (its dispatch
    # modes' host time priced from a CPU); the allocator's peak is the check a CPU cannot make
    run_resumable rest-ckpt --workloads bert --preset paper --batch-size 128 --precisions amp-bf16 \
      --checkpointing off,blocks,selective --cell-timeout 90 \
      --label "BERT-base batch 128 amp-bf16, checkpointing off, blocks and selective" || return $?
    # 9. gradient accumulation, never measured on a GPU: BERT-base 4 x 32 a step beside the plain step of 32 (one run:
    # what accumulating costs, side by side), amp-bf16 (autograd's add per parameter each later micro-batch) and
    # master-bf16 (a cast and add into the fp32 masters' gradients per parameter: predict prices its launch-bound host
    # time); predict --grad-accum 1,4 pairs with these rows
    run_resumable rest-accum --workloads bert --preset paper --batch-size 32 --grad-accum 1,4 \
      --precisions amp-bf16,master-bf16 --cell-timeout 90 \
      --label "BERT-base 32 and 4 x 32 micro-batches a step, amp-bf16 and master-bf16" || return $?
    CAP=30 bounded $AB export --db "$DB" --out "$RESULTS/runs_rest.json"
    ;;
  after)
    # what the fourth lease (H200, 2026-11-30; benchmarks/results/h200/rest) left, most telling first
    export AMPBENCH_NO_ESTIMATE=1
    gpu_tests  # 1. (tests/bench/test_gpu.py's energy oracle failed on the lease: it counted the timed steps' samples)
    # 2. a cell's wall time after the build fixes: GPT-2's build was 22 s of its 29 s (10.5 s the Markov text, now
    # ~0.5 s; ~7 s the check forward, now on a meta copy), each own workload's engine phase 3.4-5.3 s (torch._dynamo's
    # import, now once in the fork server: predict's run time counts 0.43 s a cell at its turn -- this checks it)
    gpt2_phases after-gpt2 || return $?
    run_resumable after-phases --workloads bert,resnet50 --preset paper --precisions fp32,amp-bf16 --cell-timeout 90 \
      --label "bert and resnet50 paper: the engine phase with torch._dynamo imported by the fork server" \
      || return $?
    [ -n "$DRY" ] || pack
    # 3. which ops the misses live in: ViT/BERT AMP -8..-15 %, ResNet-50 NCHW, mnist-cnn's launch-bound step
    op_times
    # 4. gradient accumulation predicted +32% too slow (67 ms measured, 89 predicted) while two runs of the plain cell
    # measured 24.6 and 30.0 ms: three interleaved repeats say how much of it is this host's noise
    run_resumable after-accum --workloads bert --preset paper --batch-size 32 --grad-accum 1,4 --precisions amp-bf16 \
      --repeats 3 --cell-timeout 90 --label "BERT-base 32 and 4 x 32 micro-batches, amp-bf16, 3 repeats" || return $?
    # 5. ResNet-50 NCHW at Lambda's batches (640/1,280) was predicted 17-24% too fast; the table's NCHW convolutions
    # are at batch 16-64: the same layouts at batch 256 say whether the layout or the batch is missed
    run_resumable after-nchw --workloads resnet50 --preset paper --batch-size 256 \
      --memory-format contiguous,channels_last --precisions tf32,amp-fp16 --cell-timeout 90 \
      --label "resnet50 paper b256: NCHW beside channels-last, tf32 and amp-fp16" || return $?
    # 6. where a launch-bound step's host time goes: the small suite's steps ran ~1 ms longer than priced on the first
    # lease whatever their mode (mnist-cnn small 1.58 ms against 0.79, tabular-mlp 3.64 against 2.54) -- the profiler's
    # Chrome trace of 10 steps each (host ops, the gaps between them, the kernels) says what that millisecond is
    local m
    for m in mnist-cnn tabular-mlp; do
      CAP=60 bounded $AB diagnose "$m" --preset small --precision fp32 --checks profile --steps 10 --device "$DEVICE" \
        --db "$DB" --trace "$RESULTS/trace_${m}_small_fp32.json" --json "$RESULTS/diagnose_${m}_small_fp32.json" 2>&1 \
        | log "$STATE/after-profile-$m.log"
    done
    CAP=30 bounded $AB export --db "$DB" --out "$RESULTS/runs_after.json"
    ;;
  lease)
    local KEY; KEY=$(gpu_key)
    [ -n "$KEY" ] || { echo "lease: this GPU is not in the catalogue (measure/gpus.csv: add its row)"; return 2; }
    local wl=tabular-mlp,mnist-cnn,resnext,bert,unet modes=fp32,tf32,amp-fp16,amp-bf16,master-bf16,pure-bf16
    local four=fp32,tf32,amp-fp16,amp-bf16
    local rn50=(--model predict_checks/references.py:ResNet50 --input-shape 3,224,224 --num-classes 1000
                --batch-size 128 --precisions "$four")
    local mha=(--model predict_checks/references.py:MHAEncoder --input-shape 128,512 --num-classes 10
               --batch-size 64 --precisions "$four")
    local bertp=(--workloads bert --preset paper --precisions "$four")
    export AMPBENCH_NO_ESTIMATE=1  # (the run's time estimate costs a child process per run: minutes a lease lacks)
    # 1. every prediction first, on the datasheet spec, before anything is measured (CPU work: ~40 s)
    # (each one's output in its log too: the command's output tail keeps only its last lines)
    CAP=60 bounded $AB predict --gpu "$KEY" "${rn50[@]}" --channels-last --db "$DB" --json "$RESULTS/predict_resnet50.json" \
      2>&1 | log "$STATE/predict-rn50.log"
    CAP=60 bounded $AB predict --gpu "$KEY" "${mha[@]}" --db "$DB" --json "$RESULTS/predict_mha.json" 2>&1 \
      | log "$STATE/predict-mha.log"
    CAP=60 bounded $AB predict --gpu "$KEY" "${bertp[@]}" --db "$DB" --json "$RESULTS/predict_bert_paper.json" 2>&1 \
      | log "$STATE/predict-bert.log"
    CAP=90 bounded $AB predict --gpu "$KEY" --workloads "$wl" --preset small --precisions "$modes" --db "$DB" \
      --json "$RESULTS/predict_suite.json" 2>&1 | log "$STATE/predict-suite.log"
    # the host's time per op (predict/cost.py's HOST_US is this, measured on the first lease's machine): ~20 s
    CAP=45 bounded $PY benchmarks/host_overhead.py --device "$DEVICE" --out "$RESULTS/host_overhead.json"
    # 2. the same cells measured: the compute-bound ones first, then the launch-bound small suite
    run_resumable lease-rn50 "${rn50[@]}" --memory-format channels_last --steps 30 \
      --label "plain-PyTorch ResNet-50 (the reference test's) batch 128 channels-last, measured beside its prediction"
    [ -n "$DRY" ] || pack
    run_resumable lease-mha "${mha[@]}" --steps 30 \
      --label "MHAEncoder (6 nn.TransformerEncoderLayer, d 512, seq 128) batch 64, measured beside its prediction"
    [ -n "$DRY" ] || pack
    run_resumable lease-bert "${bertp[@]}" --steps 30 --label "bert paper preset (base, seq 128, batch 32), measured beside its prediction"
    [ -n "$DRY" ] || pack
    # (in one process: 30 launch-bound cells would spend more time starting children than measuring)
    run_resumable lease-suite --workloads "$wl" --preset small --precisions "$modes" --no-isolate \
      --label "the small suite ampbench predict priced on $KEY, measured"
    [ -n "$DRY" ] || pack
    # 3. the engine's host time per step (issue 44) on a launch-bound step, fewer blocks than the bench stage's
    CAP=180 bounded $PY benchmarks/engine_overhead.py --tiny --device "$DEVICE" --runs 1 --repeats 6 \
      --precisions fp32,amp-bf16,amp-fp16,master-bf16,pure-bf16 --out "$RESULTS/engine_overhead_tiny.json"
    CAP=60 bounded $AB hw --device "$DEVICE" --sizes 1024,4096,8192 --db "$DB" --json "$RESULTS/hw.json"
    CAP=90 bounded $PY -m pytest -q -p no:cacheprovider tests/bench/test_gpu.py
    CAP=60 bounded $AB export --db "$DB" --out "$RESULTS/runs.json"
    ;;
  lease2)
    # what the first lease (H200, 2026-11-26) left unmeasured: the fp8 modes eager beside their predictions (torchao
    # wheel carried), compiled and CUDA-graph steps of two cells the first lease measured eager (what a prediction of
    # compiled steps would be checked against), the engine's host time in every mode, the host's time per op again
    local KEY; KEY=$(gpu_key)
    [ -n "$KEY" ] || { echo "lease2: this GPU is not in the catalogue (measure/gpus.csv: add its row)"; return 2; }
    export AMPBENCH_NO_ESTIMATE=1
    local fp8=(--workloads bert --preset small -o size=base --fp8-filter dims --precisions amp-bf16,fp8-tensorwise,fp8-rowwise)
    CAP=45 bounded $PY benchmarks/host_overhead.py --device "$DEVICE" --out "$RESULTS/host_overhead_2.json"
    if [ -n "$DRY" ] || $PY -c "from ampbench.precision.fp8 import torchao_problem as p; import sys; sys.exit(1 if p() else 0)"; then
      CAP=120 bounded $AB predict --gpu "$KEY" "${fp8[@]}" --db "$DB" --json "$RESULTS/predict_fp8.json" 2>&1 \
        | log "$STATE/predict-fp8.log"
      run_resumable lease2-fp8 "${fp8[@]}" --compile off --steps 30 \
        --label "bert base seq 64 eager: fp8 beside amp-bf16 (every Linear converted), measured beside its prediction"
      [ -n "$DRY" ] || pack
    else
      echo "lease2: torchao missing: the fp8 cells are left out (carry .whl/torchao-0.18.0-*.whl)"
    fi
    CAP=90 bounded $AB predict --gpu "$KEY" --workloads bert,resnext --preset small --precisions fp32,amp-bf16 \
      --compile on --cuda-graphs off,on --db "$DB" --json "$RESULTS/predict_compile.json" 2>&1 | log "$STATE/predict-compile.log"
    run_resumable lease2-compile --workloads bert,resnext --preset small --precisions fp32,amp-bf16 --compile on \
      --cuda-graphs off,on --label "bert and resnext small compiled, with and without CUDA graphs (eager: the first lease)"
    [ -n "$DRY" ] || pack
    CAP=240 bounded $PY benchmarks/engine_overhead.py --tiny --device "$DEVICE" --runs 1 --repeats 6 \
      --out "$RESULTS/engine_overhead_tiny.json"
    CAP=60 bounded $AB export --db "$DB" --out "$RESULTS/runs_2.json"
    ;;
  checks)
    x $AB hw --device "$DEVICE" --sizes 1024,4096,8192 --db "$DB" --json "$RESULTS/hw.json" | log "$STATE/hw.log"
    x $PY -m pytest -q -p no:cacheprovider tests/bench/test_gpu.py 2>&1 | tail -n 15
    ;;
  predict)
    # the predictions are made before the measurements they are checked against, on this GPU's datasheet spec
    KEY=$(gpu_key)
    [ -n "$KEY" ] || { echo "predict: this GPU is not in the catalogue (measure/gpus.csv: add its row, or use --gpu-spec)"; return 2; }
    local wl=tabular-mlp,mnist-cnn,resnext,bert,unet modes=fp32,tf32,amp-fp16,amp-bf16,master-bf16,pure-bf16
    local rn50=(--model predict_checks/references.py:ResNet50 --input-shape 3,224,224 --num-classes 1000
                --batch-size 128 --precisions fp32,tf32,amp-fp16,amp-bf16)
    x $AB predict --gpu "$KEY" --workloads "$wl" --preset small --precisions "$modes" --db "$DB" \
      --json "$RESULTS/predict_suite.json" | log "$STATE/predict.log"
    x $AB predict --gpu "$KEY" "${rn50[@]}" --channels-last --db "$DB" --json "$RESULTS/predict_resnet50.json" \
      | log "$STATE/predict-rn50.log"
    run_resumable predict-run --workloads "$wl" --preset small --precisions "$modes" --repeats 2 \
      --label "the cells ampbench predict priced on $KEY, measured" || return $?
    run_resumable predict-rn50 "${rn50[@]}" --memory-format channels_last --steps 30 \
      --label "plain-PyTorch ResNet-50 (the reference test's) batch 128 channels-last, measured beside its prediction" || return $?
    x $AB compare --db "$DB" | log "$STATE/predict-compare.log"
    ;;
  compat)
    # the suite is written for a CPU-only machine (CI): hide the GPU so defaults pick the CPU, and
    # learn whether this torch/python pass it
    CUDA_VISIBLE_DEVICES= x timeout "$((BUDGET_S - SECONDS))" $PY -m pytest -q -p no:cacheprovider 2>&1 | tail -n 25
    ;;
  paper)
    # an 8 GiB budget stands in for the smaller card of the published result (on 80+ GiB the fp32
    # search alone would climb to ~20k samples of 4.5 GFLOP each); the ratio is what compares
    run_resumable mnist-maxbatch --workloads mnist-cnn --preset paper --measure maxbatch --precisions fp32,amp-fp16 \
      --memory-budget 8GiB --label "mnist-cnn paper max batch, 8 GiB budget (published: 590 -> 1000)" || return $?
    run_resumable conv-dummy --workloads conv-dummy --preset paper --precisions fp32,amp-fp16 --repeats 3 \
      --label "conv-dummy paper (published: ~2.6x faster, ~2.4x less memory)"
    ;;
  suite)
    run_resumable suite
    ;;
  bench)
    x $PY benchmarks/engine_overhead.py --device "$DEVICE" --repeats 10 --runs 3 --out "$RESULTS/engine_overhead.json" \
      | log "$STATE/engine.log"
    x $PY benchmarks/host_overhead.py --device "$DEVICE" --out "$RESULTS/host_overhead.json" | log "$STATE/host.log"
    # the engine's own host time per step (issue 44): what a launch-bound step on a GPU is made of
    x $PY benchmarks/engine_overhead.py --tiny --device "$DEVICE" --runs 1 \
      --precisions fp32,tf32,amp-bf16,amp-fp16,master-bf16,master-fp16,pure-bf16 \
      --out "$RESULTS/engine_overhead_tiny.json" | log "$STATE/engine_tiny.log"
    x timeout "$((BUDGET_S - 200))" $PY benchmarks/harness_overhead.py --device "$DEVICE" --steps 100 --rounds 7 \
      --out "$RESULTS/harness_overhead.json" | log "$STATE/harness.log"
    ;;
  fp8)
    # --fp8-filter dims: under torchao's size thresholds (auto) BERT-large converts no Linear layer, and its rows
    # would be amp-bf16's math (a warning and math_mode bf16 say so; dims converts every multiple-of-16 layer)
    x $PY -c "from ampbench.precision.fp8 import torchao_problem as p; import sys; sys.exit(p())" || return 2
    run_resumable fp8 --workloads bert --preset small -o size=large --precisions fp32,amp-bf16,fp8-tensorwise,fp8-rowwise,fp8-rowwise-gw-hp \
      --fp8-filter dims --measure throughput,memory,converge --seeds 2 --converge-steps 150 --compile off,on \
      --label "BERT-large seq 64, fp8 modes vs amp-bf16 (torchao), eager and compiled"
    ;;
  optim)
    # torchao's README: ViT-H fine-tune 12.23 GB fused AdamW -> 8.33 GB 8-bit -> 7.72 GB 4-bit; here BERT-large
    x $PY -c "from ampbench.precision.optimizer_state import missing as m; import sys; p = m(); print(p or 'torchao optimizers: ok'); sys.exit(2 if p else 0)" || return 2
    run_resumable optim --workloads bert --preset small -o size=large --precisions amp-bf16,master-bf16 \
      --optimizer-state 8bit,4bit,fp8 --measure throughput,memory,maxbatch --memory-budget 16GiB --repeats 2 \
      --label "BERT-large: Adam states as built, 8bit, 4bit, fp8 (torchao's memory table on a model of ours; max batch in a 16 GiB budget)" || return $?
    run_resumable optim-sr --workloads bert --preset small --precisions fp32,master-bf16,pure-bf16 --optimizer-state bf16-sr \
      --measure throughput,memory,converge --seeds 2 --converge-steps 300 \
      --label "bert small: pure-bf16 with and without stochastic rounding, converged beside fp32 and master-bf16"
    ;;
  axes)
    run_resumable axes-resnext --workloads resnext --preset small --precisions fp32,amp-bf16 --compile off,on \
      --cuda-graphs off,on --memory-format contiguous,channels_last --repeats 3 \
      --label "resnext small: compile x CUDA graphs x channels-last, one change at a time" || return $?
    run_resumable axes-bert --workloads bert --preset small --precisions fp32,amp-bf16 --compile off,on \
      --cuda-graphs off,on --repeats 3 --label "bert small: compile x CUDA graphs, one change at a time"
    ;;
  dist)
    run_resumable dist --workloads bert --preset small --precisions fp32,amp-bf16,master-bf16 --strategy ddp,fsdp \
      --nproc-per-node 1 --repeats 3 --label "bert small: ddp/fsdp x1 (nccl) next to one process" || return $?
    if [ -n "$DRY" ] || $PY -c "from ampbench.precision.fp8 import torchao_problem as p; import sys; sys.exit(1 if p() else 0)"; then
      run_resumable dist-fp8 --workloads bert --preset small -o size=large --precisions fp32,amp-bf16,fp8-tensorwise \
        --fp8-filter dims --strategy fsdp --nproc-per-node 1 --measure throughput,memory \
        --label "BERT-large: fsdp x1 with fp8-tensorwise (fp8 all-gather path; compiled by default)" || return $?
    fi
    if [ -n "$DRY" ] || [ "$($PY -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
      x $PY benchmarks/grad_reduce.py --device "$DEVICE" --workload bert --preset small --out "$RESULTS/grad_reduce.json"
    fi
    ;;
  keras)
    x $PY -c "from ampbench.frameworks.keras.backends import missing; import sys; p = missing('jax'); print(p or 'keras on jax: ok'); sys.exit(2 if p else 0)" || return 2
    run_resumable keras-jax --workloads conv-dummy,keras-conv-dummy --preset paper --precisions fp32,amp-fp16 \
      --repeats 3 --keras-backend jax \
      --label "conv-dummy paper: torch amp-fp16 vs Keras mixed_float16 on JAX (published: ~2.6x faster, ~2.4x less memory)" || return $?
    run_resumable keras-torch --workloads keras-conv-dummy --preset paper --precisions fp32,amp-fp16 --repeats 3 \
      --keras-backend torch --label "keras-conv-dummy paper on Keras's torch backend"
    ;;
  export)
    x $AB export --db "$DB" --out "$RESULTS/runs.json"
    if [ -n "$DRY" ]; then runs=RUN; else
      runs=$($AB results --db "$DB" --all --format json | $PY -c "import json,sys; print(' '.join(sorted({r['run_id'] for r in json.load(sys.stdin)})))")
    fi
    for run in $runs; do
      x $AB report --db "$DB" --run "$run" --format md --out "$RESULTS/report-$run.md"
      x $AB report --db "$DB" --run "$run" --format html --out "$STATE/report-$run.html"
    done
    [ -n "$DRY" ] || ls -la "$RESULTS"
    ;;
esac
}

if [ "$STAGE" = all ]; then
  for s in $STAGES; do echo "# stage $s"; stage "$s"; done
else
  [ -n "$DRY" ] && echo "# stage $STAGE"
  stage "$STAGE"
fi
