import pytest
import torch

from ampbench import cpuinfo
from ampbench.precision import supported


def test_tf32_refused_on_cpu_with_reason():
    s = supported("tf32", "cpu")
    assert not s.ok and "TF32" in s.reason and "CPU" in s.reason


@pytest.mark.parametrize("name", ["fp32", "amp-fp16", "amp-bf16", "master-fp16", "pure-bf16"])
def test_cpu_runs_fp32_and_half(name):
    assert supported(name, "cpu").ok


def test_cpu_note_without_bf16_instructions(monkeypatch):
    monkeypatch.setattr(cpuinfo, "cpu_flags", lambda: frozenset({"avx2"}))
    s = supported("amp-bf16", "cpu")
    assert s.ok and "slower than fp32" in s.note
    assert supported("fp32", "cpu").note == ""


def test_unknown_device_type_refused():
    s = supported("fp32", "xpu")
    assert not s.ok and "cpu or cuda" in s.reason
    # meta: shapes and dtypes only, where ampbench predict traces a step (run refuses --device meta itself)
    meta = supported("amp-bf16", "meta")
    assert meta.ok and "nothing computed" in meta.note


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA answer")
def test_cuda_without_gpu_refused():
    s = supported("amp-fp16", "cuda")
    assert not s.ok and "CUDA is not available" in s.reason


class _FakeCuda:
    """Stand-in for torch.cuda on a machine without a GPU, with a chosen compute capability."""

    def __init__(self, cc, name="Tesla T4"):
        self.cc, self.name = cc, name

    def patch(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: self.cc)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: self.name)


def test_bf16_and_tf32_need_ampere(monkeypatch):
    _FakeCuda((7, 5)).patch(monkeypatch)
    for name in ("amp-bf16", "master-bf16", "pure-bf16", "tf32"):
        s = supported(name, "cuda")
        assert not s.ok and "8.0" in s.reason and "7.5" in s.reason and "T4" in s.reason
    assert supported("amp-fp16", "cuda").ok and supported("amp-fp16", "cuda").note == ""


def test_fp16_below_volta_runs_without_tensor_cores(monkeypatch):
    _FakeCuda((6, 1), "GTX 1080").patch(monkeypatch)
    s = supported("amp-fp16", "cuda:0")
    assert s.ok and "no Tensor Cores" in s.note


def test_fp32_refused_when_tf32_forced_by_env(monkeypatch):
    _FakeCuda((9, 0), "H100").patch(monkeypatch)
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    s = supported("fp32", "cuda")
    assert not s.ok and "NVIDIA_TF32_OVERRIDE" in s.reason
    assert supported("tf32", "cuda").ok


@pytest.mark.parametrize(("cap", "bf16", "amx"), [(None, True, True), ("AVX2", False, False), ("avx512_core", False, False),
                                                  ("AVX512_CORE_BF16", True, False), ("AVX10_1_512_AMX", True, True),
                                                  ("ALL", True, True), ("NOT_AN_ISA", True, True)])
def test_the_half_hardware_probe_honours_onednn_isa_cap(monkeypatch, cap, bf16, amx):
    """ONEDNN_MAX_CPU_ISA=AVX2 makes an AMX Xeon compute bf16 as an AVX2 CPU does: the probe (and every claim built
    on it: support notes, peaks, the advisor's expectations) says so."""
    from ampbench.measure import cpu as cpu_mod

    monkeypatch.setattr(cpuinfo, "cpu_flags", lambda: frozenset({"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"}))
    monkeypatch.setattr(cpu_mod, "cpu_flags", cpuinfo.cpu_flags)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if cap is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    hw = cpuinfo.cpu_half_hardware()
    assert hw["avx512_bf16"] is bf16 and hw["amx_bf16"] is amx and hw["avx512_fp16"] is False
    assert ("slower than fp32" in supported("amp-bf16", "cpu").note) is not (bf16 or amx)
    assert cpu_mod.fp32_flops_per_cycle()[1].startswith("AVX2") is (cap == "AVX2")  # no AVX-512 FMA under the cap


def _fp8_trains_here() -> bool:
    """The oracle, computed apart from the probe: torchao trains a 64-wide MLP two steps in each recipe, here."""
    from ampbench.precision.fp8 import import_float8

    float8 = import_float8()
    try:
        for recipe in ("tensorwise", "rowwise"):
            m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)).to(torch.bfloat16)
            float8.convert_to_float8_training(m, config=float8.Float8LinearConfig.from_recipe_name(recipe))
            for _ in range(2):
                m(torch.randn(32, 64, dtype=torch.bfloat16)).float().pow(2).mean().backward()
    except (RuntimeError, NotImplementedError):
        return False
    return True


@pytest.mark.isa  # (make test runs it again under ONEDNN_MAX_CPU_ISA=AVX2: there the fp8 modes must be refused)
def test_fp8_on_cpu_follows_what_the_cpus_kernels_do() -> None:
    """The fp8 modes run on a CPU where its fp8 matmul trains (the oracle: a training run here, apart from the
    probe's child), and are refused in one line, saying why and where to run them, where not -- never a RuntimeError
    from the first fp8 layer. Without usable AVX-512 (the AVX2 case: a short probe passes there and later calls
    fail) the flags refuse them."""
    import os

    from ampbench.precision.fp8 import torchao_problem

    if torchao_problem() is not None:
        pytest.skip(str(torchao_problem()))
    avx2 = not cpuinfo.usable("avx512f") or os.environ.get("ATEN_CPU_CAPABILITY", "").lower() in ("avx2", "default")
    kernel = not avx2 and _fp8_trains_here()
    for name in ("fp8-tensorwise", "fp8-rowwise"):
        s = supported(name, "cpu")
        assert s.ok == kernel, (name, s)
        if not kernel:
            assert ("no fp8 matmul kernel" if avx2 else "does not run fp8 training") in s.reason
            assert "compute capability >= 8.9" in s.reason and "\n" not in s.reason
    if avx2:
        from ampbench.errors import AmpbenchError
        from ampbench.precision import MixedPrecision

        with pytest.raises(AmpbenchError, match="no fp8 matmul kernel"):
            model = torch.nn.Linear(16, 16)
            MixedPrecision("fp8-tensorwise", device="cpu").setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
