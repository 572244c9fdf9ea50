"""The user's callables by name (``--model file.py:factory``, ``--batches``, ``--loss``): loaded, called, their errors
one line each. Torch-free: a Keras cell on TensorFlow or JAX loads its factory with these too.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.quiet_imports import torchao_quiet


@contextlib.contextmanager
def seeded_if_loaded(seed: int) -> Iterator[None]:
    """torch's global RNG seeded for the block (and restored after) where torch is loaded: a PyTorch factory's init,
    or a Keras one on the torch backend; a process without torch (Keras on TensorFlow or JAX) has none to seed."""
    if "torch" not in sys.modules:
        yield
        return
    from ampbench.workloads.base import seeded  # lazy: torch

    with seeded(seed):
        yield


def raised_where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    return f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""


def load_factory(spec: str, flag: str = "--model", what: str = "factory") -> Callable[..., Any]:
    """The callable named by ``path/to/file.py:name`` or ``package.module:name`` (one-line errors)."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise AmpbenchError(f"{flag} {spec!r}: expected path/to/file.py:{what} or package.module:{what}")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        if not path.is_file():
            raise AmpbenchError(f"{flag} {spec!r}: file {path} does not exist")
        mod_name = f"ampbench_user_{abs(hash(path.resolve()))}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        if module_spec is None or module_spec.loader is None:
            raise AmpbenchError(f"{flag} {spec!r}: cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            with torchao_quiet(warnings_too=False):  # (a module importing transformers, which imports torchao: its
                module_spec.loader.exec_module(module)  # W... _pytree.py lines printed above the command's output)
        except Exception as e:
            raise AmpbenchError(f"{flag} {spec!r}: importing {path} failed: {type(e).__name__}: {e}{raised_where(e)}") from None
    else:
        try:
            with torchao_quiet(warnings_too=False):
                module = importlib.import_module(target)
        except Exception as e:
            raise AmpbenchError(f"{flag} {spec!r}: cannot import module {target!r}: {type(e).__name__}: {e}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        public = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise AmpbenchError(f"{flag} {spec!r}: {target} has no attribute {attr!r} (callables there: "
                            f"{', '.join(public[:8]) or 'none'})")
    if not callable(factory):
        raise AmpbenchError(f"{flag} {spec!r}: {attr} is not callable")
    return factory


def call_factory(factory: Callable[..., Any], spec: str, preset: str | None, seed: int) -> Any:
    takes_preset = "preset" in parameter_names(factory)
    try:
        with seeded_if_loaded(seed), torchao_quiet(warnings_too=False):  # (transformers builds a model class: torchao)
            return factory(preset=preset or "small") if takes_preset else factory()
    except AmpbenchError:
        raise
    except Exception as e:
        raise AmpbenchError(f"--model {spec!r}: the factory raised {type(e).__name__}: {e}{raised_where(e)}") from None


MADE: dict[tuple[str, str | None, int], Any] = {}
"""What a factory made while its target was recognised (:func:`made_by`), kept for the one build that follows."""


def made_by(spec: str, preset: str | None, seed: int, keep: bool = True) -> Any:
    """The object ``--model spec``'s factory returns (seeded as a build is). With ``keep`` the next
    :func:`create_user_workload` of the same (spec, preset, seed) uses it instead of calling the factory again."""
    made = call_factory(load_factory(spec), spec, preset, seed)
    if keep:
        MADE[(spec, preset, seed)] = made
    return made


def parameter_names(fn: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def call_make_batch(make_batch: Callable[..., Any], batches: str, batch: int, rng: Any) -> tuple[Any, Any]:
    """``make_batch(batch, rng)``'s (inputs, targets); one line when it raises or returns something else (PyTorch
    models get a torch.Generator, Keras models a numpy Generator)."""
    try:
        made = make_batch(batch, rng)
    except Exception as e:
        raise AmpbenchError(f"--batches {batches!r} raised {type(e).__name__}: {e}{raised_where(e)}") from None
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise AmpbenchError(f"--batches {batches!r}: return (inputs, targets), got {type(made).__name__}")
    return made[0], made[1]
