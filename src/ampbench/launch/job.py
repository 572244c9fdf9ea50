"""What a launched process runs: a :class:`Job` names a function by import path and gives it a JSON payload.

Launchers (:mod:`ampbench.launch`) start processes and move jobs and results as JSON; they never import what a
job does (the harness, a framework's cell), so what runs and what starts it stay apart: ``bench`` uses
``launch``, never the reverse.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Job:
    target: str
    """``package.module:function``; called as ``function(payload)`` and returning a JSON-able dict."""
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "payload": self.payload}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        return cls(str(d["target"]), dict(d.get("payload") or {}))

    def call(self) -> dict[str, Any]:
        """Run the job in this process."""
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)(self.payload)  # type: ignore[no-any-return]
