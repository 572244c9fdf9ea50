"""A MixedPrecision's checkpoint: its scalers, master weights and step counts as plain tensors and numbers
(weights_only-loadable), and the check that a dict given to ``load_state_dict`` is one."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.precision.optimizer_slot import READY, OptimizerSlot
from ampbench.precision.scaling import LossScaleConfig

STATE_FORMAT = 1


def state_dict(precision: str, loss_scale: LossScaleConfig, slots: list[OptimizerSlot]) -> dict[str, Any]:
    return {
        "format": STATE_FORMAT,
        "precision": precision,
        "loss_scale": asdict(loss_scale),
        "optimizers": [
            {"steps": s.steps, "scaler": s.scaler.state_dict(),
             "masters": None if s.masters is None else s.masters.state_dict()}
            for s in slots
        ],
    }


def load_state_dict(precision: str, slots: list[OptimizerSlot], state: dict[str, Any]) -> None:
    _check_state(state)
    if state["precision"] != precision:
        raise AmpbenchError(f"checkpoint was saved in precision {state['precision']!r}, this run is {precision!r}")
    saved = state["optimizers"]
    if len(saved) != len(slots):
        raise AmpbenchError(f"checkpoint has {len(saved)} optimizers, this run set up {len(slots)}")
    for slot, st in zip(slots, saved):
        slot.steps = int(st["steps"])
        slot.scaler.load_state_dict(st["scaler"])
        if slot.masters is not None:
            if st["masters"] is None:
                raise AmpbenchError("checkpoint holds no master weights for this optimizer")
            slot.masters.load_state_dict(st["masters"])
        slot.stage = READY
        slot.pending_loss = None


_STATE_KEYS = {"format": int, "precision": str, "optimizers": list}
_SLOT_KEYS = {"steps": int, "scaler": dict}
_SCALER_KEYS = ("config", "scale", "steps", "skipped_steps", "growth_tracker", "hysteresis_left")


def _check_state(state: Any) -> None:
    """A MixedPrecision state dict has every entry load_state_dict reads, of the right type."""
    how = "pass the dict mp.state_dict() returned (saved whole, e.g. torch.save({'mp': mp.state_dict(), ...}))"
    if not isinstance(state, dict):
        raise AmpbenchError(f"MixedPrecision.load_state_dict() needs a dict, got {type(state).__name__}: {how}")
    missing = [k for k, t in _STATE_KEYS.items() if not isinstance(state.get(k), t)]
    if missing:
        raise AmpbenchError(f"MixedPrecision.load_state_dict(): the state lacks or mistypes {', '.join(missing)} "
                            f"(it has: {', '.join(map(str, state)) or 'nothing'}): {how}")
    if state["format"] != STATE_FORMAT:
        raise AmpbenchError(f"unknown MixedPrecision checkpoint format {state['format']!r} (this ampbench reads "
                            f"{STATE_FORMAT})")
    for i, st in enumerate(state["optimizers"]):
        bad = [k for k, t in _SLOT_KEYS.items() if not isinstance(st, dict) or not isinstance(st.get(k), t)]
        bad += [f"scaler.{k}" for k in _SCALER_KEYS if isinstance(st, dict) and isinstance(st.get("scaler"), dict)
                and k not in st["scaler"]]
        if isinstance(st, dict) and "masters" not in st:
            bad.append("masters")
        if bad:
            raise AmpbenchError(f"MixedPrecision.load_state_dict(): optimizer {i}'s entry lacks or mistypes "
                                f"{', '.join(bad)}: {how}")

