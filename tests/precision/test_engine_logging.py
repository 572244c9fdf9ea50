"""What a user's own loop logs: MixedPrecision.on_step hooks and StepRecord.scalars, checked against
torch.amp.GradScaler run on the same gradients (the oracle for the scale and the skipped step)."""

from __future__ import annotations

import torch
from torch import nn

from ampbench.precision import MixedPrecision


def test_on_step_gives_scale_found_inf_and_skipped_as_gradscaler_has_them() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mp = MixedPrecision("amp-fp16", loss_scale="dynamic", device="cpu")
    model, opt = mp.setup(model, opt)
    logged: list[dict[str, float]] = []
    remove = mp.on_step(lambda r: logged.append(r.scalars()))

    oracle = torch.amp.GradScaler("cpu", init_scale=mp.scale, growth_interval=2000)
    ref = nn.Linear(4, 1)
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    losses = []
    for step in range(4):
        poison = step == 1  # a non-finite gradient at step 2: skipped, the scale halves
        opt.zero_grad()
        loss = model(x).float().pow(2).mean() * (float("inf") if poison else 1.0)
        losses.append(float(loss))
        mp.backward(loss)
        mp.step(opt)
        ref_opt.zero_grad()
        oracle.scale(ref(x).pow(2).mean() * (float("inf") if poison else 1.0)).backward()
        oracle.step(ref_opt)
        oracle.update()
        assert logged[-1]["loss_scale"] == oracle.get_scale()
    assert [r["found_inf"] for r in logged] == [0.0, 1.0, 0.0, 0.0]
    assert [r["skipped_steps"] for r in logged] == [0.0, 1.0, 1.0, 1.0]
    assert [r["loss"] for r in logged] == losses  # (the loss passed to backward, unscaled)
    remove()
    opt.zero_grad()
    mp.backward(model(x).float().pow(2).mean())
    mp.step(opt)
    assert len(logged) == 4  # removed: not called again
