"""User models of every shape the CLI takes (loaded by the tests as ``user_models.py:factory``)."""

import torch
from torch import nn


def mlp():
    """Feature vectors: --input-shape 20 --num-classes 3."""
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))


def regressor():
    """A sequence of feature vectors: --input-shape 16,8 --num-outputs 2."""
    return nn.Sequential(nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 2))


class TokenTransformer(nn.Module):
    """Token ids: --input-shape 24 --vocab-size 300 --num-classes 2."""

    def __init__(self, vocab: int = 300, d: int = 32, classes: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 2, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(ids)).mean(dim=1))


def token_transformer():
    return TokenTransformer()


class CausalLM(nn.Module):
    """LM-shaped: --input-shape 16 --vocab-size 64 --task lm; output (batch, seq, vocab)."""

    def __init__(self, vocab: int = 64, d: int = 48) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(64, d)
        layer = nn.TransformerEncoderLayer(d, 2, 96, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.out = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf"), device=ids.device), diagonal=1)
        x = self.emb(ids) + self.pos(torch.arange(t, device=ids.device))
        return self.out(self.enc(x, mask=causal))


def causal_lm():
    return CausalLM()


class TwoInputs(nn.Module):
    """Called by keyword: model(feats=..., ids=...) (a --batches dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.feats = nn.Linear(8, 32)
        self.ids = nn.Embedding(10, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, feats: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.feats(feats) + self.ids(ids)))


def two_inputs():
    return TwoInputs()


def make_batch(batch_size, generator):
    """A learnable dict batch: the label is the token (mod 2) and the sign of the first feature."""
    ids = torch.randint(0, 10, (batch_size,), generator=generator)
    feats = torch.randn(batch_size, 8, generator=generator)
    y = (ids % 2) * 2 + (feats[:, 0] > 0).long()
    return {"feats": feats, "ids": ids}, y


def l1_loss(out, y):
    """--loss: the user's own loss (regression targets)."""
    return (out.float() - y).abs().mean()


def make_regression_batch(batch_size, generator):
    x = torch.randn(batch_size, 20, generator=generator)
    return x, x[:, :3] * 0.5


def linear2():
    """Two outputs: not what make_regression_batch's three targets need."""
    return nn.Linear(20, 2)


def sized(preset):
    """A factory that takes the preset."""
    from ampbench import Workload
    from ampbench.data import TensorData

    n = {"tiny": 16, "small": 64, "paper": 256}[preset]
    x = torch.randn(n, 4)
    return Workload(name="sized", model=nn.Linear(4, 2), train_data=TensorData((x,), (x[:, 0] > 0).long()),
                    batch_size=4, preset=preset)


def unsized():
    from ampbench import Workload
    from ampbench.data import TensorData

    x = torch.randn(16, 4)
    return Workload(name="unsized", model=nn.Linear(4, 2), train_data=TensorData((x,), (x[:, 0] > 0).long()),
                    batch_size=4)


class Spiky(nn.Module):
    """fp8 diagnosis plant: the input of `spiky` carries one huge feature (x 1e6), so a per-tensor scale
    crushes every other value to 0 in fp8; `calm` sees well-scaled inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.calm = nn.Linear(32, 64)
        self.spiky = nn.Linear(64, 64)
        self.head = nn.Linear(64, 3)
        gain = torch.ones(64)
        gain[0] = 1e6
        self.register_buffer("gain", gain)

    def forward(self, x):
        h = torch.relu(self.calm(x)) * self.gain
        return self.head(torch.relu(self.spiky(h)) * 1e-6)


def spiky():
    return Spiky()


def hf_classifier():
    """An HF model built in the user's own factory (not hf:): its forward returns a SequenceClassifierOutput."""
    import transformers

    config = transformers.BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                     vocab_size=100, num_labels=3)
    return transformers.BertForSequenceClassification(config)
