"""Save and resume a distributed run: model, optimizer and the engine's state (loss scaler, counters).

fsdp: sharded model and optimizer state through torch.distributed.checkpoint (each rank writes its
shards; resuming on the same world size reads them back in place), the engine's state beside it
(``ampbench.pt``, written by rank 0, all in ``path/current``: it is the same on every rank, the scaler decisions being
agreed). ddp: every rank holds the same state, so rank 0 writes model, optimizer and engine state
into ``ampbench.pt`` like a single-device run (the fp32 masters of master-* modes inside the
engine's state).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ampbench.distributed import current_rank
from ampbench.errors import AmpbenchError

ENGINE_FILE = "ampbench.pt"


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if hasattr(model, "module") and isinstance(model.module, nn.Module) else model


CURRENT, NEXT, OLD = "current", ".next", ".old"


def save(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, mp: Any,
         extra: dict[str, Any] | None = None) -> None:
    """Collective: every rank calls it. ``extra`` (plain values: epoch, step) is saved with the engine state.

    Written into ``path/.next`` and swapped into ``path/current`` by one rename once every rank is done,
    so a kill mid-save keeps the previous checkpoint whole (DCP writes its shards in place)."""

    root = Path(path)
    rank = current_rank()
    path = root / NEXT
    if rank == 0:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    dist.barrier()
    strategy = mp.placement.strategy
    engine = {"mp": mp.state_dict(), "strategy": strategy, "world_size": dist.get_world_size(), **(extra or {})}
    if strategy == "fsdp":
        import torch.distributed.checkpoint as dcp  # lazy: torch.distributed.checkpoint
        from torch.distributed.checkpoint.state_dict import get_state_dict  # lazy: torch.distributed.checkpoint

        with mp.direct_optimizer_steps():
            model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(path))
    elif rank == 0:
        engine.update(model=_unwrap(model).state_dict(), optimizer=optimizer.state_dict())
    if rank == 0:
        torch.save(engine, path / ENGINE_FILE)
    dist.barrier()  # every rank's shards are written
    if rank == 0:
        current, old = root / CURRENT, root / OLD
        shutil.rmtree(old, ignore_errors=True)
        if current.exists():
            current.rename(old)
        path.rename(current)
        shutil.rmtree(old, ignore_errors=True)
    dist.barrier()


def _engine_file(path: str | Path) -> Path:
    """The engine file of the checkpoint in ``path`` (an AmpbenchError where there is none)."""
    file = Path(path) / CURRENT / ENGINE_FILE
    if not file.exists():
        raise AmpbenchError(f"no ampbench distributed checkpoint in {file.parent} (missing {file.name})")
    return file


def check_placement(engine: dict[str, Any], where: str, strategy: str | None, world_size: int) -> None:
    """A checkpoint resumes only with the strategy and the rank count it was saved with (``where``: how the error
    names it)."""
    if engine.get("strategy") != strategy or engine.get("world_size") != world_size:
        raise AmpbenchError(f"{where} was saved with strategy {engine.get('strategy')!r} on {engine.get('world_size')} "
                            f"ranks; this run is {strategy!r} on {world_size}: resume with the same ones")


def about(path: str | Path) -> dict[str, Any]:
    """What a checkpoint :func:`save` wrote says of itself (strategy, world size, the extras: workload, precision,
    epoch, ...), read without a process group or a model (ddp's weights left on disk: mmap) -- so the command that
    starts the ranks can refuse a checkpoint they could not resume, before starting them."""
    file = _engine_file(path)
    try:
        engine = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:
        raise AmpbenchError(f"--resume: {file} is not a readable checkpoint ({type(e).__name__}: {e})") from None
    return {k: v for k, v in engine.items() if k not in ("model", "optimizer")}


def load(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, mp: Any) -> dict[str, Any]:
    """Collective: restore what :func:`save` wrote into a set-up model, optimizer and engine; returns the extras."""
    file = _engine_file(path)
    path = file.parent
    engine = torch.load(file, map_location="cpu", weights_only=True)
    strategy = mp.placement.strategy
    check_placement(engine, str(path), strategy, dist.get_world_size())
    if strategy == "fsdp":
        import torch.distributed.checkpoint as dcp  # lazy: torch.distributed.checkpoint
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict  # lazy: torch.distributed.checkpoint

        with mp.direct_optimizer_steps():  # (DCP fills an empty optimizer's state with a zero-lr step)
            model_sd, optim_sd = get_state_dict(model, optimizer)
            state = {"model": model_sd, "optim": optim_sd}
            dcp.load(state, checkpoint_id=str(path))
            set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    else:
        _unwrap(model).load_state_dict(engine["model"])
        optimizer.load_state_dict(engine["optimizer"])
    mp.load_state_dict(engine["mp"])
    return {k: v for k, v in engine.items() if k not in ("mp", "model", "optimizer", "strategy", "world_size")}
