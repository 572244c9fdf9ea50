"""What a Keras cell trains: ``keras-conv-dummy`` (the published random-image Conv2D run) or the user's model.

A :class:`KerasWorkload` holds numpy data and a ``build`` that makes the model under the dtype policy in force
(the cell sets the policy first, so every layer the user did not pin takes it; layers pinned to float32 stay
float32). An uncompiled model gets the loss and optimizer ampbench would use for its task; a model the factory
compiled keeps its own (compiled under the policy, so ``mixed_float16`` wraps its optimizer in a
LossScaleOptimizer as Keras always does).

The user's data options are those of a PyTorch ``--model``: ``--input-shape`` (per sample, as the model takes it;
default: the model's own ``Input`` shape), ``--num-classes`` / ``--num-outputs`` / ``--vocab-size``, and
``--batches file.py:make_batch`` -- for Keras ``make_batch(batch_size, rng)`` with a ``numpy.random.Generator``,
returning ``(inputs, targets)``: each an array, a tuple/list of arrays (a model with several inputs or outputs,
in the order of ``model.inputs`` / ``model.outputs``) or a dict of arrays by input/output name.
``--loss file.py:fn`` is a Keras loss ``fn(y_true, y_pred)`` (one loss: applied to every output of a model with
several); a factory that compiles its model keeps its losses (one per output).
The synthetic data are the very tensors a PyTorch model gets for the same options (one seeded generator), and
``--data-dir`` data the very arrays its readers give a PyTorch model (images channels-last).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ampbench.cells import CellSpec, MeasureOptions
from ampbench.errors import AmpbenchError
from ampbench.frameworks.keras.backends import check_installed
from ampbench.frameworks.keras.policy import check_precisions, refuse_torch_only
from ampbench.frameworks.keras.trees import concat, cut, is_nested, leaves, samples, structure, take, tree_map
from ampbench.launch import ChildProcess, Job
from ampbench.seam import Options
from ampbench.workloads.dataspec import BATCH, EPOCHS, USER_OPTIONS, DataSpec, sample_count
from ampbench.workloads.user_callables import MADE, call_factory, call_make_batch, load_factory, made_by

PRESETS = ("tiny", "small", "paper")


@dataclass
class KerasWorkload:
    name: str
    preset: str
    build: Callable[[], Any]
    """The keras.Model, built under the dtype policy in force (new weights each call, from Keras's seed)."""
    x_train: Any
    y_train: Any
    """Arrays, or a list / dict of them (several inputs or outputs): see :func:`take`."""
    x_test: Any | None
    y_test: Any | None
    loss: Any
    """The loss an uncompiled model is compiled with (a Keras loss object or name)."""
    metrics: list[Any]
    make_optimizer: Callable[[Any], Any]
    """make_optimizer(keras) -> a fresh optimizer."""
    batch_size: int
    epochs: int
    metric_name: str | None
    description: str
    own_loss: bool = False
    """The loss came from --loss (kept even when the factory compiled the model)."""

    def model(self, keras: Any) -> Any:
        """A fresh model, compiled: the factory's own compile kept, else ampbench's loss and optimizer."""
        model = self.build()
        if getattr(model, "optimizer", None) is None or self.own_loss:
            model.compile(optimizer=self.make_optimizer(keras), loss=self.loss, metrics=self.metrics)
        return model

    def batches(self, batch_size: int, count: int, rng: np.random.Generator | None = None) -> list[tuple[Any, Any]]:
        """``count`` training batches of ``batch_size`` (cycling over the split; shuffled with ``rng``)."""
        n = self.n_train
        order = rng.permutation(n) if rng is not None else np.arange(n)
        per_epoch = max(n // batch_size, 1)
        out = []
        for i in range(count):
            if i % per_epoch == 0 and i and rng is not None:
                order = rng.permutation(n)
            start = (i % per_epoch) * batch_size
            idx = order[start:start + batch_size]
            if len(idx) < batch_size:  # a split smaller than the batch: repeat samples to fill it
                idx = np.resize(order, batch_size)
            out.append((take(self.x_train, idx), take(self.y_train, idx)))
        return out

    @property
    def n_train(self) -> int:
        return samples(self.y_train)

    def steps_per_epoch(self, batch_size: int) -> int:
        return max(self.n_train // batch_size, 1)


def _as_arrays(x: Any, what: str, spec: str, batch: int) -> Any:
    """``x`` with every leaf a numpy array whose first dimension is the batch; a one-line error otherwise."""
    def one(a: Any) -> np.ndarray:
        try:
            arr = np.asarray(a)
        except ValueError as e:  # a ragged nest numpy cannot stack
            raise AmpbenchError(f"--batches {spec!r}: {what} is not an array, a tuple/list of arrays or a dict of "
                                f"arrays ({e})") from None
        if arr.dtype == object or arr.ndim == 0 or arr.shape[0] != batch:
            raise AmpbenchError(f"--batches {spec!r}: {what} has an array of shape {arr.shape}; the first dimension "
                                f"of every array must be the batch size ({batch}) (give several inputs or outputs as a "
                                "tuple/list or a dict of arrays)")
        return arr

    if (isinstance(x, dict) and not x) or (isinstance(x, (list, tuple)) and not x):
        raise AmpbenchError(f"--batches {spec!r}: {what} is empty")
    return tree_map(x, one)


def _adam(lr: float) -> Callable[[Any], Any]:
    return lambda keras: keras.optimizers.Adam(learning_rate=lr)


# -- keras-conv-dummy --------------------------------------------------------------------------------------------
CONV_DUMMY = {"tiny": (16, 8, 32), "small": (64, 32, 200), "paper": (256, 128, 800)}
"""size, channels, images per preset: the same as the PyTorch ``conv-dummy`` (tests check the two agree)."""
CONV_DUMMY_BATCH = {"tiny": 8, "small": 50, "paper": 50}
CONV_DUMMY_EPOCHS = {"tiny": 1, "small": 2, "paper": 10}


def conv_dummy_model(keras: Any, size: int, channels: int) -> Any:
    """The published notebook's model: Conv2D(128, 2) -> Conv2D(128, 1) -> Conv2D(128, 1) -> Flatten -> Dense(1)
    -> Activation('sigmoid', dtype='float32') (the output kept in float32, as Keras's mixed precision guide says)."""
    layers = keras.layers
    inputs = keras.Input(shape=(size, size, 3))
    x = layers.Conv2D(channels, 2)(inputs)
    x = layers.Conv2D(channels, 1)(x)
    x = layers.Conv2D(channels, 1)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(1)(x)
    outputs = layers.Activation("sigmoid", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="conv_dummy")


def build_conv_dummy(keras: Any, preset: str, seed: int) -> KerasWorkload:
    size, channels, n = CONV_DUMMY[preset]
    rng = np.random.default_rng(seed)
    x = rng.random((n, size, size, 3), dtype=np.float32)  # np.random.random((800, 256, 256, 3)) in the notebook
    y = rng.integers(0, 2, (n, 1)).astype(np.float32)
    return KerasWorkload(
        name="keras-conv-dummy", preset=preset, build=lambda: conv_dummy_model(keras, size, channels), x_train=x,
        y_train=y, x_test=None, y_test=None, loss="binary_crossentropy", metrics=["accuracy"], make_optimizer=_adam(1e-3),
        batch_size=CONV_DUMMY_BATCH[preset], epochs=CONV_DUMMY_EPOCHS[preset], metric_name="accuracy",
        description="random images (nothing to learn: a speed and memory test)")


@dataclass(frozen=True)
class KerasWorkloadInfo:
    name: str
    description: str
    paper: str
    build: Callable[[Any, str, int], KerasWorkload]
    """build(keras, preset, seed)"""
    torch_twin: str | None = None
    """The PyTorch workload of the same model and data (measured beside it: a framework column tells them apart)."""


KERAS_WORKLOADS = {
    "keras-conv-dummy": KerasWorkloadInfo(
        "keras-conv-dummy",
        "Keras: three Conv2D layers on uniform-random images (the published mixed_float16 notebook), on the "
        "--keras-backend",
        "800 random 256x256x3 images, binary labels; Conv2D(128,2)-Conv2D(128,1)-Conv2D(128,1)-Flatten-Dense(1)-"
        "Activation('sigmoid', dtype='float32'); Adam, binary cross-entropy, 10 epochs, batch 50 (published on one "
        "GPU: ~475 -> ~182 ms/step, 8.55 -> 3.57 GB)",
        build_conv_dummy, torch_twin="conv-dummy"),
}


def is_keras_workload(name: str | None) -> bool:
    return name in KERAS_WORKLOADS


# -- the user's model ------------------------------------------------------------------------------------------------
def check_keras_model(keras: Any, made: Any, spec: str) -> Any:
    """``made`` if it is a keras.Model; a one-line AmpbenchError otherwise."""
    if isinstance(made, keras.Model):
        return made
    kind = type(made).__module__.split(".")[0]
    hint = (" (a torch.nn.Module is measured as a PyTorch model: drop --keras-backend)" if kind == "torch"
            else "")
    raise AmpbenchError(f"--model {spec!r}: the factory returned {type(made).__name__}, not a keras.Model{hint}")


def _model_input_shape(model: Any) -> tuple[int, ...] | None:
    shape = getattr(model, "input_shape", None) if getattr(model, "inputs", None) else None
    if isinstance(shape, tuple) and len(shape) > 1 and all(isinstance(d, int) for d in shape[1:]):
        return tuple(int(d) for d in shape[1:])
    return None


def _output_units(model: Any) -> int | None:
    try:
        shape = model.output_shape
    except (AttributeError, ValueError):
        return None
    return int(shape[-1]) if isinstance(shape, tuple) and shape and isinstance(shape[-1], int) else None


def _activation(model: Any) -> str:
    layer = model.layers[-1] if getattr(model, "layers", None) else None
    act = getattr(layer, "activation", None)
    return getattr(act, "__name__", "") if act is not None else ""


def default_loss(keras: Any, model: Any, task: str, num_classes: int | None, num_outputs: int | None,
                 spec: str) -> tuple[Any, list[Any], str]:
    """(loss, metrics, metric name) ampbench compiles an uncompiled model with, for its task and output."""
    units = _output_units(model)
    act = _activation(model)
    if task == "regress":
        if units is not None and units != num_outputs:
            raise AmpbenchError(f"--model {spec!r}: output has {units} units; --num-outputs {num_outputs} needs "
                                f"{num_outputs}")
        return keras.losses.MeanSquaredError(), [keras.metrics.RootMeanSquaredError(name="rmse")], "rmse"
    if units == 1 and num_classes == 2:
        return keras.losses.BinaryCrossentropy(from_logits=act != "sigmoid"), ["accuracy"], "accuracy"
    if units != num_classes:
        raise AmpbenchError(f"--model {spec!r}: output has {units} units; --num-classes {num_classes} needs "
                            f"{num_classes} (or 1 with a sigmoid for 2 classes)")
    return (keras.losses.SparseCategoricalCrossentropy(from_logits=act != "softmax"), ["accuracy"], "accuracy")


def _user_batches(batches: str, preset: str, seed: int, batch: int) -> tuple[Any, Any, Any, Any]:
    """Train/test splits made by ``make_batch(batch_size, rng) -> (inputs, targets)`` (numpy arrays, or tuples/lists
    or dicts of them), a fifth held out."""

    make_batch = load_factory(batches, "--batches", "make_batch")
    rng = np.random.default_rng(seed)
    xs: list[Any] = []
    ys: list[Any] = []
    total = None
    while total is None or len(ys) * batch < total:
        inputs, targets = call_make_batch(make_batch, batches, batch, rng)
        x, y = _as_arrays(inputs, "inputs", batches, batch), _as_arrays(targets, "targets", batches, batch)
        if xs and (structure(x), structure(y)) != (structure(xs[0]), structure(ys[0])):
            raise AmpbenchError(f"--batches {batches!r}: batches differ in structure or shape (each call must return "
                                "the same arrays, names and shapes but the batch size)")
        xs.append(x)
        ys.append(y)
        if total is None:
            total = sample_count(preset, sum(a[0].nbytes for a in leaves(x) + leaves(y)), batch)
    x_all, y_all = concat(xs), concat(ys)
    n_test = max(len(xs) // 5, 1) * batch
    return cut(x_all, n_test, None), cut(y_all, n_test, None), cut(x_all, 0, n_test), cut(y_all, 0, n_test)


def _synthetic(data: Any, preset: str, seed: int, batch: int) -> tuple[Any, np.ndarray, Any, np.ndarray]:
    """The synthetic data a PyTorch model gets for the same options, as numpy (images as floats, normalised).

    Made by torch's generator (:func:`ampbench.workloads.tasks.write_synthetic`) and read back from a ``.npz``: the
    values are the PyTorch model's to the bit."""
    payload = {"data": dataclasses.asdict(data), "preset": preset, "seed": seed, "batch": batch}
    x_tr, y_tr, x_te, y_te, _ = _arrays_of("ampbench.workloads.tasks:write_synthetic", payload, "making the synthetic data")
    return x_tr, y_tr, x_te, y_te


def _arrays_of(target: str, payload: dict[str, Any], doing: str) -> tuple[Any, np.ndarray, Any, np.ndarray, dict]:
    """(train inputs, train targets, test inputs, test targets, the job's result) of a job that writes them to the
    ``.npz`` ``payload["out"]`` names (its own, here). On TensorFlow or JAX in a short process of its own, so this
    cell's process (whose memory is measured) never imports torch; on Keras's torch backend, which has torch loaded
    already, in this process."""
    with tempfile.TemporaryDirectory(prefix="ampbench-data-") as tmp:
        out = Path(tmp) / "arrays.npz"
        job = Job(target, {**payload, "out": str(out)})
        result = job.call() if "torch" in sys.modules else ChildProcess().run(job)
        if "error" in result:
            raise AmpbenchError(result["error"])
        if "_failed" in result:
            raise RuntimeError(f"{doing} failed: {result['_failed']}")
        with np.load(out) as f:
            arrays = {k: f[k] for k in f.files}
    n = int(result["inputs"])

    def inputs(name: str) -> Any:
        x = [arrays[f"x_{name}_{i}"] for i in range(n)]
        return x[0] if n == 1 else x

    return inputs("train"), arrays["y_train"], inputs("test"), arrays["y_test"], result


def _real(spec: str, options: Any, data: DataSpec) -> tuple[Any, np.ndarray, Any, np.ndarray, DataSpec, str]:
    """The --data-dir data of a Keras ``--model``: what a PyTorch model gets from the same readers (class folders of
    images, MNIST/CIFAR-10, a CSV of features and a label, a text,label CSV; :func:`ampbench.workloads.user.
    write_real`), images channels-last as Keras models take them, read as the synthetic data are made.
    ``data``: the options, the model's own input shape (channels-last) where --input-shape gives none."""
    if options.batches is not None:
        raise AmpbenchError("--batches makes the data itself: drop --data-dir")
    shape = data.input_shape
    if shape is not None and len(shape) == 3 and shape[-1] in (1, 3):  # (H, W, C) -> the readers' (C, H, W)
        shape = (shape[2], shape[0], shape[1])
    payload = {"data": dataclasses.asdict(dataclasses.replace(data, input_shape=shape)),
               "data_dir": str(options.data_dir), "where": f"--model {spec!r}", "val_fraction": options.val_fraction,
               "options": dict(options.options or {}), "channels_last": True}
    x_tr, y_tr, x_te, y_te, result = _arrays_of("ampbench.workloads.user:write_real", payload, "reading --data-dir")
    return x_tr, y_tr, x_te, y_te, DataSpec.from_dict(result["data"]), str(result["what"])


def user_workload(keras: Any, spec: str, options: Any, preset: str, seed: int) -> KerasWorkload:
    """The workload of ``--model spec`` returning a keras.Model; ``options``: the cell's DataOptions."""

    if options.task == "lm":
        raise AmpbenchError(f"--model {spec!r}: --task lm is not measured for Keras models yet; give --loss "
                            "file.py:fn with --batches file.py:make_batch for a language model")
    given = dict(options.options or {})
    bad = sorted(set(given) - set(USER_OPTIONS))
    if bad:
        raise AmpbenchError(f"--model has no option {', '.join(bad)} (options: {', '.join(USER_OPTIONS)})")
    if given and options.data_dir is None:
        raise AmpbenchError(f"--option {next(iter(given))}=...: it applies to a CSV in --data-dir; there is none")
    factory = load_factory(spec)
    first = check_keras_model(keras, call_factory(factory, spec, preset, seed), spec)
    batch = BATCH[preset]
    inputs, outputs = len(getattr(first, "inputs", None) or [0]), len(getattr(first, "outputs", None) or [0])
    compiled = getattr(first, "optimizer", None) is not None
    if options.batches is None and inputs > 1:
        raise AmpbenchError(f"--model {spec!r}: the model has {inputs} inputs; give --batches file.py:make_batch "
                            "returning them as a tuple/list or a dict by input name (synthetic data is made for one input)")
    if outputs > 1 and not compiled and options.loss is None:
        raise AmpbenchError(f"--model {spec!r}: the model has {outputs} outputs; compile it in the factory with a loss "
                            "per output, or give --loss file.py:fn (one loss, applied to every output)")
    if outputs > 1 and options.batches is None:
        raise AmpbenchError(f"--model {spec!r}: the model has {outputs} outputs; give --batches file.py:make_batch "
                            "returning their targets as a tuple/list or a dict by output name")
    data = DataSpec.of(options.input_shape or _model_input_shape(first), options.vocab_size, options.num_classes,
                       options.num_outputs, options.task)
    if options.data_dir is not None:
        x_tr, y_tr, x_te, y_te, data, said = _real(spec, options, data)
    elif options.batches is not None:
        x_tr, y_tr, x_te, y_te = _user_batches(options.batches, preset, seed, batch)
        if is_nested(y_tr):  # several outputs: the factory's compile or --loss says what each is
            data = DataSpec(None, None, None, None, "custom")
        else:
            task = "regress" if np.issubdtype(y_tr.dtype, np.floating) and data.num_classes is None else "classify"
            data = DataSpec(None, None, data.num_classes or (None if task == "regress" else int(y_tr.max()) + 1),
                            data.num_outputs or (int(np.prod(y_tr.shape[1:])) if task == "regress" else None), task)
    else:
        data = data.resolve(f"--model {spec!r}")
        x_tr, y_tr, x_te, y_te = _synthetic(data, preset, seed, batch)
    if options.loss is not None:
        loss, metrics, metric_name = load_factory(options.loss, "--loss", "fn"), [], None
    elif compiled and (outputs > 1 or is_nested(y_tr)):  # the factory's losses, one per output
        loss, metrics, metric_name = None, [], None
    elif is_nested(y_tr):
        raise AmpbenchError(f"--batches {options.batches!r}: targets are a tuple/list or dict; compile the model in the "
                            "factory with a loss per output, or give --loss file.py:fn")
    else:
        loss, metrics, metric_name = default_loss(keras, first, data.task or "classify", data.num_classes,
                                                  data.num_outputs, spec)
        if _output_units(first) == 1 and data.task == "classify" and not is_nested(y_tr):
            y_tr, y_te = y_tr.reshape(-1, 1).astype(np.float32), y_te.reshape(-1, 1).astype(np.float32)
    built = [first]

    def build() -> Any:  # the first model is the one checked; later calls (convergence seeds) build anew
        return built.pop() if built else check_keras_model(keras, call_factory(factory, spec, preset, seed), spec)

    description = said if options.data_dir is not None else data.describe() if options.batches is None else \
        f"--batches {options.batches}"
    return KerasWorkload(name=f"user:{spec}", preset=preset, build=build, x_train=x_tr, y_train=y_tr, x_test=x_te,
                         y_test=y_te, loss=loss, metrics=metrics, make_optimizer=_adam(1e-3), batch_size=batch,
                         epochs=EPOCHS[preset], metric_name=metric_name, description=description,
                         own_loss=options.loss is not None)


def build_workload(keras: Any, workload: str | None, model: str | None, preset: str, options: Any,
                   seed: int) -> KerasWorkload:
    """The Keras workload of a cell (``keras.utils.set_random_seed(seed)`` first: the same weights each time)."""
    keras.utils.set_random_seed(seed)
    if model is not None:
        return user_workload(keras, model, options, preset, seed)
    if workload not in KERAS_WORKLOADS:
        raise AmpbenchError(f"{workload!r} is not a Keras workload (Keras workloads: {', '.join(KERAS_WORKLOADS)})")
    return KERAS_WORKLOADS[workload].build(keras, preset, seed)


def output_warning(model: Any, policy: str) -> str | None:
    """Keras's float32-output rule: under a mixed policy the model's last layer should compute in float32
    (``dtype='float32'``), so the output and the loss are not computed in half. A one-line warning, or None."""
    if not policy.startswith("mixed_") or not getattr(model, "layers", None):
        return None
    last = model.layers[-1]
    dtype = str(getattr(last, "compute_dtype", "float32"))
    if dtype in ("float16", "bfloat16"):
        return (f"the output layer {last.name!r} computes in {dtype} under {policy}: {float32_output(last)} so the "
                "output and the loss stay float32, as Keras's mixed precision guide says")
    return None


def float32_output(last: Any) -> str:
    """The fix for a half output layer, written for the layer the model has (the fix named a sigmoid Activation for
    every model, a softmax classifier's too): its own arguments with ``dtype='float32'``, or a float32 Activation
    after it."""
    kind = type(last).__name__
    act = getattr(getattr(last, "activation", None), "__name__", None)
    if kind == "Dense" and isinstance(getattr(last, "units", None), int):
        extra = f", activation='{act}'" if act and act != "linear" else ""
        return f"build it as layers.Dense({last.units}{extra}, dtype='float32')"
    if kind == "Activation" and act:
        return f"build it as layers.Activation('{act}', dtype='float32')"
    return f"add layers.Activation('linear', dtype='float32') after it ({kind})"


def is_keras_model(model: str, preset: str | None, seed: int) -> bool:
    """Whether ``--model``'s factory makes a Keras model: its file imports keras (read, not run), or else the object
    its factory returns is one (a model built in another module). The factory is then called in this process, with
    keras (if the code imports it) loaded on the torch backend: this process only recognises the target, a Keras
    cell picks its own backend in a fresh process. A PyTorch factory's module is kept for the build that follows
    (``workloads.user.made_by``), so it is not built twice."""
    if imports_keras(model):
        return True

    preset_backend = os.environ.get("KERAS_BACKEND")
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "torch"  # (read by keras at import only: restored below)
    try:
        made = made_by(model, preset, seed)
    finally:
        if preset_backend is None:
            os.environ.pop("KERAS_BACKEND", None)
        else:
            os.environ["KERAS_BACKEND"] = preset_backend
    if is_keras_object(made):
        MADE.pop((model, preset, seed), None)  # (a Keras cell builds its own, in its own process)
        return True
    return False


def is_keras_object(obj: Any) -> bool:
    """Whether ``obj`` is a keras.Model, known by its class (keras itself not imported here)."""
    return any(c.__name__ == "Model" and c.__module__.split(".")[0] in ("keras", "tf_keras") for c in type(obj).__mro__)


def command_spec(backend: str, workload: str | None, model: str | None, precision: str, preset: str | None,
                 batch_size: int | None, device: str | None, seed: int, data: Any, torch_only: Options) -> Any:
    """The cell a ``train`` or ``diagnose`` of a Keras target runs in its child process, checked first: no
    PyTorch-only option (``torch_only``: what the command was given), a mode Keras has and the device runs, the backend installed.
    One-line AmpbenchErrors."""
    from ampbench.measure.env import resolve_device  # lazy: torch
    from ampbench.precision import resolve, supported  # lazy: torch

    what = workload if workload is not None else f"--model {model}"
    refuse_torch_only(what, torch_only)
    precision = resolve(precision)
    check_precisions([precision], f"{what} (a Keras model)")
    dev = str(resolve_device(device))
    sup = supported(precision, dev)
    if not sup.ok:
        raise AmpbenchError(f"--precision {precision}: {sup.reason}")
    check_installed(backend)
    return CellSpec(device=dev, workload=workload, model=model, preset=preset or "small", precision=precision,
                    batch_size=batch_size, data=data, measure=MeasureOptions(seed=seed), framework="keras", backend=backend)


def imports_keras(model: str) -> bool:
    """Whether ``--model``'s file (or module) imports keras (or tf.keras): then its factory returns a Keras model,
    measured in Keras cells. Read, not imported: a Keras backend must be chosen before keras is imported, in the
    cell's own process."""

    target = model.rpartition(":")[0]
    path: Path | None = Path(target) if target.endswith(".py") or "/" in target else None
    if path is None:
        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            return False
        path = Path(found.origin) if found is not None and found.origin else None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8")) if path is not None else None
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False  # (loading the factory will say what is wrong with the file)
    for node in ast.walk(tree) if tree is not None else ():
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)] if isinstance(node, ast.ImportFrom) \
            else [f"tensorflow.{node.attr}"] if isinstance(node, ast.Attribute) and node.attr == "keras" else []
        if any(n == "keras" or n.startswith("keras.") or n.startswith("tensorflow.keras") or n == "tf_keras"
               for n in names):
            return True
    return False
