"""Whether a CPU trains in fp8 is what its kernels do in a child process, not a flag list -- but the AVX2 case, where a
short probe passes and later calls fail, stays refused by its flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from ampbench.precision import fp8_probe


@pytest.mark.parametrize("env, said", [({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "under ONEDNN_MAX_CPU_ISA=AVX2"),
                                       ({"ATEN_CPU_CAPABILITY": "avx2"}, "under ATEN_CPU_CAPABILITY=avx2")])
def test_the_avx2_case_is_refused_by_its_flags_without_a_probe(monkeypatch: pytest.MonkeyPatch, env: dict,
                                                                said: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(fp8_probe, "usable", lambda flag: "ONEDNN_MAX_CPU_ISA" not in env)
    monkeypatch.setattr(fp8_probe, "run_probe", lambda *a, **k: pytest.fail("probed"))
    fp8_probe.forget()
    try:
        why = fp8_probe.cpu_fp8_problem()
    finally:
        fp8_probe.forget()
    assert why is not None and said in why and "AVX-512" in why


@pytest.mark.parametrize("code, said", [
    ("pass", None),
    ("raise ValueError('no primitive descriptor')", "the fp8 probe failed: ValueError: no primitive descriptor"),
    ("import sys; sys.exit('rowwise: not finite')", "the fp8 probe failed: rowwise: not finite"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "the fp8 probe crashed (signal 11)"),
    ("import time; time.sleep(30)", "the fp8 probe did not finish in 2 s")])
def test_the_childs_verdict_is_one_line(code: str, said: str | None) -> None:
    assert fp8_probe.run_probe(code, timeout=2.0).verdict == said


def test_a_verdict_is_kept_per_machine_and_software(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fp8_probe, "flags_problem", lambda: None)
    calls: list[int] = []
    crashed = fp8_probe.Probe("the fp8 probe crashed (signal 6)")
    monkeypatch.setattr(fp8_probe, "run_probe", lambda *a, **k: calls.append(1) or crashed)
    monkeypatch.setattr(fp8_probe, "probe_key", lambda: "k1")
    try:
        for _ in range(2):
            fp8_probe.forget()
            why = fp8_probe.cpu_fp8_problem()
            assert why is not None and "the fp8 probe crashed (signal 6)" in why and "CUDA GPU" in why
        assert len(calls) == 1 and (tmp_path / "ampbench" / "fp8_probe.json").is_file()  # (the second read it back)
        monkeypatch.setattr(fp8_probe, "probe_key", lambda: "k2")  # (another torch, torchao or CPU: asked again)
        fp8_probe.forget()
        fp8_probe.cpu_fp8_problem()
        assert len(calls) == 2
    finally:
        fp8_probe.forget()


def test_the_probe_makes_torchaos_calls() -> None:
    """What the child runs: torch._scaled_mm with per-tensor and per-row scales, fast accumulation on and off, e5m2
    operands, then each of torchao's recipes training a model."""
    for call in ("_scaled_mm", "torch.ones(m, 1)", "use_fast_accum=fast", "float8_e5m2", "convert_to_float8_training",
                 '"tensorwise", "rowwise", "rowwise_with_gw_hp"', "loss.backward()"):
        assert call in fp8_probe.PROBE


def test_a_probe_that_ran_out_of_time_is_not_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A probe past its time limit (87 s on an AMX Xeon whose per-tensor fp8 matmul is a reference kernel, over 180 s
    beside a parallel test run) was kept as the machine's verdict, refusing fp8 there for good. It refuses this run,
    saying it could not check, and the next process probes again; a verdict that ran to its end is kept."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fp8_probe, "flags_problem", lambda: None)
    monkeypatch.setattr(fp8_probe, "probe_key", lambda: "k1")
    verdicts = iter([f"{fp8_probe.TIMED_OUT} in 180 s", None])
    calls: list[int] = []
    monkeypatch.setattr(fp8_probe, "run_probe", lambda *a, **k: calls.append(1) or fp8_probe.Probe(next(verdicts)))
    try:
        fp8_probe.forget()
        why = fp8_probe.cpu_fp8_problem()
        assert why is not None and "could not be checked" in why and "did not finish in 180 s" in why
        assert not (tmp_path / "ampbench" / "fp8_probe.json").exists()
        for _ in range(2):  # (probed again: it trained, and that is kept)
            fp8_probe.forget()
            assert fp8_probe.cpu_fp8_problem() is None
        assert len(calls) == 2
    finally:
        fp8_probe.forget()


def test_a_slow_call_is_not_repeated_ten_times() -> None:
    """The probe's repeat (its own code, run here with a call that takes 0.6 s): ten fast calls, or as many as take a
    second -- two of the slow one."""
    import time

    code = fp8_probe.PROBE
    start, end = code.index("def again"), code.index("\n\n\nseconds = {}")
    scope: dict[str, object] = {"time": time}
    exec(code[start:end], scope)
    again = scope["again"]
    fast: list[int] = []
    slow: list[int] = []
    again(lambda: fast.append(1))  # type: ignore[operator]
    took = again(lambda: slow.append(1) or time.sleep(0.6))  # type: ignore[operator]
    assert len(fast) == 10 and len(slow) == 2
    assert 0.6 <= took < 0.9  # (seconds a call: the probe's speeds are FLOPs over it)


def test_the_child_says_its_matmuls_speeds_and_a_reference_kernel_is_said_before_a_run(monkeypatch: pytest.MonkeyPatch,
                                                                                      tmp_path: Path) -> None:
    """An AMX Xeon ran the per-tensor-scaled fp8 matmul at 0.12 GFLOP/s (a reference kernel) beside bf16's 1,600: a BERT
    whose layers convert took minutes a step with no word before the run. The child prints its largest matmul's speed
    per kind; one over 1,000x slower than bf16's is said, with what it costs (oracle: a 1,024-wide layer over 1,024
    tokens is 2 x 1024^3 FLOPs, 17.9 s at 0.12 GFLOP/s); the per-row kernel, 1/21 of bf16's, is slow, not broken."""
    said = fp8_probe.run_probe("print('GFLOPS', {'tensorwise': 0.12, 'rowwise': 75.0, 'bf16': 1600.0})", timeout=20.0)
    assert said == fp8_probe.Probe(None, {"tensorwise": 0.12, "rowwise": 75.0, "bf16": 1600.0})
    assert fp8_probe.run_probe("import sys; print('GFLOPS', {'bf16': 1.0}); sys.exit('boom')", timeout=20.0) == \
        fp8_probe.Probe("the fp8 probe failed: boom", {"bf16": 1.0})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fp8_probe, "flags_problem", lambda: None)
    monkeypatch.setattr(fp8_probe, "probe_key", lambda: "k1")
    calls: list[int] = []
    monkeypatch.setattr(fp8_probe, "run_probe", lambda *a, **k: calls.append(1) or said)
    try:
        fp8_probe.forget()
        slow = fp8_probe.cpu_fp8_slowness("tensorwise")
        assert slow == ("this CPU's per-tensor-scaled fp8 matmul ran at 0.12 GFLOP/s, 1/13,333 of its bf16 matmul's "
                        "1,600 (a reference kernel): each Linear layer the mode converts runs its 3 matmuls a step at "
                        "that rate, ~18 s each for a 1,024-wide layer over 1,024 tokens (fp8-rowwise's matmul: 75 "
                        "GFLOP/s)"), slow
        assert fp8_probe.cpu_fp8_slowness("rowwise") == ""
        from ampbench.precision import supported

        if not supported("fp8-tensorwise", "cpu").ok:  # (torchao absent: the refusal comes first)
            pytest.skip(supported("fp8-tensorwise", "cpu").reason)
        assert supported("fp8-tensorwise", "cpu").slow == slow and slow in supported("fp8-tensorwise", "cpu").note
        assert supported("fp8-rowwise", "cpu").slow == ""
        from ampbench.bench import RunConfig

        config = RunConfig.of(workloads=("bert",), presets=("tiny",), precisions=("fp32", "fp8-tensorwise"),
                              device="cpu")
        assert f"fp8-tensorwise on cpu: {slow}" in config.left_out()
        fp8_probe.forget()  # (kept with its speeds: read back, not probed again)
        assert fp8_probe.cpu_fp8_slowness("tensorwise") == slow and len(calls) == 1
    finally:
        fp8_probe.forget()


def test_a_verdict_kept_by_an_earlier_ampbench_without_speeds_is_probed_again_once(monkeypatch: pytest.MonkeyPatch,
                                                                                   tmp_path: Path) -> None:
    import json

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fp8_probe, "flags_problem", lambda: None)
    monkeypatch.setattr(fp8_probe, "probe_key", lambda: "k1")
    (tmp_path / "ampbench").mkdir()
    (tmp_path / "ampbench" / "fp8_probe.json").write_text(json.dumps({"k1": None, "k0": "kept"}))
    calls: list[int] = []
    monkeypatch.setattr(fp8_probe, "run_probe", lambda *a, **k: calls.append(1) or fp8_probe.Probe(None, {"bf16": 9.0}))
    try:
        for _ in range(2):
            fp8_probe.forget()
            assert fp8_probe.cpu_fp8_problem() is None
        assert len(calls) == 1
        kept = json.loads((tmp_path / "ampbench" / "fp8_probe.json").read_text())
        assert kept == {"k0": "kept", "k1": {"verdict": None, "gflops": {"bf16": 9.0}}}
    finally:
        fp8_probe.forget()
