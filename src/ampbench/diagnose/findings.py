"""What a diagnosis says: findings ordered by importance, each with what to do about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITY = {"error": 0, "warning": 1, "info": 2}


@dataclass
class Finding:
    severity: str
    """error (training breaks), warning (slower / less precise than it could be), info (context)."""
    check: str
    """nonfinite, gradients, activations, policy, tensorcore, profile; fallback (a kernel fallback the mode
    installs on this device, reported whatever checks ran)."""
    title: str
    detail: str = ""
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ordered(findings: list[Finding]) -> list[Finding]:
    """Most important first (errors, then warnings, then info; stable within a severity)."""
    return sorted(findings, key=lambda f: SEVERITY.get(f.severity, 3))
