"""Every workload x preset tiny x every CPU precision runs; paper presets match the published shapes."""

import pytest
import torch

from ampbench import MixedPrecision
from ampbench.errors import AmpbenchError
from ampbench.precision import list_precisions, supported
from ampbench.workloads import create_model, create_workload, list_workloads

pytestmark = pytest.mark.filterwarnings("ignore:Adam eps")

CPU_MODES = [n for n in list_precisions() if supported(n, "cpu").ok]
EXPECTED = ["mnist-cnn", "conv-dummy", "resnext", "unet", "resnet50", "vit", "bert", "lstm-lm", "gpt2", "tabular-mlp", "wide-mlp"]


def test_all_workloads_registered():
    assert list_workloads() == EXPECTED


def test_the_list_does_not_depend_on_which_family_a_process_imported_first():
    """A process that imported ``imagenet`` first (a test did) listed resnet50 and vit ahead of mnist-cnn, in the
    list and in an unknown name's "Valid: ..." (golden tests failed by test order)."""
    import subprocess
    import sys

    code = ("import ampbench.workloads.gpt, ampbench.workloads.imagenet\n"
            "from ampbench.workloads import list_workloads, get_spec\n"
            "print(','.join(list_workloads()))\n"
            "try:\n    get_spec('nosuch')\nexcept Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].split(",") == EXPECTED
    assert f"Valid: {', '.join(EXPECTED)}, keras-conv-dummy, timm:<model>" in out[1]


def _first_tensor(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.isa
@pytest.mark.parametrize("precision", CPU_MODES)
@pytest.mark.parametrize("name", EXPECTED)
def test_tiny_forward_backward_in_every_mode(name, precision):
    wl = create_workload(name, "tiny", seed=0)
    opt = wl.make_optimizer(wl.model.parameters())
    mp = MixedPrecision(precision)
    model, opt = mp.setup(wl.model, opt)
    inputs, targets = next(wl.train_data.batches(wl.batch_size))
    # fp16 with dynamic scaling may overflow at the initial 2^16 and back off: that is the scaler working
    for _attempt in range(20):
        opt.zero_grad()
        with mp.autocast():
            out = model(*wl.prepare(inputs))
            loss = wl.loss_fn(out, targets)
        assert torch.isfinite(_first_tensor(out)).all() and torch.isfinite(loss)
        mp.backward(loss)
        mp.unscale_(opt)
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        finite = bool(grads) and all(torch.isfinite(g).all() for g in grads)
        stepped = mp.step(opt)
        assert bool(stepped) == finite
        if stepped:
            break
    assert stepped, f"{name}/{precision}: no finite step in 20 tries (scale {mp.scale})"
    # (weights after the step are not checked: pure-fp16 + Adam(eps=1e-8) is the trap ampbench warns about)


def _count(name, **opts):
    with torch.device("meta"):  # shapes only: no memory for 1.8B-parameter models
        model = create_model(name, "paper", **opts)
    return sum(p.numel() for p in model.parameters())


def test_paper_parameter_counts_match_published():
    assert _count("mnist-cnn") == 4_275_210  # 1*420*9+420 + 420*1000*9+1000 + 49000*10+10
    # ResNeXt-101 32x4d: 44.18M with its 1000-class head (torchvision layout); ours has 10 classes
    assert abs(_count("resnext") + 990 * 2048 + 990 - 44_177_704) < 1000
    assert _count("bert") - (768 * 2 + 2) == 109_482_240  # BertModel bert-base-uncased
    assert _count("bert", size="large") - (1024 * 2 + 2) == 335_141_888  # BertModel bert-large-uncased
    assert abs(_count("unet") - 31_037_698) < 1000  # milesial/Pytorch-UNet, 3 -> 2 classes
    assert _count("conv-dummy") == (3 * 128 * 4 + 128) + 2 * (128 * 128 + 128) + (128 * 255 * 255 + 1)


def test_paper_shapes():
    with torch.device("meta"):
        mnist = create_model("mnist-cnn", "paper")
        lstm = create_model("lstm-lm", "paper")
        bert = create_model("bert", "paper")
    assert (mnist.conv1.out_channels, mnist.conv2.out_channels, mnist.fc.in_features) == (420, 1000, 49000)
    assert (lstm.embed.num_embeddings, lstm.lstm.hidden_size, lstm.lstm.proj_size, lstm.lstm.num_layers) == (
        793471, 8192, 1024, 2)
    assert bert.word.num_embeddings == 30522 and len(bert.layers) == 12


def test_paper_recipes():
    wl = create_workload("mnist-cnn", "paper")
    assert wl.batch_size == 590 and wl.epochs == 3 and wl.notes["batch_size_fp16"] == 1000
    assert isinstance(wl.make_optimizer(wl.model.parameters()), torch.optim.Adam)


@pytest.mark.parametrize("call,match", [
    (lambda: create_workload("mnist-cnm"), "Did you mean 'mnist-cnn'"),
    (lambda: create_workload("mnist-cnn", "huge"), "unknown preset 'huge'"),
    (lambda: create_workload("bert", "tiny", colour="red"), "no option colour"),
    (lambda: create_workload("bert", "tiny", task="qa"), "task 'qa'"),
    (lambda: create_workload("timm:resnet18", "tiny"), r"ampbench\[timm\]|timm"),
    (lambda: create_workload("conv-dummy", "tiny", data_dir="."), "random images by design"),
])
def test_bad_workload_requests(call, match):
    with pytest.raises(AmpbenchError, match=match):
        call()


def test_an_unknown_name_lists_and_suggests_every_frameworks_workloads():
    # (the list named the PyTorch workloads alone: keras-conv-dummy, which `list workloads` shows, was missing)
    from ampbench import seam

    keras = [w.name for fw in seam.all_frameworks() if fw.name != seam.DEFAULT for w in fw.workloads()]
    assert keras and "keras-conv-dummy" in keras
    with pytest.raises(AmpbenchError) as e:
        create_workload("keras-conv-dumy")
    said = str(e.value)
    assert "Did you mean 'keras-conv-dummy'?" in said
    assert said.split("Valid: ")[1].startswith(", ".join(list_workloads() + keras) + ", timm:<model>")


def test_synthetic_data_is_seeded():
    a = create_workload("mnist-cnn", "tiny", seed=3).train_data
    b = create_workload("mnist-cnn", "tiny", seed=3).train_data
    c = create_workload("mnist-cnn", "tiny", seed=4).train_data
    assert torch.equal(a.inputs[0], b.inputs[0]) and not torch.equal(a.inputs[0], c.inputs[0])


@pytest.mark.isa
@pytest.mark.parametrize("precision", ["amp-fp16", "amp-bf16"])
def test_lstm_lm_under_cpu_autocast_uses_the_engine_fallback_where_the_kernel_is_missing(precision):
    import warnings

    from torch import nn

    from ampbench.precision.fallbacks import autocast_kernel_works

    wl = create_workload("lstm-lm", "tiny", seed=0)
    mp = MixedPrecision(precision)
    missing = not autocast_kernel_works(nn.LSTM, mp.recipe.compute_dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mp.setup(wl.model, wl.make_optimizer(wl.model.parameters()))
    said = [str(w.message) for w in caught if "native" in str(w.message)]
    assert [f.split(":")[0] for f in mp.fallbacks] == (["lstm"] if missing else [])
    assert bool(said) == missing
