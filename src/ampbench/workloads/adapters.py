"""Optional adapters: ``timm:<model>`` (image models) and ``hf:<model type or config>`` (HF transformers
built from a config, no weight download: sequence classifiers, or causal LMs with ``--task lm``).
Their data are a user model's (:mod:`ampbench.workloads.user`): token ids over the config's vocabulary
for hf, images for timm. Absent packages give an error naming the extra to install."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ampbench.errors import AmpbenchError
from ampbench.quiet_imports import torchao_quiet
from ampbench.workloads.base import PRESETS, Workload, adam
from ampbench.workloads.tasks import DataSpec, show
from ampbench.workloads.user import USER_OPTIONS, ForwardFailed, OutputLogits, build_module_workload, peek_images


def _import(module: str, extra: str):
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a broken install (timm with a CPU-only torch here)
        raise AmpbenchError(
            f"{module} is not importable ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
            f"install the extra: pip install 'ampbench[{extra}]'"
        ) from None


HF_SEQ = {"tiny": 16, "small": 64, "paper": 128}
TIMM_SIZE = {"tiny": 32, "small": 64, "paper": 224}


def _value(text: Any) -> Any:
    """--option values for a config: int, float, true/false, else the string."""
    if not isinstance(text, str):
        return text
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def create_adapter_workload(name: str, preset: str, data_dir: Path | None, seed: int,
                            data: DataSpec | None = None, val_fraction: float | None = None,
                            batch_size: int | None = None, **options: Any) -> Workload:
    """``timm:<model>`` / ``hf:<model type or config>``: the model from the library (random init, nothing
    downloaded), the data as for ``--model`` (:class:`DataSpec`: synthetic, or ``--data-dir``). ``options``
    (``--option``) set fields of the HF config / arguments of ``timm.create_model``."""
    kind, _, target = name.partition(":")
    if preset not in PRESETS:
        raise AmpbenchError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    if not target:
        raise AmpbenchError(f"{name!r}: give a model after the colon, e.g. timm:resnet50 or hf:bert")
    data = data or DataSpec()
    options = {k: _value(v) for k, v in options.items()}
    csv_options = {k: options.pop(k) for k in USER_OPTIONS if k in options}  # (a text CSV's, not the model's)
    given = data.input_shape

    def images() -> tuple[tuple[int, ...] | None, int | None]:
        """The shape an image model is built for where --input-shape says none, and its classes where --num-classes
        says none: its --data-dir images' (None, None: no images there)."""
        seen = peek_images(Path(data_dir), val_fraction, given) if data_dir is not None else None
        return given or (seen[0] if seen else None), seen[1] if seen else None

    hint = None
    if kind == "timm":
        model, data = _timm_model(target, preset, data, options, images)
        optimizer = adam(1e-3)
    elif kind == "hf":
        model, data, hint = _hf_model(target, preset, data, options, images)
        optimizer = lambda p: torch.optim.AdamW(p, lr=1e-4)  # noqa: E731 (random init: a from-scratch rate)
    else:
        raise AmpbenchError(f"unknown adapter {kind!r} in {name!r}: use timm:<model> or hf:<config>")
    try:
        wl = build_module_workload(model, name, data, data_dir=data_dir, preset=preset, seed=seed,
                                   batch_size=batch_size, val_fraction=val_fraction, options=csv_options,
                                   make_optimizer=optimizer)
    except ForwardFailed as e:
        if hint is None:
            raise
        raise ForwardFailed(f"{e} ({hint})") from None
    wl.description = f"{kind} {target}: " + wl.description.removeprefix("user model: ")
    return wl


def _timm_model(target: str, preset: str, data: DataSpec, options: dict[str, Any],
                images: Callable[[], tuple[tuple[int, ...] | None, int | None]]) -> tuple[nn.Module, DataSpec]:
    timm = _import("timm", "timm")
    if data.tokens or data.task == "lm":
        raise AmpbenchError(f"timm:{target} is an image model: drop --vocab-size/--task lm")
    size = TIMM_SIZE[preset]
    seen, classes = images()
    shape = seen or (3, size, size)
    if len(shape) != 3:
        raise AmpbenchError(f"--input-shape {show(shape)}: timm:{target} takes images C,H,W")
    data = dataclasses.replace(data, input_shape=shape).resolve(f"timm:{target}", need_shape=False)
    if data.task == "classify" and data.num_classes is None:
        data = dataclasses.replace(data, num_classes=classes or 10)
    outputs = data.num_classes if data.task == "classify" else data.num_outputs
    try:
        model = timm.create_model(target, pretrained=False, num_classes=outputs, in_chans=shape[0], **options)
    except Exception as e:
        raise AmpbenchError(f"timm cannot build {target!r}: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    return model, data


class HFLogits(nn.Module):
    """An HF model called with token ids only: returns ``.logits``; the attention mask is ``ids != pad``
    where the model has a padding id (classification), none for causal LMs (no padding in LM data).

    Token ids on the meta device (``predict`` traces the step there) hold no values, and transformers reads the
    mask's (``mask.all()``, to drop an all-ones mask and keep SDPA's flash path): there the mask is left out, which is
    what transformers does with the ids of synthetic data (ids in [1, vocab): never the padding id 0), and its
    warning that looks for padding in unmasked ids (it reads two ids) is skipped. Not priced, then: a padded batch's
    masked attention (a text CSV's), and the host sync of ``mask.all()`` that a run pays each step, as HF training
    that passes the tokenizer's mask does."""

    def __init__(self, inner: nn.Module, pad_id: int | None) -> None:
        super().__init__()
        self.inner = inner
        self.pad_id = pad_id

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.is_meta:
            with _no_padding_warning(self.inner):
                return self.inner(input_ids=ids, attention_mask=None).logits
        mask = None if self.pad_id is None else (ids != self.pad_id).long()
        return self.inner(input_ids=ids, attention_mask=mask).logits


def _is_vision(config: Any) -> bool:
    """An image model's config (ViT, DeiT, Swin, ConvNeXt, ResNet ...): channels and no vocabulary. hf: built every
    config as a token model: hf:vit failed in every cell ("'ViTConfig' object has no attribute 'vocab_size'")."""
    return hasattr(config, "num_channels") and not hasattr(config, "vocab_size")


def _hf_vision(transformers: Any, target: str, preset: str, config: Any, data: DataSpec,
               images: tuple[tuple[int, ...] | None, int | None]) -> tuple[nn.Module, DataSpec, str | None]:
    """An HF image classifier from its config (``AutoModelForImageClassification``): images C,H,W (``images``: the shape
    of --input-shape or --data-dir, and the --data-dir images' classes; default: the config's channels at the preset's
    side, as timm: models are sized),
    ``--num-classes`` (default: the images' classes, else 10) or ``--num-outputs`` classes/outputs. With it, what to
    say if its forward fails at a preset's side smaller than the config's own: hf:swin's windows (7 patches) do not
    fit a 32-pixel image's last stage, and its forward failed with "check --input-shape", none having been given."""
    if data.tokens or data.task == "lm":
        raise AmpbenchError(f"hf:{target} is an image model ({type(config).__name__}): drop --vocab-size/--task lm")
    size = TIMM_SIZE[preset]
    given, classes = images
    shape = given or (int(config.num_channels), size, size)
    if len(shape) != 3 or shape[1] != shape[2]:
        if data.input_shape is None:  # (the --data-dir images' own shape: "--input-shape 3,48,64" was none given)
            side = min(shape[1:]) if len(shape) == 3 else size
            raise AmpbenchError(f"the --data-dir images ({show(shape)}): hf:{target} takes square images; give "
                                f"--input-shape {shape[0]},{side},{side} (class folders of images are resized and "
                                "centre-cropped to it)")
        raise AmpbenchError(f"--input-shape {show(shape)}: hf:{target} takes square images C,H,W (e.g. 3,224,224)")
    patch = getattr(config, "patch_size", None)
    if isinstance(patch, int) and shape[1] % patch:
        side = shape[1]
        fits = [d for d in range(2, side // 2 + 1) if side % d == 0]
        near = min(fits, key=lambda d: (abs(d - patch), d)) if fits else None
        where = f"--input-shape {show(shape)}" if data.input_shape else f"the --data-dir images ({show(shape)})"
        fix = [f"-o patch_size=N, a divisor of {side} (e.g. {near})"] if near else []
        if data.input_shape:
            fix.append(f"--input-shape {shape[0]},{side // patch * patch or patch},{side // patch * patch or patch}")
        raise AmpbenchError(f"{where}: hf:{target}'s {patch}-pixel patches do not tile a {side}-pixel side; give "
                            + " or ".join(fix or [f"-o patch_size=N, a divisor of {side}"]))
    config.num_channels = shape[0]
    designed, hint = getattr(config, "image_size", None), None
    if given is None and isinstance(designed, int) and designed > shape[1]:  # (the preset chose the side, not the user)
        hint = (f"hf:{target}'s config is sized for {designed}-pixel images and the {preset} preset gives it "
                f"{shape[1]}: --input-shape {shape[0]},{designed},{designed}"
                + (" or --preset paper" if TIMM_SIZE["paper"] == designed else ""))
    if hasattr(config, "image_size"):
        config.image_size = shape[1]
    data = dataclasses.replace(data, input_shape=shape).resolve(f"hf:{target}", need_shape=False)
    if data.task == "classify" and data.num_classes is None:
        data = dataclasses.replace(data, num_classes=classes or 10)
    config.num_labels = data.num_classes if data.task == "classify" else data.num_outputs
    if data.task == "regress":
        config.problem_type = "regression"
    if getattr(config, "architectures", None) is None:  # (a type with several heads, DeiT's: transformers iterates
        config.architectures = []                        # the config's architectures to pick one, and None fails)
    try:
        model = transformers.AutoModelForImageClassification.from_config(config)
    except Exception as e:
        raise AmpbenchError(f"hf:{target}: transformers cannot build it as an image classifier: {type(e).__name__}: "
                            f"{str(e).splitlines()[0][:200]}") from None
    return OutputLogits(model), data, hint  # (pixel_values: every HF image classifier's first argument)


WARN_PADDING = "warn_if_padding_and_no_attention_mask"
"""transformers' PreTrainedModel method that reads ``input_ids`` to warn about padding left unmasked."""


@contextlib.contextmanager
def _no_padding_warning(model: nn.Module) -> Iterator[None]:
    """transformers' padding warning off on every pretrained (sub)model of ``model`` while inside: it only warns,
    and on meta ids it would read values that are not there."""
    patched = [m for m in model.modules() if hasattr(m, WARN_PADDING)]
    for m in patched:
        setattr(m, WARN_PADDING, _ignore)
    try:
        yield
    finally:
        for m in patched:
            delattr(m, WARN_PADDING)  # (the instance attribute: the class's method shows again)


def _ignore(*_: Any) -> None:
    return None


def _hf_model(target: str, preset: str, data: DataSpec, options: dict[str, Any],
              images: Callable[[], tuple[tuple[int, ...] | None, int | None]]
              ) -> tuple[nn.Module, DataSpec, str | None]:
    with torchao_quiet():  # transformers' quantizers import torchao, where installed, when a model class is built
        return _hf_built(target, preset, data, options, images)


def _model_type_in(transformers: Any, name: str) -> str | None:
    """The model type a Hub name begins with ("bert-base-uncased", "openai-community/gpt2-large": bert, gpt2), the
    longest that does; None where none does."""
    base = name.rsplit("/", 1)[-1].lower()
    types = [t for t in transformers.CONFIG_MAPPING if base == t or base.startswith(t + "-")]
    return max(types, key=len) if types else None


def _hf_built(target: str, preset: str, data: DataSpec, options: dict[str, Any],
              images: Callable[[], tuple[tuple[int, ...] | None, int | None]]
              ) -> tuple[nn.Module, DataSpec, str | None]:
    transformers = _import("transformers", "hf")
    try:  # a model type ("bert", "gpt2") builds its default config; else a local config path or cached name
        config = transformers.AutoConfig.for_model(target)
    except Exception:
        try:
            config = transformers.AutoConfig.from_pretrained(target, local_files_only=True)
        except Exception as e:
            near = _model_type_in(transformers, target)
            hint = (f"; hf:{near} builds {near}'s default config, and -o FIELD=VALUE sizes it"
                    if near else "")
            raise AmpbenchError(f"hf: no model type or local config {target!r} (nothing is downloaded at run time: "
                                f"{str(e).splitlines()[0][:160]}){hint}") from None
    for key, value in options.items():
        if not hasattr(config, key):
            raise AmpbenchError(f"hf:{target}: its {type(config).__name__} has no field {key!r} (--option {key}=...)")
        try:
            setattr(config, key, value)
        except Exception as e:  # (transformers >= 5 validates a config's fields as they are set)
            cause = e.__cause__ or e
            raise AmpbenchError(f"--option {key}={value}: hf:{target}'s {type(config).__name__} refuses it: "
                                f"{str(cause).splitlines()[0][:160]}") from None
    if _is_vision(config):
        return _hf_vision(transformers, target, preset, config, data, images())
    if data.vocab_size is not None:
        config.vocab_size = data.vocab_size  # a smaller vocabulary than the config's: the user's choice
    shape = data.input_shape or (HF_SEQ[preset],)
    if len(shape) != 1:
        raise AmpbenchError(f"--input-shape {show(shape)}: hf:{target} takes one sequence length, e.g. 128")
    longest = next((getattr(config, k) for k in ("max_position_embeddings", "n_positions") if hasattr(config, k)), None)
    if isinstance(longest, int) and shape[0] > longest:
        raise AmpbenchError(f"--input-shape {shape[0]}: hf:{target} takes sequences of at most {longest} tokens")
    data = DataSpec(shape, config.vocab_size, data.num_classes, data.num_outputs, data.task).resolve(
        f"hf:{target}", need_shape=False)
    if data.task != "lm" and getattr(config, "is_encoder_decoder", False):
        raise AmpbenchError(f"hf:{target} is an encoder-decoder model ({type(config).__name__}): its classifier needs "
                            "decoder inputs, and hf: gives a model token ids alone; wrap it in your own module "
                            "(--model file.py:build, the decoder inputs made in its forward), or --task lm for its "
                            "decoder where transformers has one")
    try:
        if data.task == "lm":
            model = transformers.AutoModelForCausalLM.from_config(config)
            pad = None
        else:
            config.num_labels = (data.num_classes or 2) if data.task == "classify" else data.num_outputs
            if data.task == "regress":
                config.problem_type = "regression"
            if getattr(config, "pad_token_id", None) is None:
                config.pad_token_id = 0  # (GPT-2 & co: the classifier reads the last non-padding token)
            model = transformers.AutoModelForSequenceClassification.from_config(config)
            pad = int(config.pad_token_id)
    except Exception as e:
        raise AmpbenchError(f"hf:{target}: transformers cannot build it for --task {data.task}: {type(e).__name__}: "
                            f"{str(e).splitlines()[0][:200]}") from None
    if data.task == "classify" and data.num_classes is None:
        data = DataSpec(shape, config.vocab_size, config.num_labels, None, "classify")
    return HFLogits(model, pad), data, None
