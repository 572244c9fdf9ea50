"""Optional adapters: ``timm:<model>`` (image classification) and ``hf:<config>`` (HF transformers, built
from a config, no weight download). Absent packages give an error naming the extra to install."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from ampbench.data import synthetic
from ampbench.errors import AmpbenchError
from ampbench.workloads.base import PRESETS, Workload, adam, image_prep, split


def _import(module: str, extra: str):
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a broken install (timm with a CPU-only torch here)
        raise AmpbenchError(
            f"{module} is not importable ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
            f"install the extra: pip install 'ampbench[{extra}]'"
        ) from None


def create_adapter_workload(name: str, preset: str, data_dir: Path | None, seed: int, **options: Any) -> Workload:
    kind, _, target = name.partition(":")
    if preset not in PRESETS:
        raise AmpbenchError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    if not target:
        raise AmpbenchError(f"{name!r}: give a model after the colon, e.g. timm:resnet50 or hf:bert-base-uncased")
    if data_dir is not None:
        raise AmpbenchError(f"{kind}: adapters run on synthetic data; use --model with a Workload factory for real data")
    g = torch.Generator().manual_seed(seed)
    n = {"tiny": 32, "small": 1024, "paper": 8192}[preset]
    if kind == "timm":
        timm = _import("timm", "timm")
        try:
            model = timm.create_model(target, pretrained=False, num_classes=10)
        except Exception as e:
            raise AmpbenchError(f"timm cannot build {target!r}: {e}") from None
        size = {"tiny": 32, "small": 64, "paper": 224}[preset]
        x, y = synthetic.class_images(n, 10, (3, size, size), g)
        train, test = split(x, y, n // 8)
        return Workload(name=name, model=model, train_data=train, test_data=test, prepare=image_prep(),
                        make_optimizer=adam(1e-3), batch_size={"tiny": 4, "small": 32, "paper": 64}[preset],
                        preset=preset, description=f"timm {target}", **options)
    if kind == "hf":
        transformers = _import("transformers", "hf")
        try:  # a model type ("bert") builds a default config; else a local config path or cached name
            config = transformers.AutoConfig.for_model(target)
        except Exception:
            try:
                config = transformers.AutoConfig.from_pretrained(target, local_files_only=True)
            except Exception as e:
                raise AmpbenchError(f"hf: no local config for {target!r} (no downloads at run time): {e}") from None
        config.num_labels = 2
        model = transformers.AutoModelForSequenceClassification.from_config(config)
        seq = {"tiny": 16, "small": 64, "paper": 128}[preset]
        ids, mask, y = synthetic.token_classification(n, seq, config.vocab_size, 2, g)
        train, test = split((ids, mask), y, n // 8)

        class _Logits(torch.nn.Module):
            def __init__(self, inner: torch.nn.Module) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
                return self.inner(input_ids=ids, attention_mask=mask).logits

        return Workload(name=name, model=_Logits(model), train_data=train, test_data=test, loss_fn=F.cross_entropy,
                        make_optimizer=lambda p: torch.optim.AdamW(p, lr=2e-5), batch_size=8, preset=preset,
                        description=f"HF {target}", **options)
    raise AmpbenchError(f"unknown adapter {kind!r} in {name!r}: use timm:<model> or hf:<config>")
