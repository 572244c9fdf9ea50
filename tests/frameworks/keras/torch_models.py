from torch import nn


def mlp():
    return nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 2))
