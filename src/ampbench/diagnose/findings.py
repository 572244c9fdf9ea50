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
    installs on this device, reported whatever checks ran); setup (what the precision engine warned of as the checks
    set the mode up, e.g. a half Adam's eps that is 0)."""
    title: str
    detail: str = ""
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ordered(findings: list[Finding]) -> list[Finding]:
    """Most important first (errors, then warnings, then info; stable within a severity)."""
    return sorted(findings, key=lambda f: SEVERITY.get(f.severity, 3))


STARTED = " ..."
"""How a check's start line ends (the CLI shows it on its spinner; a done line it prints)."""


def check_started(i: int, n: int, check: str) -> str:
    """The progress line as check ``i`` of ``n`` starts (every framework's diagnosis says the same)."""
    return f"check {i}/{n}: {check}{STARTED}"


def check_done(i: int, n: int, check: str, seconds: float, found: int) -> str:
    """The progress line as it ends: its seconds and how many findings it made."""
    return f"check {i}/{n}: {check} done in {seconds:.1f} s ({found} finding{'' if found == 1 else 's'})"
