"""tabular-mlp: Rossmann-style categorical embeddings + continuous features -> MLP regression (fast.ai); wide-mlp: a
GEMM-bound MLP classifier."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ampbench.data import synthetic
from ampbench.data.errors import DataError
from ampbench.data.tabular import read_csv_table
from ampbench.workloads.base import RMSE, Workload, adam, held_out, mse_loss, split, standardised
from ampbench.workloads.registry import register_workload

# Cardinalities (+1 for unknown) of the 22 categorical variables of fast.ai's Rossmann notebook
# (Store, DayOfWeek, Year, Month, Day, StateHoliday, CompetitionMonthsOpen, Promo2Weeks, StoreType,
# Assortment, PromoInterval, CompetitionOpenSinceYear, Promo2SinceYear, State, Week, Events,
# Promo_fw, Promo_bw, StateHoliday_fw, StateHoliday_bw, SchoolHoliday_fw, SchoolHoliday_bw); 16 continuous.
ROSSMANN_CARDS = [1116, 8, 4, 13, 32, 3, 26, 27, 5, 4, 4, 24, 9, 13, 53, 22, 7, 7, 4, 4, 9, 9]
ROSSMANN_CONT = 16
TABULAR = {"tiny": ([10, 5, 3], 4, (32, 16), 64), "small": (ROSSMANN_CARDS, ROSSMANN_CONT, (256, 128), 20000),
           "paper": (ROSSMANN_CARDS, ROSSMANN_CONT, (1000, 500), 200000)}


class TabularMLP(nn.Module):
    """Embeddings (size min(50, (c+1)//2), fast.ai's rule) + continuous -> [Linear-ReLU-BN-Dropout]* -> 1."""

    def __init__(self, cardinalities: list[int], n_cont: int, layers: tuple[int, ...] = (1000, 500),
                 dropouts: tuple[float, ...] = (0.001, 0.01), emb_drop: float = 0.04) -> None:
        super().__init__()
        self.embeds = nn.ModuleList(nn.Embedding(c, min(50, (c + 1) // 2)) for c in cardinalities)
        self.emb_drop = nn.Dropout(emb_drop)
        self.bn_cont = nn.BatchNorm1d(n_cont)
        sizes = [sum(e.embedding_dim for e in self.embeds) + n_cont, *layers]
        body: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            body += [nn.Linear(a, b), nn.ReLU(inplace=True), nn.BatchNorm1d(b), nn.Dropout(dropouts[min(i, len(dropouts) - 1)])]
        self.body = nn.Sequential(*body)
        self.out = nn.Linear(sizes[-1], 1)

    def forward(self, cats: torch.Tensor, cont: torch.Tensor) -> torch.Tensor:  # (B, n_cat), (B, n_cont)
        emb = torch.cat([e(cats[:, i]) for i, e in enumerate(self.embeds)], dim=1)  # (B, sum(emb dims))
        x = torch.cat([self.emb_drop(emb), self.bn_cont(cont)], dim=1)
        return self.out(self.body(x))  # (B, 1)


@register_workload(
    "tabular-mlp",
    description="Rossmann-style tabular regression: categorical embeddings + continuous features -> MLP",
    paper="fast.ai Rossmann: 22 categorical (embeddings) + 16 continuous, layers 1000-500, dropout 0.001/0.01, "
          "emb dropout 0.04, Adam 1e-3",
    data="CSV with a header; a numeric 'target' column (option target=NAME), trained standardised; non-numeric "
         "columns are categorical",
    model=lambda preset, target="target": TabularMLP(*TABULAR[preset][:3]),
)
def build_tabular(preset: str, data_dir: Path | None, seed: int, target: str = "target",
                  val_fraction: float | None = None) -> Workload:
    cards, n_cont, layers, n = TABULAR[preset]
    metric = RMSE
    if data_dir is not None:
        csvs = sorted(Path(data_dir).glob("*.csv"))
        if not csvs:
            raise DataError(f"{data_dir}: no .csv file for tabular-mlp")
        table = read_csv_table(csvs[0], target=target, held_out_fraction=val_fraction or 0.1)
        cards, n_cont = [c + 1 for c in table.cardinalities], table.continuous.shape[1]
        cats, cont, y = table.categorical, table.continuous, table.target
        n = len(y)
    else:
        g = torch.Generator().manual_seed(seed)
        cats, cont, y = synthetic.tabular(n, cards, n_cont, g)
    n_test = table.n_test if data_dir is not None else held_out(n, val_fraction or 0.1, "tabular-mlp")
    if data_dir is not None:
        y, metric = standardised(y, n - n_test)
    train, test = split((cats, cont), y, n_test)
    return Workload(
        name="tabular-mlp", model=TabularMLP(cards, n_cont, layers), train_data=train, test_data=test,
        loss_fn=mse_loss, metric=metric, make_optimizer=adam(1e-3),
        batch_size={"tiny": 16, "small": 512, "paper": 512}[preset], epochs={"tiny": 1, "small": 3, "paper": 10}[preset],
        preset=preset, description="tabular MLP" + (f" ({csvs[0].name})" if data_dir else " (synthetic)"),
    )


# -- wide-mlp ------------------------------------------------------------------------------------------------------
class WideMLP(nn.Module):
    """``features`` -> ``depth`` Linear-GELU layers of ``width`` -> ``classes``: almost all of a step is GEMMs."""

    def __init__(self, features: int, width: int, depth: int, classes: int) -> None:
        super().__init__()
        sizes = [features] + [width] * depth
        self.body = nn.Sequential(*(m for a, b in zip(sizes[:-1], sizes[1:]) for m in (nn.Linear(a, b), nn.GELU())))
        self.out = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, features)
        return self.out(self.body(x))  # (B, classes)


WIDE = {"tiny": (32, 64, 2, 10, 16), "small": (512, 1024, 4, 100, 256), "paper": (2048, 8192, 4, 1000, 4096)}
"""features, width, depth, classes, batch."""


@register_workload(
    "wide-mlp",
    description="a GEMM-bound MLP (4 layers of 8192): what faster matmuls alone give a whole training step",
    paper="2048 features -> 4 x Linear(8192)-GELU -> 1000 classes (226M parameters), Adam 1e-3, batch 4096",
    data="none (synthetic learnable features)",
    model=lambda preset: WideMLP(*WIDE[preset][:4]),
)
def build_wide_mlp(preset: str, data_dir: Path | None, seed: int) -> Workload:
    if data_dir is not None:
        raise DataError("wide-mlp trains on synthetic features; it takes no --data-dir (tabular-mlp reads a CSV)")
    features, width, depth, classes, batch = WIDE[preset]
    g = torch.Generator().manual_seed(seed)
    x, y = synthetic.class_features(5 * batch, classes, (features,), g)
    train, test = split(x, y, batch)
    return Workload(
        name="wide-mlp", model=WideMLP(features, width, depth, classes), train_data=train, test_data=test,
        make_optimizer=adam(1e-3), batch_size=batch, epochs={"tiny": 1, "small": 2, "paper": 1}[preset], preset=preset,
        description=f"MLP {depth} x {width} (synthetic features)",
    )
