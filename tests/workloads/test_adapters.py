"""The hf: adapter on meta tensors (what ``ampbench predict`` traces) and its quiet import of transformers."""

from __future__ import annotations

import importlib.util
import logging

import pytest
import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from ampbench.quiet_imports import torchao_quiet
from ampbench.workloads import adapters
from ampbench.workloads.factory import build_meta, create_workload
from ampbench.workloads.tasks import DataSpec

needs_hf = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                              reason="transformers not installed (pip install 'ampbench[hf]')")

class _Calls(TorchFunctionMode):
    """The ``torch.nn.functional`` calls of a forward (linear, layer norm, attention, ...), as the device-free layer
    ``predict`` prices (on the CPU the attention runs a fused kernel; on meta it decomposes), with their tensors'
    shapes and, for attention, whether it got a mask and was causal."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[tuple[int, ...], ...], tuple[bool, bool] | None]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if getattr(F, name, None) is func:
            shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
            attention = None
            if func is F.scaled_dot_product_attention:
                mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
                attention = (mask is not None, bool(kwargs.get("is_causal", False)))
            self.calls.append((name, shapes, attention))
        return func(*args, **kwargs)


def _classifier(model: str):
    options = {"bert": dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64),
               "gpt2": dict(n_layer=1, n_embd=32, n_head=2)}[model]
    return lambda: create_workload(f"hf:{model}", "tiny", data=DataSpec.of(num_classes=3, input_shape="16"),
                                   **options)


@needs_hf
@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_an_hf_classifier_makes_on_meta_the_calls_it_makes_on_synthetic_ids(model: str) -> None:
    """Oracle: the same classifier run on the CPU with its synthetic ids (ids in [1, vocab): transformers drops the
    all-ones padding mask). On meta the ids hold no values: the same functional calls (linear, attention, ...), no mask."""
    real = _classifier(model)()
    inputs = real.example_batch(2)[0]
    assert int(inputs[0].min()) >= 1  # (no padding id in synthetic ids: the premise of leaving the mask out on meta)
    real.model.eval()  # (no dropout: the same ops every call)
    with _Calls() as on_cpu:
        real.call_model(real.model, inputs, prepared=True)
    meta = build_meta(_classifier(model))
    assert next(meta.model.parameters()).is_meta
    meta.model.eval()
    with _Calls() as on_meta:
        out = meta.call_model(meta.model, tuple(t.to("meta") for t in inputs), prepared=True)
    assert out.is_meta and out.shape == (2, 3)
    attention = [a for *_, a in on_cpu.calls if a is not None]
    assert attention == [(False, model == "gpt2")]  # one layer: one attention call, unmasked (GPT-2's causal)
    assert on_meta.calls == on_cpu.calls
    inner = meta.model.inner if hasattr(meta.model, "inner") else meta.model
    assert not any(adapters.WARN_PADDING in vars(m) for m in inner.modules())  # the warning's patch is gone


@needs_hf
def test_an_hf_language_model_builds_on_meta_though_its_tokens_are_drawn_on_the_cpu() -> None:
    """An LM's synthetic tokens are drawn on the CPU (a Markov chain reads values) while its model is built on meta:
    the check's loss takes the meta logits with the targets moved to meta, not the whole model built again on the
    CPU with a real forward (hf:gpt2 at 1,024 tokens: ~9 s and a 400 MB logits tensor, every ``predict``)."""
    def lm() -> object:
        return create_workload("hf:gpt2", "tiny", data=DataSpec.of(task="lm", input_shape="16"),
                               n_layer=1, n_embd=32, n_head=2)

    built: list[bool] = []
    wl = build_meta(lambda: built.append(True) or lm())
    assert built == [True]  # built once: on meta, no CPU fallback
    assert all(p.is_meta for p in wl.model.parameters())
    x, y = wl.example_batch(2)
    assert not y.is_meta and y.shape == (2, 16)  # (the data stay real: the oracle of the targets' shape)


@needs_hf
def test_an_hf_classifier_is_predicted() -> None:
    """``predict`` traces an encoder classifier (it stopped at transformers' ``mask.all()`` on meta before)."""
    from ampbench.predict.trace import trace_step

    trace = trace_step(build_meta(_classifier("bert")), "amp-bf16", 4)
    assert sum(o.flops for o in trace.ops) > 0


def test_torchao_quiet_holds_back_torchaos_import_noise_and_restores_the_loggers(caplog) -> None:
    """torchao logs a warning per extension it cannot load, torch one about its pytree registration: not inside."""
    names = ("torchao", "torch.utils._pytree")
    before = [logging.getLogger(n).level for n in names]
    with caplog.at_level(logging.WARNING), torchao_quiet():
        for n in names:
            logging.getLogger(n).warning("noise from %s", n)
    assert not [r for r in caplog.records if r.name in names]
    assert [logging.getLogger(n).level for n in names] == before
    logging.getLogger("torchao").warning("outside")
    assert [r.message for r in caplog.records if r.name == "torchao"] == ["outside"]


def test_the_hf_adapter_builds_inside_torchao_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers imports torchao (its quantizers) when a model class is built: the build runs quietly."""
    seen = []
    monkeypatch.setattr(adapters, "_hf_built", lambda *a: seen.append(logging.getLogger("torchao").level))
    adapters._hf_model("bert", "tiny", DataSpec.of(), {}, lambda: None)
    assert seen == [logging.ERROR]


@needs_hf
def test_an_encoder_decoder_classifier_is_refused_in_one_line_before_it_is_built() -> None:
    """T5's and BART's classifiers need decoder inputs (T5 a decoder start id, BART an <eos> in every example):
    refused, saying what to do, instead of a forward's AttributeError that blamed --input-shape."""
    from ampbench.errors import AmpbenchError

    for model in ("t5", "bart"):
        with pytest.raises(AmpbenchError, match=rf"hf:{model} is an encoder-decoder model .*\(--model file\.py:build"):
            create_workload(f"hf:{model}", "tiny")


@needs_hf
def test_a_config_field_the_config_refuses_is_one_line() -> None:
    """transformers >= 5 validates fields as they are set (a str for an int): an AmpbenchError naming the option,
    not the library's traceback (run errored every cell with it; predict exited 1)."""
    import transformers

    from ampbench.errors import AmpbenchError

    config = transformers.AutoConfig.for_model("gpt2")
    try:
        config.n_layer = "abc"
    except Exception:
        pass
    else:
        pytest.skip("this transformers does not validate config fields as they are set")
    with pytest.raises(AmpbenchError, match=r"--option n_layer=abc: hf:gpt2's GPT2Config refuses it: .*expected int"):
        create_workload("hf:gpt2", "tiny", n_layer="abc")


@needs_hf
def test_a_hub_name_is_answered_with_the_model_type_it_begins_with() -> None:
    """Nothing is downloaded: 'bert-base-uncased' and 'openai-community/gpt2-large' are refused in one line that names
    the model type to build instead (its default config); a name no type begins with gets no guess."""
    import transformers

    from ampbench.errors import AmpbenchError

    for name, near in (("bert-base-uncased", "bert"), ("openai-community/gpt2-large", "gpt2"), ("gpt2", "gpt2"),
                       ("google/vit-base-patch16-224", "vit"), ("foo-bar", None)):
        assert adapters._model_type_in(transformers, name) == near, name
    with pytest.raises(AmpbenchError, match=r"no model type or local config 'bert-base-uncased' .*; hf:bert builds "
                                            r"bert's default config, and -o FIELD=VALUE sizes it$"):
        create_workload("hf:bert-base-uncased", "tiny")


VIT = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, patch_size=4)


@needs_hf
def test_an_hf_image_model_is_built_as_an_image_classifier_of_the_data() -> None:
    """hf: built every config as a token model: hf:vit failed in every cell ("'ViTConfig' object has no attribute
    'vocab_size'"), and DeiT (several heads for one config) in transformers' own lookup. Oracle: the logits are
    transformers' ViTForImageClassification's own on the same pixels."""
    import transformers

    wl = create_workload("hf:vit", "tiny", data=DataSpec.of(num_classes=5, input_shape="3,16,16"), **VIT)
    (pixels,), _ = wl.example_batch(2)
    assert pixels.shape == (2, 3, 16, 16) and pixels.is_floating_point()
    inner = wl.model.inner
    assert isinstance(inner, transformers.ViTForImageClassification) and inner.config.image_size == 16
    wl.model.eval()
    out = wl.call_model(wl.model, (pixels,), prepared=True)
    assert out.shape == (2, 5) and torch.equal(out, inner(pixel_values=pixels).logits)
    deit = create_workload("hf:deit", "tiny", data=DataSpec.of(input_shape="3,8,8"), **VIT)
    assert type(deit.model.inner).__name__ == "DeiTForImageClassification" and deit.model.inner.config.num_labels == 10
    from ampbench.predict.trace import trace_step

    trace = trace_step(build_meta(lambda: create_workload("hf:vit", "tiny", data=DataSpec.of(num_classes=5), **VIT)),
                       "amp-bf16", 4)
    assert sum(o.flops for o in trace.ops) > 0


@needs_hf
@pytest.mark.parametrize("shape", [None, "3,8,8"])
def test_an_hf_image_model_takes_its_data_dir_s_classes_reading_the_images_once(tmp_path, monkeypatch, shape) -> None:
    """12 class folders: hf:vit was built with 10 classes and refused them ("--num-classes 10: the labels in DIR go up
    to 11", a number nobody gave). The images are read once for the shape, the classes and the data."""
    from ampbench.data import imagefolder
    from tests.data.test_imagefolder import _save, _solid

    for k in range(12):
        for i in range(2):
            _save(tmp_path / f"c{k:02d}" / f"{i}.png", _solid(8, 8, (k * 20, i, 0)))
    reads = []
    real = imagefolder.load_image_folder
    monkeypatch.setattr(imagefolder, "load_image_folder", lambda *a, **k: reads.append(a) or real(*a, **k))
    wl = create_workload("hf:vit", "tiny", data_dir=tmp_path, data=DataSpec.of(input_shape=shape), **VIT)
    assert wl.model.inner.config.num_labels == 12 and len(reads) == 1
    assert int(wl.train_data.targets.max()) <= 11 and tuple(wl.train_data.inputs[0].shape[1:]) == (3, 8, 8)
    given = create_workload("hf:vit", "tiny", data_dir=tmp_path, data=DataSpec.of(num_classes=13), **VIT)
    assert given.model.inner.config.num_labels == 13  # (--num-classes given: as given)


@needs_hf
def test_an_hf_image_model_takes_its_data_dir_s_image_shape_and_says_what_tiles_it(tmp_path) -> None:
    """On MNIST (1x28x28) hf:vit was built for the preset's 3,32,32 and refused the data with "--input-shape 3,32,32
    does not match", a shape nobody gave; a patch that does not tile the side names the option that does."""
    from ampbench.errors import AmpbenchError
    from tests.data.test_readers import _mnist_dir

    _mnist_dir(tmp_path, n=40)  # (MNIST's own IDX files: 1x28x28 digits)
    wl = create_workload("hf:vit", "tiny", data_dir=tmp_path, **VIT)  # (patch 4 tiles 28)
    assert wl.model.inner.config.image_size == 28 and wl.model.inner.config.num_channels == 1
    assert wl.model.inner.config.num_labels == 10 and tuple(wl.train_data.inputs[0].shape[1:]) == (1, 28, 28)
    with pytest.raises(AmpbenchError, match=r"^the --data-dir images \(1,28,28\): hf:vit's 16-pixel patches do not "
                                            r"tile a 28-pixel side; give -o patch_size=N, a divisor of 28 \(e\.g\. 14\)$"):
        create_workload("hf:vit", "tiny", data_dir=tmp_path, **{**VIT, "patch_size": 16})
    with pytest.raises(AmpbenchError, match=r"^--input-shape 3,30,30: .* give -o patch_size=N, a divisor of 30 "
                                            r"\(e\.g\. 15\) or --input-shape 3,16,16$"):
        create_workload("hf:vit", "tiny", data=DataSpec.of(input_shape="3,30,30"), **{**VIT, "patch_size": 16})
    from tests.data.test_imagefolder import _folder

    pets = _folder(tmp_path / "pets", {"cat": 3, "dog": 3})  # (12x16 images: not square)
    with pytest.raises(AmpbenchError, match=r"^the --data-dir images \(3,12,16\): hf:vit takes square images; give "
                                            r"--input-shape 3,12,12 \(class folders"):
        create_workload("hf:vit", "tiny", data_dir=pets, **VIT)
    wl = create_workload("hf:vit", "tiny", data_dir=pets, data=DataSpec.of(input_shape="3,12,12"), **VIT)
    assert tuple(wl.train_data.inputs[0].shape[1:]) == (3, 12, 12) and wl.model.inner.config.image_size == 12
    with pytest.raises(AmpbenchError, match=r"hf:vit is an image model \(ViTConfig\): drop --vocab-size/--task lm"):
        create_workload("hf:vit", "tiny", data=DataSpec.of(vocab_size=100, input_shape="16"), **VIT)


SWIN = dict(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1])


@needs_hf
def test_an_hf_image_model_too_small_at_the_preset_s_side_says_the_size_it_was_made_for() -> None:
    """hf:swin at the tiny preset: its 7-patch windows do not fit a 32-pixel image's last stage (32 / 4 / 2^3 = 1
    patch), its forward failed, and the line said "check --input-shape" where none was given. It now names the
    config's own size; the model that size builds (oracle: the same config at 224 pixels runs), and a shape the user
    gave gets no such hint (theirs to change)."""
    from ampbench.workloads.user import ForwardFailed

    with pytest.raises(ForwardFailed, match=r"check --input-shape \(hf:swin's config is sized for 224-pixel images and "
                                            r"the tiny preset gives it 32: --input-shape 3,224,224 or --preset paper\)$"):
        create_workload("hf:swin", "tiny", **SWIN)
    with pytest.raises(ForwardFailed, match=r"check --input-shape$"):
        create_workload("hf:swin", "tiny", data=DataSpec.of(input_shape="3,32,32"), **SWIN)
    wl = create_workload("hf:swin", "tiny", data=DataSpec.of(input_shape="3,224,224"), **SWIN)
    assert wl.model.inner.config.image_size == 224
    assert create_workload("hf:swin", "tiny", window_size=1, **SWIN).model.inner.config.image_size == 32
