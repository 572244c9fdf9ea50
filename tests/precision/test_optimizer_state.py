"""Optimizer-state precision through MixedPrecision: which (mode, state) pairs exist and why the others do not, the
optimizer rebuilt with the user's hyper-parameters (checked step by step against torch's own Adam/AdamW), the
states' real storage against a hand count of torchao's layout, and stochastic rounding where round-to-nearest stalls.

torchao compiles its update per parameter shape (15-30 s each on a 2-core CPU); these tests run the same update
eagerly (``TORCHDYNAMO_DISABLE=1``, torch's switch that makes ``torch.compile`` a no-op): the arithmetic is the same
function's, the storage the same tensors'. The harness runs it compiled (tests/bench/test_optimizer_state_run.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampbench import MixedPrecision
from ampbench.errors import AmpbenchError
from ampbench.measure.memory import state_bytes
from ampbench.precision.optimizer_state import describe, effective, missing, natural, refusal

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@pytest.fixture(autouse=True)
def _eager_torchao(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")


# -- which pairs exist ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision, own", [("fp32", "fp32"), ("amp-fp16", "fp32"), ("master-bf16", "fp32"),
                                            ("pure-bf16", "bf16"), ("pure-fp16", "fp16"), ("fp8-tensorwise", "fp32")])
def test_a_mode_s_own_states_are_those_of_the_weights_its_optimizer_steps(precision: str, own: str) -> None:
    assert natural(precision) == own
    assert effective(precision, own) is None  # (the default cell: the same key, no second measurement)
    assert MixedPrecision(precision, optimizer_state=own).optimizer_state is None


@pytest.mark.parametrize("precision, state, said", [
    ("pure-bf16", "fp32", "fp32 states need fp32 weights (master-bf16"),
    ("amp-bf16", "bf16", "bf16 optimizer states come with bf16 weights (pure-bf16"),
    ("amp-bf16", "bf16-sr", "it needs pure-bf16"),
    ("master-bf16", "bf16-sr", "fp32 master copies: nothing to round"),
    ("pure-fp16", "bf16-sr", "it needs pure-bf16"),
])
def test_pairs_that_make_no_sense_are_refused_with_the_reason(precision: str, state: str, said: str) -> None:
    assert said in (refusal(precision, state) or "")
    with pytest.raises(AmpbenchError, match=f"Passed MixedPrecision\\('{precision}', optimizer_state='{state}'\\)"):
        MixedPrecision(precision, optimizer_state=state)


def test_an_unknown_state_and_an_optimizer_that_is_not_adam_are_one_line() -> None:
    """Said as Python spells the parameter (the command line says --optimizer-state: tests/test_cli.py)."""
    with pytest.raises(AmpbenchError, match="^optimizer_state='8bits': choose from fp32, bf16, bf16-sr, 8bit, 4bit, fp8. "
                                            "Did you mean '8bit'"):
        MixedPrecision("fp32", optimizer_state="8bits")
    model = nn.Linear(8, 8)
    with pytest.raises(AmpbenchError, match="^optimizer_state='8bit': applies to torch.optim.Adam and AdamW .* is "
                                            "torch.optim.SGD"):
        MixedPrecision("fp32", optimizer_state="8bit").setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    model = nn.Linear(8, 8)
    with pytest.raises(AmpbenchError, match="no maximize=True"):
        MixedPrecision("fp32", optimizer_state="8bit").setup(model, torch.optim.Adam(model.parameters(), maximize=True))


# -- the same optimizer, its hyper-parameters kept ------------------------------------------------------------------
@pytest.mark.parametrize("cls, kw", [
    (torch.optim.AdamW, dict(lr=3e-3, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
    (torch.optim.Adam, dict(lr=2e-3, betas=(0.85, 0.99), eps=1e-7, weight_decay=0.05)),  # (L2, not decoupled)
    (torch.optim.AdamW, dict(lr=1e-3, amsgrad=True)),
])
def test_the_rebuilt_optimizer_steps_as_the_user_s_when_its_states_stay_plain(cls: type, kw: dict) -> None:
    """Oracle: torch's own optimizer. Tensors under 4096 elements keep plain fp32 states in torchao's 8-bit Adam,
    so its update must be torch's, step for step: lr, betas, eps, weight decay (L2 for Adam, decoupled for
    AdamW), amsgrad and a second param group's own lr all carried over."""
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    ours = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    ours.load_state_dict(ref.state_dict())

    def groups(m: nn.Module) -> list[dict]:
        return [{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": kw["lr"] / 3}]

    ref_opt = cls(groups(ref), **kw, foreach=False)
    mp = MixedPrecision("fp32", optimizer_state="8bit")
    ours, opt = mp.setup(ours, cls(groups(ours), **kw))
    assert type(opt).__name__ == f"{cls.__name__}8bit" and opt is not None
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    for _ in range(5):
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        opt.zero_grad()
        mp.backward(F.cross_entropy(ours(x), y))
        mp.step(opt)
    for a, b in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert describe(opt) == "fp32 x8" if not kw.get("amsgrad") else "fp32 x12"


# -- what the states take ------------------------------------------------------------------------------------------
class Net(nn.Module):
    """Tensors on each side of torchao's rule: 65536 and 16384 elements (quantized), 5000 (>= 4096 but not a
    multiple of a block: plain), biases and a norm (small: plain)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(256, 256), nn.Linear(256, 64), nn.Linear(64, 100, bias=False)
        self.odd, self.norm = nn.Linear(100, 50), nn.LayerNorm(50)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.odd(self.c(self.b(torch.relu(self.a(x))))))


LAYOUT = {  # torchao's README and subclass definitions: (block, bytes per element of codes, lookup-table entries)
    "8bit": (256, 1.0, 256), "4bit": (128, 0.5, 16), "fp8": (256, 1.0, 0)}


def _hand_count(model: nn.Module, state: str | None, weight_bytes: int) -> int:
    """Optimizer state bytes counted by hand: per parameter an fp32 step counter (4 bytes) and two moments; a moment
    of n elements quantized (n >= 4096 and a multiple of the block) takes its codes, an fp32 scale per block and
    its own fp32 lookup table, else n plain elements at the weight's size."""
    total = 0
    for p in model.parameters():
        n = p.numel()
        if state is None:
            moment = n * weight_bytes
        else:
            block, code_bytes, table = LAYOUT[state]
            quantized = n >= 4096 and n % block == 0
            moment = int(n * code_bytes) + 4 * (n // block) + 4 * table if quantized else n * weight_bytes
        total += 4 + 2 * moment
    return total


@pytest.mark.parametrize("precision, weight_bytes", [("fp32", 4), ("amp-bf16", 4), ("pure-bf16", 2)])
@pytest.mark.parametrize("state", [None, "8bit", "4bit", "fp8"])
def test_optimizer_bytes_count_the_quantized_states_real_storage(precision: str, weight_bytes: int,
                                                                 state: str | None) -> None:
    torch.manual_seed(0)
    model = Net()
    expected = _hand_count(model, state, weight_bytes)
    mp = MixedPrecision(precision, optimizer_state=state)
    model, opt = mp.setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    x = torch.randn(8, 256)
    for _ in range(2):
        opt.zero_grad()
        with mp.autocast():
            loss = model(x.to(next(model.parameters()).dtype)).float().pow(2).mean()
        mp.backward(loss)
        mp.step(opt)
    assert state_bytes(model, opt, mp.master_params()).optimizer == expected
    if state is not None:  # 3 quantized weights x 2 moments; the 5000-element weight and the small ones plain
        plain = "fp32" if weight_bytes == 4 else "bf16"
        assert describe(opt) == f"{plain} x12, {state} x6"


def test_master_weights_with_8bit_states_quantize_the_fp32_masters_moments() -> None:
    """master-bf16 + 8bit: a bf16 model, fp32 master copies, 8-bit moments of the masters."""
    torch.manual_seed(0)
    model = Net()
    expected_states = _hand_count(model, "8bit", 4)
    norm = sum(p.numel() for p in model.norm.parameters())  # (kept fp32 in the model: no master copy)
    masters = 4 * (sum(p.numel() for p in model.parameters()) - norm)
    mp = MixedPrecision("master-bf16", optimizer_state="8bit")
    model, opt = mp.setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    opt.zero_grad()
    with mp.autocast():
        loss = model(torch.randn(8, 256, dtype=torch.bfloat16)).float().pow(2).mean()
    mp.backward(loss)
    mp.step(opt)
    assert model.a.weight.dtype == torch.bfloat16 and type(opt).__name__ == "AdamW8bit"
    assert all(p.dtype == torch.float32 for g in opt.param_groups for p in g["params"])  # it steps the masters
    held = state_bytes(model, opt, mp.master_params(), grad_buckets=0)
    assert held.optimizer == expected_states + masters  # (grads moved to the masters after the step: none left)


# -- stochastic rounding -------------------------------------------------------------------------------------------
class Ramp(nn.Module):
    """4096 weights at 1.0 and a loss whose gradient is 1 for each: Adam's step is lr every step."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4096))

    def forward(self) -> torch.Tensor:
        return self.w.float().sum()


def _ramp(precision: str, state: str | None, steps: int = 200, lr: float = 1e-3) -> torch.Tensor:
    torch.manual_seed(0)  # (stochastic rounding draws from torch's generator: a fixed seed, a fixed outcome)
    model = Ramp()
    mp = MixedPrecision(precision, optimizer_state=state)
    model, opt = mp.setup(model, torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0))
    for _ in range(steps):
        opt.zero_grad()
        mp.backward(model())
        mp.step(opt)
    return model.w.detach().float()


def test_pure_bf16_stalls_on_updates_below_half_an_ulp_and_bf16_sr_does_not() -> None:
    """Each step moves every weight by lr = 1e-3; bf16's spacing just below 1.0 is 2^-8 (0.0039), so rounding to
    nearest puts 1 - 0.001 back at 1.0, every step: pure-bf16 never moves. Stochastic rounding rounds down with
    probability 0.001 / spacing, so the expected weight follows fp32's 1 - 200 x 0.001 = 0.8 (the mean of 4096
    weights, within 0.01); master-bf16's fp32 copies take every update."""
    stalled = _ramp("pure-bf16", None)
    assert torch.equal(stalled, torch.ones(4096))
    rounded = _ramp("pure-bf16", "bf16-sr")
    assert abs(rounded.mean().item() - 0.8) < 0.01 and rounded.std().item() > 0
    master = _ramp("master-bf16", None)
    assert abs(master.mean().item() - 0.8) < 0.004  # (bf16 of 0.8: within its spacing of 2^-9 .. 2^-8)


@pytest.mark.parametrize("precision, state", [("amp-bf16", "8bit"), ("pure-bf16", "bf16-sr"), ("master-fp16", "4bit")])
def test_a_torchao_optimizer_step_makes_the_one_host_read_of_an_unfused_optimizer(precision: str, state: str) -> None:
    """torchao's Adam takes no ``found_inf``: the engine decides on the host whether to call its step (one read,
    docs/precision.md "Host syncs"); torchao's own update reads nothing (its step counter lives on the CPU)."""
    from ampbench.measure.syncs import HostSyncCounter

    torch.manual_seed(0)
    model = Net()
    mp = MixedPrecision(precision, optimizer_state=state)
    model, opt = mp.setup(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    x = torch.randn(8, 256)

    def step() -> None:
        opt.zero_grad()
        with mp.autocast():
            loss = model(x.to(next(model.parameters()).dtype)).float().pow(2).mean()
        mp.backward(loss)
        mp.step(opt)

    for _ in range(2):
        step()
    with HostSyncCounter() as counter:
        for _ in range(4):
            step()
    assert counter.reads == 4
