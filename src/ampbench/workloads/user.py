"""User workloads: ``--model path/to/file.py:factory`` or ``package.module:factory``.

The factory returns an ``nn.Module`` or a ready :class:`Workload`. For a module, the data come from what the user says
about them (:class:`~ampbench.workloads.tasks.DataSpec`: any per-sample shape, token ids, classification / regression /
language modelling), from ``--data-dir`` (MNIST/CIFAR-10 images, class folders of images, a CSV of features and a
label, a ``text,label`` CSV for token models, a plain-text corpus for ``--task lm``), or from the user's own
``--batches file.py:make_batch`` (any inputs: tensor, tuple or dict), with ``--loss file.py:fn`` optional.
A factory that takes a ``preset`` argument gets ``--preset`` (so a Workload it returns can be sized by it).
Every failure is an :class:`AmpbenchError` naming what to fix, found with one forward pass before training.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ampbench.data.cifar import load_cifar10_dir
from ampbench.data.errors import DataError
from ampbench.data.features import is_text_csv, read_feature_csv
from ampbench.data.idx import load_mnist_dir
from ampbench.data.imagefolder import folder_splits, is_image_folder
from ampbench.data.splits import check_val_fraction, classification_splits
from ampbench.data.tensors import TensorData
from ampbench.data.text import load_corpus, windows
from ampbench.data.textcsv import load_text_classification
from ampbench.errors import AmpbenchError
from ampbench.paths import check_data_dir
from ampbench.workloads import meta_check, tasks
from ampbench.workloads.base import PRESETS, Metric, Workload, adam, image_prep, standardised
from ampbench.workloads.dataspec import USER_OPTIONS
from ampbench.workloads.tasks import DataSpec, shape_of, show
from ampbench.workloads.user_callables import (  # noqa: F401  (re-exported)
    MADE,
    call_factory,
    call_make_batch,
    load_factory,
    made_by,
    parameter_names,
    raised_where,
)


def _no_preset(spec: str, preset: str | None) -> AmpbenchError:
    return AmpbenchError(f"--preset {preset}: --model {spec!r} returns a Workload and takes no preset argument; define "
                         "it as factory(preset) to size it per preset, or drop --preset")


def check_preset(spec: str, preset: str | None, seed: int = 0) -> None:
    """A preset the user gave (``preset`` not None) applies to ``--model spec``: a factory returning a Workload must
    take it (what it made is kept for the build that follows). The harness then builds with ``preset_given=False``:
    the preset it passes when the user gave none ("small") is only the cell's label."""
    if preset is None:
        return
    factory = load_factory(spec)
    if "preset" not in parameter_names(factory) and isinstance(made_by(spec, preset, seed), Workload):
        raise _no_preset(spec, preset)


def create_user_workload(spec: str, input_shape: str | tuple[int, ...] | None = None, num_classes: int | None = None,
                         data_dir: str | Path | None = None, preset: str | None = None, seed: int = 0,
                         batch_size: int | None = None, val_fraction: float | None = None, *,
                         vocab_size: int | None = None, num_outputs: int | None = None, task: str | None = None,
                         batches: str | None = None, loss: str | None = None,
                         options: dict[str, Any] | None = None, preset_given: bool | None = None) -> Workload:
    """The workload of ``--model spec`` (see the module docstring). ``preset`` None: "small" (and a factory
    returning a Workload keeps its own sizes). ``preset_given``: whether the user gave ``preset`` (default: whether it
    is not None); only a preset the user gave is refused for a factory that takes none (:func:`check_preset`)."""
    if preset is not None and preset not in PRESETS:
        raise AmpbenchError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    check_val_fraction(val_fraction, data_dir, True, "--model")
    data = DataSpec.of(input_shape, vocab_size, num_classes, num_outputs, task)
    options = dict(options or {})
    bad = sorted(set(options) - set(USER_OPTIONS))
    if bad:
        raise AmpbenchError(f"--model has no option {', '.join(bad)} (options: {', '.join(USER_OPTIONS)})")
    if batches is not None and (data_dir is not None or data.input_shape is not None or data.vocab_size is not None):
        raise AmpbenchError("--batches makes the data itself: drop --data-dir, --input-shape and --vocab-size")
    factory = load_factory(spec)
    made = MADE.pop((spec, preset, seed), None)
    if made is None or _built_elsewhere(made):
        made = call_factory(factory, spec, preset, seed)
    if isinstance(made, Workload):
        given = data.given() + [f for f, v in (("--data-dir", data_dir), ("--batches", batches), ("--loss", loss),
                                               ("--option", options)) if v]
        if given:
            raise AmpbenchError(f"--model {spec!r} returns a Workload (its own data and loss): drop {', '.join(given)}")
        if (preset is not None if preset_given is None else preset_given) and "preset" not in parameter_names(factory):
            raise _no_preset(spec, preset)
        if preset is not None and made.preset == "custom":
            made.preset = preset
        check_fp32(made.model, f"--model {spec!r}")
        return made
    if not isinstance(made, nn.Module):
        raise AmpbenchError(f"--model {spec!r}: the factory returned {type(made).__name__}; "
                            "return an nn.Module or an ampbench.Workload")
    check_fp32(made, f"--model {spec!r}")
    return build_module_workload(made, spec, data, data_dir=data_dir, preset=preset or "small", seed=seed,
                                 batch_size=batch_size, val_fraction=val_fraction, batches=batches, loss=loss,
                                 options=options)


def check_fp32(model: nn.Module, where: str) -> None:
    """Every mode starts from the model in fp32 and casts it as it runs (master-* and pure-* to half; fp32 keeps it):
    a model built in half or double made every mode's forward fail on the fp32 batch ("mat1 and mat2 must have the
    same dtype ... check --input-shape"), and one whose forward took the batch as it was would have measured its own
    dtype's math as "fp32". One line naming the dtype instead."""
    dtypes = Counter(p.dtype for p in model.parameters() if p.is_floating_point())
    other = {d: n for d, n in dtypes.items() if d != torch.float32}
    if other:
        d, n = max(other.items(), key=lambda kv: kv[1])
        raise AmpbenchError(f"{where}: {n} of the model's {sum(dtypes.values())} floating-point parameters are "
                            f"{str(d).removeprefix('torch.')}; build it in float32 (no .half(), .double() or "
                            ".to(dtype)): each precision mode casts the model itself")


def _device_type(model: nn.Module) -> str | None:
    """Where a module's tensors are ("cpu", "meta", ...; None: it holds none)."""
    held = next(itertools.chain(model.parameters(), model.buffers()), None)
    return None if held is None else held.device.type


def _built_elsewhere(made: Any) -> bool:
    """A module an earlier check kept (:data:`~ampbench.workloads.user_callables.MADE`) on another device than the
    one this build is on: ``predict`` builds on meta, where the preset's check had built it on the CPU -- taken as
    it was, the CPU model met meta data and failed its check, and the whole build was done again on the CPU."""
    return isinstance(made, nn.Module) and _device_type(made) not in (None, torch.get_default_device().type)


def _no_csv_for(options: dict[str, Any]) -> None:
    """A text CSV's options where no text CSV is read: refused, naming the first."""
    given = next((k for k in USER_OPTIONS if options.get(k) is not None), None)
    if given is not None:
        raise AmpbenchError(f"--option {given}=...: it applies to a CSV in --data-dir; there is none")


def build_module_workload(model: nn.Module, spec: str, data: DataSpec, *, data_dir: str | Path | None = None,
                          preset: str = "small", seed: int = 0, batch_size: int | None = None,
                          val_fraction: float | None = None, batches: str | None = None, loss: str | None = None,
                          options: dict[str, Any] | None = None, description: str | None = None,
                          make_optimizer: Callable[..., torch.optim.Optimizer] | None = None) -> Workload:
    """A module + what the user said about its data -> a checked Workload (also used by the hf:/timm: adapters)."""
    batch = batch_size or tasks.BATCH[preset]
    where = spec if spec.startswith(("hf:", "timm:")) else f"--model {spec!r}"
    own_metric: Metric | None = None
    input_names: tuple[str, ...] | None = None
    prepare = None
    if data_dir is None:
        _no_csv_for(options or {})
    if batches is not None:
        data = data.resolve(where, need_shape=False) if data.given() else DataSpec()  # (task None: from the targets)
        train, test, input_names, made_by = _from_batches(batches, preset, seed, batch)
        what = f"batches from {made_by}"
    elif data_dir is not None:
        data_dir = check_data_dir(data_dir)
        train, test, data, prepare, what, own_metric = _real_data(data_dir, data, where, val_fraction, (options or {}))
    else:
        data = data.resolve(where)
        train, test, prepare = tasks.synthesize(data, preset, seed, batch)
        what = f"synthetic {data.describe()}"
    objective = tasks.OBJECTIVES[data.task or "classify"]
    loss_fn, metric = objective.loss_fn, objective.metric
    if own_metric is not None:
        metric = own_metric  # (a standardised label's RMSE, said in its own units)
    if loss is not None:
        loss_fn = load_factory(loss, "--loss", "fn")
        metric = _loss_metric(loss_fn)
    workload = Workload(
        name=spec, model=model, train_data=train, test_data=test, loss_fn=loss_fn, metric=metric,
        make_optimizer=make_optimizer or adam(1e-3), input_names=input_names, batch_size=batch,
        epochs=tasks.EPOCHS[preset], preset=preset, description=description or f"user model: {what}",
        **({"prepare": prepare} if prepare is not None else {}),
    )
    real = what if data_dir is not None and batches is None else None
    checked = None
    if meta_check.on_meta():  # (a run's cell: the run checked this target for real; see meta_check)
        with contextlib.suppress(Exception):  # (anything the copy cannot stand in for: the real check says)
            checked = _check(workload, where, data, batches is not None, real, loss is not None, meta=True)
    wrapped, inferred = checked or _check(workload, where, data, batches is not None, real, loss is not None)
    if wrapped is not None:  # (an HF model's ModelOutput, a dict with "logits")
        workload.model = OutputLogits(model)
        workload.description += f" (the logits of its {wrapped})"
    if inferred is not None:
        workload.loss_fn, workload.metric = (tasks.OBJECTIVES[inferred.task].loss_fn,  # type: ignore[index]
                                             tasks.OBJECTIVES[inferred.task].metric)  # type: ignore[index]
    return workload


def _check(workload: Workload, where: str, data: DataSpec, made: bool, real: str | None, own_loss: bool,
           meta: bool = False) -> tuple[str | None, DataSpec | None]:
    """The check forward, the output against the task and the loss on it (each failure one line): the type whose
    logits the model's output holds (None: the output is the logits, or --loss takes it), and the task inferred from
    --batches data (None: the task was given). ``meta``: on a meta copy of the model (:mod:`ampbench.workloads.
    meta_check`), raising :class:`~ampbench.workloads.meta_check.NotOnMeta` where the copy cannot stand in."""
    # (a model built on meta for ``predict``, its data drawn on the CPU: checked on meta -- a value read says so, and
    # the build retries on the CPU)
    built_on_meta = _device_type(workload.model) == "meta"
    out, targets = _check_forward(workload, where, data.tokens, made, real, meta=meta, built_on_meta=built_on_meta)
    logits = _logits_of(out) if not own_loss else None
    wrapped = type(out).__name__ if logits is not None else None
    out = logits if logits is not None else out
    inferred = None
    if not own_loss:
        if made and data.task is None:
            data = inferred = tasks.infer(out, targets, where)
        tasks.check_output(out, data, targets, where)
    loss_fn = workload.loss_fn if inferred is None else tasks.OBJECTIVES[inferred.task].loss_fn  # type: ignore[index]
    _check_loss(loss_fn, out, meta_check.meta_like(targets) if meta or built_on_meta else targets, where, own_loss)
    return wrapped, inferred


def _loss_metric(loss_fn: Callable[..., torch.Tensor]) -> Metric:
    """--loss: the metric is the user's loss itself (mean over the test set), lower is better."""

    def fn(out: Any, y: torch.Tensor) -> tuple[torch.Tensor, int]:
        n = int(y.shape[0]) if isinstance(y, torch.Tensor) and y.dim() else 1
        return loss_fn(out, y).detach().float() * n, n

    return Metric("loss", fn, higher_is_better=False)


def _real_data(data_dir: Path, data: DataSpec, where: str, val_fraction: float | None, options: dict[str, Any]
               ) -> tuple[TensorData, TensorData, DataSpec, Any, str, Metric | None]:
    """--data-dir for a user module: a text corpus (--task lm), a text,label CSV (token models), a CSV of features and
    a label (a model of one vector a row), or images; with the metric of data that brings its own, else None."""
    if data.task == "lm" or (data_dir / "train.txt").is_file():
        _no_csv_for(options)
        return (*_real_corpus(data_dir, data, where, val_fraction), None)
    csvs = sorted(data_dir.glob("*.csv"))
    if csvs:
        first = next((c for c in csvs if c.name == "train.csv"), csvs[0])
        if data.vocab_size is not None or is_text_csv(first, options.get("text")):
            return (*_real_text_csv(data_dir, data, where, val_fraction, options), None)
        return _real_table(data_dir, data, val_fraction, options)
    _no_csv_for(options)
    train, test, what = _load_images(data_dir, val_fraction, data.input_shape)
    real_shape = tuple(train.inputs[0].shape[1:])
    if data.input_shape is not None and data.input_shape != real_shape:
        raise AmpbenchError(f"--input-shape {show(data.input_shape)} does not match the data in {data_dir} "
                            f"({show(real_shape)})")
    if data.vocab_size is not None or data.num_outputs is not None or data.task not in (None, "classify"):
        raise AmpbenchError(f"--data-dir {data_dir}: images are classification data; drop --vocab-size/--num-outputs/--task")
    classes = int(train.targets.max()) + 1
    if data.num_classes is not None and data.num_classes < classes:
        raise AmpbenchError(f"--num-classes {data.num_classes}: the labels in {data_dir} go up to {classes - 1}")
    data = DataSpec(real_shape, None, data.num_classes or classes, None, "classify")
    return train, test, data, image_prep(), what, None


def write_real(payload: dict[str, Any]) -> dict[str, Any]:
    """Job (:mod:`ampbench.launch`): the --data-dir data a user's PyTorch model would get for ``payload["data"]`` (a
    DataSpec's fields, the shape per sample as PyTorch takes it), ``data_dir``, ``val_fraction`` and ``options``,
    prepared as the model gets them (images as normalised floats; ``channels_last``: (N, H, W, C), as a Keras model
    takes them), saved as numpy arrays to ``payload["out"]`` (``.npz``: ``x_train_<i>``, ``y_train``, ``x_test_<i>``,
    ``y_test``). Run in a process of its own for a framework whose cells must not import torch (a Keras cell on
    TensorFlow or JAX), as :func:`~ampbench.workloads.tasks.write_synthetic` is. Returns ``{"inputs": n, "what": ...,
    "data": the resolved DataSpec's fields}``, or ``{"error": line}``."""
    spec = DataSpec.from_dict(payload["data"])
    try:
        data_dir = check_data_dir(payload["data_dir"])
        train, test, data, prepare, what, metric = _real_data(data_dir, spec, payload["where"],
                                                              payload["val_fraction"], dict(payload["options"]))
    except AmpbenchError as e:
        return {"error": str(e)}
    if metric is not None:
        return {"error": f"{payload['where']}: a CSV's regression label is trained standardised, its RMSE said in "
                         "its units by ampbench's PyTorch loop; for a Keras model give --batches file.py:make_batch"}
    tasks.save_splits(payload["out"], train, test, prepare, bool(payload.get("channels_last")))
    return {"inputs": len(train.inputs), "what": what, "data": dataclasses.asdict(data)}


def _real_table(data_dir: Path, data: DataSpec, val_fraction: float | None, options: dict[str, Any]
                ) -> tuple[TensorData, TensorData, DataSpec, Any, str, Metric | None]:
    """A CSV of features and a label (:mod:`ampbench.data.features`) for a model that takes one vector a row; a
    regression label is trained standardised, its metric its RMSE in the label's own units."""
    if options.get("tokenizer") is not None:
        raise AmpbenchError("--option tokenizer=...: it applies to a text,label CSV for a token model (give "
                            "--vocab-size); this CSV is read as features and a label")
    if data.task == "lm":
        raise AmpbenchError(f"--data-dir {data_dir} holds a CSV: --task lm reads a train.txt corpus")
    regress = data.task == "regress" or data.num_outputs is not None
    table = read_feature_csv(data_dir, options.get("label"), regress, val_fraction)
    width = len(table.features)
    if data.input_shape is not None and data.input_shape != (width,):
        raise AmpbenchError(f"--input-shape {show(data.input_shape)} does not match the data in {data_dir}: "
                            f"{width} features a row ({', '.join(table.features[:6])}{', ...' if width > 6 else ''})")
    n = len(table.train_y)
    if regress:
        if data.num_outputs not in (None, 1):
            raise AmpbenchError(f"--num-outputs {data.num_outputs}: {data_dir} has one label column ({table.label!r})")
        y, metric = standardised(torch.cat([table.train_y, table.test_y]), n)
        return (TensorData((table.train_x,), y[:n]), TensorData((table.test_x,), y[n:]),
                DataSpec((width,), None, None, 1, "regress"), None, table.describe(), metric)
    classes = len(table.classes or [])
    if data.num_classes is not None and data.num_classes < classes:
        raise AmpbenchError(f"--num-classes {data.num_classes}: {table.label!r} in {data_dir} has {classes} "
                            f"values ({', '.join((table.classes or [])[:8])})")
    return (TensorData((table.train_x,), table.train_y), TensorData((table.test_x,), table.test_y),
            DataSpec((width,), None, data.num_classes or classes, None, "classify"), None, table.describe(), None)


def _real_corpus(data_dir: Path, data: DataSpec, where: str, val_fraction: float | None
                 ) -> tuple[TensorData, TensorData, DataSpec, Any, str]:

    if data.task != "lm":
        raise AmpbenchError(f"--data-dir {data_dir} holds a text corpus (train.txt): that is language-model data, "
                            "give --task lm --vocab-size V --input-shape SEQ")
    data = data.resolve(where, need_shape=False)
    if data.input_shape is None:
        raise AmpbenchError("--task lm with --data-dir: give --input-shape SEQ (the sequence length)")
    assert data.vocab_size is not None
    streams, words = load_corpus(data_dir, max_vocab=data.vocab_size, held_out=val_fraction or 0.1)
    seq = data.input_shape[0]
    train, test = windows(streams["train"], seq), windows(streams["test"], seq)
    return train, test, data, None, f"{len(words):,}-word corpus {data_dir}, seq {seq}"


def _real_text_csv(data_dir: Path, data: DataSpec, where: str, val_fraction: float | None, options: dict[str, Any]
                   ) -> tuple[TensorData, TensorData, DataSpec, Any, str]:

    if data.vocab_size is None or data.task not in (None, "classify"):
        raise AmpbenchError(f"--data-dir {data_dir} holds a text,label CSV: that is text classification for a token "
                            "model; give --vocab-size V (the model's embedding size) and --input-shape SEQ")
    if data.input_shape is None or len(data.input_shape) != 1:
        raise AmpbenchError("text classification: give --input-shape SEQ (one sequence length, e.g. 128)")
    text = load_text_classification(data_dir, seq_len=data.input_shape[0], vocab_size=data.vocab_size,
                                    tokenizer=str(options.get("tokenizer", "word")), val_fraction=val_fraction,
                                    text=options.get("text"), label=options.get("label"))
    classes = len(text.labels)
    if data.num_classes is not None and data.num_classes < classes:
        raise AmpbenchError(f"--num-classes {data.num_classes}: {data_dir} has {classes} labels "
                            f"({', '.join(text.labels[:8])})")
    data = DataSpec(data.input_shape, data.vocab_size, data.num_classes or classes, None, "classify")
    train = TensorData((text.train_ids,), text.train_labels)
    test = TensorData((text.test_ids,), text.test_labels)
    return train, test, data, None, text.describe()


def peek_images(data_dir: Path, val_fraction: float | None = None, shape: tuple[int, ...] | None = None
                ) -> tuple[tuple[int, ...], int] | None:
    """(per-sample shape, classes) of the images in ``data_dir`` (MNIST IDX, CIFAR-10, class folders of images --
    at ``shape`` where given, else of their own shape where they share one); None where it holds text (a CSV, a
    train.txt corpus) or nothing readable (the workload's build says why). An adapter's image model is built for
    them where --input-shape and --num-classes say nothing: hf:vit on MNIST was built for the preset's 3,32,32 and
    refused the data with "--input-shape 3,32,32 does not match", a shape nobody gave; on 12 class folders it was
    built with 10 classes and refused them with "--num-classes 10: the labels go up to 11"."""
    if not data_dir.is_dir() or (data_dir / "train.txt").is_file() or any(data_dir.glob("*.csv")):
        return None
    try:
        splits = _load_images(data_dir, val_fraction, shape)
    except DataError:
        return None
    PEEKED.clear()
    PEEKED[(str(data_dir.resolve()), val_fraction)] = splits
    train = splits[0]
    return tuple(int(d) for d in train.inputs[0].shape[1:]), int(train.targets.max()) + 1


PEEKED: dict[tuple[str, float | None], tuple[TensorData, TensorData, str]] = {}
"""The images :func:`peek_images` read, kept for the build that follows it (read once, not twice), as
:data:`~ampbench.workloads.user_callables.MADE` keeps what a factory made."""


def _load_images(data_dir: Path, val_fraction: float | None = None, shape: tuple[int, ...] | None = None
                 ) -> tuple[TensorData, TensorData, str]:
    """(train, test, what they are) of the images in ``data_dir``: MNIST IDX, CIFAR-10, or class folders of images
    (resized and centre-cropped to ``shape`` where given: :mod:`ampbench.data.imagefolder`)."""
    peeked = PEEKED.pop((str(data_dir.resolve()), val_fraction), None)
    if peeked is not None and (shape is None or tuple(peeked[0].inputs[0].shape[1:]) == tuple(shape)):
        return peeked
    if is_image_folder(data_dir):
        return folder_splits(data_dir, shape, val_fraction)
    errors = []
    for loader in (load_mnist_dir, load_cifar10_dir):
        try:
            train, test = classification_splits(data_dir, loader, val_fraction)  # type: ignore[misc]
            return train, test, f"images from {data_dir}"
        except DataError as e:
            errors.append(str(e))
    raise DataError(f"--data-dir {data_dir}: no data found: no MNIST IDX or CIFAR-10 files ({'; '.join(errors)}), no "
                    "class folders of images (<class>/<image>, or train/ and val/ of them), no text,label CSV (token "
                    "models), no train.txt corpus (--task lm)")


def _as_inputs(inputs: Any, batches: str, n: int) -> tuple[tuple[torch.Tensor, ...], tuple[str, ...] | None]:
    names: tuple[str, ...] | None = None
    if isinstance(inputs, torch.Tensor):
        tensors: tuple[Any, ...] = (inputs,)
    elif isinstance(inputs, (tuple, list)):
        tensors = tuple(inputs)
    elif isinstance(inputs, dict):
        names, tensors = tuple(str(k) for k in inputs), tuple(inputs.values())
    else:
        raise AmpbenchError(f"--batches {batches!r}: inputs are {type(inputs).__name__}; return a tensor, a tuple or "
                            "a dict of tensors")
    for i, t in enumerate(tensors):
        label = names[i] if names else f"input {i}"
        if not isinstance(t, torch.Tensor):
            raise AmpbenchError(f"--batches {batches!r}: {label} is {type(t).__name__}, not a tensor")
        if t.dim() == 0 or t.shape[0] != n:
            raise AmpbenchError(f"--batches {batches!r}: {label} has shape {tuple(t.shape)}; asked for a batch of {n}, "
                                f"its first dimension must be {n}")
    return tensors, names


def _from_batches(batches: str, preset: str, seed: int, batch: int
                  ) -> tuple[TensorData, TensorData, tuple[str, ...] | None, str]:
    """Train/test splits made by the user's ``make_batch(batch_size, generator) -> (inputs, targets)``.

    Called batch by batch with one seeded generator until the preset's sample count (fewer for big
    samples); a fifth of the batches is held out for testing.
    """
    make_batch = load_factory(batches, "--batches", "make_batch")
    g = torch.Generator().manual_seed(seed)
    chunks: list[tuple[tuple[torch.Tensor, ...], torch.Tensor]] = []
    names: tuple[str, ...] | None = None
    n_total, n_made = None, 0
    while n_total is None or n_made < n_total:
        made = call_make_batch(make_batch, batches, batch, g)
        tensors, these = _as_inputs(made[0], batches, batch)
        targets = made[1]
        if not isinstance(targets, torch.Tensor) or targets.dim() == 0 or targets.shape[0] != batch:
            got = tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise AmpbenchError(f"--batches {batches!r}: targets {got}; return a tensor whose first dimension is the "
                                f"batch size ({batch})")
        if chunks and (these != names or len(tensors) != len(chunks[0][0])):
            raise AmpbenchError(f"--batches {batches!r}: batches differ in their inputs' names or number")
        names = these
        chunks.append((tensors, targets))
        n_made += batch
        if n_total is None:
            per_sample = sum(t[0].numel() * t.element_size() for t in (*tensors, targets))
            n_total = tasks.sample_count(preset, per_sample, batch)
    try:
        inputs = tuple(torch.cat([c[0][i] for c in chunks]) for i in range(len(chunks[0][0])))
        targets = torch.cat([c[1] for c in chunks])
    except RuntimeError as e:
        raise AmpbenchError(f"--batches {batches!r}: batches differ in shape or dtype ({str(e).splitlines()[0]})") from None
    n_test = max(len(chunks) // 5, 1) * batch
    train, test = TensorData(inputs, targets).split_off(n_test)
    return train, test, names, batches


class OutputLogits(nn.Module):
    """A model whose output is a mapping holding ``logits`` (a transformers ``ModelOutput``: an HF model built in the
    user's own factory, or the hf: adapter's image classifier, called with its pixels), called as it is, its logits
    returned. It was refused ("the model returned SequenceClassifierOutput, not a tensor") unless a --loss read it."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.inner(*args, **kwargs)["logits"]


def _logits_of(out: Any) -> torch.Tensor | None:
    """The ``logits`` tensor of a mapping output (a ModelOutput is one), else None."""
    if isinstance(out, Mapping) and isinstance(out.get("logits"), torch.Tensor):
        return out["logits"]
    return None


class ForwardFailed(AmpbenchError):
    """The check forward on 2 samples failed: the model does not take the batch as it is shaped (a builder that chose
    the shape can say what would fit: :func:`~ampbench.workloads.adapters.create_adapter_workload`)."""


def _check_forward(workload: Workload, where: str, tokens: bool, made: bool, real: str | None = None,
                   meta: bool = False, built_on_meta: bool = False) -> tuple[Any, torch.Tensor]:
    """One fp32 forward on 2 samples, so a shape mismatch is a clear error before any training. ``real``: what the
    --data-dir data are, where they set the shape (a CSV's one-hot columns widen its rows: "check --input-shape" was
    no help where none was given). ``meta``: on a meta copy of the model, its output on meta
    (:func:`~ampbench.workloads.meta_check.meta_forward`; :class:`~ampbench.workloads.meta_check.NotOnMeta` where the
    copy cannot stand in). ``built_on_meta``: the model itself is on meta, the batch is moved there."""
    inputs, targets = workload.example_batch(2)
    if meta:
        ran = meta_check.meta_forward(workload.model, lambda clone: workload.call_model(
            clone, meta_check.meta_like(inputs), prepared=True))
        if ran is None:
            raise meta_check.NotOnMeta(where)
        return ran[0], targets
    if built_on_meta:
        inputs = meta_check.meta_like(inputs)
    shapes = [f"(2, {show(tuple(t.shape[1:]))})" if t.dim() > 1 else "(2,)" for t in inputs]
    names = workload.input_names
    # How the batch reached forward, so a signature mismatch says which convention it met.
    if names:
        shapes = [f"{n}={s}" for n, s in zip(names, shapes)]
        called = f"; a dict batch is called as model(**inputs): forward({', '.join(names)})"
    elif len(shapes) > 1:
        called = f"; a tuple batch is called as model(*inputs): {len(shapes)} positional arguments"
    else:
        called = ""
    try:
        with torch.no_grad():
            return workload.call_model(workload.model, inputs, prepared=True), targets
    except torch.OutOfMemoryError:
        raise  # not a shape problem: the harness records it as status oom
    except Exception as e:
        msg = str(e).splitlines()[0][:200] if str(e) else ""
        fix = "check --batches" if made else "check --input-shape" + (" and --vocab-size" if tokens else "")
        if real is not None and not made:
            fix = f"the batch is the --data-dir data's ({real}): make the model take it"
        raise ForwardFailed(f"{where}: forward on a batch of shape {', '.join(shapes)} failed: {type(e).__name__}: "
                            f"{msg}. {fix}{called if made else ''}") from None


def _check_loss(loss_fn: Callable[..., Any], out: Any, targets: torch.Tensor, where: str, own_loss: bool) -> None:
    try:
        with torch.no_grad():
            value = loss_fn(out, targets)
    except Exception as e:
        msg = str(e).splitlines()[0][:200] if str(e) else ""
        fix = "check --loss" if own_loss else "give --loss file.py:fn, or --task/--num-classes/--num-outputs"
        raise AmpbenchError(f"{where}: the loss failed on the model's output {shape_of(out)} and targets "
                            f"{shape_of(targets)}: {type(e).__name__}: {msg}. {fix}") from None
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise AmpbenchError(f"{where}: the loss returned {shape_of(value)}, not a scalar tensor")
