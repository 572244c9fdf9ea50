"""User workloads: ``--model path/to/file.py:factory`` or ``package.module:factory``.

The factory returns an ``nn.Module`` (then ``input_shape``/``num_classes`` give synthetic
classification data, or ``data_dir`` real MNIST/CIFAR-10 data) or a ready :class:`Workload`.
Every failure is an :class:`AmpbenchError` naming what to fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ampbench.data import synthetic
from ampbench.data.errors import DataError
from ampbench.errors import AmpbenchError
from ampbench.workloads.base import PRESETS, Workload, adam, image_prep, split
from ampbench.workloads.registry import check_val_fraction, seeded
from ampbench.workloads.vision import classification_splits


def _where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    return f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""


def load_factory(spec: str) -> Callable[..., Any]:
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise AmpbenchError(f"--model {spec!r}: expected path/to/file.py:factory or package.module:factory")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        if not path.is_file():
            raise AmpbenchError(f"--model {spec!r}: file {path} does not exist")
        mod_name = f"ampbench_user_{abs(hash(path.resolve()))}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        if module_spec is None or module_spec.loader is None:
            raise AmpbenchError(f"--model {spec!r}: cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            raise AmpbenchError(f"--model {spec!r}: importing {path} failed: {type(e).__name__}: {e}{_where(e)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except Exception as e:
            raise AmpbenchError(f"--model {spec!r}: cannot import module {target!r}: {type(e).__name__}: {e}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise AmpbenchError(f"--model {spec!r}: {target} has no attribute {attr!r} (callables there: "
                            f"{', '.join(public[:8]) or 'none'})")
    if not callable(factory):
        raise AmpbenchError(f"--model {spec!r}: {attr} is not callable")
    return factory


def parse_shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = [p.strip() for p in re.split(r"[,x]", str(text))]
    if not parts or not all(p.isdigit() for p in parts):
        raise AmpbenchError(f"--input-shape {text!r}: expected integers like 1,28,28 (C,H,W)")
    shape = tuple(int(p) for p in parts)
    if any(s < 1 for s in shape):
        raise AmpbenchError(f"--input-shape {text!r}: expected positive integers like 1,28,28 (C,H,W)")
    return shape


def _load_real(data_dir: Path, val_fraction: float | None = None) -> tuple[Any, Any]:
    from ampbench.data.cifar import load_cifar10_dir
    from ampbench.data.idx import load_mnist_dir

    errors = []
    for loader in (load_mnist_dir, load_cifar10_dir):
        try:
            return classification_splits(data_dir, loader, val_fraction)  # type: ignore[return-value]
        except DataError as e:
            errors.append(str(e))
    raise DataError(f"--data-dir {data_dir}: no MNIST IDX or CIFAR-10 files found ({'; '.join(errors)})")


def create_user_workload(spec: str, input_shape: str | tuple[int, ...] | None = None, num_classes: int | None = None,
                         data_dir: str | Path | None = None, preset: str = "small", seed: int = 0,
                         batch_size: int | None = None, val_fraction: float | None = None) -> Workload:
    if preset not in PRESETS:
        raise AmpbenchError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    check_val_fraction(val_fraction, data_dir, True, "--model")
    factory = load_factory(spec)
    try:
        with seeded(seed):
            made = factory()
    except Exception as e:
        raise AmpbenchError(f"--model {spec!r}: the factory raised {type(e).__name__}: {e}{_where(e)}") from None
    if isinstance(made, Workload):
        return made
    if not isinstance(made, nn.Module):
        raise AmpbenchError(f"--model {spec!r}: the factory returned {type(made).__name__}; "
                            "return an nn.Module or an ampbench.Workload")
    shape = parse_shape(input_shape) if not isinstance(input_shape, tuple) else input_shape
    if data_dir is not None:
        data_dir = Path(data_dir)
        if not data_dir.is_dir():
            raise AmpbenchError(f"--data-dir {data_dir} is not a directory")
        train, test = _load_real(data_dir, val_fraction)
        real_shape = tuple(train.inputs[0].shape[1:])
        if shape is not None and shape != real_shape:
            raise AmpbenchError(f"--input-shape {','.join(map(str, shape))} does not match the data in {data_dir} "
                                f"({','.join(map(str, real_shape))})")
        shape = real_shape
        num_classes = num_classes or int(train.targets.max()) + 1
    else:
        if shape is None or num_classes is None:
            raise AmpbenchError(f"--model {spec!r} returned an nn.Module: give --input-shape C,H,W and "
                                "--num-classes N (synthetic data), or --data-dir with MNIST/CIFAR-10 files")
        if num_classes < 2:
            raise AmpbenchError(f"--num-classes {num_classes}: need at least 2")
        n = {"tiny": 64, "small": 4096, "paper": 50000}[preset]
        g = torch.Generator().manual_seed(seed)
        if len(shape) != 3:
            raise AmpbenchError(f"--input-shape {','.join(map(str, shape))}: synthetic images need C,H,W")
        x, y = synthetic.class_images(n, num_classes, shape, g)  # type: ignore[arg-type]
        train, test = split(x, y, n // 5)
    workload = Workload(
        name=spec, model=made, train_data=train, test_data=test, make_optimizer=adam(1e-3), prepare=image_prep(),
        batch_size=batch_size or {"tiny": 8, "small": 64, "paper": 128}[preset],
        epochs={"tiny": 1, "small": 3, "paper": 10}[preset], preset=preset, description=f"user model {spec}",
    )
    _check_forward(workload, spec, shape, num_classes)
    return workload


def _check_forward(workload: Workload, spec: str, shape: tuple[int, ...], num_classes: int) -> None:
    """One fp32 forward on 2 samples, so a shape mismatch is a clear error before any training."""
    inputs, _ = workload.example_batch(2)
    try:
        with torch.no_grad():
            out = workload.model(*inputs)
    except torch.OutOfMemoryError:
        raise  # not a shape problem: the harness records it as status oom
    except Exception as e:
        msg = str(e).splitlines()[0][:200]
        raise AmpbenchError(f"--model {spec!r}: forward on a batch of shape (2, {','.join(map(str, shape))}) failed: "
                            f"{type(e).__name__}: {msg}. Check --input-shape") from None
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[1] != num_classes:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise AmpbenchError(f"--model {spec!r}: output {got} is not (batch, {num_classes}) logits; "
                            "check --num-classes or return an ampbench.Workload with its own loss")
