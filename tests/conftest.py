from __future__ import annotations

import os
import subprocess

import pytest
import torch
from torch import nn

# The suite runs hundreds of plans: none of them is timed for the header's estimate, except in the tests of the
# estimate itself (tests/bench/test_estimate.py, test_progress.py), which switch it back on.
os.environ["AMPBENCH_NO_ESTIMATE"] = "1"


@pytest.fixture
def with_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMPBENCH_NO_ESTIMATE", raising=False)


class TinyNet(nn.Module):
    """Linear -> LayerNorm -> ReLU -> Linear, with a BatchNorm1d: norm layers of both kinds."""

    def __init__(self, d_in: int = 8, d_hidden: int = 16, d_out: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.bn = nn.BatchNorm1d(d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.norm(self.bn(self.fc1(x)))))  # (B, d_out)


def make_run(seed: int = 0, lr: float = 1e-2, opt: str = "adam", impl: str | None = None):
    """TinyNet and an optimizer (``impl``: "fused", "foreach" or "forloop"; None: torch's default)."""
    torch.manual_seed(seed)
    model = TinyNet()
    kw = {"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}, None: {}}[impl]
    if opt == "adam":
        optimizer: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=lr, **kw)
    elif opt == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, **kw)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, **kw)
    return model, optimizer


def batches(n: int, seed: int = 1, batch: int = 32):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(8, 4, generator=g)
    out = []
    for _ in range(n):
        x = torch.randn(batch, 8, generator=g)
        out.append((x, (x @ w).argmax(dim=1)))
    return out


@pytest.fixture
def tiny_run():
    return make_run


def cli(*args: str) -> tuple[int, str, str]:
    """Run the ampbench command line in this process: (exit code, stdout, stderr). Bad input is checked here, in
    the process, as fast as a function call; subprocess tests are kept for what only a real process shows."""
    import contextlib
    import io

    from ampbench import cli as cli_mod

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli_mod.main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """:func:`cli` shaped like ``subprocess.run(...)``'s result, for tests written against a subprocess."""
    code, out, err = cli(*args)
    return subprocess.CompletedProcess(["ampbench", *args], code, out, err)
